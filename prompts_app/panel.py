from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from prompts_app.models import PromptVersion


@login_required
def prompts_tab(request):
    versions = PromptVersion.objects.all()[:50]
    return render(request, "panel/prompts.html", {"tab": "prompts", "versions": versions})
