from django.urls import path

from sessions import panel

api_urlpatterns: list = []
panel_urlpatterns = [
    path("sessions/", panel.sessions_tab, name="panel-sessions"),
]
