"""What showing a session in Lark costs its turns' hot path: nothing for a session no
conversation shows, nothing for streaming deltas of one that is shown, one outbox upsert
for a batch that changes what its card shows (statements counted on the real database)."""

from __future__ import annotations

import pytest

from conversations.models import Conversation, TurnReply
from effects.models import Effect
from intake.models import Source
from runtimes import events as rt
from sessions import services, timeline
from sessions.models import Session
from tests.integration.sessions.test_turn_statements import statements

pytestmark = pytest.mark.django_db


def _session(mirrored: bool) -> Session:
    session = Session.objects.create(runtime="pi", workdir="/tmp/w", name="cost")
    if mirrored:
        source = Source.objects.create(kind="lark", slug="lk", name="Lark",
                                       config={"app_id": "cli", "conversation": "topic"})
        Conversation.objects.create(source=source, mode="topic", chat_id="oc_1",
                                    thread_key="omt_1", session=session)
        services.set_mirrored(session.pk)
    return session


def _costs(session: Session) -> dict[str, int]:
    turn, _ = timeline.enqueue_input(session.pk, "hi", key="k1", origin={
        "via": "lark", "actor": "ou_a", "conversation": Conversation.objects.filter(
            session=session).values_list("pk", flat=True).first(), "chat_id": "oc_1",
        "message_id": "om_1"})
    costs = {"start": len(statements(timeline.start_turn, session.pk, turn.pk)[0])}
    costs["deltas"] = len(statements(timeline.record, session.pk, turn.pk, [
        rt.MessageDelta(text="he"), rt.MessageDelta(text="llo")])[0])
    costs["message"] = len(statements(timeline.record, session.pk, turn.pk, [
        rt.MessageCompleted(text="hello")])[0])
    costs["end"] = len(statements(timeline.record, session.pk, turn.pk,
                                  [rt.TurnCompleted()])[0])
    return costs


def test_only_a_shown_session_pays_and_deltas_cost_nothing_more():
    plain = _costs(_session(False))
    shown = _costs(_session(True))
    assert shown["deltas"] == plain["deltas"]  # streaming text: no work for the card
    assert shown["message"] == plain["message"] + 1  # the card's one coalescing upsert
    # the card's upsert, and the one look for open question / permission cards the end
    # of the turn releases (conversations/card_release)
    assert shown["end"] == plain["end"] + 2
    # a starting turn opens its card once: its origin, its place, the reply row, the upsert
    assert shown["start"] - plain["start"] <= 5, (plain, shown)
    assert TurnReply.objects.count() == 1
    assert Effect.objects.filter(kind="conversation.reply").count() == 1  # coalesced
    print("statements per step, plain vs shown:", plain, shown)
