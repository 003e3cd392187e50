"""The Providers page: model providers listed, created and edited in the panel, the key
write-only (the page says only whether one is set), and a connection test that is
`amux doctor`'s provider check run on demand."""

from __future__ import annotations

import re

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from amux_common import roles
from amux_common.doctor import Check
from sessions.doctor import provider_check
from sessions.keys import api_key_problem, with_key
from sessions.models import ProviderProfile

# Providers are where every runtime sends its model requests, so the page sits with the
# Sessions tab; agent settings and the first-run checklist link to it.
TAB = "sessions"


class ProviderForm(forms.ModelForm):
    api_key = forms.CharField(
        label="API key", required=False, strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Write-only: never shown again. Leave empty to keep the current key.")
    clear_key = forms.BooleanField(label="Remove the stored key", required=False)
    base_url = forms.URLField(
        label="Base URL", max_length=300, assume_scheme="https",
        help_text="For example https://api.openai.com/v1; the connection test asks "
                  "the base URL + /models.")
    models_text = forms.CharField(
        label="Suggested models", required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One model name per line (offered in agent settings).")

    class Meta:
        model = ProviderProfile
        fields = ["slug", "platform", "base_url"]
        labels = {"slug": "Name (slug)"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["slug"].disabled = True  # sessions and settings refer to it
            self.initial["models_text"] = "\n".join(self.instance.model_names or [])
        else:
            del self.fields["clear_key"]

    def clean_base_url(self) -> str:
        value = self.cleaned_data["base_url"]
        if not value.startswith(("http://", "https://")):
            raise forms.ValidationError("an explicit http(s) base URL is required")
        return value.rstrip("/")

    def clean_api_key(self) -> str:
        key = self.cleaned_data.get("api_key") or ""
        if key and (problem := api_key_problem(key)):
            raise forms.ValidationError(problem)
        return key

    def save(self, commit: bool = True) -> ProviderProfile:
        provider = super().save(commit=False)
        provider.model_names = [m.strip() for m in self.cleaned_data["models_text"].splitlines()
                                if m.strip()]
        provider.secrets = with_key(provider.secrets, self.cleaned_data.get("api_key") or "",
                                    bool(self.cleaned_data.get("clear_key")))
        provider.save()
        return provider


@roles.read_page
def providers(request):
    rows = [{"p": p, "key_set": bool((p.secrets or {}).get("api_key"))}
            for p in ProviderProfile.objects.all()]
    return render(request, "panel/providers.html", {
        "tab": TAB, "rows": rows, "can_edit": roles.is_operator(request.user)})


@roles.operator_to_change
def provider_form(request, slug: str | None = None):
    provider = get_object_or_404(ProviderProfile, slug=slug) if slug else None
    form = ProviderForm(instance=provider)
    if request.method == "POST":
        form = ProviderForm(request.POST, instance=provider or ProviderProfile())
        if form.is_valid():
            saved = form.save()
            messages.success(request, f"Saved provider {saved.slug}.")
            return redirect("panel-providers")
    return render(request, "panel/provider_form.html", {
        "tab": TAB, "form": form, "provider": provider,
        "key_set": bool(provider and (provider.secrets or {}).get("api_key")),
        "can_edit": roles.is_operator(request.user),
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
                                  f"{provider.base_url}/models is not a model list: check "
                                  "the base URL.")
    else:
        messages.error(request, f"{provider.slug}: {check.detail}")
    return redirect("panel-providers")
