"""The one form for a model provider, in the panel's Providers page and in the admin: the
key is write-only (typed in, never rendered back, kept when left empty) and checked to be
sendable in an HTTP header."""

from __future__ import annotations

from django import forms

from sessions.keys import api_key_problem, with_key
from sessions.models import ProviderProfile


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
        if commit:
            provider.save()
        return provider
