"""The inbox drives itself: a managed agent drains its async inbox and settles what it
drained in its own turns (goals.core.inbox_turns), through one outbox kind
(``goals.inbox_turn``) with two keys:

- ``agent:<id>``, the agent's lane: written with every event the inbox captures
  (goals/ingress.py), after every inbox turn and whenever the supervisor finds a reply
  due. Under the agent's lock it asks what comes next; for an inbox turn it drains (a
  claim under the turn's key), posts the events into the working session and writes the
  ``turn:`` row, all in one transaction, so a crash loses nothing and a replay finds the
  claim in flight and posts nothing twice. When the supervisor's ordinary turn comes
  next, it sends the supervisor.
- ``turn:<session turn key>``, that turn's settle: it waits for the turn to end (the
  ``session.turn_ended`` fact wakes it, goals/turn_end.py), then settles each event its
  answer names through goals.inbox.settle (the effect first, the reply read back, then the
  ACK) and puts back, claim released, each event the answer does not settle. An event
  drained ``MAX_DRIVES`` times without a settle is left to a person.

Nothing polls: a turn in flight (ordinary or inbox) holds the lane, and its end asks
again."""

from __future__ import annotations

import contextlib
import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from effects import outbox
from execution.task_runs import final_answer
from goals import inbox, ingress, locks
from goals.core import inbox_turns as rules
from goals.core import ingress as ingress_rules
from goals.core import lifecycle as lc
from goals.core import quota
from goals.core import turns as turn_rules
from goals.core.lifecycle import Refused
from goals.core.urgency import ASKS_FOR_REPLY
from goals.models import Agent, InboxEvent, WorkingSession
from sessions import services
from sessions.models import Turn, TurnState

log = logging.getLogger(__name__)

SUPERVISE_TASK = "goals.supervise"
WAKE_FLOOR_S = 300  # a settle waiting for its turn is woken by the turn's end; a floor only


def timeout_s() -> int:
    """How long an inbox turn may run before it is interrupted (as a todo turn)."""
    return int(getattr(settings, "AMUX_GOAL_TURN_TIMEOUT_S", 1800))


def schedule(agent_pk: int) -> None:
    """In the caller's transaction: the agent's lane looks again after commit."""
    outbox.enqueue(rules.EFFECT_KIND, rules.agent_key(agent_pk), {"agent": agent_pk})


def drivable(agent: Agent, now):
    """Events the lane may drain: undrained or with an expired claim, not given up on."""
    return inbox.drainable(InboxEvent.objects.filter(agent=agent), now).filter(
        drains__lt=rules.MAX_DRIVES)


def reply_due(agent: Agent, now) -> bool:
    """A drivable event asks for a reply: it preempts the agent's ordinary advancement."""
    return drivable(agent, now).filter(kind__in=ASKS_FOR_REPLY).exists()


def waiting_agents():
    """Managed agents with events the lane could drain (for the supervisor's sweep)."""
    return (InboxEvent.objects.filter(agent__mode=lc.MANAGED, drains__lt=rules.MAX_DRIVES)
            .filter(Q(state="pending") | Q(state="processing",
                                            claimed_until__lte=timezone.now()))
            .values_list("agent_id", flat=True).distinct())


def next_step(agent: Agent) -> tuple[str | None, WorkingSession | None]:
    """What the agent does next on its own (goals.core.inbox_turns.next_step), and its
    working session."""
    now = timezone.now()
    status, binding = ingress.session_status(agent)
    live = status == ingress_rules.LIVE
    goal = agent.goal
    last = agent.turns.order_by("-id").first()
    ordinary_in_flight = agent.turns.filter(state__in=turn_rules.IN_FLIGHT).exists()
    events = drivable(agent, now)
    ordinary_next = turn_rules.supervise_next(
        autorun=agent.autorun, managed=agent.mode == lc.MANAGED, live=live,
        goal_state=goal.state, quota_remaining=quota.remaining(goal.quota_limit,
                                                                goal.quota_spent),
        in_flight=ordinary_in_flight, last_hint=last.hint if last else None)
    step = rules.next_step(
        managed=agent.mode == lc.MANAGED, live=live, ordinary_in_flight=ordinary_in_flight,
        inbox_in_flight=InboxEvent.objects.filter(
            agent=agent, state="processing", claim_key__startswith=rules.TURN_PREFIX,
            claimed_until__gt=now).exists(),
        drainable=events.count(), reply_due=events.filter(kind__in=ASKS_FOR_REPLY).exists(),
        ordinary_next=ordinary_next)
    return step, binding


def drive(effect_id: int, payload: dict) -> None:
    """The ``goals.inbox_turn`` handler: the lane (``agent``) or a turn's settle."""
    if payload.get("turn_key"):
        _settle(int(payload["agent"]), int(payload["session"]), str(payload["turn_key"]))
    else:
        _start(int(payload["agent"]))


def _start(agent_pk: int) -> None:
    now = timezone.now()
    with transaction.atomic(durable=True):
        try:
            agent = locks.agent(agent_pk)
        except Refused:
            return  # deleted meanwhile: nothing is left to drive
        step, binding = next_step(agent)
        if step == rules.TURN:
            send_supervisor(agent_pk)
        if step != rules.INBOX:
            return
        key = f"{rules.TURN_PREFIX}{uuid.uuid4().hex}"
        # the claim outlives the turn's own bound, so the settle finds it still held
        until = now + timedelta(seconds=timeout_s() + WAKE_FLOOR_S)
        events = inbox.claim(drivable(agent, now).select_related("receipt__connector"),
                             key, rules.DRIVE_LIMIT, until)
        if not events:
            return
        views = [rules.EventView(
            id=e.pk, kind=e.kind, text=e.text, actor=e.actor,
            reply_due=e.kind in ASKS_FOR_REPLY,
            can_reply=e.receipt.connector.reply_mode != "none") for e in events]
        services.post_message(
            binding.session_id, rules.prompt(agent.goal.title, views), key=key,
            origin={"via": "loopx", "goal": agent.goal.slug, "agent": agent.slug,
                    "inbox": len(views)})
        outbox.enqueue(rules.EFFECT_KIND, rules.turn_key(key), {
            "agent": agent_pk, "session": binding.session_id, "turn_key": key})


def send_supervisor(agent_pk: int) -> None:
    """In the caller's transaction: the agent's supervisor asked, once it commits, whether
    an ordinary turn comes next (its task, by name: tasks sit above). The beat asks again
    if this is lost."""
    from celery import current_app

    transaction.on_commit(lambda: current_app.send_task(
        SUPERVISE_TASK, kwargs={"agent_pk": agent_pk}, queue="default"))


def _settle(agent_pk: int, session_id: int, key: str) -> None:
    turn = Turn.objects.filter(session_id=session_id, key=key).first()
    if turn is not None and turn.state in (TurnState.QUEUED, TurnState.RUNNING):
        _bound(turn)
        raise outbox.Later(WAKE_FLOOR_S, "the inbox turn has not ended")
    agent = Agent.objects.select_related("goal").filter(pk=agent_pk).first()
    if agent is None:
        return
    answer = final_answer(turn.pk) if turn and turn.state == TurnState.COMPLETED else ""
    drained = list(InboxEvent.objects.filter(agent=agent, claim_key=key, state="processing")
                   .order_by("id").values_list("pk", flat=True))
    parsed = rules.parse(answer, drained)
    bound = _still_bound(agent, session_id)  # freshness before every writeback
    for pk in drained:
        entry = parsed.settles.get(pk)
        why = parsed.problems.get(pk) or parsed.error or "the answer does not settle it"
        if turn is None or turn.state != TurnState.COMPLETED:
            why = f"the inbox turn ended {turn.state if turn else 'lost'}"
        if bound != ingress_rules.LIVE:
            entry, why = None, bound  # an answer from a session no longer the agent's
        if entry is not None:
            try:
                inbox.settle(agent.goal.slug, agent.slug, pk, effect=entry.effect,
                             reply=entry.reply, key=key)
                continue
            except Refused as exc:
                why = f"{exc.field or 'settle'}: {exc}"
        _release(agent_pk, pk, key, why)
    with transaction.atomic(durable=True):
        schedule(agent_pk)  # the lane looks again: more events, or ordinary work


def _still_bound(agent: Agent, session_id: int) -> str:
    status, binding = ingress.session_status(agent)
    if status == ingress_rules.LIVE and binding.session_id != session_id:
        return "session_replaced"
    return status


def _bound(turn: Turn) -> None:
    """An inbox turn stays bounded: past the timeout it is interrupted once (its end then
    settles, releasing what it did not answer)."""
    started = turn.started_at or turn.created_at
    if timezone.now() - started > timedelta(seconds=timeout_s()):
        # not running yet, or ended meanwhile: looked at again at the next wake
        with contextlib.suppress(services.CommandError):
            services.interrupt(turn.session_id, turn_id=turn.pk)


def _release(agent_pk: int, event_pk: int, key: str, why: str) -> None:
    """Put an event the turn did not settle back in line, its claim released (its count
    of drains stays, so one the agent cannot settle is left to a person in the end)."""
    with transaction.atomic(durable=True):
        locks.agent(agent_pk)
        event = locks.inbox_event(InboxEvent.objects.filter(pk=event_pk, claim_key=key,
                                                            state="processing"))
        if event is None:
            return
        event.state, event.claim_key, event.claimed_until = "pending", "", None
        event.save(update_fields=["state", "claim_key", "claimed_until"])
    log.warning("inbox event %s not settled by its inbox turn (%s drains): %s",
                event_pk, event.drains, why)
