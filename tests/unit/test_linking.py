"""Which ticket a pull request joins, GitHub's closing keywords, CI dedupe keys, endings."""

import pytest

from intake.sources.github_ci import CiResult, ci_outcome, ci_text, ci_trigger_id, closed_issues
from tickets.core.linking import (
    Candidate,
    PullFacts,
    pr_for_commit,
    pr_state_after,
    short_name_of_branch,
    ticket_branch,
    ticket_to_link,
)
from tickets.core.routing import EndFacts, end_reason

REPO = "octo/app"


@pytest.mark.parametrize("keyword", ["close", "closes", "closed", "fix", "fixes", "fixed",
                                     "resolve", "resolves", "resolved", "CLOSES", "Fixes"])
def test_every_closing_keyword_closes_the_issue(keyword):
    assert closed_issues(f"{keyword} #12", REPO) == [12]


@pytest.mark.parametrize("text,expected", [
    ("Fixes: #7", [7]),
    ("fixes:#7", [7]),
    ("This PR fixes #7 and resolves octo/app#9.", [7, 9]),
    ("Closes OCTO/App#3", [3]),
    ("(closes #4)", [4]),
    ("closes #4, closes #4", [4]),
    ("Title\n\nResolved #5\n", [5]),
])
def test_closing_references_in_text(text, expected):
    assert closed_issues(text, REPO) == expected


@pytest.mark.parametrize("text", [
    "fixes-#3",  # the keyword must stand alone
    "prefix#3",
    "fixes prefix#3",
    "see #3",
    "refixes #3",
    "fixes #3abc",
    "fixes other/repo#3",  # another repository
    "fixes octo/app2#3",
    "fixes #",
    "fix#3",
    "",
])
def test_what_closes_nothing(text):
    assert closed_issues(text, REPO) == []


def test_the_tickets_branch_names_its_short_name():
    assert ticket_branch("t7-fix-the-crash") == "amux/t7-fix-the-crash"
    assert short_name_of_branch("amux/t7-fix-the-crash") == "t7-fix-the-crash"
    assert short_name_of_branch("feature/t7") is None
    assert short_name_of_branch("amux/") is None
    assert short_name_of_branch("amux/a/b") is None


def test_the_tickets_own_branch_wins_over_a_closing_keyword():
    pr = PullFacts("open", "amux/t1-x", (2,))
    assert ticket_to_link(pr, Candidate(1, False), [Candidate(2, False)]) == 1
    assert ticket_to_link(pr, None, [Candidate(2, False), Candidate(3, False)]) == 2


def test_ended_tickets_and_closed_unmerged_prs_link_nothing():
    assert ticket_to_link(PullFacts("open"), Candidate(1, True), [Candidate(2, True)]) is None
    assert ticket_to_link(PullFacts("open"), Candidate(1, True), [Candidate(2, False)]) == 2
    assert ticket_to_link(PullFacts("closed"), Candidate(1, False), []) is None
    assert ticket_to_link(PullFacts("merged"), None, [Candidate(2, False)]) == 2
    assert ticket_to_link(PullFacts("open"), None, []) is None


def test_a_closed_pr_leaves_the_ticket_open_while_another_is():
    assert pr_state_after(merged=True, other_open=True) == "merged"
    assert pr_state_after(merged=False, other_open=True) == "open"
    assert pr_state_after(merged=False, other_open=False) == "closed"


def run(name="build", conclusion="failure", sha="a" * 40, summary=False):
    return CiResult(REPO, sha, name, conclusion, "https://ci/1", summary=summary)


def test_one_failure_per_commit_and_check_name_one_success_per_commit():
    assert ci_trigger_id(run()) == ci_trigger_id(run())  # a redelivery, a second run
    assert ci_trigger_id(run()) != ci_trigger_id(run(name="lint"))
    assert ci_trigger_id(run()) != ci_trigger_id(run(sha="b" * 40))
    passed = ci_trigger_id(run("CI", "success", summary=True))
    assert passed == ci_trigger_id(run("other workflow", "success", summary=True))
    assert passed != ci_trigger_id(run("CI", "success", sha="b" * 40, summary=True))


def test_only_suites_and_workflows_report_success_and_some_outcomes_say_nothing():
    assert ci_outcome(run(conclusion="success")) is None  # one check run passing
    assert ci_outcome(run(conclusion="success", summary=True)) == "passed"
    for quiet in ("cancelled", "skipped", "neutral", "stale", ""):
        assert ci_trigger_id(run(conclusion=quiet)) is None
    for failed in ("failure", "timed_out", "action_required", "startup_failure", "error"):
        assert ci_outcome(run(conclusion=failed)) == "failed"
    assert ci_trigger_id(run(sha="")) is None


def test_the_input_names_the_check_and_its_link():
    text = ci_text(run("unit tests"))
    assert "unit tests" in text and "failure" in text and "https://ci/1" in text
    assert "aaaaaaa" in text
    assert "passed" in ci_text(run("CI", "success", summary=True))


def test_a_status_finds_its_pull_request_by_commit_then_branch():
    prs = [("o/r#1", "feature", "c1"), ("o/r#2", "amux/t2", "c2")]
    assert pr_for_commit("c2", ["main"], prs) == "o/r#2"
    assert pr_for_commit("zz", ["main", "feature"], prs) == "o/r#1"
    assert pr_for_commit("zz", ["main"], prs) is None


def test_the_issue_closed_ends_a_ticket_only_without_an_open_pr():
    assert end_reason(EndFacts(False, False, False, issue_closed=True)) == "issue_closed"
    assert end_reason(EndFacts(False, False, False, issue_closed=True, pr_open=True)) is None
    assert end_reason(EndFacts(False, False, True, issue_closed=True)) is None
    assert end_reason(EndFacts(True, False, False, merged=True)) == "merged"
    assert end_reason(EndFacts(True, False, False)) == "pr_closed"
    assert end_reason(EndFacts(False, False, False)) is None
