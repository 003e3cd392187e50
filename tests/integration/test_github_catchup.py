"""Catch-up after downtime: polling through PyGithub; the cursor moves only after the
triggers are stored, and webhook and poll of the same object make one trigger."""

from __future__ import annotations

import pytest

from intake import poll
from intake.models import Source, Trigger
from intake.sources.github import GitHub
from tests.support.github_payloads import signed
from tests.support.intake import processed
from tests.support.recording_server import RecordingServer

pytestmark = pytest.mark.django_db

REPO = "octo/demo"


@pytest.fixture
def server():
    with RecordingServer() as srv:
        srv.state.issues[(REPO, 1)] = {"title": "Old", "body": "",
                                       "created_at": "2026-10-01T00:00:00Z",
                                       "updated_at": "2026-10-01T00:00:00Z"}
        srv.state.issues[(REPO, 2)] = {"title": "Crash on start", "body": "@amux-bot help",
                                       "created_at": "2026-11-02T00:00:00Z",
                                       "updated_at": "2026-11-02T00:00:00Z"}
        srv.state.pulls[(REPO, 3)] = {"title": "A PR", "body": "",
                                      "created_at": "2026-11-03T00:00:00Z",
                                      "updated_at": "2026-11-03T00:00:00Z"}
        srv.state.comments[(REPO, 2)] = [{
            "id": 77, "body": "any news?", "user": {"login": "alice", "type": "User"},
            "created_at": "2026-11-04T00:00:00Z", "updated_at": "2026-11-04T00:00:00Z"}]
        yield srv


@pytest.fixture
def gh(server):
    config = GitHub.validate_config({"repo": [REPO], "api_url": server.url, "handle": "amux-bot"})
    source = Source(kind="github", slug="gh", name="GitHub", config=config,
                    health={"cursors": {"poll": {"value": "2026-10-15T00:00:00+00:00"}}})
    source.secrets = {"webhook_secret": "s", "token": "t"}
    source.save()
    return source


def test_poll_stores_what_was_missed_then_moves_the_cursor(gh, server):
    assert poll.poll(gh) == 3
    triggers = {t.external_id: t for t in Trigger.objects.all()}
    assert set(triggers) == {"issue:502", "pull_request:9003", "issue_comment:77"}
    assert triggers["issue:502"].addressed and triggers["issue:502"].scope == "issue_new"
    assert triggers["pull_request:9003"].scope == "pr_new"
    assert triggers["issue_comment:77"].thread.key == f"{REPO}#2"
    gh.refresh_from_db()
    assert gh.health["cursors"]["poll"]["value"] == "2026-11-04T00:00:00+00:00"
    assert poll.poll(gh) == 0 or Trigger.objects.count() == 3
    assert Trigger.objects.count() == 3


def test_a_webhook_for_a_polled_comment_makes_no_second_trigger(client, gh, server):
    poll.poll(gh)
    payload = {"action": "created", "comment": {"id": 77, "body": "any news?"},
               "issue": {"number": 2, "title": "Crash on start"},
               "repository": {"full_name": REPO}, "sender": {"login": "alice", "type": "User"}}
    body, headers = signed("issue_comment", payload, "s")
    response = client.post("/hooks/github/gh", data=body, content_type="application/json",
                           **headers)
    # a new delivery id: stored, and processing finds the polled comment's trigger id
    assert processed(response)["outcome"] == "duplicate" and Trigger.objects.count() == 3


def test_the_cursor_stays_when_the_poll_fails(gh, server):
    server.state.fail_next.append(("GET", rf"/repos/{REPO}/issues/comments", 500))
    with pytest.raises(Exception):  # noqa: B017 - PyGithub's error for a 500
        poll.poll(gh)
    gh.refresh_from_db()
    assert gh.health["cursors"]["poll"]["value"] == "2026-10-15T00:00:00+00:00"


def test_a_failed_poll_says_what_failed_in_the_sources_health(gh, server, client, operator):
    for _ in range(4):  # a 502 each time PyGithub tries
        server.state.fail_next.append(("GET", rf"/repos/{REPO}/issues/comments", 502))
    assert poll.poll_all() == 0
    gh.refresh_from_db()
    error = gh.health["last_error"]
    assert error["reason"] == "poll_failed"
    assert error["message"].startswith("GithubException:") and "502" in error["message"]
    client.force_login(operator)
    page = client.get("/panel/sources/").content.decode()
    assert "poll_failed" in page and "GithubException:" in page


# --- what a ticket missed on its pull request while amux was down ----------------------

HEAD = "a1" * 20


@pytest.fixture
def ticket(gh, server, settings, tmp_path):
    """Issue #2 asks @amux-bot for help; the first catch-up finds it and opens a ticket
    (its first dispatch has run: no worker is configured, nothing is in flight)."""
    from effects import outbox
    from policy import services as policy_services
    from tickets.models import Ticket

    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    policy_services.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["octocat"], "rows": {"issue_new": {"addressed": True}}}}}, None)
    poll.poll(gh)
    outbox.drain(seconds=10)
    ticket = Ticket.objects.get()
    assert ticket.thread.key == f"{REPO}#2"
    return ticket


def later(day: int) -> str:
    return f"2026-11-{day:02d}T00:00:00Z"


def test_a_pr_merged_while_amux_was_down_is_found_and_ends_the_ticket(client, gh, server,
                                                                     ticket):
    # Opened by a person, merged, and the issue closed by the merge: all while down.
    server.state.pulls[(REPO, 4)] = {
        "title": "Fix the crash", "body": "Fixes #2", "state": "closed",
        "user": {"login": "alice", "type": "User"}, "head": {"ref": "fix-crash", "sha": HEAD},
        "created_at": later(5), "updated_at": later(6), "closed_at": later(6),
        "merged_at": later(6)}
    server.state.issues[(REPO, 2)].update(state="closed", closed_at=later(6),
                                          updated_at=later(6))
    poll.poll(gh)
    ticket.refresh_from_db()
    assert ticket.ended_at and ticket.end_reason == "merged" and ticket.pr_state == "merged"
    assert ticket.pr_url.endswith("/pull/4")
    # The webhook that was missed, delivered late: it changes nothing.
    from intake.models import Delivery

    stored = Delivery.objects.count()
    payload = {"action": "closed", "number": 4, "repository": {"full_name": REPO},
               "sender": {"login": "alice", "type": "User"},
               "pull_request": {"id": 9004, "number": 4, "state": "closed", "merged": True,
                                "title": "Fix the crash", "body": "Fixes #2",
                                "head": {"ref": "fix-crash", "sha": HEAD}}}
    body, headers = signed("pull_request", payload, "s")
    assert processed(client.post("/hooks/github/gh", data=body,
                                 content_type="application/json", **headers)
                     )["reason"] == "pr_merged"
    ticket.refresh_from_db()
    assert ticket.end_reason == "merged" and Delivery.objects.count() == stored + 1
    assert poll.poll(gh) >= 0 and Delivery.objects.count() == stored + 1


def test_a_missed_ci_failure_review_and_review_comment_are_found(client, gh, server, ticket):
    from tickets.models import Input, Subscription

    # The agent's pull request, on the ticket's branch: the catch-up links it.
    server.state.pulls[(REPO, 4)] = {
        "title": "Fix the crash", "body": "", "user": {"login": "amux-bot", "type": "Bot"},
        "head": {"ref": f"amux/{ticket.short_name}", "sha": HEAD},
        "created_at": later(5), "updated_at": later(5)}
    before = Input.objects.filter(ticket=ticket).count()  # alice's "any news?"
    poll.poll(gh)
    assert Subscription.objects.get(thread__key=f"{REPO}#4").ticket_id == ticket.pk
    assert Input.objects.filter(ticket=ticket).count() == before  # its own PR: no message
    # While amux is down: a check fails, a suite passes, a person reviews.
    run_url = f"https://github.example/{REPO}/runs/31"
    server.state.check_runs[(REPO, HEAD)] = [
        {"id": 31, "name": "build", "status": "completed", "conclusion": "failure",
         "head_sha": HEAD, "html_url": run_url, "pull_requests": []},
        {"id": 32, "name": "lint", "status": "in_progress", "conclusion": None,
         "head_sha": HEAD, "html_url": "x", "pull_requests": []}]
    server.state.statuses[(REPO, HEAD)] = [
        {"id": 41, "state": "error", "context": "ci/legacy",
         "target_url": "https://legacy.example/7", "description": "broken"}]
    server.state.reviews[(REPO, 4)] = [
        {"id": 51, "state": "CHANGES_REQUESTED", "body": "Please add a test.",
         "user": {"login": "bob", "type": "User"}, "submitted_at": later(7),
         "html_url": f"https://github.example/{REPO}/pull/4#pullrequestreview-51"}]
    server.state.review_comments[(REPO, 4)] = [
        {"id": 61, "body": "Typo here.", "path": "app.py", "line": 3,
         "user": {"login": "bob", "type": "User"}, "created_at": later(7),
         "updated_at": later(7), "html_url": f"https://github.example/{REPO}/pull/4#r61"}]
    server.state.pulls[(REPO, 4)]["updated_at"] = later(7)  # a review updates its PR
    poll.poll(gh)
    texts = list(Input.objects.filter(ticket=ticket).order_by("pk").values_list("text",
                                                                                 flat=True))
    texts = texts[before:]
    assert len(texts) == 4, texts
    assert "Please add a test." in texts[0] and "app.py:3" in texts[1]
    assert "build" in texts[2] and run_url in texts[2]
    assert "ci/legacy" in texts[3] and "https://legacy.example/7" in texts[3]
    # Polling again, and the webhook that was missed, add nothing.
    poll.poll(gh)
    payload = {"action": "completed", "repository": {"full_name": REPO},
               "sender": {"login": "amux-bot", "type": "Bot"},
               "check_run": {"id": 31, "name": "build", "status": "completed",
                             "conclusion": "failure", "head_sha": HEAD, "html_url": run_url,
                             "pull_requests": [{"number": 4, "head": {"sha": HEAD}}]}}
    body, headers = signed("check_run", payload, "s")
    response = client.post("/hooks/github/gh", data=body, content_type="application/json",
                           **headers)
    assert processed(response)["outcome"] == "duplicate"
    assert Input.objects.filter(ticket=ticket).count() == before + 4
    # The suite passing later is news once.
    server.state.check_suites[(REPO, HEAD)] = [
        {"id": 71, "status": "completed", "conclusion": "success", "head_sha": HEAD,
         "head_branch": f"amux/{ticket.short_name}", "app": {"name": "GitHub Actions"},
         "pull_requests": []}]
    poll.poll(gh)
    poll.poll(gh)
    assert Input.objects.filter(ticket=ticket).count() == before + 5
    assert Input.objects.filter(ticket=ticket).last().text.startswith(f"CI passed on {HEAD[:7]}")


def test_an_issue_closed_while_amux_was_down_ends_a_ticket_without_a_pr(gh, server, ticket):
    server.state.issues[(REPO, 2)].update(state="closed", closed_at=later(6),
                                          updated_at=later(6))
    poll.poll(gh)
    ticket.refresh_from_db()
    assert ticket.ended_at and ticket.end_reason == "issue_closed"
