"""The URL map: each app owns its API and panel routes; this file only composes them."""

from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView, TemplateView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from amux_site import favicon, health, metrics, root
from execution import urls as execution_urls
from goals import urls as goals_urls
from intake import urls as intake_urls
from policy import urls as policy_urls
from prompts_app import urls as prompts_urls
from sessions import urls as sessions_urls
from tickets import urls as tickets_urls

# The API docs page is Swagger UI from amux's own static files (drf-spectacular-sidecar):
# the split view serves its start-up script as a file rather than inline; Swagger UI sets
# inline styles as it renders, which its page alone allows.
_SWAGGER_CSP = csp_update({"style-src": ["'unsafe-inline'"]})

api_patterns = [
    path("", root.api_root, name="api-root"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", _SWAGGER_CSP(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
         name="api-docs"),
    *tickets_urls.api_urlpatterns,
    *intake_urls.api_urlpatterns,
    *sessions_urls.api_urlpatterns,
    *execution_urls.api_urlpatterns,
    *goals_urls.api_urlpatterns,
    *policy_urls.api_urlpatterns,
    *prompts_urls.api_urlpatterns,
]

panel_patterns = [
    path("", RedirectView.as_view(pattern_name="panel-tickets"), name="panel"),
    path(
        "login/",
        auth_views.LoginView.as_view(template_name="registration/login.html"),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("glossary/", root.glossary, name="panel-glossary"),
    *tickets_urls.panel_urlpatterns,
    *intake_urls.panel_urlpatterns,
    *goals_urls.panel_urlpatterns,
    *sessions_urls.panel_urlpatterns,
    *execution_urls.panel_urlpatterns,
    *policy_urls.panel_urlpatterns,
    *prompts_urls.panel_urlpatterns,
]

urlpatterns = [
    path("", RedirectView.as_view(url="/panel/"), name="home"),
    path("healthz/", health.healthz, name="healthz"),
    path("metrics/", metrics.metrics, name="metrics"),
    path("hooks/", include(intake_urls.hook_urlpatterns)),
    path("api/v1/", include(api_patterns)),
    path("panel/", include(panel_patterns)),
    path("admin/", include(execution_urls.admin_urlpatterns)),  # pages that moved
    path("admin/", admin.site.urls),
    path("favicon.ico", favicon.favicon, name="favicon"),
    path("robots.txt", TemplateView.as_view(template_name="robots.txt", content_type="text/plain")),
]

admin.site.site_header = "amux audit"
admin.site.site_title = "amux"

handler400 = "amux_site.errors.bad_request"
handler404 = "amux_site.errors.not_found"
handler500 = "amux_site.errors.server_error"
