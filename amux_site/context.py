"""Template context shared by every panel page: the six tabs, in the seed's order."""

from django.urls import reverse

TABS = [
    ("tickets", "Tickets", "panel-tickets"),
    ("triage", "Triage", "panel-triage"),
    ("sources", "Sources", "panel-sources"),
    ("policy", "Policy", "panel-policy"),
    ("prompts", "Prompts", "panel-prompts"),
    ("sessions", "Sessions", "panel-sessions"),
]


def panel(request):
    return {"panel_tabs": [(key, label, reverse(name)) for key, label, name in TABS]}
