"""GET /metrics: amux's health in Prometheus' text format, for an operator's scraper.

Every figure is read at scrape time from what amux already keeps — the database (webhook
deliveries, triggers, effects, sessions, turns, tokens, tickets) and the broker's queues —
so the work of every process (web, the Celery workers on any machine) is counted with no
per-process state to merge: what one scrape shows any web process would show. Counters
are totals over what the database holds (a pruned table lowers them: Prometheus reads a
lower value as a counter reset).

Access: with AMUX_METRICS_TOKEN set, a request must carry ``Authorization: Token
<token>`` (``Bearer <token>`` is taken too: Prometheus's default scheme); without it only
this machine's loopback is answered. Anything else is 401 (or
403) in the JSON error shape.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator

import redis
from django.conf import settings
from django.db.models import Count, F, Sum
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from effects.models import Effect
from intake.models import Delivery, Trigger
from sessions.models import Session, Turn, UsageDay
from tickets.models import Ticket

LOOPBACK = ("127.0.0.1", "::1")
QUEUES = ("default", "runtime")


class AmuxCollector:
    """The figures of one scrape, read now."""

    def collect(self) -> Iterator[Metric]:
        yield from _intake()
        yield from _effects()
        yield from _sessions()
        yield from _work()
        yield _queues()


def _intake() -> Iterator[Metric]:
    deliveries = CounterMetricFamily(
        "amux_webhook_deliveries", "Verified webhook deliveries stored, by source and outcome "
        "(empty: not processed yet)", labels=["source", "outcome"])
    for row in (Delivery.objects.values(slug=F("source__slug"), result=F("outcome"))
                .annotate(n=Count("id")).order_by()):
        deliveries.add_metric([row["slug"], row["result"] or "pending"], row["n"])
    yield deliveries
    triggers = CounterMetricFamily(
        "amux_triggers", "Triggers by source and the policy's decision",
        labels=["source", "decision"])
    for row in (Trigger.objects.values(slug=F("source__slug"), said=F("decision"))
                .annotate(n=Count("id")).order_by()):
        triggers.add_metric([row["slug"], row["said"] or "undecided"], row["n"])
    yield triggers


def _effects() -> Iterator[Metric]:
    now = timezone.now()
    rows = GaugeMetricFamily(
        "amux_effects", "Side effects in the outbox by kind and state (due: pending and "
        "due now; running: claimed by a drainer; waiting: pending, due later; dead)",
        labels=["kind", "state"])
    oldest = GaugeMetricFamily(
        "amux_effect_oldest_due_seconds", "Age of the oldest effect that is due and not "
        "done, by kind", labels=["kind"])
    counts: dict[tuple[str, str], int] = {}
    first_due: dict[str, object] = {}
    for kind, state, due_at, claimed_until in Effect.objects.values_list(
            "kind", "state", "due_at", "claimed_until").iterator():
        if state == "dead":
            label = "dead"
        elif claimed_until is not None and claimed_until > now:
            label = "running"
        elif due_at <= now:
            label = "due"
            if kind not in first_due or due_at < first_due[kind]:
                first_due[kind] = due_at
        else:
            label = "waiting"
        counts[(kind, label)] = counts.get((kind, label), 0) + 1
    for (kind, label), n in sorted(counts.items()):
        rows.add_metric([kind, label], n)
    for kind, due_at in sorted(first_due.items()):
        oldest.add_metric([kind], (now - due_at).total_seconds())
    yield rows
    yield oldest


def _sessions() -> Iterator[Metric]:
    sessions = GaugeMetricFamily("amux_sessions", "Sessions by runtime and lifecycle",
                                 labels=["runtime", "lifecycle"])
    for row in Session.objects.values("runtime", "lifecycle").annotate(n=Count("id")).order_by():
        sessions.add_metric([row["runtime"], row["lifecycle"]], row["n"])
    yield sessions
    turns = CounterMetricFamily("amux_turns", "Turns by runtime and state",
                                labels=["runtime", "state"])
    for row in (Turn.objects.values(runtime=F("session__runtime"), said=F("state"))
                .annotate(n=Count("id")).order_by()):
        turns.add_metric([row["runtime"], row["said"]], row["n"])
    yield turns
    duration = SummaryMetricFamily(
        "amux_turn_duration_seconds", "Time from a turn's start to its end, ended turns by "
        "runtime", labels=["runtime"])
    totals: dict[str, list[float]] = {}
    for runtime, started, ended in (Turn.objects.filter(started_at__isnull=False,
                                                        ended_at__isnull=False)
                                    .values_list("session__runtime", "started_at",
                                                 "ended_at").iterator()):
        entry = totals.setdefault(runtime, [0, 0.0])
        entry[0] += 1
        entry[1] += max((ended - started).total_seconds(), 0.0)
    for runtime, (count, seconds) in sorted(totals.items()):
        duration.add_metric([runtime], count_value=count, sum_value=seconds)
    yield duration
    tokens = CounterMetricFamily(
        "amux_model_tokens", "Tokens spent by sessions, by provider and model",
        labels=["provider", "model"])
    for row in (UsageDay.objects.values(provider=F("session__provider__slug"),
                                        name=F("session__model"))
                .annotate(n=Sum("tokens")).order_by()):
        tokens.add_metric([row["provider"] or "", row["name"] or ""], row["n"] or 0)
    yield tokens


def _work() -> Iterator[Metric]:
    tickets = GaugeMetricFamily("amux_tickets", "Tickets, open or ended",
                                labels=["state"])
    ended = Ticket.objects.filter(ended_at__isnull=False).count()
    tickets.add_metric(["open"], Ticket.objects.count() - ended)
    tickets.add_metric(["ended"], ended)
    yield tickets


def _queues() -> Metric:
    depth = GaugeMetricFamily("amux_queue_length", "Celery tasks waiting in a queue "
                              "(-1: the broker cannot be read)", labels=["queue"])
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2,
                                      socket_connect_timeout=2)
        for queue in QUEUES:
            depth.add_metric([queue], client.llen(queue))
    except redis.RedisError:
        for queue in QUEUES:
            depth.add_metric([queue], -1)
    return depth


def _refused(status: int, message: str) -> JsonResponse:
    code = "not_authenticated" if status == 401 else "permission_denied"
    response = JsonResponse({"error": {"code": code, "message": message}}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Token realm="amux metrics"'
    return response


@require_GET
def metrics(request):
    token = settings.AMUX_METRICS_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme not in ("Token", "Bearer") or not hmac.compare_digest(
                given.strip().encode(), token.encode()):
            return _refused(401, "Authorization: Token <AMUX_METRICS_TOKEN> is needed")
    elif request.META.get("REMOTE_ADDR") not in LOOPBACK:
        return _refused(403, "without AMUX_METRICS_TOKEN only this machine may read "
                             "/metrics")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AmuxCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
