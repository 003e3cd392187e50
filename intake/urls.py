from django.urls import include, path
from rest_framework.routers import SimpleRouter

from intake import api, views

router = SimpleRouter()
router.register("sources", api.SourceViewSet, basename="source")

api_urlpatterns = [path("", include(router.urls))]
hook_urlpatterns = [
    path("github/<slug:slug>/", views.github_hook, name="hook-github"),
    path("lark/<slug:slug>/", views.lark_hook, name="hook-lark"),
]
