from django.apps import AppConfig


class PromptsAppConfig(AppConfig):
    name = "prompts_app"
    default_auto_field = "django.db.models.BigAutoField"
