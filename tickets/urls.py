from django.urls import path

from tickets import panel

api_urlpatterns: list = []
hook_urlpatterns: list = []
panel_urlpatterns = [
    path("tickets/", panel.tickets_tab, name="panel-tickets"),
    path("triage/", panel.triage_tab, name="panel-triage"),
    path("sources/", panel.sources_tab, name="panel-sources"),
]
