from django import forms
from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from sessions import models
from sessions.keys import api_key_problem, with_key


class ProviderAdminForm(forms.ModelForm):
    """The key is write-only here as everywhere: typed in, never rendered back."""

    api_key = forms.CharField(
        label="API key", required=False, strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Write-only: leave empty to keep the current key.")
    clear_key = forms.BooleanField(label="Remove the stored key", required=False)
    base_url = forms.URLField(label="Base URL", max_length=300, assume_scheme="https")

    class Meta:
        model = models.ProviderProfile
        fields = ["slug", "platform", "base_url", "model_names"]

    def clean_api_key(self) -> str:
        key = self.cleaned_data.get("api_key") or ""
        if key and (problem := api_key_problem(key)):
            raise forms.ValidationError(problem)
        return key

    def save(self, commit: bool = True):
        provider = super().save(commit=False)
        provider.secrets = with_key(provider.secrets, self.cleaned_data.get("api_key") or "",
                                    bool(self.cleaned_data.get("clear_key")))
        if commit:
            provider.save()
        return provider


@admin.register(models.ProviderProfile)
class ProviderProfileAdmin(admin.ModelAdmin):
    form = ProviderAdminForm
    list_display = ["slug", "platform", "base_url", "key_set"]
    readonly_fields = ["key_set"]

    @admin.display(boolean=True, description="key set")
    def key_set(self, obj) -> bool:
        return bool((obj.secrets or {}).get("api_key"))


@admin.register(models.Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = ["id", "name", "runtime", "model", "lifecycle", "lease_owner"]
    list_filter = ["runtime", "lifecycle"]


@admin.register(models.Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "seq", "state", "error_code"]


@admin.register(models.TimelineEvent)
class TimelineEventAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "seq", "type", "at"]


@admin.register(models.UsageDay)
class UsageDayAdmin(ReadOnlyAdmin):
    list_display = ["session", "day", "tokens"]
