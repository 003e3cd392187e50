from django.urls import path

from sessions import api, panel, providers_panel

api_urlpatterns = [
    path("providers/", api.ProviderList.as_view(), name="provider-list"),
    path("providers/<slug:slug>/", api.ProviderDetail.as_view(), name="provider-detail"),
    path("runtimes/", api.RuntimeList.as_view(), name="runtime-list"),
    path("runtimes/<str:name>/", api.RuntimeDetail.as_view(), name="runtime-detail"),
    path("sessions/", api.SessionList.as_view(), name="session-list"),
    path("sessions/<int:pk>/", api.SessionDetail.as_view(), name="session-detail"),
    path("sessions/<int:pk>/messages/", api.SessionMessages.as_view(), name="session-messages"),
    path("sessions/<int:pk>/interrupt/", api.SessionInterrupt.as_view(),
         name="session-interrupt"),
    path("sessions/<int:pk>/permissions/<str:request_id>/", api.SessionPermission.as_view(),
         name="session-permission"),
    path("sessions/<int:pk>/questions/<str:request_id>/", api.SessionQuestion.as_view(),
         name="session-question"),
    path("sessions/<int:pk>/sleep/", api.SessionSleep.as_view(), name="session-sleep"),
    path("sessions/<int:pk>/archive/", api.SessionArchive.as_view(), name="session-archive"),
    path("sessions/<int:pk>/timeline/", api.SessionTimeline.as_view(), name="session-timeline"),
    path("sessions/<int:pk>/model/", api.SessionModel.as_view(), name="session-model"),
    path("sessions/<int:pk>/clear/", api.SessionClear.as_view(), name="session-clear"),
    path("sessions/<int:pk>/compact/", api.SessionCompact.as_view(), name="session-compact"),
]
panel_urlpatterns = [
    path("sessions/", panel.sessions_tab, name="panel-sessions"),
    path("providers/", providers_panel.providers, name="panel-providers"),
    path("providers/new/", providers_panel.provider_form, name="panel-provider-new"),
    path("providers/<slug:slug>/", providers_panel.provider_form, name="panel-provider-edit"),
    path("providers/<slug:slug>/test/", providers_panel.provider_test,
         name="panel-provider-test"),
    path("sessions/<int:pk>/", panel.session_detail, name="panel-session"),
    path("sessions/<int:pk>/message/", panel.session_message, name="panel-session-message"),
    path("sessions/<int:pk>/interrupt/", panel.session_interrupt,
         name="panel-session-interrupt"),
    path("sessions/<int:pk>/permission/<str:request_id>/", panel.session_permission,
         name="panel-session-permission"),
    path("sessions/<int:pk>/question/<str:request_id>/", panel.session_question,
         name="panel-session-question"),
]
