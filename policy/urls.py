from django.urls import path

from policy import api, panel

api_urlpatterns = [
    path("policy/", api.PolicyView.as_view(), name="api-policy"),
    path("policy/check/", api.CheckView.as_view(), name="api-policy-check"),
    path("policy/preview/", api.PreviewView.as_view(), name="api-policy-preview"),
    path("policy/versions/", api.VersionsView.as_view(), name="api-policy-versions"),
    path("policy/versions/diff/", api.DiffView.as_view(), name="api-policy-diff"),
    path("policy/versions/<str:version>/", api.VersionDetailView.as_view(),
         name="api-policy-version"),
]
panel_urlpatterns = [
    path("policy/", panel.policy_tab, name="panel-policy"),
    path("policy/preview/", panel.preview, name="panel-policy-preview"),
    path("policy/save/", panel.save, name="panel-policy-save"),
    path("policy/diff/", panel.version_diff, name="panel-policy-diff"),
    path("policy/try/", panel.try_gate, name="panel-policy-try"),
]
