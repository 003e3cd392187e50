"""A plugin that fails on an event leaves its delivery unprocessed with the error — shown
in the admin and the source's health — and the intake sweep tries it again with growing
delays; it is never stored as "ignored". Once the plugin reads it, it becomes one
trigger, and the deliveries behind it on the same thread follow in order."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from intake import process
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
    assert delivery.attempts == 1 and delivery.last_error == "KeyError: 'sender'"
    assert delivery.retry_at > timezone.now()
    gh.refresh_from_db()
    shown = health(gh)
    assert shown["unprocessed"] == 1 and shown["last_error"]["reason"] == "processing_failed"
    assert shown["last_error"]["message"] == "KeyError: 'sender'"  # what failed, not just that
    assert "unreadable_event" not in shown["rejected"]
    assert not Trigger.objects.exists()
    page = admin_client.get(f"/admin/intake/delivery/{delivery.pk}/change/")
    assert page.status_code == 200 and "KeyError: &#x27;sender&#x27;" in page.content.decode()

    assert process.process_pending() == 0  # not due yet: the sweep leaves it
    assert flaky["calls"] == 1

    later(31)
    assert process.process_pending() == 1
    trigger = Trigger.objects.get()
    assert trigger.scope == "issue_new" and trigger.external_id == f"issue:{payload['issue']['id']}"
    delivery.refresh_from_db()
    assert delivery.processed_at and delivery.trigger_id == trigger.pk
    assert delivery.outcome == "ignored" and delivery.reason  # the gate's (no policy yet)
    assert delivery.retry_at is None and health(gh)["unprocessed"] == 0
    # GitHub delivering it again changes nothing.
    assert post(client, "issues", payload, delivery="d-1").json() == {
        "duplicate": True, "delivery": "d-1"}
    assert Trigger.objects.count() == 1


def test_a_failing_delivery_holds_back_its_thread_and_backs_off(client, gh, flaky, later):
    """Stored first (a crash after the answer), it fails in the sweep twice; a comment on
    the same thread arriving meanwhile waits behind it; each try waits longer."""
    flaky["fails"] = 2
    opened = example("issues", "opened")
    number = opened["issue"]["number"]
    process.delivery_received(source_id=gh.pk, delivery_id="d-1", event="issues",
                              mailbox=f"gh:{REPO}#{number}", headers={},
                              body=json.dumps(opened).encode())
    assert process.process_pending() == 0
    first = Delivery.objects.get(delivery_id="d-1")
    assert first.attempts == 1 and first.processed_at is None

    comment = example("issue_comment", "created")
    comment["issue"]["number"] = number
    response = post(client, "issue_comment", comment, delivery="d-2")
    assert response.json()["outcome"] == "queued"
    assert process.drain() == 0  # in line behind the failing one
    assert Delivery.objects.get(delivery_id="d-2").processed_at is None
    assert not Trigger.objects.exists()

    later(31)
    assert process.process_pending() == 0  # failed again: now it waits a minute
    first.refresh_from_db()
    assert first.attempts == 2
    assert first.retry_at - timezone.now() >= timedelta(seconds=59)
    later(31 + 61)
    assert process.process_pending() == 2
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
    assert process.process_pending() == 1
    assert Trigger.objects.count() == 1 and Delivery.objects.get().processed_at
