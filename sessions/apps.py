from django.apps import AppConfig


class AgentSessionsConfig(AppConfig):
    # django.contrib.sessions owns the label "sessions".
    name = "sessions"
    label = "agent_sessions"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from effects import events
        from effects.models import EffectKind
        from sessions import task_runs

        # a task run takes the outcome of its turn (stated with the terminal event)
        events.subscribe(EffectKind.TURN_ENDED, task_runs.SUBSCRIBER,
                         wants=task_runs.wants_turn_end)(task_runs.turn_ended)
