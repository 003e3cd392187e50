"""Facts reach every subscriber, each through its own outbox row (effects/events.py), and
nothing replaces a listener silently (issue 31, item 4)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from effects import events, outbox
from effects.models import Effect

pytestmark = pytest.mark.django_db

FACT = "session.turn_ended"


@pytest.fixture
def listeners():
    """This test's subscribers in place of the apps' own (which come back after)."""
    saved = {fact: dict(subs) for fact, subs in events._subscribers.items()}
    for subs in events._subscribers.values():
        subs.clear()
    yield
    for fact, subs in saved.items():
        events._subscribers[fact].clear()
        events._subscribers[fact].update(subs)


def test_the_apps_subscribe_to_the_turn_end_each_under_its_own_name():
    assert events.subscribers(FACT) == ["goals", "tasks", "tickets"]


def test_a_second_handler_for_an_effect_kind_is_an_error_naming_both():
    def impostor(effect_id, payload):
        return None

    with pytest.raises(ImproperlyConfigured, match=r"'deliver' already has a handler "
                       r"\(tickets\.effect_handlers\.deliver_input\).*impostor"):
        outbox.register("deliver")(impostor)
    # the app's own handler registered again (a ready() run twice) is no second handler
    outbox.register("deliver")(outbox.handlers()["deliver"])
    assert outbox.handler_name(outbox.handlers()["deliver"]).endswith("deliver_input")


def test_a_second_subscriber_under_one_name_is_an_error(listeners):
    events.subscribe(FACT, "audit")(lambda effect_id, payload: None)
    with pytest.raises(ImproperlyConfigured, match="already has a subscriber named 'audit'"):
        events.subscribe(FACT, "audit")(test_a_second_subscriber_under_one_name_is_an_error)
    with pytest.raises(outbox.EffectError, match="unknown fact 'turn.over'"):
        events.subscribe("turn.over", "audit")


def test_each_subscriber_gets_its_own_row_and_a_failing_one_holds_back_no_other(listeners):
    seen = []

    def failing(effect_id, payload):
        raise RuntimeError("the audit log is down")

    events.subscribe(FACT, "tickets")(lambda effect_id, payload: seen.append(payload))
    events.subscribe(FACT, "audit")(failing)
    events.subscribe(FACT, "tasks", wants=lambda fact: fact["task_runs"])(
        lambda effect_id, payload: seen.append(payload))

    assert events.publish(FACT, "turn:9", {"turn": 9, "task_runs": False}) == 2
    assert sorted(Effect.objects.values_list("key", flat=True)) == [
        "audit:turn:9", "tickets:turn:9"]  # tasks did not want it: no row

    assert outbox.drain(seconds=10) == 1  # done; the other failed
    assert seen == [{"turn": 9, "task_runs": False, "fact": FACT, "subscriber": "tickets"}]
    (left,) = Effect.objects.all()
    assert (left.key, left.attempts) == ("audit:turn:9", 1)
    assert "the audit log is down" in left.last_error


def test_a_row_for_a_subscriber_this_installation_no_longer_has_fails_naming_it(listeners):
    outbox.enqueue(FACT, "gone:turn:3", {"turn": 3, "fact": FACT, "subscriber": "gone"})
    outbox.drain(seconds=10)
    row = Effect.objects.get()
    assert row.attempts == 1
    assert "no subscriber 'gone' of 'session.turn_ended'" in row.last_error


def test_a_wake_while_the_handler_waits_runs_the_row_again_at_once(listeners):
    """The race a wake-up must survive: the fact arrives while the waiting row's handler is
    deciding to wait (`Later`, a long floor). The row runs again at once, not after it."""
    looks = []

    def waiting(effect_id, payload):
        looks.append(effect_id)
        if len(looks) == 1:
            assert outbox.wake("goals.connector_reply", "turn:1")  # the fact, meanwhile
            raise outbox.Later(300, "the turn has not ended")

    outbox.register("goals.connector_reply", replace=True)(waiting)
    try:
        outbox.enqueue("goals.connector_reply", "turn:1", {"receipt": 1})
        outbox.drain(seconds=10)  # the same drain takes it again, due now, not in 300 s
    finally:
        from goals import replies

        outbox.register("goals.connector_reply", replace=True)(replies.deliver)
    assert len(looks) == 2 and not Effect.objects.exists()
    assert outbox.wake("goals.connector_reply", "turn:1") is False  # nothing waits now
