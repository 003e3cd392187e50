"""Panel pages of the orchestrator: Tickets, Triage and Sources tabs."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from tickets.models import Eval, Source, Ticket, Trigger


@login_required
def tickets_tab(request):
    live = Ticket.objects.filter(ended_at__isnull=True).select_related("thread")[:200]
    ended = Ticket.objects.filter(ended_at__isnull=False).select_related("thread")[:50]
    return render(request, "panel/tickets.html", {"tab": "tickets", "live": live, "ended": ended})


@login_required
def triage_tab(request):
    triggers = Trigger.objects.select_related("source", "thread")[:100]
    evals = Eval.objects.select_related("trigger")[:100]
    return render(
        request, "panel/triage.html", {"tab": "triage", "triggers": triggers, "evals": evals}
    )


@login_required
def sources_tab(request):
    return render(
        request, "panel/sources.html", {"tab": "sources", "sources": Source.objects.all()}
    )
