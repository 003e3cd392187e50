"""URLs for bench/ingest.py: the real app plus a bare one-INSERT endpoint."""

from django.db import connection
from django.http import JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from amux_site.urls import urlpatterns as _amux


@csrf_exempt
def bare(request):
    """The floor: read the body, one INSERT, answer JSON — same server, same database."""
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO bench_bare (body) VALUES (%s) RETURNING id", [request.body])
        (row_id,) = cursor.fetchone()
    return JsonResponse({"id": row_id}, status=202)


urlpatterns = [path("bench/bare", bare), *_amux]
