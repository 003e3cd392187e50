from django.urls import path

from goals import api, api_inbox, api_turns, panel

G = "goals/<slug:slug>/"
A = G + "agents/<slug:agent>/"

api_urlpatterns = [
    path("goals/", api.GoalList.as_view(), name="goal-list"),
    path(G, api.GoalDetail.as_view(), name="goal-detail"),
    path(G + "todos/", api.TodoList.as_view(), name="goal-todo-list"),
    path(G + "todos/<int:pk>/", api.TodoDetail.as_view(), name="goal-todo-detail"),
    path(G + "materials/", api.MaterialList.as_view(), name="goal-material-list"),
    path(G + "agents/", api.AgentList.as_view(), name="goal-agent-list"),
    path(A, api.AgentDetail.as_view(), name="goal-agent-detail"),
    path(A + "start/", api.AgentStart.as_view(), name="goal-agent-start"),
    path(A + "attach/", api.AgentAttach.as_view(), name="goal-agent-attach"),
    path(A + "detach/", api.AgentDetach.as_view(), name="goal-agent-detach"),
    path(A + "mode/", api.AgentMode.as_view(), name="goal-agent-mode"),
    path(A + "messages/", api.AgentMessages.as_view(), name="goal-agent-messages"),
    path(A + "inbox/urgency/", api.InboxUrgency.as_view(), name="goal-agent-urgency"),
    path(A + "inbox/drain/", api_inbox.InboxDrain.as_view(), name="goal-agent-inbox-drain"),
    path(A + "inbox/<int:pk>/settle/", api_inbox.InboxSettle.as_view(),
         name="goal-agent-inbox-settle"),
    path(A + "turns/", api_turns.TurnList.as_view(), name="goal-agent-turn-list"),
    path(A + "turns/<str:key>/", api_turns.TurnDetail.as_view(), name="goal-agent-turn-detail"),
    path(A + "turns/<str:key>/cancel/", api_turns.TurnCancel.as_view(),
         name="goal-agent-turn-cancel"),
    path(A + "autorun/", api_turns.AgentAutorun.as_view(), name="goal-agent-autorun"),
    path(A + "provider/", api_turns.AgentProvider.as_view(), name="goal-agent-provider"),
    path("connectors/", api.ConnectorList.as_view(), name="connector-list"),
    path("connectors/<int:pk>/", api.ConnectorDetail.as_view(), name="connector-detail"),
    path("connectors/<int:pk>/rebind/", api.ConnectorRebind.as_view(),
         name="connector-rebind"),
    path("connectors/<int:pk>/reconnect/", api.ConnectorReconnect.as_view(),
         name="connector-reconnect"),
    path("connectors/<int:pk>/channel/", api.ConnectorChannel.as_view(),
         name="connector-channel"),
    path("ingress-receipts/", api.ReceiptList.as_view(), name="ingress-receipt-list"),
    path("ingress-receipts/<int:pk>/", api.ReceiptDetail.as_view(),
         name="ingress-receipt-detail"),
    path("ingress-receipts/<int:pk>/cancel/", api.ReceiptCancel.as_view(),
         name="ingress-receipt-cancel"),
]

panel_urlpatterns = [
    path("sessions/goals/", panel.goal_list, name="panel-goals"),
    path("sessions/goals/<slug:slug>/", panel.goal_page, name="panel-goal"),
    path("sessions/goals/<slug:slug>/agents/<slug:agent>/attach/", panel.agent_attach,
         name="panel-goal-agent-attach"),
    path("sessions/goals/<slug:slug>/agents/<slug:agent>/turns/<str:key>/cancel/",
         panel.turn_cancel, name="panel-goal-turn-cancel"),
    path("sessions/goals/<slug:slug>/agents/<slug:agent>/<str:action>/", panel.agent_action,
         name="panel-goal-agent-action"),
    path("sessions/goals/<slug:slug>/connectors/<int:pk>/channel/",
         panel.connector_channel, name="panel-goal-connector-channel"),
    path("sessions/goals/<slug:slug>/connectors/<int:pk>/<str:action>/",
         panel.connector_action, name="panel-goal-connector-action"),
]
