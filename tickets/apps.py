from django.apps import AppConfig


class TicketsConfig(AppConfig):
    name = "tickets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from tickets import wiring  # models are loaded only now

        wiring.wire()
