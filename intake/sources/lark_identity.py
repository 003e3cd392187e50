"""Which bot a Lark source admits mentions of: the one Lark itself names.

The operator's `bot_open_id` is a claim; the bot's open id read from Lark's bot info
(`GET /open-apis/bot/v3/info`, kept in the source's health by intake/profile.py with the
app id it was read for and when) is the fact. A mention is admitted by the verified id
only. Fail closed: with no verified id for the source's current app, or a configured id
that differs from it, a mention is refused with a reason the operator can act on. Pure."""

from __future__ import annotations

from dataclasses import dataclass

MISMATCH = "bot_identity_mismatch"
UNVERIFIED = "bot_identity_unverified"


@dataclass(frozen=True)
class Binding:
    """`bot`: the open id mentions are admitted by ("" when none may be); `refusal`: why
    none may be ("" when one may); `verified`: the id Lark states, when known."""

    bot: str
    refusal: str
    verified: str = ""
    verified_at: str = ""

    @property
    def state(self) -> str:
        return self.refusal or "verified"


def binding(*, configured: str, app_id: str, profile: dict | None) -> Binding:
    """The binding of a source whose config names `configured` (may be empty) and
    `app_id`, from its stored profile. An id verified for another app (the operator
    changed the app since) verifies nothing. An empty configured id takes the verified
    one: there is no claim to contradict."""
    profile = profile if isinstance(profile, dict) else {}
    verified = profile.get("open_id") if isinstance(profile.get("open_id"), str) else ""
    at = profile.get("verified_at") if isinstance(profile.get("verified_at"), str) else ""
    if not verified or not app_id or profile.get("app_id") != app_id:
        return Binding("", UNVERIFIED)
    if configured and configured != verified:
        return Binding("", MISMATCH, verified, at)
    return Binding(verified, "", verified, at)
