"""The Providers page: model providers listed, created and edited in the panel, the key
write-only (the page says only whether one is set), and a connection test that is
`amux doctor`'s provider check run on demand."""

from __future__ import annotations

import re

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from amux_common import roles
from amux_common.doctor import Check
from sessions import capabilities, provider_actions, provider_templates
from sessions.doctor import provider_check
from sessions.models import ProviderProfile
from sessions.provider_form import ProviderForm
from sessions.provider_routes import models_url

# Providers are where every runtime sends its model requests, so the page sits with the
# Sessions tab; agent settings and the first-run checklist link to it.
TAB = "sessions"


@roles.read_page
def providers(request):
    rows = []
    for p in ProviderProfile.objects.all():
        last, evidence = capabilities.latest(p), capabilities.latest_ok(p)
        template = provider_templates.of(p.platform, p.base_url)
        rows.append({"p": p, "key_set": bool((p.secrets or {}).get("api_key")),
                     "probe": last, "evidence": evidence,
                     "own_models": bool(template and template.own_models),
                     # what the operator lists that the route did not discover
                     "undiscovered": [m for m in p.model_list
                                      if evidence and m not in evidence.model_ids]})
    return render(request, "panel/providers.html", {
        "tab": TAB, "rows": rows, "can_edit": roles.is_operator(request.user)})


@roles.operator_to_change
def provider_form(request, slug: str | None = None):
    provider = get_object_or_404(ProviderProfile, slug=slug) if slug else None
    # a new provider may start from a template's preset (?template=ark-agent-plan)
    preset = None if provider else provider_templates.TEMPLATES.get(
        request.GET.get("template", ""))
    form = ProviderForm(instance=provider, initial=preset and {
        "platform": preset.platform, "base_url": preset.base_url})
    if request.method == "POST":
        form = ProviderForm(request.POST, instance=provider or ProviderProfile())
        if form.is_valid():
            try:
                saved = form.save()
            except provider_actions.ProviderRefused as refused:  # a race: e.g. slug taken
                for field, message in refused.fields.items():
                    form.add_error(None, f"{field}: {message}")
            else:
                messages.success(request, f"Saved provider {saved.slug}.")
                return redirect("panel-providers")
    return render(request, "panel/provider_form.html", {
        "tab": TAB, "form": form, "provider": provider,
        "key_set": bool(provider and (provider.secrets or {}).get("api_key")),
        "can_edit": roles.is_operator(request.user),
        "templates": [] if provider else list(provider_templates.TEMPLATES.values()),
        "preset": preset,
    }, status=400 if form.errors else 200)


def connection_check(provider: ProviderProfile) -> Check:
    """doctor's provider check; a key no header can carry is reported, not raised."""
    try:
        return provider_check(provider)
    except ValueError as exc:  # UnicodeEncodeError and friends from http.client
        return Check(f"provider:{provider.slug}", False, f"the key cannot be sent: {exc}"[:300])


@roles.operator_required
@require_POST
def provider_test(request, slug: str):
    provider = get_object_or_404(ProviderProfile, slug=slug)
    check = connection_check(provider)
    status = re.search(r"\((\d{3})\)", check.detail)
    if check.ok and status and status[1].startswith("2"):
        messages.success(request, f"{provider.slug}: {check.detail}, authenticated.")
    elif check.ok:  # the server answered, but not with the model list: a wrong base URL?
        messages.warning(request, f"{provider.slug}: {check.detail}, but "
                                  f"{models_url(provider.platform, provider.base_url)} is not a "
                                  "model list: check "
                                  "the base URL.")
    else:
        messages.error(request, f"{provider.slug}: {check.detail}")
    return redirect("panel-providers")


@roles.operator_required
@require_POST
def provider_probe(request, slug: str):
    """Probe the route now; the page shows the new revision."""
    provider = get_object_or_404(ProviderProfile, slug=slug)
    row = capabilities.probe(provider)
    if row.ok:
        messages.success(request, f"{provider.slug}: probe revision {row.revision}: "
                                  f"{row.detail}.")
    else:
        messages.error(request, f"{provider.slug}: probe revision {row.revision} failed "
                                f"({row.outcome}): {row.detail}")
    return redirect("panel-providers")


@roles.operator_required
@require_POST
def provider_use_discovered(request, slug: str):
    """The operator's explicit action: the model list becomes the discovered models."""
    provider = get_object_or_404(ProviderProfile, slug=slug)
    models, problem = capabilities.use_discovered(provider)
    if problem:
        messages.error(request, f"{provider.slug}: {problem}")
    else:
        messages.success(request, f"{provider.slug}: now lists the {len(models)} discovered "
                                  "models.")
    return redirect("panel-providers")
