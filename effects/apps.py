from django.apps import AppConfig


class EffectsConfig(AppConfig):
    name = "effects"
    label = "effects"
    verbose_name = "Effects"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from effects import events, outbox

        outbox.check_lease_rule()  # refuse to start with leases a handler could outlive
        events.wire()
