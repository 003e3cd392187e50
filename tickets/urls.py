from django.urls import include, path
from rest_framework.routers import SimpleRouter

from tickets import api, panel
from tickets.tools import rest as tools_rest

router = SimpleRouter()
router.register("tickets", api.TicketViewSet, basename="ticket")
router.register("triggers", api.TriggerViewSet, basename="trigger")
router.register("evals", api.EvalViewSet, basename="eval")

tool_urlpatterns = [
    path("report/", tools_rest.ReportView.as_view(), name="tool-report"),
    path("ask/", tools_rest.AskView.as_view(), name="tool-ask"),
    path("hand_back/", tools_rest.HandBackView.as_view(), name="tool-hand-back"),
    path("hand-back/", tools_rest.HandBackDashView.as_view(), name="tool-hand-back-dash"),
    path("reply/", tools_rest.ReplyView.as_view(), name="tool-reply"),
    path("pull_request/", tools_rest.PullRequestView.as_view(), name="tool-pull-request"),
    path("git_credential/", tools_rest.GitCredentialView.as_view(),
         name="tool-git-credential"),
    path("context/", tools_rest.ContextView.as_view(), name="tool-context"),
    path("whoami/", tools_rest.ContextView.as_view(), name="tool-whoami"),
    path("memory_search/", tools_rest.MemorySearchView.as_view(), name="tool-memory-search"),
    path("memory_read/", tools_rest.MemoryReadView.as_view(), name="tool-memory-read"),
]

api_urlpatterns = [
    path("settings/agents/", api.AgentSettingsView.as_view(), name="agent-settings"),
    path("", include(router.urls)),
    path("tools/", include(tool_urlpatterns)),
]
panel_urlpatterns = [
    path("tickets/", panel.tickets_tab, name="panel-tickets"),
    path("tickets/<int:pk>/", panel.ticket_page, name="panel-ticket"),
    path("tickets/<int:pk>/stop/", panel.ticket_stop, name="panel-ticket-stop"),
    path("tickets/<int:pk>/inputs/", panel.ticket_input, name="panel-ticket-input"),
    path("tickets/<int:pk>/retry/", panel.ticket_retry, name="panel-ticket-retry"),
    path("questions/<int:pk>/answer/", panel.question_answer, name="panel-question-answer"),
    path("triage/", panel.triage_tab, name="panel-triage"),
    path("settings/agents/", panel.agent_settings, name="panel-agent-settings"),
    path("sources/", panel.sources_tab, name="panel-sources"),
    path("sources/new/<str:kind>/", panel.source_form, name="panel-source-new"),
    path("sources/<slug:slug>/edit/", panel.source_form, name="panel-source-edit"),
    path("sources/<slug:slug>/toggle/", panel.source_toggle, name="panel-source-toggle"),
    path("sources/<slug:slug>/test/", panel.source_test, name="panel-source-test"),
    path("sources/<slug:slug>/chat/", panel.source_chat, name="panel-source-chat"),
]
