"""A provider's API key as the panel and the admin take it: write-only, checked to be
sendable in an HTTP header, kept when the field is left empty."""

from __future__ import annotations


def key_problem(key: str) -> str | None:
    """Why a key cannot travel in an HTTP header (visible ASCII only), or None."""
    if not key.isascii() or not key.isprintable() or key != key.strip():
        return ("use only visible ASCII characters (no spaces at the ends, no accents or "
                "other non-ASCII letters): the key is sent in an HTTP header")
    return None


def with_key(secrets: dict | None, key: str, clear: bool) -> dict:
    """The secrets after a form: cleared on request, replaced by a typed key, else kept."""
    secrets = dict(secrets or {})
    if clear:
        secrets.pop("api_key", None)
    elif key:
        secrets["api_key"] = key
    return secrets
