from django.apps import AppConfig


class TicketsConfig(AppConfig):
    name = "tickets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from tickets import effect_handlers, policy_hooks  # noqa: F401 - outbox handlers

        policy_hooks.register()  # source facts and live mandates for policy/
