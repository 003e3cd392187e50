"""What the orchestrator asks of the current policy (one seam, so the engine stays small)."""

from __future__ import annotations

from policy.models import PolicyVersion


def acceptance_mode() -> str:
    """`manual` (inferred candidates never become work) unless the policy says `auto`."""
    current = PolicyVersion.objects.order_by("-id").first()
    if current is None:
        return "manual"
    return "auto" if current.document.get("acceptance") == "auto" else "manual"


def current_version() -> str:
    current = PolicyVersion.objects.order_by("-id").first()
    return current.version if current else ""
