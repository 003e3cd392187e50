from django.urls import include, path
from rest_framework.routers import SimpleRouter

from intake import api, panel_github_app, views

router = SimpleRouter()
router.register("sources", api.SourceViewSet, basename="source")

api_urlpatterns = [path("", include(router.urls))]
hook_urlpatterns = [
    path("github/<slug:slug>/", views.github_hook, name="hook-github"),
    path("lark/<slug:slug>/", views.lark_hook, name="hook-lark"),
]
panel_urlpatterns = [
    path("sources/github-app/new/", panel_github_app.new, name="panel-github-app-new"),
    path("sources/github-app/callback/", panel_github_app.callback,
         name="panel-github-app-callback"),
    path("sources/github-app/<int:pk>/", panel_github_app.status, name="panel-github-app"),
]
