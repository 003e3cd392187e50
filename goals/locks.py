"""The one module of goals' lock querysets, and the one order they are taken in.

A transaction that locks several goals rows takes them root first, in this order, so two
writers never wait on each other in a circle:

    goal → agent → connector → turn (GoalTurn) → todo → material → decision
         → receipt (IngressReceipt) → queued ingress → inbox event → reply → binding
         → intake's source (last: it belongs to another app)

Several rows of one model are locked in pk order. ``no_key``: a row that others only
point at (a goal its todos and turns reference) can still be referenced meanwhile;
``of=("self",)``: rows joined for reading are read, not locked. Locking a row the caller
already holds is free, so a writer that needs the goal locks it first even when it came in
through a finer row (it reads that row's goal id without a lock, then locks both)."""

from __future__ import annotations

from goals.core.lifecycle import Refused
from goals.models import (
    Agent,
    Connector,
    ConnectorReply,
    Decision,
    Goal,
    GoalTurn,
    InboxEvent,
    IngressReceipt,
    Material,
    QueuedIngress,
    Todo,
    WorkingSession,
)
from intake.models import Source


def for_update(queryset):
    return queryset.select_for_update(no_key=True, of=("self",)).order_by("pk")


def goal(*, slug: str | None = None, pk: int | None = None) -> Goal:
    rows = Goal.objects.filter(slug=slug) if slug is not None else Goal.objects.filter(pk=pk)
    found = for_update(rows).first()
    if found is None:
        raise Refused(f"unknown goal {slug if slug is not None else pk!r}",
                      code="not_found", status=404)
    return found


def agent_of(goal_slug: str, agent_slug: str) -> Agent:
    """The agent, its goal locked first."""
    goal(slug=goal_slug)
    found = for_update(Agent.objects.select_related("goal")
                       .filter(goal__slug=goal_slug, slug=agent_slug)).first()
    if found is None:
        raise Refused(f"unknown agent {agent_slug!r} of goal {goal_slug!r}",
                      code="not_found", status=404)
    return found


def agent(pk: int) -> Agent:
    """The agent by id, its goal locked first."""
    goal_id = Agent.objects.filter(pk=pk).values_list("goal_id", flat=True).first()
    if goal_id is None:
        raise Refused(f"unknown agent {pk}", code="not_found", status=404)
    goal(pk=goal_id)
    return for_update(Agent.objects.select_related("goal").filter(pk=pk)).get()


def connector(pk: int) -> Connector:
    """The connector, its agent locked first (and the agent's goal before that)."""
    agent_id = Connector.objects.filter(pk=pk).values_list("agent_id", flat=True).first()
    if agent_id is None:
        raise Refused(f"unknown connector {pk}", code="not_found", status=404)
    agent(agent_id)
    found = for_update(Connector.objects.select_related("agent", "goal").filter(pk=pk)).first()
    if found is None:
        raise Refused(f"unknown connector {pk}", code="not_found", status=404)
    return found


def turn(pk: int, *, goal_first: bool = True) -> GoalTurn | None:
    """The envelope (None: gone). ``goal_first``: its goal locked before it, for a step
    that changes the goal or its todos."""
    if goal_first:
        goal_id = GoalTurn.objects.filter(pk=pk).values_list("goal_id", flat=True).first()
        if goal_id is None:
            return None
        goal(pk=goal_id)
    return for_update(GoalTurn.objects.filter(pk=pk)).first()


def todo(goal_row: Goal, pk: int) -> Todo | None:
    return for_update(Todo.objects.select_related("claimed_by")
                      .filter(goal=goal_row, pk=pk)).first()


def material(goal_row: Goal, key: str) -> Material | None:
    return for_update(Material.objects.filter(goal=goal_row, key=key)).first()


def decision(goal_row: Goal, pk: int) -> Decision | None:
    return for_update(Decision.objects.filter(goal=goal_row, pk=pk)).first()


def receipt(pk: int) -> IngressReceipt | None:
    return for_update(IngressReceipt.objects.filter(pk=pk)).first()


def queued(queryset) -> list[QueuedIngress]:
    return list(for_update(queryset))


def inbox_event(queryset) -> InboxEvent | None:
    return for_update(queryset).first()


def reply(pk: int) -> ConnectorReply:
    return for_update(ConnectorReply.objects.filter(pk=pk)).get()


def binding(agent_row: Agent) -> WorkingSession | None:
    return for_update(agent_row.bindings.filter(active=True)).first()


def source(pk: int) -> Source:
    """Intake's source row, locked last (a connector's chat or document on it)."""
    return for_update(Source.objects.filter(pk=pk)).get()
