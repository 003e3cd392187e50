from django.apps import AppConfig


class GoalsConfig(AppConfig):
    name = "goals"
    verbose_name = "Goals and agents (LoopX)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from effects import outbox
        from goals import queue

        # the session queue's crash-safe dispatch: one row per session, one item a run
        outbox.register(queue.EFFECT_KIND)(queue.dispatch)
