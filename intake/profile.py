"""The provider profile of a source, read from the provider: a Lark source's bot as Lark
states it (`GET /open-apis/bot/v3/info`, through lark-oapi). The open id read there is
kept in the source's health with the app id it was read for and when; mentions are
admitted by that verified id only (intake/sources/lark_identity.py). It is read by the
periodic source poll, and before translating a source's events when no id is verified
for its current app yet (at most once a minute while Lark cannot be reached).

Lark refusing the app's credentials (HTTP 401/403, or a tenant token it will not issue)
is kept as the provider's word that the source is disconnected."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from amux_common.clock import now as clock
from intake import source_actions
from intake.models import Source
from intake.sources import SourceKind, plugin
from intake.sources.lark import Lark, LarkApiError
from intake.sources.lark_identity import binding

log = logging.getLogger(__name__)

# How long a check that verified nothing is trusted before the next translation asks again.
RECHECK_UNREACHABLE = timedelta(seconds=60)
# Lark's codes for credentials it will not take: a bad tenant token, a bad app secret,
# an app that is disabled or not installed in the tenant.
REFUSED_CODES = {99991663, 99991664, 99991661, 10003, 10014, 10015, 99991543}


def verify(source: Source) -> dict | None:
    """Read one source's profile from its provider; None when it has none to read (not
    Lark, or no credentials to ask with). `state`: verified, mismatch, unconfigured,
    refused (the provider refused the credentials: disconnected) or unreachable."""
    plug = plugin(source.kind, source.config, source.secrets)
    if not isinstance(plug, Lark) or not source.secrets.get("app_secret"):
        return None
    configured = plug.config.get("bot_open_id") or ""
    app_id = plug.config.get("app_id") or ""
    try:
        stated = plug.bot_profile()["open_id"]
    except LarkApiError as exc:
        refused = exc.status in (401, 403) or exc.code in REFUSED_CODES
        profile = {"state": "refused" if refused else "unreachable", "code": exc.code,
                   "status": exc.status}
    except Exception as exc:  # network: kept as a reason, never as a crash of the poll
        log.warning("checking the bot of %s failed: %s", source.slug, type(exc).__name__)
        profile = {"state": "unreachable", "code": None}
    else:
        state = ("unconfigured" if not configured
                 else "verified" if stated and stated == configured else "mismatch")
        profile = {"state": state, "code": 0}
        if stated:  # the verified identity, bound to the app it was read for
            profile.update(open_id=stated, app_id=app_id, verified_at=clock().isoformat())
    if profile["state"] in ("unreachable",):
        # Lark was not reached: what it said before still stands.
        kept = (source.health or {}).get("profile") or {}
        profile.update({k: kept[k] for k in ("open_id", "app_id", "verified_at") if k in kept})
    source_actions.source_profile_checked(source_id=source.pk, profile=profile)
    if profile["state"] != "unreachable":  # Lark answered: it takes the app, or refuses it
        source_actions.provider_state_reported(source_id=source.pk,
                                               disconnected=profile["state"] == "refused",
                                               reason="credentials_refused")
        source.refresh_from_db(fields=["health"])
        return profile
    source.health = {**(source.health or {}), "profile": {**profile,
                                                          "at": clock().isoformat()}}
    return profile


def verify_all() -> int:
    """Check every enabled source that has a profile; answers how many were checked."""
    checked = 0
    for source in Source.objects.filter(enabled=True, kind="lark"):
        checked += verify(source) is not None
    return checked


def _checked_lately(profile: dict) -> bool:
    try:
        at = datetime.fromisoformat(profile.get("at") or "")
    except (TypeError, ValueError):
        return False
    return clock() - at < RECHECK_UNREACHABLE


def ensure_verified(source: Source) -> Source:
    """The source with a verified bot identity for its current app when Lark can give one
    now: read once when none is kept (the first event of a new source, or after its app
    changed). Outside any transaction: it asks Lark over the network."""
    if source.kind != "lark" or not (source.secrets or {}).get("app_secret"):
        return source
    kept = (source.health or {}).get("profile") or {}
    app_id = (source.config or {}).get("app_id") or ""
    if binding(configured="", app_id=app_id, profile=kept).verified:
        return source
    if _checked_lately(kept):  # Lark was asked a moment ago and named no bot for this app
        return source
    verify(source)
    return source


def translator(source: Source) -> SourceKind:
    """The plugin that translates a source's events: it knows the verified profile."""
    return plugin(source.kind, source.config, source.secrets,
                  (source.health or {}).get("profile"))
