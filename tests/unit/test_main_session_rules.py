"""The main session's pure rules (tickets/core/main_session.py): who routes, the 30-word
routing note refused (never cut), the stop-only rule while an executor owns a message."""

from __future__ import annotations

import pytest

from tickets.core import main_session as rules
from tickets.core.errors import InvalidCommand
from tickets.core.routing import Route


def test_the_main_session_routes_explicit_requests_only_when_configured():
    assert rules.router(True) is rules.Router.MAIN
    assert rules.router(False) is rules.Router.CODE
    assert rules.hands_to_main(Route.OPEN, True)
    assert not rules.hands_to_main(Route.OPEN, False)  # the deterministic fallback
    for other in (Route.EVALUATE, Route.NOT_ACCEPTED, Route.FOLLOW_UP, Route.IGNORE):
        assert not rules.hands_to_main(other, True)  # inferred candidates go to triage


def test_it_hears_of_a_persons_follow_up_never_of_a_bots_or_without_a_main_session():
    assert rules.notifies_main(Route.FOLLOW_UP, True, is_human=True)
    assert rules.notifies_main(Route.REVIVE, True, is_human=True)
    assert not rules.notifies_main(Route.FOLLOW_UP, True, is_human=False)
    assert not rules.notifies_main(Route.RECORD, True, is_human=True)
    assert not rules.notifies_main(Route.FOLLOW_UP, False, is_human=True)


def test_a_routing_note_of_30_words_passes_and_31_is_refused_whole():
    thirty = " ".join(f"w{i}" for i in range(30))
    assert rules.check_note(thirty) == thirty
    assert rules.check_note("  see   src/parser.py\n first ") == "see src/parser.py first"
    assert rules.check_note(None) == "" and rules.check_note("") == ""
    with pytest.raises(InvalidCommand, match="note has 31 words; a routing note is at most 30"):
        rules.check_note(thirty + " w30")
    with pytest.raises(InvalidCommand, match="note must be text"):
        rules.check_note(["a", "list"])


@pytest.mark.parametrize("value", [0, -3, "x", None, True, 2.5, "1e3"])
def test_an_id_the_model_names_must_be_a_positive_integer(value):
    with pytest.raises(InvalidCommand, match="trigger must be an id"):
        rules.check_id(value, "trigger")


def test_ids_given_as_digit_strings_are_accepted():
    assert rules.check_id("12", "ticket") == 12 and rules.check_id(7, "ticket") == 7


def test_a_reason_is_one_bounded_line():
    assert rules.check_reason("  not  ours\n") == "not ours"
    with pytest.raises(InvalidCommand, match="reason must be a non-empty line"):
        rules.check_reason("  ")
    with pytest.raises(InvalidCommand, match="at most 300 characters"):
        rules.check_reason("x" * 301)


def test_only_an_explicit_request_awaiting_routing_may_be_routed():
    rules.check_routable(rules.TriggerFacts(1, rules.AWAITING, "explicit"))
    # bound meanwhile: still routable (the action then gives it to that ticket's executor)
    rules.check_routable(rules.TriggerFacts(1, rules.AWAITING, "explicit", owner_ticket=4))
    with pytest.raises(rules.NotAwaiting, match="does not await routing"):
        rules.check_routable(rules.TriggerFacts(1, "admitted", "explicit"))
    with pytest.raises(rules.NotAwaiting, match="never routed by the main session"):
        rules.check_routable(rules.TriggerFacts(1, "evaluating", "inferred"))


def test_a_message_the_executor_owns_may_be_stopped_not_taken():
    with pytest.raises(rules.OwnedByExecutor) as refused:
        rules.check_routable(rules.TriggerFacts(9, "follow_up", "explicit", owner_ticket=4))
    assert refused.value.status == 409 and refused.value.code == "owned_by_executor"
    assert "stop that ticket" in refused.value.message


def test_notices_name_the_trigger_and_say_what_the_main_session_may_do():
    request = rules.request_notice(trigger=5, actor="octocat", source="gh", thread="o/r#1",
                                   url="https://github.com/o/r/issues/1", text="fix it")
    assert "trigger 5 from octocat" in request and "route(trigger=5" in request
    assert "at most 30 words" in request and "fix it" in request
    follow = rules.followup_notice(trigger=6, ticket=3, actor="mona", thread="o/r#1",
                                   text="also this")
    assert "stop(ticket=3" in follow and "owns this message" in follow
    effect = rules.notify(5, "request")
    assert (effect.kind, effect.key, effect.payload) == (
        "main.notify", "trigger:5", {"trigger": 5, "what": "request", "ticket": None})


def test_a_main_turn_names_the_trigger_it_was_told_of():
    assert rules.told_trigger(rules.notice_key(42)) == 42
    for other in (None, "", "assignment:3", "main:trigger:", "main:trigger:x", "input:7"):
        assert rules.told_trigger(other) is None


def test_a_web_chat_message_says_the_main_session_routes_or_dismissed_it():
    from intake.outcome import describe

    routing = describe("explicit", "", rules.AWAITING)
    assert routing.admitted and "main session is routing it" in routing.text
    dismissed = describe("explicit", "", rules.DISMISSED)
    assert not dismissed.admitted and "dismissed" in dismissed.text
