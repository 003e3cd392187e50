from django.apps import AppConfig


class TicketsConfig(AppConfig):
    name = "tickets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from tickets import (
            effect_handlers,  # noqa: F401 - registers the outbox handlers
            reply_handlers,  # noqa: F401 - relay and notice through sources
        )
