from django.urls import path

from prompts_app import panel

api_urlpatterns: list = []
panel_urlpatterns = [
    path("prompts/", panel.prompts_tab, name="panel-prompts"),
]
