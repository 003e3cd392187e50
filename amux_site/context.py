"""Template context shared by every panel page: the six tabs, in the seed's order."""

from django.urls import reverse

from amux_common import roles
from amux_site.version import version

TABS = [
    ("tickets", "Tickets", "panel-tickets"),
    ("triage", "Triage", "panel-triage"),
    ("sources", "Sources", "panel-sources"),
    ("policy", "Policy", "panel-policy"),
    ("prompts", "Prompts", "panel-prompts"),
    ("sessions", "Sessions", "panel-sessions"),
]


def panel(request):
    return {"panel_tabs": [(key, label, reverse(name)) for key, label, name in TABS],
            # the panel shows change controls only to those the shared role rule lets change
            "is_operator": roles.is_operator(getattr(request, "user", None)),
            "amux_version": version()}
