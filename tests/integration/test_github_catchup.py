"""Catch-up after downtime: polling through PyGithub; the cursor moves only after the
triggers are stored, and webhook and poll of the same object make one trigger."""

from __future__ import annotations

import pytest

from tests.support.github_payloads import signed
from tests.support.recording_server import RecordingServer
from tickets import intake
from tickets.models import Source, Trigger
from tickets.sources.github import GitHub

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
        srv.state.issues[(REPO, 3)] = {"title": "A PR", "body": "", "is_pr": True,
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
    assert intake.poll(gh) == 3
    triggers = {t.external_id: t for t in Trigger.objects.all()}
    assert set(triggers) == {"issue:502", "pull_request:9003", "issue_comment:77"}
    assert triggers["issue:502"].addressed and triggers["issue:502"].scope == "issue_new"
    assert triggers["pull_request:9003"].scope == "pr_new"
    assert triggers["issue_comment:77"].thread.key == f"{REPO}#2"
    gh.refresh_from_db()
    assert gh.health["cursors"]["poll"]["value"] == "2026-11-04T00:00:00+00:00"
    assert intake.poll(gh) == 0 or Trigger.objects.count() == 3
    assert Trigger.objects.count() == 3


def test_a_webhook_for_a_polled_comment_makes_no_second_trigger(client, gh, server):
    intake.poll(gh)
    payload = {"action": "created", "comment": {"id": 77, "body": "any news?"},
               "issue": {"number": 2, "title": "Crash on start"},
               "repository": {"full_name": REPO}, "sender": {"login": "alice", "type": "User"}}
    body, headers = signed("issue_comment", payload, "s")
    response = client.post("/hooks/github/gh", data=body, content_type="application/json",
                           **headers)
    assert response.json()["duplicate"] is True and Trigger.objects.count() == 3


def test_the_cursor_stays_when_the_poll_fails(gh, server):
    server.state.fail_next.append(("GET", rf"/repos/{REPO}/issues/comments", 500))
    with pytest.raises(Exception):  # noqa: B017 - PyGithub's error for a 500
        intake.poll(gh)
    gh.refresh_from_db()
    assert gh.health["cursors"]["poll"]["value"] == "2026-10-15T00:00:00+00:00"
