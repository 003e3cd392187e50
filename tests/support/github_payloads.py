"""Real GitHub webhook payloads (@octokit/webhooks-examples, pinned) and GitHub's signing."""

from __future__ import annotations

import copy
import json
import uuid
from functools import cache
from pathlib import Path

from intake.sources.github import sign

VERSION = "7.6.1"
FIXTURES = (
    Path(__file__).resolve().parent.parent / "fixtures" / f"octokit-webhooks-examples-{VERSION}"
)


@cache
def _examples(event: str) -> list[dict]:
    return json.loads((FIXTURES / f"{event}.json").read_text())


def example(event: str, action: str | None = None, index: int = 0, **match) -> dict:
    """A deep copy of the `index`-th example of `event` with that `action`."""
    found = [
        e for e in _examples(event)
        if (action is None or e.get("action") == action)
        and all(_get(e, k) == v for k, v in match.items())
    ]
    return copy.deepcopy(found[index])


def _get(obj, dotted: str):
    for part in dotted.split("__"):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def signed(event: str, payload: dict | bytes, secret: str, delivery: str | None = None):
    """(body, headers as Django test-client kwargs) exactly as GitHub sends them."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {
        "HTTP_X_GITHUB_EVENT": event,
        "HTTP_X_GITHUB_DELIVERY": delivery or str(uuid.uuid4()),
        "HTTP_X_HUB_SIGNATURE_256": sign(secret, body),
        "HTTP_USER_AGENT": "GitHub-Hookshot/amux-test",
    }
    return body, headers
