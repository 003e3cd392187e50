"""What a ticket hears from its pull request, and how it ends: signed webhooks (real
example payloads) through the HTTP endpoint, the outbox drained by the real drainer."""

from __future__ import annotations

import pytest

from effects import outbox
from effects.models import Effect
from intake.models import Source, Thread
from intake.sources.github import GitHub
from policy import services as policy_services
from tests.support.github_payloads import example, signed
from tests.support.intake import drained, processed
from tickets.actions import executor
from tickets.models import Assignment, Input, Subscription, Ticket

pytestmark = pytest.mark.django_db

SECRET = "It's a Secret to Everybody"
REPO = "Codertocat/Hello-World"
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"  # PR #2's head in the examples


@pytest.fixture
def gh(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    config = GitHub.validate_config({"repo": [REPO], "handle": "amux-bot"})
    source = Source(kind="github", slug="gh", name="GitHub", config=config)
    source.secrets = {"webhook_secret": SECRET, "token": "ghp_test"}
    source.save()
    policy_services.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["Codertocat"],
        "rows": {"issue_new": {"addressed": True}}}}}, None)
    return source


def post(client, event, payload, delivery=None):
    body, headers = signed(event, payload, SECRET, delivery)
    return drained(client.post("/hooks/github/gh", data=body,
                               content_type="application/json", **headers))


@pytest.fixture
def ticket(client, gh):
    """Ticket for issue #1, asked for by an allowed person; its first dispatch has run
    (no worker is configured here, so the run fails, and nothing is in flight)."""
    issue = example("issues", "opened")
    issue["issue"]["body"] = "@amux-bot please fix the spelling"
    assert processed(post(client, "issues", issue))["outcome"] == "admitted"
    outbox.drain(seconds=10)
    ticket = Ticket.objects.get()
    assert ticket.thread.key == f"{REPO}#1"
    return ticket


def pull_request(action="opened", *, body="", head="changes", sender="alice", merged=False):
    payload = example("pull_request", action)
    pr = payload["pull_request"]
    pr["body"] = body
    pr["head"]["ref"] = head
    pr["head"]["label"] = f"Codertocat:{head}"
    if action == "closed":
        pr["merged"] = merged
    payload["sender"].update(login=sender, type="User")
    return payload


def inputs(ticket):
    return list(Input.objects.filter(ticket=ticket).order_by("pk"))


def ended(ticket):
    ticket.refresh_from_db()
    return ticket.ended_at is not None


def last_run(ticket):
    """The ticket's newest run, once the outbox settled it (a person's message on a
    failed ticket dispatches it again)."""
    outbox.drain(seconds=10)
    return Assignment.objects.filter(ticket=ticket).latest("pk")


def link_by_hand(client, ticket):
    response = post(client, "pull_request", pull_request(body="Typo fix.\n\nCloses #1"))
    assert response.status_code == 202
    pr_thread = Thread.objects.get(source=ticket.thread.source, key=f"{REPO}#2")
    assert Subscription.objects.get(thread=pr_thread).ticket_id == ticket.pk
    return pr_thread


def test_a_hand_opened_pr_that_closes_the_issue_joins_and_its_merge_ends_the_ticket(
        client, ticket):
    link_by_hand(client, ticket)
    ticket.refresh_from_db()
    assert ticket.pr_state == "open" and ticket.pr_url.endswith("/pull/2")
    # The opening reached the worker as a person's message on a followed thread.
    (opened,) = inputs(ticket)
    assert opened.author == "alice" and opened.is_human and "Closes #1" in opened.text
    assignment = last_run(ticket)
    executor.report_received(assignment_id=assignment.pk, status="done", text="seen")
    outbox.drain(seconds=10)
    response = post(client, "pull_request", pull_request("closed", body="Closes #1",
                                                         merged=True, sender="bob"))
    assert processed(response)["reason"] == "pr_merged"
    assert ended(ticket) and ticket.end_reason == "merged" and ticket.pr_state == "merged"


def test_a_pr_whose_head_is_the_tickets_branch_joins_it_whoever_opened_it(client, ticket):
    payload = pull_request(head=f"amux/{ticket.short_name}", body="no keywords here")
    post(client, "pull_request", payload)
    pr_thread = Thread.objects.get(key=f"{REPO}#2")
    assert Subscription.objects.get(thread=pr_thread).ticket_id == ticket.pk
    assert pr_thread.meta["head_sha"] == HEAD and pr_thread.meta["pr_state"] == "open"
    ticket.refresh_from_db()
    assert ticket.pr_state == "open"


def test_an_unrelated_pr_joins_nothing(client, ticket):
    post(client, "pull_request", pull_request(body="Fixes other/repo#1, see #1"))
    assert not Subscription.objects.filter(thread__key=f"{REPO}#2").exists()
    assert not inputs(ticket)


def test_the_agents_own_pr_is_linked_by_its_branch_though_its_message_is_dropped(
        client, ticket):
    payload = pull_request(head=f"amux/{ticket.short_name}", sender="amux-bot[bot]")
    body = processed(post(client, "pull_request", payload))
    assert body["reason"] == "own_message"
    assert Subscription.objects.get(thread__key=f"{REPO}#2").ticket_id == ticket.pk
    assert not inputs(ticket)


def check_run(name="Octocoders-linter", conclusion="failure", run_id=None):
    payload = example("check_run", "completed", 0)  # PR #2, failure
    run = payload["check_run"]
    run["name"], run["conclusion"] = name, conclusion
    if run_id is not None:
        run["id"] = run_id
        run["html_url"] = f"https://github.com/{REPO}/runs/{run_id}"
    return payload


def test_ci_failure_on_the_pr_head_is_one_input_per_check_name(client, ticket):
    link_by_hand(client, ticket)
    before = len(inputs(ticket))
    failing = check_run()
    url = failing["check_run"]["html_url"]
    assert post(client, "check_run", failing, delivery="ci-1").status_code == 202
    (ci,) = inputs(ticket)[before:]
    assert "Octocoders-linter" in ci.text and url in ci.text and HEAD[:7] in ci.text
    assert not ci.is_human and ci.author == ""
    assert Effect.objects.filter(kind="deliver", key=f"input:{ci.pk}").exists()
    # A redelivery, and a second failing run of the same check: nothing more.
    assert post(client, "check_run", failing, delivery="ci-1").json()["duplicate"] is True
    post(client, "check_run", check_run(run_id=999))
    assert len(inputs(ticket)) == before + 1
    # Another check's failure is news.
    post(client, "check_run", check_run(name="unit tests", run_id=1000))
    assert len(inputs(ticket)) == before + 2
    assert "unit tests" in inputs(ticket)[-1].text
    # A failing suite has no page of its own: its commit's checks page is the link.
    suite = example("check_suite", "completed", 0)
    suite["check_suite"]["conclusion"] = "failure"
    post(client, "check_suite", suite)
    assert len(inputs(ticket)) == before + 3
    assert f"https://github.com/{REPO}/commit/{HEAD}/checks" in inputs(ticket)[-1].text


def test_ci_success_is_one_input_per_head_commit(client, ticket):
    link_by_hand(client, ticket)
    before = len(inputs(ticket))
    # A check run passing tells nothing; its suite does, once.
    post(client, "check_run", check_run(conclusion="success", run_id=5))
    assert len(inputs(ticket)) == before
    suite = example("check_suite", "completed", 0)  # PR #2, success
    post(client, "check_suite", suite)
    (passed,) = inputs(ticket)[before:]
    assert passed.text.startswith(f"CI passed on {HEAD[:7]}")
    run = example("workflow_run", "completed", 2)  # success, names PR #2
    run["repository"]["full_name"] = REPO
    run["workflow_run"]["head_sha"] = HEAD
    post(client, "workflow_run", run)
    suite["check_suite"]["id"] += 1
    post(client, "check_suite", suite)
    assert len(inputs(ticket)) == before + 1


def test_a_commit_status_finds_the_pr_by_its_branch(client, ticket):
    link_by_hand(client, ticket)
    before = len(inputs(ticket))
    status = example("status", index=0)  # branches master, changes, gh-pages; success
    status["state"], status["target_url"] = "failure", "https://ci.example/build/7"
    status["context"] = "ci/jenkins"
    body = processed(post(client, "status", status))
    assert body["trigger"]
    (ci,) = inputs(ticket)[before:]
    assert "ci/jenkins" in ci.text and "https://ci.example/build/7" in ci.text
    # A status on a branch no followed PR has concerns no ticket and leaves no trigger.
    status["branches"] = [{"name": "gh-pages", "commit": {"sha": "x"}}]
    status["sha"] = "f" * 40
    body = processed(post(client, "status", status))
    assert (body["reason"], body["trigger"]) == ("pull_request_not_followed", None)


def test_reviews_and_review_comments_reach_the_ticket(client, ticket):
    link_by_hand(client, ticket)
    before = len(inputs(ticket))
    review = example("pull_request_review", "submitted")
    review["review"]["state"] = "changes_requested"
    review["review"]["body"] = "Please keep the old wording in the title."
    post(client, "pull_request_review", review)
    comment = example("pull_request_review_comment", "created", 1)
    post(client, "pull_request_review_comment", comment)
    got = inputs(ticket)[before:]
    assert len(got) == 2 and all(i.is_human for i in got)
    assert "requested changes" in got[0].text and "old wording" in got[0].text
    assert "README.md:265" in got[1].text and comment["comment"]["html_url"] in got[1].text
    # A review that only holds line comments adds nothing of its own.
    empty = example("pull_request_review", "submitted", 1)
    assert processed(post(client, "pull_request_review", empty))["reason"] == "review_without_text"


def issue_closed():
    payload = example("issues", "reopened")  # the corpus has no `closed`: same issue, closed
    payload["action"] = "closed"
    payload["issue"]["state"] = "closed"
    assert payload["issue"]["number"] == 1
    return payload


def test_the_issue_closed_with_no_open_pr_ends_the_ticket(client, ticket):
    body = processed(post(client, "issues", issue_closed()))
    assert body["reason"] == "issue_closed"
    assert ended(ticket) and ticket.end_reason == "issue_closed"


def test_the_issue_closed_while_a_pr_is_open_waits_for_the_pr(client, ticket):
    link_by_hand(client, ticket)
    assignment = last_run(ticket)
    executor.report_received(assignment_id=assignment.pk, status="done", text="seen")
    post(client, "issues", issue_closed())
    assert not ended(ticket)
    post(client, "pull_request", pull_request("closed", body="Closes #1"))
    assert ended(ticket) and ticket.end_reason == "pr_closed"


def test_ci_after_the_end_is_recorded_and_revives_nothing(client, ticket):
    link_by_hand(client, ticket)
    executor.report_received(assignment_id=last_run(ticket).pk,
                           status="done", text="seen")
    post(client, "pull_request", pull_request("closed", body="Closes #1", merged=True))
    assert ended(ticket)
    runs = Assignment.objects.filter(ticket=ticket).count()
    post(client, "check_run", check_run(name="late check"))
    late = inputs(ticket)[-1]
    assert "late check" in late.text
    assert not Effect.objects.filter(kind="deliver", key=f"input:{late.pk}").exists()
    assert ended(ticket) and Assignment.objects.filter(ticket=ticket).count() == runs


def test_closing_one_of_two_open_prs_leaves_the_ticket_open(client, ticket):
    link_by_hand(client, ticket)
    second = pull_request(head=f"amux/{ticket.short_name}", sender="amux-bot[bot]")
    second["number"] = second["pull_request"]["number"] = 3
    second["pull_request"]["id"] += 1
    post(client, "pull_request", second)
    executor.report_received(assignment_id=last_run(ticket).pk,
                           status="done", text="seen")
    post(client, "pull_request", pull_request("closed", body="Closes #1"))
    assert not ended(ticket)
    ticket.refresh_from_db()
    assert ticket.pr_state == "open"


def test_ci_set_off_by_the_agents_own_push_still_reaches_the_ticket(client, ticket):
    link_by_hand(client, ticket)
    before = len(inputs(ticket))
    run = example("workflow_run", "completed", 2)  # names PR #2
    run["repository"]["full_name"] = REPO
    run["workflow_run"].update(head_sha=HEAD, conclusion="failure", name="CI")
    run["sender"].update(login="amux-bot[bot]", type="Bot")  # whoever pushed
    post(client, "workflow_run", run)
    (ci,) = inputs(ticket)[before:]
    assert "CI" in ci.text and run["workflow_run"]["html_url"] in ci.text


def test_ci_in_progress_or_cancelled_says_nothing(client, ticket):
    link_by_hand(client, ticket)
    before = len(inputs(ticket))
    assert processed(post(client, "check_run", example("check_run", "created")))["reason"] == (
        "action_not_handled")
    post(client, "check_run", check_run(conclusion="cancelled", run_id=77))
    status = example("status", index=0)
    status["state"] = "pending"
    assert processed(post(client, "status", status))["reason"] == "ci_not_final"
    assert len(inputs(ticket)) == before
