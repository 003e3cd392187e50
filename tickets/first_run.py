"""The first-run checklist on the Tickets tab: what a new install needs before work can
arrive and run, in the order it is done (provider → agent settings → source → policy). Each
step is ticked from the data itself, so it is never out of date."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from intake.models import Source
from policy import services as policy_services
from policy.document import open_cells
from sessions.models import ProviderProfile
from tickets.policy_hooks import worker_configured


@dataclass(frozen=True)
class Step:
    key: str
    title: str
    hint: str
    url: str
    done: bool


def steps() -> list[Step]:
    sources = policy_services.sources()
    return [
        Step("provider", "Add a model provider",
             "Where the agents send their model requests, with its key; test the connection "
             "there.", reverse("panel-providers"), ProviderProfile.objects.exists()),
        Step("agent-settings", "Choose the worker's provider and model",
             "Agent settings: the runtime, provider and model each ticket's worker runs on "
             "(and the triage model).", reverse("panel-agent-settings"), worker_configured()),
        Step("source", "Connect a source",
             "GitHub, Lark or web chat: where requests come from.", reverse("panel-sources"),
             Source.objects.filter(enabled=True).exists()),
        Step("policy", "Open the policy",
             "Say who may give the agent work, and where: open at least one cell.",
             reverse("panel-policy"),
             bool(open_cells(policy_services.current().document, sources))),
    ]


def checklist() -> list[Step] | None:
    """The steps while any is undone; None once all are."""
    todo = steps()
    return None if all(s.done for s in todo) else todo
