"""`/favicon.ico`: browsers ask for it on every page, whatever the page links; answered
from the static file the base template links too."""

from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

ICON = "amux/favicon.ico"


@require_GET
@cache_control(max_age=86400, public=True)
def favicon(request):
    path = finders.find(ICON) or Path(settings.STATIC_ROOT) / ICON
    if not path or not Path(path).is_file():
        raise Http404("no icon")
    return FileResponse(open(path, "rb"), content_type="image/x-icon")
