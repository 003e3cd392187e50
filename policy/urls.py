from django.urls import path

from policy import panel

api_urlpatterns: list = []
panel_urlpatterns = [
    path("policy/", panel.policy_tab, name="panel-policy"),
]
