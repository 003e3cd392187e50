from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from policy.models import PolicyVersion


@login_required
def policy_tab(request):
    versions = PolicyVersion.objects.all()[:50]
    return render(request, "panel/policy.html", {"tab": "policy", "versions": versions})
