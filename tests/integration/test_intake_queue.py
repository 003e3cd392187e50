"""Store first, answer fast: a webhook is answered once its delivery is stored; the drainer,
woken after the commit, processes it; the sweep processes whatever a lost wake-up left."""

from __future__ import annotations

import json
import time

import pytest
from django.core.cache import cache
from django.utils import timezone

from amux_site.celery import app
from effects.models import Effect
from intake import process, record
from intake.models import Delivery, Source, Trigger
from intake.sources.github import GitHub
from intake.tasks import intake_sweep
from tests.support.github_payloads import example, signed
from tests.support.intake import outcome_of, processed, translation_fails_for

pytestmark = pytest.mark.django_db

SECRET = "s3cret"
REPO = "Codertocat/Hello-World"


@pytest.fixture
def gh():
    source = Source(kind="github", slug="gh", name="GitHub",
                    config=GitHub.validate_config({"repo": [REPO]}))
    source.secrets = {"webhook_secret": SECRET, "token": "t"}
    source.save()
    return source


def comment(number: int, comment_id: int) -> dict:
    payload = example("issue_comment", "created")
    payload["issue"]["number"], payload["comment"]["id"] = number, comment_id
    return payload


def post(client, payload, delivery=None, event="issue_comment"):
    body, headers = signed(event, payload, SECRET, delivery)
    return client.post("/hooks/github/gh", data=body, content_type="application/json",
                       **headers)


def test_the_answer_comes_before_processing(client, gh):
    response = post(client, comment(1, 11), delivery="d-1")
    assert response.status_code == 202
    assert response.json() == {"delivery": "d-1", "trigger": None, "outcome": "queued",
                               "reason": None}
    stored = Delivery.objects.get()
    assert stored.processed_at is None and stored.trigger_id is None and not stored.last_error
    assert stored.mailbox == f"gh:{REPO}#1"
    assert json.loads(bytes(stored.body))["comment"]["id"] == 11
    assert not Trigger.objects.exists()


def test_processing_afterwards_makes_exactly_the_trigger(client, gh):
    response = post(client, comment(1, 11), delivery="d-1")
    outcome = processed(response)
    trigger = Trigger.objects.get()
    assert outcome == {"delivery": "d-1", "trigger": trigger.pk, "outcome": "ignored",
                       "reason": trigger.reason}
    assert trigger.external_id == "issue_comment:11" and trigger.thread.key == f"{REPO}#1"
    assert process.drain() == 0 and Trigger.objects.count() == 1  # nothing left to do


def test_the_trigger_is_readable_over_rest_once_processed(client, gh, api):
    response = post(client, comment(1, 11), delivery="d-1")
    assert api.get("/api/v1/triggers").json()["results"] == []
    processed(response)
    (row,) = api.get("/api/v1/triggers").json()["results"]
    assert row["external_id"] == "issue_comment:11"


def test_a_crash_between_store_and_process_loses_nothing(client, gh):
    """The web process died after its commit and before any drainer ran (the wake-up was
    lost with it): the beat sweep processes the delivery."""
    assert post(client, comment(1, 11), delivery="d-1").status_code == 202
    assert not Trigger.objects.exists()
    assert intake_sweep() == 1
    assert outcome_of("d-1")["trigger"] == Trigger.objects.get().pk


def test_order_within_a_mailbox_is_kept(client, gh):
    for n in range(5):  # one issue: one mailbox
        assert post(client, comment(7, 70 + n), delivery=f"d-{n}").status_code == 202
    assert post(client, comment(8, 80), delivery="other").status_code == 202
    assert process.drain() == 6
    assert list(Trigger.objects.filter(thread__key=f"{REPO}#7").order_by("pk")
                .values_list("external_id", flat=True)) == [
        f"issue_comment:{70 + n}" for n in range(5)]


def test_a_failing_head_holds_its_mailbox_only(client, gh, monkeypatch):
    translation_fails_for(monkeypatch, 70)
    post(client, comment(7, 70), delivery="head")
    post(client, comment(7, 71), delivery="behind")
    post(client, comment(8, 80), delivery="elsewhere")
    assert process.drain() == 1
    head = Delivery.objects.get(delivery_id="head")
    assert head.last_error == "KeyError: 'sender'"
    retry = Effect.objects.get(kind=record.RETRY_EFFECT, key=head.mailbox)  # its mailbox's
    assert retry.attempts == 1 and retry.due_at > timezone.now()
    assert outcome_of("behind")["outcome"] == "queued"
    assert outcome_of("elsewhere")["trigger"]


def test_a_duplicate_delivery_id_is_answered_200_and_stores_nothing(client, gh):
    assert post(client, comment(1, 11), delivery="d-1").status_code == 202
    again = post(client, comment(1, 11), delivery="d-1")
    assert again.status_code == 200 and again.json() == {"duplicate": True, "delivery": "d-1"}
    assert Delivery.objects.count() == 1
    assert process.drain() == 1 and Trigger.objects.count() == 1
    after = post(client, comment(1, 11), delivery="d-1")  # once processed, still a duplicate
    assert after.status_code == 200 and Delivery.objects.count() == 1


def test_a_stored_delivery_wakes_one_drain_task_after_commit(client, gh,
                                                             django_capture_on_commit_callbacks):
    with app.connection_for_write() as conn:
        redis = conn.default_channel.client
        queued = redis.llen("default")
        cache.delete(process.WAKE_FLAG)
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            post(client, comment(1, 11))
            post(client, comment(2, 21))
        assert len(callbacks) == 2
        # sent by the process's waker thread, after the answers: wait for it
        deadline = time.monotonic() + 10
        while redis.llen("default") == queued and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # a second task, if one were sent, would be there by now
        # debounced: the second wake-up found the first task still waiting
        assert redis.llen("default") == queued + 1
        sent = json.loads(redis.lindex("default", 0))
        assert sent["headers"]["task"] == "intake.drain"
        assert process.drain() == 2  # a drainer starting clears the flag
        assert cache.get(process.WAKE_FLAG) is None
        redis.lpop("default")


def test_a_delivery_to_a_known_source_is_one_statement(client, gh):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    assert post(client, comment(1, 11), delivery="first").status_code == 202
    with CaptureQueriesContext(connection) as captured:
        assert post(client, comment(2, 21), delivery="second").status_code == 202
    sent = [q["sql"] for q in captured.captured_queries
            if not q["sql"].upper().startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    # the source row read before is checked by the INSERT itself
    assert len(sent) == 1 and sent[0].startswith("INSERT"), sent
    assert Delivery.objects.count() == 2


def test_a_source_disabled_since_the_last_delivery_stores_nothing(client, gh):
    assert post(client, comment(1, 11), delivery="before").status_code == 202
    Source.objects.filter(pk=gh.pk).update(enabled=False)  # no save(): no updated_at either
    refused = post(client, comment(2, 21), delivery="after")
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    assert list(Delivery.objects.values_list("delivery_id", flat=True)) == ["before"]


def test_a_rotated_secret_applies_to_the_next_delivery(client, gh):
    global SECRET
    assert post(client, comment(1, 11), delivery="old-secret").status_code == 202
    old, SECRET = SECRET, "rotated"
    try:
        gh.secrets = {"webhook_secret": "rotated", "token": "t"}
        gh.save()
        assert post(client, comment(2, 21), delivery="new-secret").status_code == 202
        SECRET = old  # signed with the secret that is no longer the source's
        refused = post(client, comment(3, 31), delivery="stale-secret")
        assert refused.status_code == 401
    finally:
        SECRET = old
    assert sorted(Delivery.objects.values_list("delivery_id", flat=True)) == [
        "new-secret", "old-secret"]


def test_a_config_change_since_the_last_delivery_is_seen(client, gh):
    assert post(client, comment(1, 11), delivery="before").status_code == 202
    config = dict(gh.config, receive_all=True)
    Source.objects.filter(pk=gh.pk).update(config=config)
    assert post(client, comment(2, 21), delivery="after").status_code == 202
    from intake.receive import _seen

    assert _seen[("github", "gh")][0].config == config  # read afresh, kept again
