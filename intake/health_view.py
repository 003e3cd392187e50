"""A source's health as the panel and the API show it: what it received last, what it
refused (by content-free reason, counted in Redis or stored), its catch-up cursors, what
waits unprocessed and which secrets are missing."""

from __future__ import annotations

from django.db.models import Count

from intake import acks, liveness, rejections
from intake.models import Delivery, Source
from intake.sources import plugin
from intake.sources.lark_identity import binding


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
        # listening, stale or disconnected, why and since when (intake/liveness.py)
        "connection": liveness.shown(liveness.of(
            source, last_event_at=last["received_at"] if last else None)),
        # chats the provider removed the bot from, and since when
        "removed_chats": stored.get("removed_chats") or {},
        "bot_identity": bot_identity(source),
        # events of a cursor captured and not yet acknowledged, per cursor and step
        "unacknowledged": acks.pending(source),
        # a GitHub App's installation as its last installation event reported it
        "installation": stored.get("installation"),
    }


def bot_identity(source: Source) -> dict | None:
    """Which bot a Lark source admits mentions of: `state` verified, or the reason
    mentions are refused (bot_identity_mismatch, bot_identity_unverified)."""
    if source.kind != "lark":
        return None
    config = source.config or {}
    bound = binding(configured=config.get("bot_open_id") or "", app_id=config.get("app_id") or "",
                    profile=(source.health or {}).get("profile"))
    return {"state": bound.state, "verified_open_id": bound.verified or None,
            "configured_open_id": config.get("bot_open_id") or None,
            "verified_at": bound.verified_at or None}
