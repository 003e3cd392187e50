"""Everything the execution model plugs into the apps below it, in one place (called once
from ExecutionConfig.ready): the ports sessions declares for it (sessions.hooks) and the
subscriber that gives a task run the outcome of its turn, and the handler that fires a
schedule's run. Nothing below execution imports it."""

from __future__ import annotations

from effects import events, outbox
from effects.models import EffectKind
from execution import schedules, session_hooks, task_runs
from sessions import hooks


def wire() -> None:
    hooks.launch_settings.provide(session_hooks.launch_settings)
    hooks.expert_snapshot.provide(session_hooks.expert_snapshot)
    hooks.expert_text.provide(session_hooks.expert_text_now)
    hooks.expert_reading.provide(session_hooks.expert_reading)
    hooks.task_turn_started.provide(task_runs.turn_started)
    # a task run takes the outcome of its turn (stated with the terminal event)
    events.subscribe(EffectKind.TURN_ENDED, task_runs.SUBSCRIBER,
                     wants=task_runs.wants_turn_end)(task_runs.turn_ended)
    outbox.register(EffectKind.SCHEDULE_FIRE)(schedules.fire_effect)
