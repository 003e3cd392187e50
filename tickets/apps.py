from django.apps import AppConfig


class TicketsConfig(AppConfig):
    name = "tickets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from intake import consumers
        from tickets import (  # noqa: F401 - outbox handlers
            effect_handlers,
            policy_hooks,
            reply_handlers,  # relay and notice through the sources
        )
        from tickets.consumer import TicketsConsumer

        policy_hooks.register()  # source facts and live mandates for policy/
        consumers.register(TicketsConsumer())  # what intake records, tickets take
