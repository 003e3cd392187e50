"""The Sessions tab: sessions with lifecycle, runtime, model and usage; one session's
timeline live over the websocket (htmx ws), a message box, interrupt, permission answers,
and — only when the session's runtime declared native goals — the short goal help."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from amux_common import roles
from amux_common.pager import paged
from sessions import isolation, native_goal_commands, native_goals, services, timeline
from sessions.models import Lifecycle, Session, Turn


@roles.read_page
def sessions_tab(request):
    sessions = paged(request, Session.objects.select_related("provider").order_by("-id"))
    return render(request, "panel/sessions.html", {
        "tab": "sessions", "sessions": sessions,
        # the backend new sessions get and why; each session shows the one frozen with it
        "isolation": isolation.selected_backend(), "isolation_reason":
            isolation.selection_reason()})


@roles.read_page
def session_detail(request, pk: int):
    session = get_object_or_404(Session.objects.select_related("provider"), pk=pk)
    return render(request, "sessions/detail.html", {
        "tab": "sessions", "s": session, "pending": timeline.pending_requests(pk),
        "can_act": roles.is_operator(request.user),
        "archived": session.lifecycle == Lifecycle.ARCHIVED,
        # the goal commands, as the Lark status card lists them; none without goals
        "goal_help": native_goal_commands.HELP if native_goals.supported(session) else ()})


@roles.read_page
def session_turn(request, pk: int, seq: int):
    """A turn's time and the tokens it used, once it has ended: the page asks for it when
    the turn's end arrives (the tokens are what the runtime's usage reports of the turn add
    up to, ``timeline.turn_tokens``)."""
    turn = get_object_or_404(Turn.objects.select_related("session"), session_id=pk, seq=seq)
    took = None
    if turn.started_at and turn.ended_at:
        took = seconds_text((turn.ended_at - turn.started_at).total_seconds())
    reported = turn.events.filter(type="usage.observed").exists()
    tokens = timeline.turn_tokens(turn) if reported else None
    return render(request, "sessions/_turn_summary.html", {
        "took": took, "tokens": tokens,
        "tokens_shown": None if tokens is None else f"{tokens:,}"})


def seconds_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def _result(message: str, ok: bool = True, status: int = 200) -> HttpResponse:
    cls = "ok" if ok else "error"
    return HttpResponse(format_html('<p class="notice {}" role="status">{}</p>', cls, message),
                        status=status)


def _refuse_archived(pk: int) -> HttpResponse | None:
    """An archived session takes no more input: say so plainly (409), whatever the page
    showed when it was loaded."""
    session = get_object_or_404(Session, pk=pk)
    if session.lifecycle == Lifecycle.ARCHIVED:
        return _result("This session is archived: it takes no messages and has nothing to "
                       "interrupt.", ok=False, status=409)
    return None


@roles.operator_required
@require_POST
def session_message(request, pk: int):
    if refused := _refuse_archived(pk):
        return refused
    try:
        turn = services.post_message(pk, request.POST.get("text", ""),
                                     origin={"via": "web", "actor": request.user.get_username()})
    except services.CommandError as exc:
        return _result(str(exc), ok=False, status=200)
    if isinstance(turn, dict):  # a goal command (sessions.native_goals): its outcome
        if turn.get("refused"):
            return _result(f"Goal: {turn['refused']}", ok=False, status=200)
        return _result(f"Goal: {turn.get('command')} sent.")
    return _result(f"Queued as turn {turn.seq}.")


@roles.operator_required
@require_POST
def session_interrupt(request, pk: int):
    if refused := _refuse_archived(pk):
        return refused
    try:
        services.interrupt(pk)
    except services.CommandError as exc:
        return _result(str(exc), ok=False)
    return _result("Interrupt requested.")


@roles.operator_required
@require_POST
def session_permission(request, pk: int, request_id: str):
    get_object_or_404(Session, pk=pk)
    try:
        services.answer_permission(pk, request_id, request.POST.get("option") or None)
    except services.CommandError as exc:
        return _result(str(exc), ok=False)
    return _result("Answered.")


@roles.operator_required
@require_POST
def session_question(request, pk: int, request_id: str):
    """Answers per question id (``q:<id>`` fields); a typed answer wins over a choice."""
    get_object_or_404(Session, pk=pk)
    answers: dict[str, list[str]] = {}
    for key in request.POST:
        if key.startswith("q:"):
            values = [v for v in request.POST.getlist(key) if v.strip()]
            if values:
                answers[key[2:]] = values
    try:
        services.answer_question(pk, request_id, answers)
    except services.CommandError as exc:
        return _result(str(exc), ok=False)
    return _result("Answered.")
