from django.apps import AppConfig


class GoalsConfig(AppConfig):
    name = "goals"
    verbose_name = "Goals and agents (LoopX)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from goals import wiring

        wiring.wire()
