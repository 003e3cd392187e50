from django.urls import include, path
from rest_framework.routers import SimpleRouter

from tickets import api, panel

router = SimpleRouter()
router.register("tickets", api.TicketViewSet, basename="ticket")
router.register("triggers", api.TriggerViewSet, basename="trigger")
router.register("evals", api.EvalViewSet, basename="eval")

api_urlpatterns = [
    path("settings/agents/", api.AgentSettingsView.as_view(), name="agent-settings"),
    path("", include(router.urls)),
]
hook_urlpatterns: list = []
panel_urlpatterns = [
    path("tickets/", panel.tickets_tab, name="panel-tickets"),
    path("tickets/<int:pk>/", panel.ticket_page, name="panel-ticket"),
    path("tickets/<int:pk>/stop/", panel.ticket_stop, name="panel-ticket-stop"),
    path("tickets/<int:pk>/inputs/", panel.ticket_input, name="panel-ticket-input"),
    path("triage/", panel.triage_tab, name="panel-triage"),
    path("settings/agents/", panel.agent_settings, name="panel-agent-settings"),
    path("sources/", panel.sources_tab, name="panel-sources"),
]
