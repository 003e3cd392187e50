"""The Schedules page under the Sessions tab: the operator's schedules, a form to add one,
pause / resume / delete, and each schedule's runs (execution/schedules.py does the work)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from amux_common import roles
from amux_common.pager import paged
from execution import schedules
from execution.models import ScheduleMode, ScheduleRun
from runtimes import registered
from sessions.services import CommandError

FORM_FIELDS = ("name", "every_seconds", "cron", "mode", "prompt", "runtime", "model",
               "provider", "profile", "extra_args")


def _submitted(post) -> dict:
    """The form as the API's body: empty inputs are left out, extra_args one per line."""
    data: dict = {}
    for key in FORM_FIELDS:
        value = post.get(key, "")
        if key != "prompt":
            value = value.strip()
        if not value:
            continue
        if key == "every_seconds":
            data[key] = int(value) if value.isdigit() else value
        elif key == "extra_args":
            data[key] = [line.strip() for line in value.splitlines() if line.strip()]
        else:
            data[key] = value
    return data


def _list_page(request, *, error=None, form=None):
    rows = paged(request, schedules.visible_to(request.user).order_by("-id"))
    return render(request, "sessions/schedules.html", {
        "tab": "sessions", "sub": "schedules", "rows": rows,
        "views": [schedules.schedule_view(s) for s in rows.items],
        "modes": ScheduleMode.choices, "runtimes": sorted(registered()),
        "can_edit": roles.is_operator(request.user), "error": error, "form": form or {}},
        status=400 if error else 200)


@roles.read_page
def schedules_page(request):
    return _list_page(request)


@roles.operator_required
@require_POST
def schedule_create(request):
    try:
        schedule = schedules.create_schedule(owner=request.user, data=_submitted(request.POST))
    except CommandError as exc:
        return _list_page(request, error={"field": exc.field, "message": str(exc)},
                          form=request.POST)
    messages.success(request, f"Schedule {schedule.name} added.")
    return redirect("panel-schedules")


@roles.read_page
def schedule_page(request, pk: int):
    schedule = schedules.visible_to(request.user).filter(pk=pk).first()
    if schedule is None:
        raise Http404
    runs = paged(request, ScheduleRun.objects.filter(schedule=schedule)
                 .select_related("task").order_by("-slot"))
    return render(request, "sessions/schedule.html", {
        "tab": "sessions", "sub": "schedules", "s": schedules.schedule_view(schedule),
        "runs": runs, "run_views": [schedules.run_view(r) for r in runs.items],
        "can_edit": roles.is_operator(request.user)})


@roles.operator_required
@require_POST
def schedule_action(request, pk: int, action: str):
    try:
        if action in ("pause", "resume"):
            schedules.set_paused(owner=request.user, schedule_id=pk, paused=action == "pause")
            messages.success(request, "Paused." if action == "pause" else "Resumed.")
        elif action == "delete":
            schedules.delete_schedule(owner=request.user, schedule_id=pk)
            messages.success(request, "Schedule deleted.")
            return redirect("panel-schedules")
        else:
            raise Http404
    except CommandError as exc:
        if exc.status == 404:
            raise Http404 from exc
        messages.error(request, str(exc))
    return redirect("panel-schedule", pk=pk)
