"""The one form for a model provider, in the panel's Providers page and in the admin: the
key is write-only (typed in, never rendered back, kept when left empty). What it accepts
and stores is sessions.provider_actions' to say, as for the REST API."""

from __future__ import annotations

from django import forms

from runtimes import catalog
from sessions import provider_actions
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
        return self.cleaned_data["base_url"].rstrip("/")

    def clean_models_text(self) -> list:
        return models_from_text(self.cleaned_data.get("models_text") or "")

    def validate_unique(self) -> None:
        """The slug's freedom is the writer's to say, with every other fault."""

    def clean(self):
        """Every fault sessions.provider_actions would refuse, beside its field."""
        data = super().clean()
        refused = provider_actions.refusals(
            self._stored(), **self._given(data, only_valid=True))
        for field, message in refused.items():
            if _FIELD_OF.get(field, field) not in self.errors:  # its own check said it
                self.add_error(_FIELD_OF.get(field, field), message)
        return data

    def save(self, commit: bool = True) -> ProviderProfile:
        """Through the one writer; ``commit`` False (the admin, which saves it next with
        ``save_model``) answers the profile unwritten."""
        if not commit:
            return super().save(commit=False)
        return provider_actions.save(self._stored() or self.instance,
                                     **self._given(self.cleaned_data))

    def _stored(self) -> ProviderProfile | None:
        return self.instance if self.instance.pk else None

    def _given(self, data: dict, *, only_valid: bool = False) -> dict:
        """The writer's members from the form's values (a field that failed its own check
        is left out, so its fault is not named twice)."""
        given = {"slug": data.get("slug"), "platform": data.get("platform"),
                 "base_url": data.get("base_url"), "models": data.get("models_text"),
                 "api_key": data.get("api_key") or "",
                 "clear_key": bool(data.get("clear_key"))}
        if only_valid:
            given = {name: value for name, value in given.items()
                     if _FIELD_OF.get(name, name) not in self.errors}
        return given


# the writer's names for the form's fields
_FIELD_OF = {"models": "models_text"}
