from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from conversations import wiring  # models are loaded only now

        wiring.wire()
        # card actions: intake verifies card callbacks and hands them to this app's checks
        from conversations import card_actions, request_actions  # noqa: F401
        from intake import card_hooks

        card_hooks.register(card_actions.handle)
