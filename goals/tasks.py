"""The managed-mode supervisor's Celery tasks, on the default queue (never a thread, never
an endless loop in one task). An envelope's own supervisor is its outbox row (goals/turns.py
``drive``); what is left here runs where the outbox cannot:

- ``goals.turn`` runs amux's check of an ended attempt, and the steps after it, on the
  machine that holds the session's work directory (its runtime queue; the check is bounded
  by its own timeout, longer than a drainer may hold a handler), then hands the envelope
  back to its row.
- ``goals.supervise`` (beat, and when autorun is switched on or an inbox lane lets the
  ordinary turn go first) asks each autorun agent (or the one named) whether another
  turn is eligible — an inbox turn first when a reply is due, and agents with inbox events
  waiting too. Nothing in flight depends on it: each envelope has its row."""

from __future__ import annotations

from django.db.models import Q

from amux_common.tasks import durable_task
from goals import checks, inbox_turns, turns
from goals.models import Agent


@durable_task(turns.CHECK_TASK, time_limit=checks.check_timeout_s() + turns.CHECK_MARGIN_S)
def run_turn(turn_pk: int) -> str:
    return turns.run_check_step(turn_pk).state


@durable_task("goals.supervise", time_limit=60)
def supervise(agent_pk: int | None = None) -> int:
    """One bounded pass over autorun agents (or the one named): each is asked whether
    another turn is eligible. Returns todo turns started."""
    if agent_pk is not None:
        agents = Agent.objects.filter(pk=agent_pk)
    else:
        agents = Agent.objects.filter(Q(autorun=True) | Q(pk__in=inbox_turns.waiting_agents()))
    started = 0
    for pk in agents.values_list("pk", flat=True)[:100]:
        if turns.supervise(pk) is not None:
            started += 1
    return started
