"""Panel pages of the orchestrator: Tickets, Triage and Sources tabs."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from tickets import engine
from tickets.api import WORKER_RUNTIMES
from tickets.core.errors import CommandRefused
from tickets.core.stage import MOVING, NEEDS_ME, Stage
from tickets.models import AgentSettings, Eval, Source, Ticket, Trigger
from tickets.read import stages


@login_required
def tickets_tab(request):
    live = list(Ticket.objects.filter(ended_at__isnull=True).select_related("thread__source"))
    labelled = stages(live)
    rows = [(t, *labelled[t.pk]) for t in live]
    ended = Ticket.objects.filter(ended_at__isnull=False).select_related("thread__source")
    context = {
        "tab": "tickets",
        "needs_me": [r for r in rows if r[1] in NEEDS_ME],
        "moving": [r for r in rows if r[1] in MOVING],
        "ended": ended.order_by("-ended_at")[:50],
    }
    return render(request, "panel/tickets.html", context)


@login_required
def ticket_page(request, pk):
    ticket = get_object_or_404(
        Ticket.objects.select_related("thread__source", "mandate", "session"), pk=pk
    )
    stage, label = stages([ticket])[ticket.pk]
    context = {
        "tab": "tickets",
        "ticket": ticket,
        "stage": stage,
        "label": label,
        "ended": stage == Stage.ENDED,
        "mandate": getattr(ticket, "mandate", None),
        "inputs": ticket.inputs.all(),
        "reports": ticket.reports.all(),
        "questions": ticket.questions.all(),
        "threads": [s.thread for s in ticket.subscriptions.select_related("thread__source")],
    }
    return render(request, "panel/ticket.html", context)


def _operator(request):
    if not request.user.is_staff:
        raise PermissionDenied("Only operators can change tickets.")


@login_required
@require_POST
def ticket_stop(request, pk):
    _operator(request)
    try:
        engine.stop_ticket(ticket_id=pk, by=request.user.username)
    except CommandRefused as refusal:
        messages.error(request, refusal.message)
    return redirect("panel-ticket", pk=pk)


@login_required
@require_POST
def ticket_input(request, pk):
    _operator(request)
    try:
        engine.add_input(
            ticket_id=pk, text=request.POST.get("text", ""), author=request.user.username
        )
    except CommandRefused as refusal:
        messages.error(request, refusal.message)
    return redirect("panel-ticket", pk=pk)


class AgentSettingsForm(forms.ModelForm):
    class Meta:
        model = AgentSettings
        fields = ["triage_provider", "triage_model", "worker_runtime", "worker_provider",
                  "worker_model"]
        labels = {
            "triage_provider": "Triage provider",
            "triage_model": "Triage model",
            "worker_runtime": "Worker runtime",
            "worker_provider": "Worker provider",
            "worker_model": "Worker model",
        }
        widgets = {"worker_runtime": forms.Select(choices=[(r, r) for r in WORKER_RUNTIMES])}


@login_required
def agent_settings(request):
    """Who triages candidates and which runtime and model run each ticket's worker."""
    form = AgentSettingsForm(instance=AgentSettings.current())
    if request.method == "POST":
        _operator(request)
        form = AgentSettingsForm(request.POST, instance=AgentSettings.current())
        if form.is_valid():
            form.save()
            messages.success(request, "Saved. New work uses these settings.")
            return redirect("panel-agent-settings")
    return render(request, "panel/agent_settings.html", {"tab": "triage", "form": form})


@login_required
def triage_tab(request):
    triggers = Trigger.objects.select_related("source", "thread")[:100]
    evals = Eval.objects.select_related("trigger")[:100]
    handed_back = Trigger.objects.filter(disposition="handed_back").select_related("source")[:50]
    return render(
        request,
        "panel/triage.html",
        {"tab": "triage", "triggers": triggers, "evals": evals, "handed_back": handed_back},
    )


@login_required
def sources_tab(request):
    return render(
        request, "panel/sources.html", {"tab": "sources", "sources": Source.objects.all()}
    )
