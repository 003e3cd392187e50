"""Webhook answers under "store first, answer fast": the 202 says queued, then the test
processes the stored delivery as production does (the intake drainer) and reads what
became of it from the database."""

from __future__ import annotations

from intake import process
from intake.models import Delivery


def processed(response) -> dict:
    """A webhook's 202 "queued" answer, then the delivery drained by the real drainer:
    `{"delivery", "trigger", "outcome", "reason"}` as stored on its row."""
    body = response.json() if callable(getattr(response, "json", None)) else response
    assert getattr(response, "status_code", 202) == 202, body
    assert body == {"delivery": body.get("delivery"), "trigger": None, "outcome": "queued",
                    "reason": None}, body
    process.drain()
    return outcome_of(body["delivery"])


def outcome_of(delivery_id: str) -> dict:
    """What became of a stored delivery: its outcome, or "queued" while unprocessed."""
    row = Delivery.objects.get(delivery_id=delivery_id)
    if row.processed_at is None:
        return {"delivery": row.delivery_id, "trigger": None, "outcome": "queued",
                "reason": "processing_later" if row.last_error else None}
    return {"delivery": row.delivery_id, "trigger": row.trigger_id, "outcome": row.outcome,
            "reason": row.reason or None}


def drained(response):
    """The webhook's response, after the real drainer processed what it stored (for tests
    that look at the effects; `processed` reads the outcome)."""
    process.drain()
    return response


def translation_fails_for(monkeypatch, comment_id: int) -> None:
    """The GitHub plugin raises KeyError('sender') translating comment `comment_id` (a plugin
    bug, or a payload it did not expect); every other delivery translates as usual."""
    from intake.sources.github import GitHub

    real = GitHub.translate

    def translate(self, env):
        if (env.payload.get("comment") or {}).get("id") == comment_id:
            raise KeyError("sender")
        return real(self, env)

    monkeypatch.setattr(GitHub, "translate", translate)
