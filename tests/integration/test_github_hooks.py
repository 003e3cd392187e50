"""GitHub webhooks through the HTTP endpoint: real payloads, signed as GitHub signs them."""

from __future__ import annotations

import json

import pytest

from intake import process
from intake.health_view import health
from intake.models import Delivery, Source, Thread, Trigger
from intake.sources.github import GitHub
from tests.support.github_payloads import example, signed
from tests.support.intake import processed
from tickets.models import Subscription, Ticket

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


def post(client, event, payload, *, secret=SECRET, delivery=None, slug="gh", path=None, **extra):
    body, headers = signed(event, payload, secret, delivery)
    headers.update(extra)
    return client.post(path or f"/hooks/github/{slug}", data=body,
                       content_type="application/json", **headers)


def test_signature_matches_githubs_documented_test_vector():
    from intake.sources.github import sign

    assert sign("It's a Secret to Everybody", b"Hello, World!") == (
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    )


def test_new_issue_becomes_a_trigger_on_its_thread(client, gh):
    payload = example("issues", "opened")
    body = processed(post(client, "issues", payload))
    # No policy yet: the gate ignores it, with its reason; the trigger is kept.
    assert body["outcome"] == "ignored" and body["trigger"] and body["reason"]
    trigger = Trigger.objects.get(pk=body["trigger"])
    assert trigger.scope == "issue_new"
    assert trigger.actor == "Codertocat" and trigger.is_human and not trigger.is_bot
    assert trigger.thread.key == f"{REPO}#{payload['issue']['number']}"
    assert trigger.thread.title == payload["issue"]["title"]
    assert trigger.external_id == f"issue:{payload['issue']['id']}"
    assert trigger.decision == "ignore" and trigger.reason == body["reason"]
    delivery = Delivery.objects.get(delivery_id=body["delivery"])
    assert delivery.processed_at and delivery.trigger_id == trigger.pk
    assert json.loads(bytes(delivery.body)) == payload


def test_comment_on_an_issue_and_on_a_pr(client, gh):
    on_issue = example("issue_comment", "created")
    trigger = Trigger.objects.get(pk=processed(post(client, "issue_comment", on_issue))["trigger"])
    assert trigger.scope == "comment" and trigger.meta["on_pr"] is False
    # The corpus has no comment on a PR: the same payload with `issue.pull_request`.
    on_pr = example("issue_comment", "created", 1)
    on_pr["comment"]["id"] += 1
    on_pr["issue"]["pull_request"] = {"url": "https://api.github.com/repos/x/y/pulls/1"}
    trigger = Trigger.objects.get(pk=processed(post(client, "issue_comment", on_pr))["trigger"])
    assert trigger.scope == "comment" and trigger.meta["on_pr"] is True


def test_pull_request_review_and_review_comment(client, gh):
    pr = example("pull_request", "opened")
    trigger = Trigger.objects.get(pk=processed(post(client, "pull_request", pr))["trigger"])
    assert trigger.scope == "pr_new" and trigger.thread.key == f"{REPO}#{pr['number']}"
    review = example("pull_request_review", "submitted")
    review["review"]["body"] = "One nit: rename the helper."  # the corpus's bodies are empty
    trigger = Trigger.objects.get(
        pk=processed(post(client, "pull_request_review", review))["trigger"])
    assert trigger.scope == "comment" and trigger.meta["review_state"] == review["review"]["state"]
    rc = example("pull_request_review_comment", "created")
    trigger = Trigger.objects.get(
        pk=processed(post(client, "pull_request_review_comment", rc))["trigger"]
    )
    assert trigger.scope == "comment" and trigger.thread.key == (
        f"{REPO}#{rc['pull_request']['number']}"
    )


def test_merged_and_closed_prs_are_facts_for_tickets(client, gh):
    closed = example("pull_request", "closed")
    thread = Thread.objects.create(source=gh, key=f"{REPO}#{closed['number']}")
    ticket = Ticket.objects.create(short_name="t1", title="t", thread=thread, pr_state="open")
    Subscription.objects.create(ticket=ticket, thread=thread)  # the PR's thread follows it
    assert processed(post(client, "pull_request", closed)) | {"delivery": None} == {
        "delivery": None, "trigger": None, "outcome": "ignored", "reason": "pr_closed"}
    ticket.refresh_from_db()
    assert ticket.pr_state == "closed"
    merged = example("pull_request", "closed")  # the corpus has no merged PR
    merged["pull_request"]["merged"] = True
    merged["number"] = merged["pull_request"]["number"] = 99
    thread = Thread.objects.create(source=gh, key=f"{REPO}#99")
    ticket = Ticket.objects.create(short_name="t2", title="t", thread=thread, pr_state="open")
    Subscription.objects.create(ticket=ticket, thread=thread)
    assert processed(post(client, "pull_request", merged))["reason"] == "pr_merged"
    ticket.refresh_from_db()
    thread.refresh_from_db()
    assert ticket.pr_state == "merged" and thread.meta["pr_state"] == "merged"


def test_ci_only_on_the_default_branch(client, gh):
    suite = example("check_suite", "completed", 1)  # head_branch "main"
    assert suite["check_suite"]["head_branch"] == "main"
    body = processed(post(client, "check_suite", suite))
    trigger = Trigger.objects.get(pk=body["trigger"])
    assert trigger.scope == "ci_default_branch" and not trigger.is_human and trigger.actor == ""
    other = example("check_run", "completed")  # head_branch "changes", on PR #2
    body = processed(post(client, "check_run", other))
    # CI on a pull request's head is never a candidate; no ticket follows PR #2 here.
    assert body["outcome"] == "ignored" and body["reason"] == "pull_request_not_followed"
    assert body["trigger"] is None
    gh.config["default_branch"] = "master"
    gh.save()
    run = example("workflow_run", "completed", 1)
    run["repository"]["full_name"] = REPO
    body = processed(post(client, "workflow_run", run))
    assert Trigger.objects.get(pk=body["trigger"]).meta["conclusion"] == "success"


@pytest.mark.parametrize("event", ["push", "star"])
def test_other_events_are_answered_and_recorded_as_ignored(client, gh, event):
    body = processed(post(client, event, example(event)))
    assert (body["outcome"], body["reason"]) == ("ignored", "event_not_handled")
    assert not Trigger.objects.exists()
    assert health(gh)["rejected"] == {"event_not_handled": 1}


def test_unhandled_actions_are_ignored_with_a_reason(client, gh):
    body = processed(post(client, "issues", example("issues", "labeled")))
    assert (body["outcome"], body["reason"]) == ("ignored", "action_not_handled")


def test_ping_answers_200_and_stores_nothing(client, gh):
    response = post(client, "ping", example("ping"))
    assert response.status_code == 200
    assert not Delivery.objects.exists()


def test_wrong_or_missing_signature_is_401_and_stores_nothing(client, gh):
    assert post(client, "issues", example("issues", "opened"), secret="wrong").status_code == 401
    body, headers = signed("issues", example("issues", "opened"), SECRET)
    del headers["HTTP_X_HUB_SIGNATURE_256"]
    response = client.post("/hooks/github/gh", data=body, content_type="application/json",
                           **headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    # A body changed after signing fails too.
    body, headers = signed("issues", example("issues", "opened"), SECRET)
    response = client.post("/hooks/github/gh", data=body + b" ",
                           content_type="application/json", **headers)
    assert response.status_code == 401
    assert not Delivery.objects.exists() and not Trigger.objects.exists()
    assert health(gh)["rejected"] == {"bad_signature": 2, "missing_signature": 1}


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b"", b"{\"a\": 1"])
def test_malformed_body_is_400_and_stores_nothing(client, gh, body):
    response = post(client, "issues", body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert not Delivery.objects.exists()


def test_missing_event_or_delivery_header_is_400(client, gh):
    body, headers = signed("issues", example("issues", "opened"), SECRET)
    del headers["HTTP_X_GITHUB_DELIVERY"]
    assert client.post("/hooks/github/gh", data=body, content_type="application/json",
                       **headers).status_code == 400
    assert not Delivery.objects.exists()


def test_oversized_body_is_413(client, gh):
    body = b"{" + b" " * (25 * 1024 * 1024 + 1) + b"}"
    response = post(client, "issues", body)
    assert response.status_code == 413
    assert not Delivery.objects.exists()


def test_unknown_disabled_or_other_kind_source_is_404(client, gh):
    assert post(client, "issues", example("issues", "opened"), slug="nope").status_code == 404
    Source.objects.create(kind="lark", slug="lk", name="Lark")
    assert post(client, "issues", example("issues", "opened"), slug="lk").status_code == 404
    gh.enabled = False
    gh.save()
    assert post(client, "issues", example("issues", "opened")).status_code == 404
    assert not Delivery.objects.exists()


def test_get_is_405_not_500(client, gh):
    assert client.get("/hooks/github/gh").status_code == 405


def test_path_with_or_without_trailing_slash(client, gh):
    assert post(client, "ping", example("ping"), path="/hooks/github/gh/").status_code == 200
    assert post(client, "ping", example("ping"), path="/hooks/github/gh").status_code == 200


def test_form_encoded_delivery_is_accepted(client, gh):
    from urllib.parse import urlencode

    payload = example("issues", "opened")
    body = urlencode({"payload": json.dumps(payload)}).encode()
    _, headers = signed("issues", body, SECRET)
    response = client.post("/hooks/github/gh", data=body,
                           content_type="application/x-www-form-urlencoded", **headers)
    assert processed(response)["trigger"]


def test_same_delivery_twice_makes_one_trigger(client, gh):
    payload = example("issue_comment", "created")
    first = post(client, "issue_comment", payload, delivery="d-1")
    second = post(client, "issue_comment", payload, delivery="d-1")
    assert first.status_code == 202 and second.status_code == 200
    assert second.json() == {"duplicate": True, "delivery": "d-1"}
    process.drain()
    assert Trigger.objects.count() == 1 and Delivery.objects.count() == 1


def test_the_same_comment_under_a_new_delivery_id_makes_no_second_trigger(client, gh):
    payload = example("issue_comment", "created")
    assert processed(post(client, "issue_comment", payload, delivery="d-1"))["trigger"]
    # A new delivery id is stored and answered at once; processing finds the trigger id
    # seen before and records the delivery as a duplicate.
    again = processed(post(client, "issue_comment", payload, delivery="d-2"))
    assert (again["outcome"], again["reason"], again["trigger"]) == (
        "duplicate", "already_seen", None)
    assert Trigger.objects.count() == 1


def test_the_agents_own_messages_are_dropped(client, gh):
    payload = example("issue_comment", "created")
    payload["sender"]["login"] = "amux-bot[bot]"
    body = processed(post(client, "issue_comment", payload))
    assert (body["outcome"], body["reason"]) == ("ignored", "own_message")
    assert not Trigger.objects.exists()


def test_addressed_when_the_handle_is_mentioned_outside_quotes(client, gh):
    payload = example("issue_comment", "created")
    payload["comment"]["body"] = "@amux-bot could you fix the flaky test?"
    addressed = Trigger.objects.get(pk=processed(post(client, "issue_comment", payload))["trigger"])
    assert addressed.addressed
    quoted = example("issue_comment", "created", 1)
    quoted["comment"]["id"] += 7
    quoted["comment"]["body"] = "> @amux-bot could you\n\nno, and `@amux-bot` in code"
    trigger = Trigger.objects.get(pk=processed(post(client, "issue_comment", quoted))["trigger"])
    assert not trigger.addressed


def test_bots_by_sender_type_and_by_the_bot_list(client, gh):
    payload = example("issue_comment", "created")
    payload["sender"].update(login="dependabot[bot]", type="Bot")
    trigger = Trigger.objects.get(pk=processed(post(client, "issue_comment", payload))["trigger"])
    assert trigger.is_bot and not trigger.is_human
    gh.config["bots"] = ["ci-helper"]
    gh.save()
    other = example("issue_comment", "created", 1)
    other["sender"]["login"] = "ci-helper"
    other["comment"]["id"] += 7
    trigger = Trigger.objects.get(pk=processed(post(client, "issue_comment", other))["trigger"])
    assert trigger.is_bot


def test_repository_not_configured_is_ignored(client, gh):
    payload = example("issues", "opened")
    payload["repository"]["full_name"] = "someone/else"
    body = processed(post(client, "issues", payload))
    assert body["reason"] == "repo_not_configured"


def test_a_crash_after_storing_loses_nothing(client, gh):
    """Stored but not processed (the process died after the answer): the sweep processes
    it, and a redelivery of the same id creates nothing new."""
    payload = example("issues", "opened")
    pk, created = process.delivery_received(
        source_id=gh.pk, delivery_id="crash-1", event="issues",
        mailbox=f"gh:{REPO}#{payload['issue']['number']}", headers={},
        body=json.dumps(payload).encode(),
    )
    assert created and not Trigger.objects.exists()
    assert health(gh)["unprocessed"] == 1
    assert process.process_pending() == 1
    assert Trigger.objects.get().scope == "issue_new"
    assert post(client, "issues", payload, delivery="crash-1").json() == {
        "duplicate": True, "delivery": "crash-1"}
    assert Trigger.objects.count() == 1


def test_deliveries_of_one_thread_are_processed_in_order(gh):
    mailbox = f"gh:{REPO}#1"
    for i in range(3):
        payload = example("issue_comment", "created")
        payload["comment"]["id"] = 10 + i
        process.delivery_received(source_id=gh.pk, delivery_id=f"o-{i}", event="issue_comment",
                                 mailbox=mailbox, headers={}, body=json.dumps(payload).encode())
    process.process_pending()
    ids = list(Trigger.objects.order_by("pk").values_list("external_id", flat=True))
    assert ids == ["issue_comment:10", "issue_comment:11", "issue_comment:12"]


def test_the_gate_decides_and_an_explicit_request_opens_a_ticket(client, gh):
    from policy import services

    services.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["Codertocat"],
        "rows": {"comment": {"addressed": True, "unaddressed_allowed": False,
                             "unaddressed_anyone": False}}}}}, None)
    payload = example("issue_comment", "created")
    payload["comment"]["body"] = "@amux-bot please fix the typo"
    body = processed(post(client, "issue_comment", payload))
    assert body["outcome"] == "admitted" and body["reason"] is None
    trigger = Trigger.objects.get(pk=body["trigger"])
    assert (trigger.decision, trigger.strength) == ("explicit", "explicit")
    assert trigger.rule and trigger.policy_version == services.current().version
    assert trigger.disposition == "admitted"  # routed: a ticket was opened
    assert Ticket.objects.get().thread == trigger.thread
    unaddressed = example("issue_comment", "created", 1)
    unaddressed["comment"]["id"] += 7
    body = processed(post(client, "issue_comment", unaddressed))
    assert body["outcome"] == "ignored" and body["reason"]
    assert Ticket.objects.count() == 1


def test_each_delivery_is_decided_under_the_version_current_when_it_arrives(client, gh):
    from policy import services

    rows = {"comment": {"addressed": True, "unaddressed_allowed": False,
                        "unaddressed_anyone": False}}
    first = services.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["someone-else"], "rows": rows}}}, None).version
    payload = example("issue_comment", "created")
    payload["comment"]["body"] = "@amux-bot please fix the typo"
    body = processed(post(client, "issue_comment", payload))
    assert body["outcome"] == "ignored"
    assert Trigger.objects.get(pk=body["trigger"]).policy_version == first
    second = services.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["Codertocat"], "rows": rows}}}, first).version
    payload["comment"]["id"] += 1
    body = processed(post(client, "issue_comment", payload))
    assert body["outcome"] == "admitted"
    assert Trigger.objects.get(pk=body["trigger"]).policy_version == second


def test_a_delivery_costs_one_query_and_its_processing_a_bounded_number(client, gh):
    """The answer: the delivery's INSERT, which also checks that the source row read for an
    earlier delivery is unchanged (savepoints aside: the test's transaction needs them,
    production runs it in autocommit). The drainer's processing:
    the pending heads, the policy version, the source, the mailbox lock with its check,
    the pending rows, the thread, its subscription, the trigger, the delivery's update
    (plus savepoints and BEGIN/COMMIT on PostgreSQL). A regression here is the ingest
    benchmark's."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from policy import services

    services.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["Codertocat"], "rows": {"comment": {"addressed": True}}}}}, None)
    payload = example("issue_comment", "created")
    processed(post(client, "issue_comment", payload))  # compiles the current version once
    payload["comment"]["id"] += 1
    payload["issue"]["number"] += 1

    def statements(captured):
        return [q["sql"].split()[0].upper() for q in captured.captured_queries
                if "SAVEPOINT" not in q["sql"].upper()]

    with CaptureQueriesContext(connection) as answering:
        response = post(client, "issue_comment", payload)
    assert statements(answering) == ["INSERT"]
    with CaptureQueriesContext(connection) as processing:
        outcome = processed(response)
    assert (outcome["outcome"], outcome["reason"]) == ("ignored", "not_addressed")
    # ten for the drainer (the last an empty second round), one for `processed`'s read
    assert len(statements(processing)) <= 11
