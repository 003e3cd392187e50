"""The goal pages, under the Sessions tab: the goals, and one goal with its agents (mode,
lifecycle, working session), each connection's state in a header line ("Lark Bot ·
listening"), todos, materials and inbox urgency. Operators start and detach agents here,
run a managed agent's next turn, cancel a running one and switch its autorun, and
disconnect, reconnect, rebind connections or choose a Lark Bot connection's channel;
viewers read."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from amux_common import roles
from goals import actions, read, turns
from goals.core import connectors as ck
from goals.core.lifecycle import Refused
from goals.models import Connector, Goal

TAB = "sessions"


def _next_turn(slug: str, agent: str) -> None:
    """One click, one new turn (its own key): the same flow as POST .../turns."""
    turns.request(slug, agent, key=f"panel-{uuid.uuid4().hex[:12]}")


ACTIONS = {"start": actions.start, "detach": actions.detach, "turn": _next_turn,
           "autorun-on": lambda slug, agent: turns.set_autorun(slug, agent, True),
           "autorun-off": lambda slug, agent: turns.set_autorun(slug, agent, False)}
CONNECTOR_ACTIONS = {"disconnect": actions.disconnect, "reconnect": actions.reconnect,
                     "rebind": actions.rebind}


@roles.read_page
def goal_list(request):
    goals = [{"slug": g.slug, "title": g.title, "state": g.state, "agents": g.agents.count()}
             for g in Goal.objects.all()]
    return render(request, "panel/goals.html", {"tab": TAB, "goals": goals})


@roles.read_page
def goal_page(request, slug: str):
    goal = get_object_or_404(Goal, slug=slug)
    return render(request, "panel/goal.html", {
        "tab": TAB, "goal": read.goal_page(goal),
        "can_edit": roles.is_operator(request.user)})


@roles.operator_required
@require_POST
def agent_action(request, slug: str, agent: str, action: str):
    command = ACTIONS.get(action)
    if command is None:
        raise Http404("unknown action")
    try:
        command(slug, agent)
    except Refused as exc:
        if exc.status == 404:
            raise Http404(str(exc)) from exc
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{agent}: {action} done.")
    return redirect("panel-goal", slug=slug)


@roles.operator_required
@require_POST
def turn_cancel(request, slug: str, agent: str, key: str):
    """A running turn's Cancel button: the same command as POST .../turns/<key>/cancel."""
    try:
        turn = turns.cancel(slug, agent, key)
    except Refused as exc:
        if exc.status == 404:
            raise Http404(str(exc)) from exc
        messages.error(request, f"{agent}: turn {key}: {exc}")
    else:
        messages.success(request, f"{agent}: turn {key} " + (
            "cancelled." if turn.state == "cancelled"
            else "is being interrupted; it ends cancelled once its session turn stops."))
    return redirect("panel-goal", slug=slug)


# ---------------------------------------------------------------- attached mode
@roles.operator_required
@require_POST
def agent_attach(request, slug: str, agent: str):
    """Attach an attached-mode agent to the chosen ``<app-server>:<thread>`` (the same
    checks as POST goals/<g>/agents/<a>/attach)."""
    ref, _, thread = (request.POST.get("choice") or "").partition(":")
    try:
        if not ref:
            raise Refused("choose an attachable session", code="invalid", status=400,
                          field="session")
        actions.attach(slug, agent, ref, thread or None)
    except Refused as exc:
        if exc.status == 404:
            raise Http404(str(exc)) from exc
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{agent}: attached.")
    return redirect("panel-goal", slug=slug)


# --- connection actions (the header line's disconnect / reconnect / rebind) -------------

def _connection_done(action: str, label: str, result) -> str:
    if action == "rebind":
        moved = result["rebound"]
        return (f"{label}: {moved} queued item{'' if moved == 1 else 's'} moved to "
                f"session {result['session']}.")
    return f"{label} · {result.state}."


@roles.operator_required
@require_POST
def connector_action(request, slug: str, pk: int, action: str):
    """Disconnect, reconnect or rebind one of the goal's connectors (its header line): the
    same commands as ``DELETE connectors/<id>``, ``POST connectors/<id>/reconnect`` and
    ``POST connectors/<id>/rebind``. None of them touches the agent's mode, session or the
    goal's todos."""
    command = CONNECTOR_ACTIONS.get(action)
    connector = Connector.objects.filter(pk=pk, goal__slug=slug).first()
    if command is None or connector is None:
        raise Http404("unknown connector or action")
    label = ck.label(connector.source_kind)
    try:
        result = command(pk)
    except Refused as exc:
        messages.error(request, f"{label}: {exc}")
    else:
        messages.success(request, _connection_done(action, label, result))
    return redirect("panel-goal", slug=slug)


@roles.operator_required
@require_POST
def connector_channel(request, slug: str, pk: int):
    """Choose a Lark Bot connection's channel among its source's configured chats: the same
    command as ``POST connectors/<id>/channel``. The agent's mode and session and the goal's
    todos stay as they are."""
    connector = Connector.objects.filter(pk=pk, goal__slug=slug).first()
    if connector is None:
        raise Http404("unknown connector")
    label = ck.label(connector.source_kind)
    chat = request.POST.get("source_ref") or ""
    before = connector.source_ref
    try:
        changed = actions.select_channel(pk, chat)
    except Refused as exc:
        messages.error(request, f"{label}: {exc}")
    else:
        if changed.source_ref == before:
            messages.info(request, f"{label}: already on {chat}.")
        else:
            messages.success(request, f"{label}: channel {changed.source_ref}.")
    return redirect("panel-goal", slug=slug)


@roles.operator_required
@require_POST
def decision_resolve(request, slug: str, pk: int):
    """A person resolves an open decision with a note: the same command as
    ``POST goals/<slug>/decisions/<id>/resolve``."""
    get_object_or_404(Goal, slug=slug)
    try:
        actions.resolve_decision(slug, pk, resolution=request.POST.get("resolution", ""),
                                 by=request.user.get_username())
    except Refused as exc:
        if exc.status == 404:
            raise Http404(str(exc)) from None
        messages.error(request, f"Decision {pk}: {exc}")
    else:
        messages.success(request, f"Decision {pk} resolved.")
    return redirect("panel-goal", slug=slug)
