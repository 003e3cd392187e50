"""URLs for bench/ingest.py: the real app plus a bare one-INSERT endpoint as a Django view."""

from django.db import connection
from django.http import JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from amux_site.urls import urlpatterns as _amux


def insert_bare(body: bytes) -> int:
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO bench_bare (body) VALUES (%s) RETURNING id", [body])
        (row_id,) = cursor.fetchone()
    return row_id


@csrf_exempt
def bare(request):
    """The floor of a Django view: read the body, one INSERT, answer JSON — same server,
    same database."""
    return JsonResponse({"id": insert_bare(request.body)}, status=202)


urlpatterns = [path("bench/bare", bare), *_amux]
