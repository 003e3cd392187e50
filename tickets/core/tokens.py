"""The bearer token an executor's tools carry: scoped to one assignment, stored only as a
hash (the one definition of that hash)."""

from __future__ import annotations

import hashlib
import secrets

PREFIX = "amx_"


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def looks_like_token(token: str | None) -> bool:
    """Only strings of our shape are looked up (anything else is unknown at once)."""
    return bool(token) and token.startswith(PREFIX)
