"""A plugin that fails on an event leaves its delivery unprocessed with the error — shown
in the admin and the source's health — and its mailbox's retry, an outbox effect, tries it
again with the outbox's growing delays; it is never stored as "ignored". Once the plugin
reads it, it becomes one trigger, and the deliveries behind it on the same thread follow
in order."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from effects import outbox
from effects.models import Effect
from intake import process, record
from intake.health_view import health
from intake.models import Delivery, Source, Trigger
from intake.sources.github import GitHub
from tests.support.github_payloads import example, signed

pytestmark = pytest.mark.django_db

SECRET = "It's a Secret to Everybody"
REPO = "Codertocat/Hello-World"


@pytest.fixture
def gh():
    config = GitHub.validate_config({"repo": [REPO], "handle": "amux-bot"})
    source = Source(kind="github", slug="gh", name="GitHub", config=config)
    source.secrets = {"webhook_secret": SECRET, "token": "ghp_test"}
    source.save()
    return source


@pytest.fixture
def flaky(monkeypatch):
    """The GitHub plugin's translation of delivery `d-1` fails the first `fails` times (a
    plugin bug or a payload it did not expect, fixed by the time of the retry)."""
    state = {"fails": 1, "calls": 0}
    translate = GitHub.translate

    def flaky_translate(self, env):
        state["calls"] += 1
        if env.delivery_id == "d-1" and state["fails"] > 0:
            state["fails"] -= 1
            raise KeyError("sender")
        return translate(self, env)

    monkeypatch.setattr(GitHub, "translate", flaky_translate)
    return state


@pytest.fixture
def later(monkeypatch):
    """Move every reader of the time forward by `seconds`."""
    real = timezone.now

    def move(seconds: float) -> None:
        moved = real() + timedelta(seconds=seconds)
        monkeypatch.setattr(timezone, "now", lambda: moved)

    return move


def retry_of(delivery: Delivery) -> Effect:
    """The pending retry of the delivery's mailbox (one outbox row per mailbox)."""
    return Effect.objects.get(kind=record.RETRY_EFFECT, key=delivery.mailbox, state="pending")


def retried() -> int:
    """The outbox drained as a worker drains it: the deliveries processed meanwhile."""
    before = Delivery.objects.filter(processed_at__isnull=False).count()
    outbox.drain(seconds=5)
    return Delivery.objects.filter(processed_at__isnull=False).count() - before


def post(client, event, payload, delivery=None):
    body, headers = signed(event, payload, SECRET, delivery)
    return client.post("/hooks/github/gh", data=body, content_type="application/json",
                       **headers)


def test_a_plugin_that_fails_once_makes_one_trigger_on_retry(client, admin_client, gh, flaky,
                                                            later):
    payload = example("issues", "opened")
    response = post(client, "issues", payload, delivery="d-1")
    assert response.status_code == 202
    assert response.json() == {"delivery": "d-1", "trigger": None, "outcome": "queued",
                               "reason": None}
    assert process.drain() == 0  # the drainer's try fails: it waits for its retry
    delivery = Delivery.objects.get(delivery_id="d-1")
    assert delivery.processed_at is None and not delivery.outcome
    assert delivery.last_error == "KeyError: 'sender'"
    retry = retry_of(delivery)
    assert retry.attempts == 1 and retry.due_at > timezone.now()  # the drainer's try
    assert retry.last_error == "KeyError: 'sender'"
    assert retry.payload == {"source": gh.pk, "mailbox": delivery.mailbox,
                             "delivery": delivery.pk}
    gh.refresh_from_db()
    shown = health(gh)
    assert shown["unprocessed"] == 1 and shown["last_error"]["reason"] == "processing_failed"
    assert shown["last_error"]["message"] == "KeyError: 'sender'"  # what failed, not just that
    assert "unreadable_event" not in shown["rejected"]
    assert not Trigger.objects.exists()
    page = admin_client.get(f"/admin/intake/delivery/{delivery.pk}/change/")
    assert page.status_code == 200 and "KeyError: &#x27;sender&#x27;" in page.content.decode()
    assert f"effect {retry.pk}: failed tries 1, next at" in page.content.decode()

    assert process.process_pending() == 0  # held: the sweep leaves it to its retry
    assert retried() == 0  # not due yet
    assert flaky["calls"] == 1

    later(31)
    assert retried() == 1
    trigger = Trigger.objects.get()
    assert trigger.scope == "issue_new" and trigger.external_id == f"issue:{payload['issue']['id']}"
    delivery.refresh_from_db()
    assert delivery.processed_at and delivery.trigger_id == trigger.pk
    assert delivery.outcome == "ignored" and delivery.reason  # the gate's (no policy yet)
    assert not Effect.objects.exists() and health(gh)["unprocessed"] == 0
    # GitHub delivering it again changes nothing.
    assert post(client, "issues", payload, delivery="d-1").json() == {
        "duplicate": True, "delivery": "d-1"}
    assert Trigger.objects.count() == 1


def test_a_failing_delivery_holds_back_its_thread_and_backs_off(client, gh, flaky, later):
    """Stored first (a crash after the answer), it fails in the sweep, then in its retry;
    a comment on the same thread arriving meanwhile waits behind it; each try waits
    longer."""
    flaky["fails"] = 2
    opened = example("issues", "opened")
    number = opened["issue"]["number"]
    process.delivery_received(source_id=gh.pk, delivery_id="d-1", event="issues",
                              mailbox=f"gh:{REPO}#{number}", headers={},
                              body=json.dumps(opened).encode())
    assert process.process_pending() == 0
    first = Delivery.objects.get(delivery_id="d-1")
    assert first.last_error and first.processed_at is None
    waited = retry_of(first).due_at - timezone.now()
    assert timedelta(seconds=14) <= waited <= timedelta(seconds=30)

    comment = example("issue_comment", "created")
    comment["issue"]["number"] = number
    response = post(client, "issue_comment", comment, delivery="d-2")
    assert response.json()["outcome"] == "queued"
    assert process.drain() == 0  # in line behind the failing one
    assert Delivery.objects.get(delivery_id="d-2").processed_at is None
    assert not Trigger.objects.exists()

    later(31)
    assert retried() == 0  # failed again: now it waits longer
    assert process.process_pending() == 0  # and the sweep still leaves the mailbox alone
    retry = retry_of(first)
    assert retry.attempts == 2 and "KeyError: 'sender'" in retry.last_error
    assert retry.due_at - timezone.now() >= waited
    later(31 + 61)
    assert retried() == 2
    assert list(Trigger.objects.order_by("pk").values_list("scope", flat=True)) == [
        "issue_new", "comment"]
    assert not Delivery.objects.filter(processed_at__isnull=True).exists()


def test_a_gate_that_fails_once_makes_one_trigger_on_retry(client, gh, monkeypatch, later):
    """Deciding fails the same way translating does: the event waits, it is not ignored."""
    from policy import services

    compile_policy = services.current_policy
    fails = {"left": 1}

    def failing_once(*args, **kwargs):
        if fails["left"]:
            fails["left"] -= 1
            raise RuntimeError("policy store unavailable")
        return compile_policy(*args, **kwargs)

    monkeypatch.setattr(services, "current_policy", failing_once)
    response = post(client, "issues", example("issues", "opened"), delivery="d-1")
    assert response.json()["outcome"] == "queued"
    assert process.drain() == 0 and not Trigger.objects.exists()
    assert Delivery.objects.get().last_error == "RuntimeError: policy store unavailable"
    later(31)
    assert retried() == 1
    assert Trigger.objects.count() == 1 and Delivery.objects.get().processed_at


def test_a_delivery_failing_behind_the_retried_one_starts_the_count_afresh(gh, monkeypatch,
                                                                            later):
    """The retry gets its delivery through, then the next one in the mailbox fails for the
    first time: the same retry row now stands for that one, with its error and one try."""
    from tests.support.intake import translation_fails_for

    translation_fails_for(monkeypatch, 70)
    mailbox = f"gh:{REPO}#7"
    for n in (70, 71):
        payload = example("issue_comment", "created")
        payload["issue"]["number"], payload["comment"]["id"] = 7, n
        process.delivery_received(source_id=gh.pk, delivery_id=f"c-{n}", event="issue_comment",
                                  mailbox=mailbox, headers={}, body=json.dumps(payload).encode())
    assert process.process_pending() == 0
    head = Delivery.objects.get(delivery_id="c-70")
    assert retry_of(head).attempts == 1
    later(31)
    assert retried() == 0  # failing again: the outbox counts it
    first = retry_of(head)
    assert first.attempts == 2

    monkeypatch.undo()
    translation_fails_for(monkeypatch, 71)  # the head reads now; the one behind it fails
    later(31 + 61)
    assert retried() == 1
    behind = Delivery.objects.get(delivery_id="c-71")
    assert behind.processed_at is None and behind.last_error == "KeyError: 'sender'"
    retry = retry_of(behind)
    assert retry.pk == first.pk and retry.attempts == 1 and retry.claimed_by == ""
    assert retry.payload["delivery"] == behind.pk and retry.due_at > timezone.now()
    assert process.process_pending() == 0  # held by its retry, as the head was

    monkeypatch.undo()
    later(31 + 61 + 31)
    assert retried() == 1 and not Effect.objects.exists()
    assert Trigger.objects.count() == 2


def test_a_retry_that_keeps_failing_becomes_a_dead_letter_holding_its_mailbox(client, gh,
                                                                               flaky, later):
    """Out of tries, the retry is a dead letter: the delivery keeps its error and its
    mailbox stays held (nothing behind it overtakes it) until an operator puts the retry
    back in line, from the outbox's admin."""
    from effects.kinds import KINDS

    flaky["fails"] = 10**6
    post(client, "issues", example("issues", "opened"), delivery="d-1")
    assert process.drain() == 0
    delivery = Delivery.objects.get(delivery_id="d-1")
    Effect.objects.filter(kind=record.RETRY_EFFECT).update(
        attempts=KINDS[record.RETRY_EFFECT].max_attempts - 1)
    later(3600)
    assert retried() == 0
    dead = Effect.objects.get(kind=record.RETRY_EFFECT)
    assert dead.state == "dead" and "KeyError: 'sender'" in dead.last_error
    assert process.process_pending() == 0 and Delivery.objects.get(pk=delivery.pk).last_error

    flaky["fails"] = 0
    assert outbox.retry_dead([dead.pk]) == 1
    assert retried() == 1 and Trigger.objects.count() == 1
