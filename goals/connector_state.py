"""A connector's state as shown (the rule: goals/core/connectors.py `live_state`): its
source's liveness, read once per source per call site (intake/liveness.py)."""

from __future__ import annotations

from typing import Any

from goals.core import connectors as ck
from goals.models import Connector
from intake import liveness


class Reader:
    """Reads each source's liveness once, however many connectors share it."""

    def __init__(self):
        self.sources: dict[int, tuple[str, str, Any]] = {}

    def of(self, connector: Connector) -> dict[str, Any]:
        source = connector.source if connector.source_id else None
        state = None
        if source is not None:
            if source.pk not in self.sources:
                live = liveness.of(source)
                self.sources[source.pk] = (live.state, live.reason, live.since)
            state = self.sources[source.pk]
        shown, reason, since = ck.live_state(
            detached=connector.state == "disconnected", detached_at=connector.updated_at,
            source_kind=connector.source_kind, has_source=source is not None,
            source_state=state,
            removed_chats=(source.health or {}).get("removed_chats") if source else None,
            source_ref=connector.source_ref, created_at=connector.created_at)
        return {"state": shown, "state_reason": reason or None,
                "state_since": since.isoformat() if hasattr(since, "isoformat") else since,
                "detached": connector.state == "disconnected"}


def of(connector: Connector) -> dict[str, Any]:
    return Reader().of(connector)
