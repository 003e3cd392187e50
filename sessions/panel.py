from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from sessions.models import Session


@login_required
def sessions_tab(request):
    sessions = Session.objects.select_related("provider")[:200]
    return render(request, "panel/sessions.html", {"tab": "sessions", "sessions": sessions})
