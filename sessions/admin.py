from django import forms
from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from sessions import models
from sessions.keys import api_key_problem


class ProviderProfileForm(forms.ModelForm):
    """The key is write-only here as in the API: never rendered back, kept when left empty."""

    api_key = forms.CharField(
        required=False, strip=True, widget=forms.PasswordInput(render_value=False),
        help_text="Write-only: leave empty to keep the stored key.")

    class Meta:
        model = models.ProviderProfile
        fields = ["slug", "platform", "base_url", "model_names"]

    def clean_api_key(self):
        key = self.cleaned_data["api_key"]
        problem = api_key_problem(key)
        if problem:
            raise forms.ValidationError(problem)
        return key

    def save(self, commit=True):
        profile = super().save(commit=False)
        key = self.cleaned_data.get("api_key")
        if key:
            profile.secrets = {**(profile.secrets or {}), "api_key": key}
        if commit:
            profile.save()
        return profile


@admin.register(models.ProviderProfile)
class ProviderProfileAdmin(admin.ModelAdmin):
    form = ProviderProfileForm
    list_display = ["slug", "platform", "base_url"]


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
