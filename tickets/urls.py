from django.urls import include, path
from rest_framework.routers import SimpleRouter

from tickets import panel, source_views

router = SimpleRouter()
router.register("sources", source_views.SourceViewSet, basename="source")

api_urlpatterns: list = [
    path("", include(router.urls)),
]
hook_urlpatterns: list = [
    path("github/<slug:slug>/", source_views.github_hook, name="hook-github"),
    path("lark/<slug:slug>/", source_views.lark_hook, name="hook-lark"),
]
panel_urlpatterns = [
    path("tickets/", panel.tickets_tab, name="panel-tickets"),
    path("triage/", panel.triage_tab, name="panel-triage"),
    path("sources/", panel.sources_tab, name="panel-sources"),
    path("sources/new/<str:kind>/", panel.source_form, name="panel-source-new"),
    path("sources/<slug:slug>/edit/", panel.source_form, name="panel-source-edit"),
    path("sources/<slug:slug>/toggle/", panel.source_toggle, name="panel-source-toggle"),
    path("sources/<slug:slug>/test/", panel.source_test, name="panel-source-test"),
    path("sources/<slug:slug>/chat/", panel.source_chat, name="panel-source-chat"),
]
