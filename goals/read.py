"""The read side shared by the API and the panel: an agent's projected lifecycle and the
goal page's plain data (no model objects reach a template)."""

from __future__ import annotations

from typing import Any

from amux_common import metrics
from goals import connector_state, ingress
from goals.core import connectors as ck
from goals.core import lifecycle as lc
from goals.core import turns as turn_rules
from goals.models import Agent, Goal, WorkingSession
from sessions import app_servers, timeline
from sessions.models import AppServer, Lifecycle, TurnState


def lifecycle(agent: Agent) -> str:
    binding = agent.bindings.filter(active=True).select_related("session").first()
    if binding is None:
        return lc.project_lifecycle(agent.lifecycle, bound=False, session_archived=False,
                                    turn_running=False, waiting_for_person=False,
                                    last_turn_cancelled=False)
    session = binding.session
    last = session.turns.order_by("-seq").first()
    stored = agent.lifecycle
    if binding.mode == lc.ATTACHED and not app_servers.thread_live(session):
        stored = "stale"  # the app-server or its thread is gone: nothing replaces it
    return lc.project_lifecycle(
        stored, bound=True,
        session_archived=session.lifecycle == Lifecycle.ARCHIVED,
        turn_running=timeline.turn_in_flight(session.pk) is not None,
        waiting_for_person=bool(timeline.pending_requests(session.pk)),
        last_turn_cancelled=bool(last and last.state == TurnState.CANCELLED))


def goal_page(goal: Goal) -> dict[str, Any]:
    agents = []
    states = connector_state.Reader()
    for agent in goal.agents.select_related("provider").order_by("slug"):
        binding = agent.bindings.filter(active=True).first()
        agents.append({
            "slug": agent.slug, "name": agent.name or agent.slug, "mode": agent.mode,
            "managed": agent.mode == lc.MANAGED,
            "lifecycle": lifecycle(agent), "session": binding.session_id if binding else None,
            "runtime": agent.runtime, "provider": agent.provider.slug if agent.provider else "",
            "model": agent.model,
            "connections": [{"id": c.pk, "label": ck.label(c.source_kind), **states.of(c),
                             "queues": "session_queue" in (c.ingress_mode, c.fallback),
                             "ingress": c.ingress_mode, "fallback": c.fallback,
                             "capture": c.capture_scope, "reply": c.reply_mode,
                             "mirror": c.mirror_ref, **channel_choice(c)}
                            for c in agent.connectors.select_related("source")
                            .order_by("id")],
            "urgency": ingress.urgency(agent),
            "autorun": agent.autorun,
            "turns": recent_turns(agent),
            # attached mode (its own block): the binding and the sessions to attach to
            **(attached_state(agent, binding) if agent.mode == lc.ATTACHED else {}),
        })
    return {
        "slug": goal.slug, "title": goal.title, "description": goal.description,
        "state": goal.state, "check_command": goal.check_command,
        "quota": {"unit": goal.quota_unit, "limit": goal.quota_limit,
                  "spent": goal.quota_spent},
        "agents": agents,
        "todos": [{"id": t.pk, "title": t.title, "state": t.state,
                   "claimed_by": t.claimed_by.slug if t.claimed_by else "",
                   "writeback": _writeback_words(t)}
                  for t in goal.todos.select_related("claimed_by")],
        "materials": [{"key": m.key, "title": m.title or m.key, "revision": m.revision,
                       "fetched_at": m.fetched_at} for m in goal.materials.all()],
        # open ones first, newest first within each: what waits for a person leads
        "decisions": [{"id": d.pk, "kind": d.kind.replace("_", " "), "text": d.text,
                       "contradicts": d.contradicts, "todo": d.todo_id, "state": d.state,
                       "resolution": d.resolution, "resolved_by": d.resolved_by,
                       "at": d.created_at}
                      for d in goal.decisions.order_by("state", "-id")[:50]],
    }


def _writeback_words(todo) -> str:
    """An attached agent's pending or refused "done", beside a claimed todo's state."""
    wb = todo.writeback or {}
    if todo.state != "claimed" or "state" not in wb:
        return ""
    if wb["state"] == "validating":
        return "done? amux is checking"
    if wb["state"] == "refused":
        return f"done refused: {wb.get('reason', '').replace('_', ' ')}"
    return ""


def channel_choice(connector) -> dict[str, Any]:
    """A Lark Bot connection's channel and the chats it may choose among (its source's
    configured groups); other connections have none."""
    if connector.source_kind != ck.LARK_BOT:
        return {"channel": None, "channels": []}
    groups = ck.configured_groups(connector.source.config if connector.source_id else None)
    choices = list(groups)
    if connector.source_ref and connector.source_ref not in choices:
        choices.insert(0, connector.source_ref)  # shown, though no longer configured
    return {"channel": connector.source_ref, "channels": choices}


def recent_turns(agent: Agent, limit: int = 5) -> list[dict[str, Any]]:
    """The agent's last managed turns, newest first: validation, hint and spend."""
    return [{"key": t.key, "state": t.state, "reason": t.reason, "todo": t.todo_id,
             "passed": (t.validation or {}).get("passed"), "hint": t.hint,
             "quota_spent": t.quota_spent, "at": t.updated_at,
             # a turn in flight before its writeback can be cancelled (Cancel button)
             "cancelling": bool((t.attempt or {}).get("cancel_requested"))
             and t.state == turn_rules.RUNNING,
             "cancellable": t.state in (turn_rules.QUEUED, turn_rules.RUNNING,
                                        turn_rules.VALIDATED)
             and not (t.attempt or {}).get("cancel_requested")}
            for t in agent.turns.order_by("-id")[:limit]]


# ---------------------------------------------------------------- attached mode (panel)
def attached_state(agent: Agent, binding) -> dict[str, Any]:
    """An attached agent's binding (app-server, thread, live now or stale) and, when it
    is unbound, the threads of the live attachable app-servers to choose from."""
    if binding is not None:
        server = app_servers.app_server_of(binding.session)
        return {"attached": {
            "server": server.name if server else "", "ref": server.ref if server else "",
            "thread": binding.session.native_ref,
            "live": app_servers.thread_live(binding.session)}}
    choices = []
    for row in AppServer.objects.select_related("provider").exclude(state="stopped"):
        described = app_servers.describe(row)
        for thread in described["threads"]:
            if thread["attached"] is None:
                choices.append({"value": f"{row.ref}:{thread['id']}",
                                "label": f"{row.name} · thread {thread['id']}"})
    return {"attached": None, "attachable": choices}


def model_request_refusal(session_id: int, goal_id: int) -> str | None:
    """Why a model request of `session_id` may not go out now (the model gateway asks before
    each one; registered in goals/wiring.py): the goal `goal_id` of the agent working in
    the session has spent its token quota (what `MODEL_REQUEST_PROBE` found). A quota in
    turns is held where turns start; no limit set (0) holds nothing here."""
    goal = Goal.objects.filter(pk=goal_id).values_list("slug", "quota_limit").first()
    if goal is None:
        return None
    metrics.guard_blocked("goal_tokens", "model_request")
    return f"amux: the goal {goal[0]}'s token quota ({goal[1]:,}) is spent"


# read with the grant of each model request (sessions.hooks): the goal of the agent working
# in the session whose token quota is spent, else NULL
MODEL_REQUEST_PROBE = (
    f"SELECT g.id FROM {Goal._meta.db_table} g "
    f"JOIN {Agent._meta.db_table} a ON a.goal_id = g.id "
    f"JOIN {WorkingSession._meta.db_table} w ON w.agent_id = a.id "
    f"WHERE w.session_id = {{session}} AND w.active AND g.quota_unit = 'tokens' "
    f"AND g.quota_limit > 0 AND g.quota_spent >= g.quota_limit LIMIT 1")
