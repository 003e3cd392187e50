"""Path B before the gate; explicit → ticket; inferred → eval only in auto acceptance."""

from tickets.core.routing import EndFacts, Route, RoutingFacts, may_end, route


def facts(**kw):
    base = {"decision": "ignore", "acceptance": "manual", "is_human": True}
    return RoutingFacts(**{**base, **kw})


def test_a_message_on_a_subscribed_thread_flows_to_the_ticket_whoever_sends_it():
    assert route(facts(subscribed_ticket=1, decision="ignore", is_human=False)) is Route.FOLLOW_UP
    assert route(facts(subscribed_ticket=1, decision="explicit")) is Route.FOLLOW_UP


def test_a_person_revives_an_ended_ticket_a_bot_does_not():
    assert route(facts(subscribed_ticket=1, ticket_ended=True)) is Route.REVIVE
    assert route(facts(subscribed_ticket=1, ticket_ended=True, is_human=False)) is Route.RECORD


def test_an_explicit_request_opens_a_ticket_without_an_eval():
    assert route(facts(decision="explicit")) is Route.OPEN


def test_an_inferred_candidate_never_becomes_work_in_manual_mode():
    assert route(facts(decision="inferred", acceptance="manual")) is Route.NOT_ACCEPTED
    assert route(facts(decision="inferred", acceptance="auto")) is Route.EVALUATE


def test_the_agents_own_messages_are_dropped():
    assert route(facts(subscribed_ticket=1, own_message=True)) is Route.IGNORE


def test_a_ticket_ends_on_a_final_pr_only_when_nothing_is_in_flight():
    assert may_end(EndFacts(pr_final=True, assignment_in_flight=False, unanswered_follow_up=False))
    assert not may_end(EndFacts(True, assignment_in_flight=True, unanswered_follow_up=False))
    assert not may_end(EndFacts(True, assignment_in_flight=False, unanswered_follow_up=True))
    assert not may_end(EndFacts(False, False, False))
