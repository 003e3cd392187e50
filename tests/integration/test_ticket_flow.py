"""A ticket's life through the engine: routing, reports, questions, PR end and revival."""

import pytest

from effects.models import Effect
from intake.models import Channel
from policy import services as policy_services
from tests import factories as f
from tickets.actions import commands as ticket_commands
from tickets.actions import executor, pull_requests, routing
from tickets.core.errors import InvalidCommand, NotFound
from tickets.models import Assignment, Eval, Input, Mandate, Ticket
from tickets.read import stages

pytestmark = pytest.mark.django_db


@pytest.fixture
def source():
    return f.SourceFactory()


def make_trigger(source, **fields):
    """A request on the one issue these tests talk about (octo/app#12)."""
    return f.TriggerFactory(source=source, thread__key="octo/app#12",
                            thread__title="Crash on login", **fields)


def stage_of(ticket):
    return stages([Ticket.objects.get(pk=ticket.pk)])[ticket.pk][0]


def test_explicit_request_to_merged_pr_then_revival_under_the_same_mandate(source):
    # The GitHub source names where its tickets' results are announced.
    team = f.SourceFactory(kind="webchat", slug="team", name="Team chat")
    source.config = {"notice_channel": "team:team-chat"}
    source.save()
    assert routing.route_trigger(trigger_id=make_trigger(source).pk) == "admitted"
    ticket = Ticket.objects.get()
    mandate_id = Mandate.objects.get(ticket=ticket).pk
    assignment = Assignment.objects.get(ticket=ticket)
    executor.assignment_started(assignment_id=assignment.pk)
    assert stage_of(ticket) == "working"

    pr = f.ThreadFactory(source=source, key="octo/app#13", url="https://gh/pr/13")
    pull_requests.pr_linked(ticket_id=ticket.pk, pr_thread_id=pr.pk)
    executor.report_received(assignment_id=assignment.pk, status="done", text="PR #13 is open")
    assert stage_of(ticket) == "awaiting_review"

    pull_requests.pr_closed(pr_thread_id=pr.pk, merged=True)
    assert stage_of(ticket) == "ended"
    (notice,) = Effect.objects.filter(kind="notice")
    chat = Channel.objects.get(source=team, address="team-chat")
    assert notice.payload["channel"] == chat.pk and "merged" in notice.payload["text"]
    assert not Effect.objects.filter(kind="relay").exists()  # nothing repeated on GitHub

    # A later comment on the thread revives it: same mandate, no eval, a new run.
    assert routing.route_trigger(
        trigger_id=make_trigger(source, text="one more thing").pk
    ) == "revive"
    ticket.refresh_from_db()
    assert ticket.ended_at is None
    assert Mandate.objects.get(ticket=ticket).pk == mandate_id
    assert not Eval.objects.exists()
    assert Assignment.objects.filter(ticket=ticket).count() == 2
    assert Input.objects.get(ticket=ticket).text == "one more thing"


def test_a_pr_closed_while_a_person_waits_for_an_answer_ends_only_after_it(source):
    routing.route_trigger(trigger_id=make_trigger(source).pk)
    ticket = Ticket.objects.get()
    assignment = Assignment.objects.get(ticket=ticket)
    executor.assignment_started(assignment_id=assignment.pk)
    pr = f.ThreadFactory(source=source, key="octo/app#13")
    pull_requests.pr_linked(ticket_id=ticket.pk, pr_thread_id=pr.pk)
    executor.report_received(assignment_id=assignment.pk, status="done", text="done")
    routing.route_trigger(trigger_id=make_trigger(source, text="wait, also X").pk)
    pull_requests.pr_closed(pr_thread_id=pr.pk, merged=False)
    assert stage_of(ticket) != "ended"
    executor.report_received(assignment_id=assignment.pk, status="progress", text="looking")
    assert stage_of(ticket) != "ended"
    executor.report_received(assignment_id=assignment.pk, status="done", text="X handled")
    assert stage_of(ticket) == "ended"
    assert Ticket.objects.get().end_reason == "pr_closed"


def test_follow_ups_from_anyone_flow_in_as_context(source):
    routing.route_trigger(trigger_id=make_trigger(source).pk)
    ticket = Ticket.objects.get()
    ci = make_trigger(source, decision="ignore", actor="ci[bot]", is_bot=True,
                      text="CI failed on main")
    assert routing.route_trigger(trigger_id=ci.pk) == "follow_up"
    item = Input.objects.get(trigger=ci)
    assert item.ticket == ticket and item.is_human is False
    assert Effect.objects.filter(kind="deliver", key=f"input:{item.pk}").exists()
    # A redelivery of the same trigger changes nothing.
    assert routing.route_trigger(trigger_id=ci.pk) == "follow_up"
    assert Input.objects.filter(trigger=ci).count() == 1


def test_an_inferred_candidate_in_manual_mode_makes_no_ticket(source):
    t = make_trigger(source, decision="inferred")
    assert routing.route_trigger(trigger_id=t.pk) == "not_accepted"
    assert not Ticket.objects.exists() and not Eval.objects.exists()


def test_in_auto_mode_an_inferred_candidate_is_evaluated_then_accepted(source):
    policy_services.save({"acceptance": "auto", "sources": {}}, None)
    t = make_trigger(source, decision="inferred")
    assert routing.route_trigger(trigger_id=t.pk) == "evaluating"
    evaluation = Eval.objects.get()
    assert Effect.objects.filter(kind="assess", key=f"eval:{evaluation.pk}").exists()
    long_note = " ".join(["word"] * 40)
    assert routing.eval_finished(eval_id=evaluation.pk, result="accept", note=long_note) == (
        "admitted"
    )
    evaluation.refresh_from_db()
    assert len(evaluation.note.split()) == 30
    assert Mandate.objects.get().strength == "inferred"


def test_free_text_never_waits_for_a_person_a_structured_ask_does(source):
    routing.route_trigger(trigger_id=make_trigger(source).pk)
    ticket = Ticket.objects.get()
    assignment = Assignment.objects.get(ticket=ticket)
    executor.assignment_started(assignment_id=assignment.pk)
    executor.report_received(
        assignment_id=assignment.pk, status="progress", text="I need you to confirm"
    )
    assert stage_of(ticket) == "working"
    question = executor.question_asked(
        assignment_id=assignment.pk, text="Which login flow?", options=["SSO", "password"]
    )
    assert stage_of(ticket) == "waiting_for_person"
    relay = Effect.objects.get(kind="relay")
    assert "Which login flow?" in relay.payload["text"] and relay.channel == "gh:octo/app#12"
    ticket_commands.answer_question(question_id=question.pk, answer="SSO", by="octocat")
    assert stage_of(ticket) == "working"
    assert Input.objects.get(kind="answer").text.endswith("SSO")
    with pytest.raises(InvalidCommand):
        ticket_commands.answer_question(question_id=question.pk, answer="again", by="octocat")


def test_bad_tool_input_is_refused_with_a_reason(source):
    routing.route_trigger(trigger_id=make_trigger(source).pk)
    assignment = Assignment.objects.get()
    with pytest.raises(InvalidCommand, match="unknown report status"):
        executor.report_received(assignment_id=assignment.pk, status="finished", text="")
    with pytest.raises(InvalidCommand, match="needs a question"):
        executor.question_asked(assignment_id=assignment.pk, text="  ")
    with pytest.raises(NotFound):
        executor.report_received(assignment_id=999999, status="done")


def test_handing_back_makes_a_candidate_only_then(source):
    policy_services.save({"acceptance": "auto", "sources": {}}, None)
    routing.route_trigger(trigger_id=make_trigger(source).pk)
    assignment = Assignment.objects.get()
    other = make_trigger(source, decision="ignore", text="can you also redo the CSS?")
    routing.route_trigger(trigger_id=other.pk)
    assert not Eval.objects.exists()
    executor.hand_back(assignment_id=assignment.pk, trigger_id=other.pk, reason="outside mandate")
    other.refresh_from_db()
    assert other.disposition == "handed_back"
    assert Eval.objects.get().trigger == other


def test_outbound_messages_per_ticket_stay_few(source):
    """Explicit request → question → done → merged: the people hear at most 3 messages."""
    Channel.objects.create(source=source, kind="chat", address="team-chat")
    routing.route_trigger(trigger_id=make_trigger(source).pk)
    ticket = Ticket.objects.get()
    assignment = Assignment.objects.get()
    executor.assignment_started(assignment_id=assignment.pk)
    executor.report_received(assignment_id=assignment.pk, status="progress", text="on it")
    q = executor.question_asked(assignment_id=assignment.pk, text="SSO or password?")
    ticket_commands.answer_question(question_id=q.pk, answer="SSO", by="octocat")
    pr = f.ThreadFactory(source=source, key="octo/app#13")
    pull_requests.pr_linked(ticket_id=ticket.pk, pr_thread_id=pr.pk)
    executor.report_received(assignment_id=assignment.pk, status="done", text="PR open")
    pull_requests.pr_closed(pr_thread_id=pr.pk, merged=True)
    outbound = Effect.objects.filter(kind__in=["relay", "notice"]).count()
    assert outbound <= 3
