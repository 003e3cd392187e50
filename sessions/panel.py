"""The Sessions tab: sessions with lifecycle, runtime, model and usage; one session's
timeline live over the websocket (htmx ws), a message box, interrupt, permission answers."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from amux_common.pager import paged
from sessions import services, timeline
from sessions.models import Session


@login_required
def sessions_tab(request):
    sessions = paged(request, Session.objects.select_related("provider").order_by("-id"))
    return render(request, "panel/sessions.html", {"tab": "sessions", "sessions": sessions})


@login_required
def session_detail(request, pk: int):
    session = get_object_or_404(Session.objects.select_related("provider"), pk=pk)
    return render(request, "sessions/detail.html", {
        "tab": "sessions", "s": session, "pending": timeline.pending_requests(pk),
        "can_act": request.user.is_staff})


def _result(message: str, ok: bool = True, status: int = 200) -> HttpResponse:
    cls = "ok" if ok else "error"
    return HttpResponse(f'<p class="notice {cls}" role="status">{message}</p>', status=status)


@login_required
@require_POST
def session_message(request, pk: int):
    if not request.user.is_staff:
        return HttpResponseForbidden("viewers cannot send messages")
    get_object_or_404(Session, pk=pk)
    try:
        turn = services.post_message(pk, request.POST.get("text", ""))
    except services.CommandError as exc:
        return _result(str(exc), ok=False, status=200)
    return _result(f"Queued as turn {turn.seq}.")


@login_required
@require_POST
def session_interrupt(request, pk: int):
    if not request.user.is_staff:
        return HttpResponseForbidden("viewers cannot interrupt")
    get_object_or_404(Session, pk=pk)
    try:
        services.interrupt(pk)
    except services.CommandError as exc:
        return _result(str(exc), ok=False)
    return _result("Interrupt requested.")


@login_required
@require_POST
def session_permission(request, pk: int, request_id: str):
    if not request.user.is_staff:
        return HttpResponseForbidden("viewers cannot answer")
    get_object_or_404(Session, pk=pk)
    try:
        services.answer_permission(pk, request_id, request.POST.get("option") or None)
    except services.CommandError as exc:
        return _result(str(exc), ok=False)
    return _result("Answered.")


@login_required
@require_POST
def session_question(request, pk: int, request_id: str):
    """Answers per question id (``q:<id>`` fields); a typed answer wins over a choice."""
    if not request.user.is_staff:
        return HttpResponseForbidden("viewers cannot answer")
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
