"""Rules about configuring a source (pure)."""

from __future__ import annotations

SLUG_FIXED = (
    "cannot change once the source has received events: its webhook URL (configured in "
    "GitHub or Lark) and the policy name it by this slug. Add a new source instead."
)


def slug_change_refused(current: str, wanted: str, has_events: bool) -> str | None:
    """Why renaming a source is refused, or None when it may be renamed."""
    if wanted == current or not has_events:
        return None
    return SLUG_FIXED
