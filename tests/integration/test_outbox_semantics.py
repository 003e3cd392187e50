"""The outbox's rules, one test each, through the real drainer (effects.outbox.drain()).

These run on PostgreSQL and on SQLite alike; the concurrent-drainer proofs are in
test_outbox_concurrency.py.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from effects import outbox
from effects.models import Effect
from effects.outbox import KINDS, EffectError, Later
from tests.support.workers import purge_queues

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def handlers():
    """A clean handler registry for each test (the app's own handlers come back after)."""
    saved = dict(outbox._handlers)
    outbox._handlers.clear()
    yield outbox._handlers
    outbox._handlers.clear()
    outbox._handlers.update(saved)


def recorder(kind, calls, behaviour=None):
    @outbox.register(kind)
    def handle(effect_id, payload):
        calls.append((effect_id, payload))
        if behaviour:
            behaviour(effect_id, payload)

    return handle


def make_due():
    """Skip the wait of a backoff or Later (the clock is the only thing we move)."""
    Effect.objects.filter(state="pending").update(due_at=timezone.now())


# -- bad input -------------------------------------------------------------------------------


def test_unknown_kind_is_refused_and_writes_nothing():
    with pytest.raises(EffectError, match="unknown effect kind 'email'"):
        outbox.enqueue("email", "k", {})
    with pytest.raises(EffectError, match="unknown effect kind"):
        outbox.register("email")
    assert not Effect.objects.exists()


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("deliver", "k", ["not", "an", "object"]), {}, "payload must be a JSON object, not list"),
        (("deliver", "k", "text"), {}, "payload must be a JSON object, not str"),
        (("deliver", "k", {"when": object()}), {}, "payload is not JSON"),
        (("deliver", "k", {"x": math.nan}), {}, "payload is not JSON"),
        (("deliver", "k", {"s": {1, 2}}), {}, "payload is not JSON"),
        (("deliver", "", {}), {}, "key must be a string of 1 to 300"),
        (("deliver", "k" * 301, {}), {}, "key must be a string of 1 to 300"),
        (("deliver", 7, {}), {}, "key must be a string"),
        (("deliver", "k", {}), {"channel": "thread-1"}, "only ordered kinds"),
        (("notice", "k", {}), {"channel": "c" * 301}, "channel must be a string"),
        (("deliver", "k", {}), {"delay": -1}, "delay must be a number"),
        (("deliver", "k", {}), {"delay": "soon"}, "delay must be a number"),
    ],
)
def test_malformed_input_is_refused_and_writes_nothing(args, kwargs, message):
    with pytest.raises(EffectError, match=message):
        outbox.enqueue(*args, **kwargs)
    assert not Effect.objects.exists()


def test_a_refused_effect_leaves_the_callers_transaction_usable():
    with transaction.atomic():
        outbox.enqueue("deliver", "good", {"n": 1})
        with pytest.raises(EffectError):
            outbox.enqueue("deliver", "bad", {"n": math.inf})
        outbox.enqueue("deliver", "good-2", {"n": 2})
    assert sorted(Effect.objects.values_list("key", flat=True)) == ["good", "good-2"]


# -- enqueue and replace ---------------------------------------------------------------------


def test_handler_gets_the_effect_id_and_payload_and_the_row_goes_after_success():
    calls = []
    recorder("deliver", calls)
    effect = outbox.enqueue("deliver", "delivery-1", {"n": 1})
    assert outbox.drain() == 1
    assert calls == [(effect.pk, {"n": 1})]
    assert not Effect.objects.exists()


def test_same_key_replaces_payload_and_keeps_place_in_line():
    calls = []
    recorder("deliver", calls)
    first = outbox.enqueue("deliver", "input-1", {"v": 1})
    outbox.enqueue("deliver", "input-2", {"v": 1})
    outbox.enqueue("deliver", "input-3", {"v": 1})
    again = outbox.enqueue("deliver", "input-1", {"v": 2})
    assert again.pk == first.pk and again.version != first.version
    assert Effect.objects.filter(kind="deliver", key="input-1").count() == 1
    outbox.drain()
    assert [(p["v"], eid) for eid, p in calls] == [
        (2, first.pk), (1, first.pk + 1), (1, first.pk + 2)
    ]


def test_replacing_a_backed_off_row_makes_it_due_now_with_fresh_attempts():
    calls = []

    def fail_old(effect_id, payload):
        if payload["v"] == 1:
            raise RuntimeError("peer down")

    recorder("deliver", calls, fail_old)
    effect = outbox.enqueue("deliver", "k", {"v": 1})
    outbox.drain()
    row = Effect.objects.get(pk=effect.pk)
    assert row.attempts == 1 and row.due_at > timezone.now()
    outbox.enqueue("deliver", "k", {"v": 2})
    row.refresh_from_db()
    assert row.attempts == 0 and row.due_at <= timezone.now()
    outbox.drain()
    assert [p["v"] for _, p in calls] == [1, 2]
    assert not Effect.objects.exists()


def test_replacing_a_row_while_its_handler_runs_runs_the_new_payload_too():
    calls = []

    def replace_during_first_run(effect_id, payload):
        if payload["v"] == 1:
            # Another transaction replaces the row while this handler is running.
            outbox.enqueue("relay", "report-1", {"v": 2}, channel="thread-1")

    recorder("relay", calls, replace_during_first_run)
    outbox.enqueue("relay", "report-1", {"v": 1}, channel="thread-1")
    outbox.drain()
    assert [p["v"] for _, p in calls] == [1, 2]
    assert not Effect.objects.exists()


def test_a_dead_letter_does_not_block_a_new_effect_with_its_key():
    effect = outbox.enqueue("deliver", "k", {"v": 1})
    Effect.objects.filter(pk=effect.pk).update(state="dead")
    fresh = outbox.enqueue("deliver", "k", {"v": 2})
    assert fresh.pk != effect.pk and fresh.state == "pending"


# -- outcomes --------------------------------------------------------------------------------


def test_later_is_not_a_failure():
    calls = []

    def busy(effect_id, payload):
        if len(calls) == 1:
            raise Later(30, "no free worker slot")

    recorder("dispatch", calls, busy)
    effect = outbox.enqueue("dispatch", "assignment-1", {})
    before = timezone.now()
    assert outbox.drain() == 0
    row = Effect.objects.get(pk=effect.pk)
    assert row.attempts == 0 and row.last_error == "" and row.state == "pending"
    assert before + timedelta(seconds=29) <= row.due_at <= timezone.now() + timedelta(seconds=30)
    assert row.claimed_by == "" and row.claimed_until is None
    make_due()
    assert outbox.drain() == 1 and len(calls) == 2


def test_a_failure_backs_off_exponentially_with_jitter():
    def fail(effect_id, payload):
        raise RuntimeError("502 from GitHub")

    recorder("deliver", [], fail)
    effect = outbox.enqueue("deliver", "k", {})
    policy = KINDS["deliver"]
    for attempt in (1, 2, 3):
        before = timezone.now()
        outbox.drain()
        row = Effect.objects.get(pk=effect.pk)
        assert row.attempts == attempt
        assert row.last_error == "RuntimeError: 502 from GitHub"
        low = policy.base_backoff * 2 ** (attempt - 1) * 0.5
        high = policy.base_backoff * 2 ** (attempt - 1)
        assert before + timedelta(seconds=low) <= row.due_at
        assert row.due_at <= timezone.now() + timedelta(seconds=high)
        make_due()
    delays = {round(outbox.backoff(policy, 1), 3) for _ in range(20)}
    assert len(delays) > 1, "jitter spreads retries"
    assert outbox.backoff(policy, 50) <= policy.max_backoff


def test_dead_letter_after_max_attempts():
    def fail(effect_id, payload):
        raise ValueError("bad request")

    recorder("assess", [], fail)
    effect = outbox.enqueue("assess", "eval-1", {})
    for _ in range(KINDS["assess"].max_attempts):
        outbox.drain()
        make_due()
    row = Effect.objects.get(pk=effect.pk)
    assert row.state == "dead" and row.attempts == KINDS["assess"].max_attempts
    assert row.last_error == "ValueError: bad request"
    assert outbox.drain() == 0, "a dead letter is not retried by itself"


def test_dead_letter_is_retried_from_the_admin(client, django_user_model):
    django_user_model.objects.create_superuser("root", "root@example.com", "root-pass-123")
    assert client.login(username="root", password="root-pass-123")
    broken = {"yes": True}

    def maybe_fail(effect_id, payload):
        if broken["yes"]:
            raise ConnectionError("lark unreachable")

    calls = []
    recorder("notice", calls, maybe_fail)
    effect = outbox.enqueue("notice", "n-1", {"text": "hi"}, channel="chat-1")
    for _ in range(KINDS["notice"].max_attempts):
        outbox.drain()
        make_due()
    assert Effect.objects.get(pk=effect.pk).state == "dead"

    page = client.get("/admin/effects/effect/?state__exact=dead")
    assert page.status_code == 200
    assert b"lark unreachable" in page.content
    assert b"Retry the selected dead letters" in page.content

    broken["yes"] = False
    response = client.post(
        "/admin/effects/effect/",
        {"action": "retry", "_selected_action": [effect.pk], "index": 0},
        follow=True,
    )
    assert response.status_code == 200
    assert b"1 effect(s) queued again" in response.content
    row = Effect.objects.get(pk=effect.pk)
    assert row.state == "pending" and row.attempts == 0 and row.due_at <= timezone.now()
    assert outbox.drain() == 1
    assert not Effect.objects.exists()


def test_retry_leaves_a_dead_letter_dead_when_a_newer_payload_is_pending():
    old = outbox.enqueue("deliver", "k", {"v": 1})
    Effect.objects.filter(pk=old.pk).update(state="dead", attempts=15)
    outbox.enqueue("deliver", "k", {"v": 2})
    assert outbox.retry_dead([old.pk]) == 0
    assert Effect.objects.get(pk=old.pk).state == "dead"


def test_rows_of_a_kind_without_a_handler_wait():
    outbox.enqueue("assess", "eval-1", {})
    assert outbox.drain() == 0
    row = Effect.objects.get()
    assert row.attempts == 0 and row.claimed_by == ""


def test_a_fact_nobody_handles_here_waits_for_a_process_that_does():
    """sessions writes `session.turn_ended` whether or not this process has tickets' handler:
    a drainer without it leaves the row alone, and one with it runs it."""
    calls = []
    recorder("deliver", calls)
    fact = outbox.enqueue("session.turn_ended", "turn:7", {"session": 3, "turn": 7,
                                                           "state": "completed",
                                                           "error_code": ""})
    for _ in range(3):
        assert outbox.drain() == 0
        make_due()
    row = Effect.objects.get(pk=fact.pk)
    assert (row.state, row.attempts, row.claimed_by, row.last_error) == ("pending", 0, "", "")
    recorder("session.turn_ended", calls)
    assert outbox.drain() == 1
    assert calls == [(fact.pk, {"session": 3, "turn": 7, "state": "completed",
                                "error_code": ""})]


def test_a_handler_gone_after_the_claim_gives_the_row_back_untouched(handlers):
    recorder("deliver", [])
    outbox.enqueue("deliver", "k", {})
    (effect,) = outbox.claim("drainer-a")
    del handlers["deliver"]
    assert outbox.run_one(effect, "drainer-a") == "released"
    row = Effect.objects.get()
    assert (row.state, row.attempts, row.claimed_by, row.claimed_until) == ("pending", 0, "", None)


def test_a_lost_lease_is_not_run():
    calls = []
    recorder("deliver", calls)
    outbox.enqueue("deliver", "k", {})
    (effect,) = outbox.claim("drainer-a")
    # drainer-a stalled past its lease; drainer-b took the row over.
    expired = timezone.now() - timedelta(seconds=1)
    Effect.objects.filter(pk=effect.pk).update(claimed_until=expired)
    effect.claimed_until = expired  # what drainer-a's clock says after the stall
    (taken,) = outbox.claim("drainer-b")
    assert taken.pk == effect.pk
    assert outbox.run_one(effect, "drainer-a") == "lost"
    assert calls == []
    assert outbox.run_one(taken, "drainer-b") == "done"
    assert not Effect.objects.exists()


# -- order -----------------------------------------------------------------------------------


def test_relay_and_notice_keep_order_per_channel_and_a_failing_head_holds_back():
    done = []
    failing = {"report-a1"}

    def handle(effect_id, payload):
        if payload["key"] in failing:
            raise RuntimeError("thread locked")
        done.append(payload["key"])

    outbox.register("relay")(handle)
    outbox.register("notice")(handle)
    for key, kind, channel in [
        ("report-a1", "relay", "a"),
        ("notice-b1", "notice", "b"),
        ("notice-a2", "notice", "a"),
        ("report-b2", "relay", "b"),
        ("report-a3", "relay", "a"),
    ]:
        outbox.enqueue(kind, key, {"key": key}, channel=channel)
    outbox.drain()
    assert done == ["notice-b1", "report-b2"], "channel a waits behind its failing head"
    assert Effect.objects.filter(channel="a").count() == 3
    failing.clear()
    make_due()
    outbox.drain()
    assert done[2:] == ["report-a1", "notice-a2", "report-a3"]


def test_relays_and_notices_to_one_place_share_one_line():
    done = []
    failing = {"relay-1"}

    def handle(effect_id, payload):
        if payload["key"] in failing:
            raise RuntimeError("rate limited")
        done.append(payload["key"])

    outbox.register("relay")(handle)
    outbox.register("notice")(handle)
    place = outbox.channel_key("team", "oc_chat:om_root")
    assert place == outbox.channel_key("team", "oc_chat:om_root") != outbox.channel_key(
        "other", "oc_chat:om_root")
    outbox.enqueue("relay", "relay-1", {"key": "relay-1"}, channel=place)
    outbox.enqueue("notice", "notice-2", {"key": "notice-2"}, channel=place)
    outbox.drain()
    assert done == [], "the notice waits behind the relay to the same place"
    failing.clear()
    make_due()
    outbox.drain()
    assert done == ["relay-1", "notice-2"]


@pytest.mark.parametrize(("source", "address"), [("", "t1"), ("team", "")])
def test_a_channel_needs_a_source_and_an_address(source, address):
    with pytest.raises(EffectError, match="a channel needs a source and an address"):
        outbox.channel_key(source, address)


def test_a_dead_head_releases_its_channel():
    done = []

    def handle(effect_id, payload):
        if payload["key"] == "head":
            raise RuntimeError("gone for good")
        done.append(payload["key"])

    outbox.register("notice")(handle)
    outbox.enqueue("notice", "head", {"key": "head"}, channel="c")
    outbox.enqueue("notice", "next", {"key": "next"}, channel="c")
    for _ in range(KINDS["notice"].max_attempts):
        outbox.drain()
        make_due()
    assert done == ["next"]


# -- waking ----------------------------------------------------------------------------------


class SentKicks:
    """The drain tasks a kick really put on the broker's `default` queue."""

    def __init__(self):
        purge_queues()
        cache.delete(outbox.KICK_FLAG)

    def __len__(self) -> int:
        broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        return sum(b"effects.drain_outbox" in raw for raw in broker.lrange("default", 0, -1))

    def drain_started(self) -> None:
        """What a started drain task does first: the next kick may send again."""
        cache.delete(outbox.KICK_FLAG)


@pytest.fixture
def kicks():
    sent = SentKicks()
    yield sent
    purge_queues()


def test_a_transaction_kicks_the_drainer_once_after_commit(django_capture_on_commit_callbacks,
                                                           kicks):
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        outbox.enqueue("deliver", "a", {})
        outbox.enqueue("deliver", "b", {})
        outbox.enqueue("deliver", "c", {})
        assert len(kicks) == 0, "nothing is kicked before the commit"
    assert len(kicks) == 1
    kicks.drain_started()
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        outbox.enqueue("deliver", "d", {})
    assert len(kicks) == 2, "the next transaction kicks again"


def test_a_rolled_back_savepoint_keeps_the_kick_of_the_rows_after_it(
        django_capture_on_commit_callbacks, kicks):
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            outbox.enqueue("deliver", "dropped", {})
            raise RuntimeError("savepoint rolled back")
        outbox.enqueue("deliver", "kept", {})
    assert len(kicks) == 1
    assert list(Effect.objects.values_list("key", flat=True)) == ["kept"]


def test_the_kick_is_lost_with_a_rolled_back_transaction(django_capture_on_commit_callbacks):
    with (
        django_capture_on_commit_callbacks() as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        outbox.enqueue("deliver", "a", {})
        raise RuntimeError("refused")
    assert callbacks == [] and not Effect.objects.exists()


def test_a_kick_lost_with_a_rollback_does_not_silence_the_next_transaction(
        django_capture_on_commit_callbacks, kicks):
    with pytest.raises(RuntimeError), transaction.atomic():
        outbox.enqueue("deliver", "a", {})
        raise RuntimeError("refused")
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        outbox.enqueue("deliver", "b", {})
    assert len(kicks) == 1


def test_drain_stops_at_its_time_budget_and_releases_the_rest():
    calls = []
    recorder("deliver", calls)
    for n in range(5):
        outbox.enqueue("deliver", f"k{n}", {})
    assert outbox.drain(seconds=0) == 0
    assert Effect.objects.filter(claimed_by="").count() == 5


def test_a_kind_is_claimed_by_no_more_drainers_than_its_concurrency():
    outbox.register("assess")(lambda effect_id, payload: None)
    for n in range(5):
        outbox.enqueue("assess", f"eval-{n}", {})
    assert KINDS["assess"].concurrency == 2
    first, second = outbox.claim("drainer-a"), outbox.claim("drainer-b")
    assert len(first) == len(second) == KINDS["assess"].batch
    assert outbox.claim("drainer-c") == [], "two drainers already run assessments"
    assert outbox.run_one(first[0], "drainer-a") == "done"
    assert len(outbox.claim("drainer-c")) == 1, "a slot came free"


def test_a_thread_that_kicks_from_another_thread_still_kicks_once(
        django_capture_on_commit_callbacks, kicks):
    """A session host's database thread does not wait for the kick: the process's kicker
    thread sends it, once per commit as ever."""
    import time

    outbox.kick_from_another_thread()
    try:
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            outbox.enqueue("deliver", "a", {})
            outbox.enqueue("deliver", "b", {})
            assert len(kicks) == 0, "nothing is kicked before the commit"
        deadline = time.monotonic() + 10
        while len(kicks) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # a second kick, if one were sent, would be there by now
        assert len(kicks) == 1
    finally:
        outbox.kick_from_another_thread(on=False)  # the test thread kicks by itself again
