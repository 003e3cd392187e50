"""The hand-off of a session whose native conversation is gone, read from its timeline:
every turn since the last clear (a clear forgets on purpose), its input and the agent's
messages, composed by sessions/core/handoff.py."""

from __future__ import annotations

from collections import defaultdict

from sessions.core import handoff
from sessions.models import TimelineEvent, Turn, TurnState


def exchanges(session_id: int) -> list[handoff.Exchange]:
    since = (TimelineEvent.objects.filter(session_id=session_id, type="session.cleared")
             .order_by("-seq").values_list("seq", flat=True).first()) or 0
    replies: dict[int, list[str]] = defaultdict(list)
    for turn_id, payload in (TimelineEvent.objects
                             .filter(session_id=session_id, type="message.completed",
                                     seq__gt=since, turn__isnull=False)
                             .order_by("seq").values_list("turn_id", "payload")):
        if (payload or {}).get("text"):
            replies[turn_id].append(payload["text"])
    opened = set(TimelineEvent.objects.filter(session_id=session_id, type="turn.started",
                                              seq__gt=since).values_list("turn_id",
                                                                         flat=True))
    ended = (TurnState.COMPLETED, TurnState.FAILED, TurnState.CANCELLED)
    return [handoff.Exchange(said=(turn.input or {}).get("text") or "",
                             replied="\n\n".join(replies.get(turn.pk, [])))
            for turn in Turn.objects.filter(session_id=session_id, pk__in=opened,
                                            state__in=ended).order_by("seq")
            if (turn.input or {}).get("text") or replies.get(turn.pk)]


def text(session_id: int) -> str | None:
    return handoff.text(exchanges(session_id))
