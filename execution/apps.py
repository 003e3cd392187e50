from django.apps import AppConfig


class ExecutionConfig(AppConfig):
    name = "execution"
    verbose_name = "Execution model (experts, presets, tasks, instances, schedules)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from execution import wiring  # models are loaded only now

        wiring.wire()
