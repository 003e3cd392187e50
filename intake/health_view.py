"""A source's health as the panel and the API show it: what it received last, what it
refused (by content-free reason, counted in Redis or stored), its catch-up cursors, what
waits unprocessed and which secrets are missing."""

from __future__ import annotations

from django.db.models import Count

from intake import acks, rejections
from intake.models import Delivery, Source
from intake.sources import plugin


def health(source: Source) -> dict:
    """Health per declared item: last event, last error, cursor freshness, counts of
    events seen but not admitted, by content-free reason, and deliveries that wait."""
    stored = dict(source.health or {})
    rejected = dict(stored.get("rejected") or {})
    for reason, n in rejections.pending(source).items():  # refusals not flushed yet
        rejected[reason] = rejected.get(reason, 0) + n
    for reason, n in (
        Delivery.objects.filter(source=source, outcome="ignored")
        .values_list("reason").annotate(n=Count("id")).order_by()
    ):
        rejected[reason] = rejected.get(reason, 0) + n
    last = Delivery.objects.filter(source=source).order_by("-pk").values(
        "received_at", "event", "outcome").first()
    missing = plugin(source.kind).check_secrets(source.config, source.secrets)
    return {
        "last_event": {"at": last["received_at"].isoformat(), "event": last["event"],
                       "outcome": last["outcome"] or "queued"} if last else None,
        "last_error": stored.get("last_error"),
        "rejected": rejected,
        "cursors": stored.get("cursors") or {},
        # a delivery whose processing failed waits here too (its error: health's
        # last_error, and the delivery itself in the admin)
        "unprocessed": Delivery.objects.filter(source=source, processed_at__isnull=True).count(),
        "missing_secrets": sorted(missing),
        # the provider profile as checked against the provider (intake/profile.py)
        "profile": stored.get("profile"),
        # events of a cursor captured and not yet acknowledged, per cursor and step
        "unacknowledged": acks.pending(source),
        # a GitHub App's installation as its last installation event reported it
        "installation": stored.get("installation"),
    }
