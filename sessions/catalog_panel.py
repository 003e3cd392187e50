"""The panel's model picker: a fragment (htmx) listing a runtime's model catalog as
suggestions for a model field, with the catalog's status when it has no list. The field
keeps whatever it holds: a suggestion list never replaces a saved choice."""

from __future__ import annotations

from django.shortcuts import render

from amux_common import roles
from sessions import model_catalog, services
from sessions.models import ProviderProfile

STATUS_LABELS = {"not_logged_in": "not logged in", "unreachable": "runtime unreachable",
                 "failed": "discovery failed", "unsupported": "no native list"}


@roles.read_page
def model_options(request):
    runtime = request.GET.get("worker_runtime") or request.GET.get("runtime") or ""
    provider = request.GET.get("worker_provider") or request.GET.get("provider") or None
    if provider and provider.isdigit():  # a form's provider select names the row
        provider = ProviderProfile.objects.filter(pk=int(provider)).values_list(
            "slug", flat=True).first() or provider
    target = request.GET.get("list", "model-options")
    try:
        found = model_catalog.for_runtime(runtime, provider)
    except services.CommandError as exc:
        found = {"status": "failed", "message": str(exc), "models": []}
    return render(request, "sessions/model_options.html", {
        "catalog": found, "list_id": target,
        "status_label": STATUS_LABELS.get(found["status"], found["status"])})
