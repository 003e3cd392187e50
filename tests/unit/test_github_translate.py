"""The GitHub plugin's translation of pull request feedback (pure: payload and config)."""

from __future__ import annotations

from intake.sources.base import Envelope, Ignored, TriggerFacts
from intake.sources.github import GitHub
from tests.support.github_payloads import example

REPO = "Codertocat/Hello-World"
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


def plug():
    return GitHub(GitHub.validate_config({"repo": [REPO], "handle": "amux-bot"}))


def translate(event, payload):
    p = plug()
    return p.translate(Envelope("event", "d", event, p.thread_of(event, payload), payload))


def test_a_pull_request_reports_its_head_state_and_the_issues_it_closes():
    payload = example("pull_request", "synchronize")
    payload["pull_request"]["body"] = "Fixes #1 and closes Codertocat/Hello-World#5"
    result = translate("pull_request", payload)
    assert isinstance(result, Ignored) and result.reason == "pr_updated"
    assert result.facts == {"pr_state": "open", "head_ref": "changes", "head_sha": HEAD,
                            "closes": [1, 5],
                            "pr_url": payload["pull_request"]["html_url"]}


def test_the_agents_own_pull_request_is_no_message_but_its_facts_hold():
    payload = example("pull_request", "closed")
    payload["pull_request"]["merged"] = True
    payload["sender"]["login"] = "amux-bot[bot]"
    result = translate("pull_request", payload)
    assert result.reason == "own_message" and result.facts["pr_state"] == "merged"


def test_ci_of_one_check_on_one_commit_has_one_id_whichever_event_or_poll_carried_it():
    run = example("check_run", "completed", 0)  # failure on PR #2
    first = translate("check_run", run)
    run["check_run"]["id"] += 1  # a re-run of the same check
    run["check_run"]["check_suite"]["pull_requests"] = []  # as the poll shapes it
    second = translate("check_run", run)
    assert isinstance(first, TriggerFacts) and first.scope == "ci_pull_request"
    assert first.external_id == second.external_id and first.thread == f"{REPO}#2"
    assert not first.is_human and "Octocoders-linter" in first.text


def test_a_status_names_no_pull_request_the_engine_finds_it():
    status = example("status", index=0)
    status["state"] = "failure"
    result = translate("status", status)
    assert result.thread == "" and result.meta["match_pr"] == {
        "repo": REPO, "sha": status["sha"], "branches": ["master", "changes", "gh-pages"]}


def test_default_branch_ci_stays_a_candidate_under_the_admission_table():
    suite = example("check_suite", "completed", 1)  # main, no PR
    result = translate("check_suite", suite)
    assert result.scope == "ci_default_branch"


def _installation(action, inst_id=7):
    return {"action": action,
            "installation": {"id": inst_id, "account": {"login": "Codertocat"},
                             "repository_selection": "selected"},
            "repositories": [{"full_name": "Codertocat/b"}, {"full_name": "Codertocat/a"}],
            "sender": {"login": "octocat"}}


def test_an_app_installation_is_a_fact_about_the_source_not_a_trigger():
    result = translate("installation", _installation("created"))
    assert (result.reason, result.source_facts) == ("app_installed", {
        "installation": {"state": "installed", "id": 7, "account": "Codertocat",
                         "repository_selection": "selected",
                         "repositories": ["Codertocat/a", "Codertocat/b"]},
        "provider": {"disconnected": False, "reason": ""}})
    assert translate("installation", _installation("deleted")).source_facts["provider"] == {
        "disconnected": True, "reason": "installation_deleted"}
    assert translate("installation", _installation("deleted")).source_facts[
        "installation"]["state"] == "removed"
    assert translate("installation", _installation("suspend")).reason == "app_suspended"


def test_an_installation_event_it_does_not_follow_changes_nothing():
    assert translate("installation", _installation("new_permissions_accepted")
                     ).reason == "action_not_handled"
    assert translate("installation", _installation("created", inst_id="7")
                     ).reason == "action_not_handled"
