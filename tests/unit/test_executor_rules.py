"""The rules behind tickets/actions: what an executor's facts change, the executor's last
word, evals under a new policy, the token hash (tickets/core; no database)."""

from datetime import UTC, datetime, timedelta

import pytest

from amux_common.ports import Event, Port, PortTaken
from tickets.core import answers, evals, failure, messages, notices, rules, runs, tokens
from tickets.core.errors import InvalidCommand
from tickets.core.routing import Route, disposition

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


# --- the executor's last word -----------------------------------------------------------


def test_the_last_word_is_a_report_that_is_not_progress_or_the_end_of_a_run_or_turn():
    reports = [("blocked", at(1)), ("progress", at(9))]
    assert answers.last_word(reports, [None, None]) == at(1)  # progress says nothing
    assert answers.last_word(reports, [at(3), None, None, at(5)]) == at(5)  # a turn's end
    assert answers.last_word([], [None]) is None


def test_a_person_spoke_after_the_last_word_only_when_later_or_when_nothing_was_said():
    assert answers.spoke_after(at(6), at(5))
    assert not answers.spoke_after(at(5), at(5))
    assert not answers.spoke_after(at(4), at(5))
    assert answers.spoke_after(at(1), None)  # the executor owes its first answer
    assert not answers.spoke_after(None, at(5))
    assert not answers.spoke_after(None, None)


# --- runs -------------------------------------------------------------------------------


def test_a_run_that_settled_is_not_started_or_ended_again():
    for state in ("ended", "failed"):
        assert runs.started(state, None, T0) is None
        assert runs.ended(state, reason="stopped", failed=False, failure=None, now=T0) is None


def test_a_started_run_keeps_its_first_start():
    assert runs.started("dispatching", None, at(2)) == {"state": "running", "started_at": at(2)}
    assert runs.started("running", at(1), at(2))["started_at"] == at(1)


def test_a_failed_run_keeps_its_failure_whole_and_a_bare_failure_is_a_dispatch_error():
    whole = runs.ended("running", reason="", failed=True,
                       failure=failure.Failure("workspace", "clone failed: " + "x" * 300), now=T0)
    assert whole["state"] == "failed" and whole["end_reason"] == "workspace"
    assert whole["failure_message"].endswith("x" * 300)
    bare = runs.ended("dispatching", reason="boom", failed=True, failure=None, now=T0)
    assert bare["failure_code"] == failure.DISPATCH_ERROR and bare["failure_message"] == "boom"
    done = runs.ended("running", reason="stopped", failed=False, failure=None, now=T0)
    assert done == {"state": "ended", "ended_at": T0, "end_reason": "stopped",
                    "failure_code": "", "failure_message": ""}


def test_the_end_of_a_turn_is_the_workers_word_and_a_failed_turn_fails_the_run():
    assert runs.turn_ended("completed", error_code="", error_message="", ended_at=at(3)) == {
        "last_turn_at": at(3)}
    failed = runs.turn_ended("failed", error_code="rate_limited", error_message="slow down",
                             ended_at=at(3))
    assert failed["state"] == "failed" and failed["ended_at"] == at(3)
    assert failed["failure_message"] == "slow down" and failed["failure_code"]


# --- evals ------------------------------------------------------------------------------


def test_an_accepted_candidate_becomes_work_only_in_auto_mode_on_a_free_thread():
    assert evals.finished("accept", acceptance="auto", thread_bound=False).open_ticket
    assert evals.finished("accept", acceptance="manual", thread_bound=False) == evals.Finished(
        False, "not_accepted")
    assert evals.finished("accept", acceptance="auto", thread_bound=True).disposition == (
        "not_accepted")
    assert evals.finished("decline", acceptance="auto", thread_bound=False).disposition == (
        "declined")
    assert evals.finished("needs_person", acceptance="auto", thread_bound=False).disposition == (
        "needs_person")


def test_an_unknown_eval_result_is_refused_by_name():
    with pytest.raises(InvalidCommand, match="maybe"):
        evals.check_result("maybe")


def test_a_new_policy_decides_a_running_eval_again_but_never_a_handed_back_trigger():
    def requeue(**kw):
        base = dict(state="running", eval_version="v1", new_version="v2", handed_back=False,
                    auto=True)
        return evals.requeue(**{**base, **kw})

    assert requeue() is evals.Requeue.DECIDE_AGAIN
    assert requeue(state="done") is evals.Requeue.KEEP
    assert requeue(eval_version="v2") is evals.Requeue.KEEP  # started under the new rules
    assert requeue(handed_back=True) is evals.Requeue.EVALUATE_AGAIN
    assert requeue(handed_back=True, auto=False) is evals.Requeue.DROP


def test_an_eval_is_assessed_once_per_eval():
    effect = evals.assess(12)
    assert (effect.kind, effect.key, effect.payload) == ("assess", "eval:12", {"eval": 12})


# --- what the routes write, titles, replies and notices --------------------------------


def test_each_route_has_the_disposition_the_panel_shows():
    assert disposition(Route.OPEN) == "admitted"
    assert disposition(Route.EVALUATE) == "evaluating"
    assert disposition(Route.FOLLOW_UP) == "follow_up"
    assert disposition(Route.NOT_ACCEPTED) == "not_accepted"


def test_a_new_tickets_title_falls_back_to_the_first_line_then_to_who_asked():
    assert rules.title_of("Login crash", "please fix", "issue", "octocat") == "Login crash"
    assert rules.title_of("", "  please fix\nthe crash", "issue", "octocat") == "please fix"
    assert rules.title_of("", "", "direct", "ann") == "direct from ann"


def test_a_reply_asked_again_is_the_same_message():
    assert rules.reply_key(4, "done") == rules.reply_key(4, "done")
    assert rules.reply_key(4, "done") != rules.reply_key(5, "done")
    key, message_id = rules.reply_key(4, "done")
    assert key.startswith("reply:4:") and message_id.startswith("reply-4-")


def test_only_blocked_and_failed_reports_with_words_are_relayed():
    assert messages.relayed("blocked", "need a key") and messages.relayed("failed", "x")
    assert not messages.relayed("blocked", "  ") and not messages.relayed("done", "merged")
    assert messages.question_text("Which?", ["a", "b"]) == "Which?\n- a\n- b"


def test_the_final_notice_says_what_ended_the_ticket():
    assert notices.result_text("Fix", "merged", "merged", "", "https://x/pull/1") == (
        "Fix: pull request merged. https://x/pull/1")
    assert notices.result_text("Fix", "pr_closed", "closed", "", "") == (
        "Fix: pull request closed without merging.")
    assert notices.result_text("Fix", "issue_closed", "", "https://x/issues/2", "") == (
        "Fix: issue closed. https://x/issues/2")


# --- the assignment token ---------------------------------------------------------------


def test_the_token_is_stored_only_as_its_hash_and_shaped_to_be_recognised():
    token = tokens.new_token()
    assert tokens.looks_like_token(token) and not tokens.looks_like_token("ghp_x")
    assert not tokens.looks_like_token("") and not tokens.looks_like_token(None)
    assert tokens.token_hash(token) == tokens.token_hash(token) != token
    assert len(tokens.token_hash(token)) == 64 and tokens.new_token() != token


# --- one way up -------------------------------------------------------------------------


def test_a_port_answers_its_default_until_provided_and_takes_one_provider():
    port = Port("test.port", default=list)
    assert port() == [] and not port.provided

    def first():
        return [1]

    port.provide(first)
    port.provide(first)  # the same provider again (wiring run twice) changes nothing
    assert port() == [1]
    with pytest.raises(PortTaken, match="test.port is provided already"):
        port.provide(lambda: [2])
    assert port() == [1]
    before = port.replace(lambda: [2])  # a test's stand-in, put back after
    assert port() == [2] and before is first
    assert port.replace(before)() == [2] and port() == [1]
    assert Port("test.bare")() is None


def test_an_event_tells_every_listener_even_after_one_fails():
    heard = []
    event = Event("test.event")

    def fails(x):
        raise RuntimeError("boom")

    event.listen(fails)
    event.listen(heard.append)
    event.listen(heard.append)  # listening twice is listening once
    assert event.tell(1) is False and heard == [1]
    event.forget(fails)
    assert event.tell(2) is True and heard == [1, 2]
