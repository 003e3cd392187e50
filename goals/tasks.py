"""The managed-mode supervisor, as Celery tasks on the default queue (never a thread, never
an endless loop in one task):

- ``goals.turn`` advances one envelope (goals.turns.advance) as far as it can go now. While
  its session turn runs it ends: the turn's ``session.turn_ended`` fact sends it again
  (goals/turn_end.py), so nothing polls a running turn. The check runs on the machine
  that holds the session's work directory (its runtime queue).
- ``goals.supervise`` (beat, and after every turn) resumes envelopes nobody advanced
  lately (a lost task, a worker that died between steps), interrupts an attempt past its
  timeout and, for agents set to ``autorun``, starts the next bounded turn when the last
  one said ``continue`` — after the agent's own inbox turn when a reply is due there
  (goals/inbox_turns.py); an agent with inbox events waiting has its lane sent."""

from __future__ import annotations

from django.db.models import Q

from amux_common.tasks import durable_task
from goals import checks, inbox_turns, turns
from goals.core import turns as rules
from goals.models import Agent


@durable_task("goals.turn", time_limit=checks.check_timeout_s() + 120)
def run_turn(turn_pk: int) -> str:
    turn = turns.advance(turn_pk)
    if turn.state not in rules.IN_FLIGHT:
        supervise.apply_async(kwargs={"agent_pk": turn.agent_id})
        return turn.state
    queue = turns.check_queue(turn)  # the check runs where the work directory is
    if queue is not None:
        turns.enqueue(turn_pk, queue=queue)
    return turn.state


@durable_task("goals.supervise", time_limit=60)
def supervise(agent_pk: int | None = None) -> int:
    """One bounded pass: stalled envelopes are sent on again, then each autorun agent (or
    the one named) is asked whether another turn is eligible — an inbox turn first when a
    reply is due, and agents with inbox events waiting too. Returns todo turns started."""
    for turn_pk in turns.stalled()[:100]:
        turns.enqueue(turn_pk)
    if agent_pk is not None:
        agents = Agent.objects.filter(pk=agent_pk)
    else:
        agents = Agent.objects.filter(Q(autorun=True) | Q(pk__in=inbox_turns.waiting_agents()))
    started = 0
    for pk in agents.values_list("pk", flat=True)[:100]:
        if turns.supervise(pk) is not None:
            started += 1
    return started
