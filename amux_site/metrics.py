"""GET /metrics: amux's health in Prometheus' text format, for an operator's scraper.

Two kinds of figures, each from where it is true:
- events (deliveries, triggers, turns, model requests and tokens, guard blocks) are
  counters every amux process increments as they happen (amux_common/metrics.py), kept in
  files under PROMETHEUS_MULTIPROC_DIR and added up here;
- state (the outbox, sessions, tickets, Celery's queues) is read now from the database and
  Redis, so it is right whichever process answers and counts nothing twice.

Access (settings.AMUX_METRICS_TOKEN, AMUX_METRICS_ALLOW): the token as ``Authorization:
Token <token>`` (``Bearer`` is taken too), or a connection from an allowed address; with
neither configured nobody reads it. A refusal is 401 or 403 in the JSON error shape.
"""

from __future__ import annotations

import contextlib
import glob
import hmac
import ipaddress
import os
from collections.abc import Iterator

import redis
from django.conf import settings
from django.db.models import Count, Min, Q
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from amux_common import metrics as counters
from amux_common.shared_redis import client as redis_client
from effects.models import Effect, EffectKind, EffectState
from sessions import capacity
from sessions.models import Session
from tickets.models import Ticket

QUEUES = ("default", "runtime")


class StateCollector:
    """The state figures of one scrape, read now."""

    def collect(self) -> Iterator[Metric]:
        yield from _effects()
        yield from _sessions()
        yield _tickets()
        yield _queues()


def _effects() -> Iterator[Metric]:
    now = timezone.now()
    dead = Q(state=EffectState.DEAD)
    running = ~dead & Q(claimed_until__gt=now)
    due = ~dead & ~running & Q(due_at__lte=now)
    rows = (Effect.objects.values("kind").order_by()
            .annotate(dead=Count("pk", filter=dead), running=Count("pk", filter=running),
                      due=Count("pk", filter=due), total=Count("pk"),
                      first_due=Min("due_at", filter=due)))
    counts = GaugeMetricFamily(
        "amux_effects", "Side effects in the outbox by kind and state (due: pending and due "
        "now; running: claimed by a drainer; waiting: pending, due later; dead)",
        labels=["kind", "state"])
    oldest = GaugeMetricFamily(
        "amux_effect_oldest_due_seconds", "How long the oldest effect that is due and not "
        "running has been due, by kind", labels=["kind"])
    by_kind = {row["kind"]: row for row in rows}
    empty = {"total": 0, "dead": 0, "running": 0, "due": 0, "first_due": None}
    # every kind, an empty one as 0: an alert on a series is not silenced by its absence
    for kind in sorted({*EffectKind.values, *by_kind}):
        row = by_kind.get(kind, empty)
        waiting = row["total"] - row["dead"] - row["running"] - row["due"]
        for state in ("due", "running", "dead"):
            counts.add_metric([kind, state], row[state])
        counts.add_metric([kind, "waiting"], waiting)
        if row["first_due"] is not None:
            oldest.add_metric([kind], (now - row["first_due"]).total_seconds())
    yield counts
    yield oldest


def _sessions() -> Iterator[Metric]:
    sessions = GaugeMetricFamily("amux_sessions", "Sessions by runtime and lifecycle",
                                 labels=["runtime", "lifecycle"])
    for runtime, lifecycle, n in (Session.objects.values_list("runtime", "lifecycle")
                                  .annotate(n=Count("pk")).order_by("runtime", "lifecycle")):
        sessions.add_metric([runtime, lifecycle], n)
    yield sessions
    waiting = GaugeMetricFamily(
        "amux_sessions_waiting_for_capacity", "Sessions with input waiting while every "
        "runtime worker slot is held by another awake session, by runtime",
        labels=["runtime"])
    for runtime, n in sorted(capacity.waiting_by_runtime().items()):
        waiting.add_metric([runtime], n)
    yield waiting


def _tickets() -> Metric:
    tickets = GaugeMetricFamily("amux_tickets", "Tickets, open or ended", labels=["state"])
    counts = Ticket.objects.aggregate(all=Count("pk"),
                                      ended=Count("pk", filter=Q(ended_at__isnull=False)))
    tickets.add_metric(["open"], counts["all"] - counts["ended"])
    tickets.add_metric(["ended"], counts["ended"])
    return tickets


def _queues() -> Metric:
    depth = GaugeMetricFamily("amux_queue_length", "Celery tasks waiting in a queue: "
                              "default, runtime and each host's runtime.<host> (-1: the "
                              "broker cannot be read)", labels=["queue"])
    try:
        client = redis_client()
        names = [*QUEUES, *sorted(k.decode() for k in client.scan_iter(match="runtime.*"))]
        for queue in names:
            depth.add_metric([queue], client.llen(queue))
    except redis.RedisError:
        for queue in QUEUES:
            depth.add_metric([queue], -1)
    return depth


def _refused(status: int, message: str) -> JsonResponse:
    code = "not_authenticated" if status == 401 else "permission_denied"
    response = JsonResponse({"error": {"code": code, "message": message, "fields": {}}},
                            status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Token realm="amux metrics"'
    return response


def _allowed_address(address: str | None) -> bool:
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    return any(ip in network for network in settings.AMUX_METRICS_ALLOW)


def refusal(request) -> JsonResponse | None:
    """Why this request may not read the metrics, or None."""
    token = settings.AMUX_METRICS_TOKEN
    if _allowed_address(request.META.get("REMOTE_ADDR")):
        return None
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme in ("Token", "Bearer") and hmac.compare_digest(given.strip().encode(),
                                                                 token.encode()):
            return None
        return _refused(401, "Authorization: Token <AMUX_METRICS_TOKEN> is needed")
    if settings.AMUX_METRICS_ALLOW:
        return _refused(403, "this address is not in AMUX_METRICS_ALLOW")
    return _refused(403, "metrics are off: set AMUX_METRICS_TOKEN (for the scraper's "
                         "Authorization header) or AMUX_METRICS_ALLOW (its addresses)")


class _SettledFiles(multiprocess.MultiProcessCollector):
    """The processes' counter files, leaving out one that is still empty: a process that is
    creating its file (or was killed doing so) has not written its header yet, and reading
    it would fail the whole scrape."""

    def collect(self):
        files = []
        for name in glob.glob(os.path.join(self._path, "*.db")):
            with contextlib.suppress(FileNotFoundError):  # a dead process's, just removed
                if os.path.getsize(name) > 0:
                    files.append(name)
        return self.merge(files, accumulate=True)


def metrics(request):
    if request.method not in ("GET", "HEAD"):
        response = JsonResponse({"error": {"code": "method_not_allowed", "message": "use GET",
                                           "fields": {}}}, status=405)
        response["Allow"] = "GET, HEAD"
        return response
    refused = refusal(request)
    if refused is not None:
        return refused
    registry = CollectorRegistry(auto_describe=False)
    _SettledFiles(registry, path=str(counters.directory()))
    registry.register(StateCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
