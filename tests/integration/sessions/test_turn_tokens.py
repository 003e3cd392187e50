"""The tokens one turn used (what a goal's `tokens` quota spends, goals/turns.py): each
usage report of the turn counted as the session's daily usage counts it — the increase
of a runtime's own cumulative figure, or each call's own figure for one without it."""

from __future__ import annotations

import pytest

from runtimes import events as rt
from sessions import timeline
from sessions.models import Session, UsageDay

pytestmark = pytest.mark.django_db


def _turn(session: Session, text: str):
    turn, _ = timeline.enqueue_input(session.pk, text)
    timeline.start_turn(session.pk, turn.pk)
    return turn


def _cumulative(total: int) -> rt.UsageObserved:
    return rt.UsageObserved(last={"total_tokens": 1}, cumulative={
        "cumulative_input_tokens": total - 5, "cumulative_output_tokens": 5,
        "cumulative_total_tokens": total})


def test_a_cumulative_runtimes_turn_counts_what_its_figure_grew():
    session = Session.objects.create(runtime="pi", workdir="/tmp/w", name="tokens")
    first = _turn(session, "one")
    timeline.record(session.pk, first.pk, [_cumulative(100), _cumulative(250),
                                           rt.TurnCompleted()])
    second = _turn(session, "two")
    timeline.record(session.pk, second.pk, [_cumulative(400), _cumulative(420),
                                            rt.TurnCompleted()])
    assert timeline.turn_tokens(first) == 250
    assert timeline.turn_tokens(second) == 170  # from 250, where the first turn left it
    assert sum(UsageDay.objects.filter(session=session).values_list("tokens", flat=True)) \
        == timeline.turn_tokens(first) + timeline.turn_tokens(second)


def test_a_per_call_runtimes_turn_counts_each_call():
    session = Session.objects.create(runtime="acp", workdir="/tmp/w", name="tokens")
    turn = _turn(session, "one")
    timeline.record(session.pk, turn.pk, [
        rt.UsageObserved(last={"input_tokens": 30, "output_tokens": 12}),
        rt.UsageObserved(last={"total_tokens": 8}), rt.TurnCompleted()])
    assert timeline.turn_tokens(turn) == 50
    quiet = _turn(session, "two")
    timeline.record(session.pk, quiet.pk, [rt.TurnCompleted()])
    assert timeline.turn_tokens(quiet) == 0
