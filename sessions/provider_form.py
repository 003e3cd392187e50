"""The one form for a model provider, in the panel's Providers page and in the admin: the
key is write-only (typed in, never rendered back, kept when left empty) and checked to be
sendable in an HTTP header."""

from __future__ import annotations

from django import forms

from runtimes import catalog
from sessions import provider_templates
from sessions.keys import api_key_problem, with_key
from sessions.models import ProviderProfile


def models_to_text(stored) -> str:
    """One line per model: ``name``, or ``name | display name | effort, effort``."""
    lines = []
    for entry in catalog.provider_entries(stored):
        if entry.display_name or entry.efforts:
            lines.append(" | ".join([entry.ref, entry.display_name, ", ".join(entry.efforts)])
                         .rstrip(" |"))
        else:
            lines.append(entry.ref)
    return "\n".join(lines)


def models_from_text(text: str) -> list:
    raw: list = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if not parts[0]:
            continue
        if len(parts) == 1:
            raw.append(parts[0])
            continue
        item: dict = {"name": parts[0], "display_name": parts[1]}
        if len(parts) > 2 and parts[2]:
            item["efforts"] = [e.strip() for e in parts[2].split(",") if e.strip()]
        raw.append(item)
    return raw


class ProviderForm(forms.ModelForm):
    api_key = forms.CharField(
        label="API key", required=False, strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Write-only: never shown again. Leave empty to keep the current key.")
    clear_key = forms.BooleanField(label="Remove the stored key", required=False)
    base_url = forms.URLField(
        label="Base URL", max_length=300, assume_scheme="https",
        help_text="For example https://api.openai.com/v1 (https://api.anthropic.com for "
                  "anthropic-compat); the connection test asks the base URL + /models "
                  "(+ /v1/models for anthropic-compat).")
    models_text = forms.CharField(
        label="Suggested models", required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One model per line (offered in agent settings): a name, or "
                  "name | display name | efforts (comma-separated), e.g. "
                  "gpt-5.5 | GPT-5.5 | low, medium, high.")

    class Meta:
        model = ProviderProfile
        fields = ["slug", "platform", "base_url"]
        labels = {"slug": "Name (slug)"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["slug"].disabled = True  # sessions and settings refer to it
            self.initial["models_text"] = models_to_text(self.instance.model_names)
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

    def clean_models_text(self) -> list:
        stored, problem = catalog.check_provider_models(
            models_from_text(self.cleaned_data.get("models_text") or ""))
        if problem:
            raise forms.ValidationError(problem)
        return stored

    def clean(self):
        """A profile on a template's route needs the template's key from the start."""
        data = super().clean()
        stored = bool(self.instance.pk and (self.instance.secrets or {}).get("api_key"))
        problem = provider_templates.key_missing(
            data.get("platform") or "", data.get("base_url") or "",
            has_key=bool(data.get("api_key") or (stored and not data.get("clear_key"))))
        if problem:
            self.add_error("api_key", problem)
        return data

    def save(self, commit: bool = True) -> ProviderProfile:
        provider = super().save(commit=False)
        provider.model_names = self.cleaned_data["models_text"]
        provider.secrets = with_key(provider.secrets, self.cleaned_data.get("api_key") or "",
                                    bool(self.cleaned_data.get("clear_key")))
        if commit:
            provider.save()
        return provider
