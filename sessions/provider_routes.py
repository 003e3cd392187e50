"""How a provider's route is asked for its models: where it lists them and with which
headers (``amux doctor``'s provider check and the capability probe, sessions.capabilities).
Pure."""

from __future__ import annotations


def models_url(platform: str, base_url: str) -> str:
    """Where a route lists its models. An ``anthropic-compat`` base URL is the API's root
    (what Claude Code takes as ANTHROPIC_BASE_URL and appends ``/v1/messages`` to), so its
    list is ``<base_url>/v1/models``; an OpenAI-compatible base URL already ends in its
    version (``…/v1``), so its list is ``<base_url>/models``."""
    base = base_url.rstrip("/")
    if platform == "anthropic-compat" and not base.endswith("/v1"):
        return base + "/v1/models"
    return base + "/models"


def models_headers(platform: str, key: str) -> dict[str, str]:
    """The headers of a ``GET <base_url>/models`` (this check, and the capability probe)."""
    headers = {"User-Agent": "amux-doctor"}
    if key and platform == "anthropic-compat":
        headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
    elif key:
        headers["Authorization"] = f"Bearer {key}"
    return headers
