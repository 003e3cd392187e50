"""The provider profile of a source, verified against the provider: a Lark source's
`bot_open_id` (the id mentions are matched by) checked against the bot's identity as Lark
states it (`GET /open-apis/bot/v3/info`). The outcome is kept in the source's health and a
mismatch is shown plainly there; it is checked by the periodic source poll."""

from __future__ import annotations

import logging

from intake import health
from intake.models import Source
from intake.sources import plugin
from intake.sources.lark import Lark, LarkApiError

log = logging.getLogger(__name__)


def verify(source: Source) -> dict | None:
    """Check one source's profile; None when it has none to check (not Lark, or no
    credentials to ask with). `state`: verified, mismatch, unconfigured or unreachable."""
    plug = plugin(source.kind, source.config, source.secrets)
    if not isinstance(plug, Lark) or not source.secrets.get("app_secret"):
        return None
    configured = plug.config.get("bot_open_id") or ""
    try:
        stated = plug.bot_profile()["open_id"]
    except LarkApiError as exc:
        profile = {"state": "unreachable", "code": exc.code}
    except Exception as exc:  # network: kept as a reason, never as a crash of the poll
        log.warning("checking the bot of %s failed: %s", source.slug, type(exc).__name__)
        profile = {"state": "unreachable", "code": None}
    else:
        state = ("unconfigured" if not configured
                 else "verified" if stated and stated == configured else "mismatch")
        profile = {"state": state, "code": 0}
    health.source_profile_checked(source_id=source.pk, profile=profile)
    return profile


def verify_all() -> int:
    """Check every enabled source that has a profile; answers how many were checked."""
    checked = 0
    for source in Source.objects.filter(enabled=True, kind="lark"):
        checked += verify(source) is not None
    return checked
