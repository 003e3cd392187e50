from django.apps import AppConfig


class IntakeConfig(AppConfig):
    name = "intake"
    label = "intake"
    verbose_name = "Intake"
    default_auto_field = "django.db.models.BigAutoField"
