"""The engine: commands may be refused and change nothing; facts are never refused."""

import pytest

from effects.models import Effect
from intake.models import Source, Thread, Trigger
from tickets import read
from tickets.actions import commands as ticket_commands
from tickets.actions import executor
from tickets.core.errors import InvalidCommand, NotFound, ThreadAlreadyBound, TicketEnded
from tickets.models import Assignment, Input, Mandate, Subscription
from tickets.read import stages

pytestmark = pytest.mark.django_db


@pytest.fixture
def trigger():
    source = Source.objects.create(kind="github", slug="gh", name="GitHub")
    thread = Thread.objects.create(source=source, key="octo/app#12", title="Crash on login")
    return Trigger.objects.create(
        source=source, thread=thread, external_id="comment-1", scope="comment",
        actor="octocat", addressed=True, text="@amux please fix", decision="explicit",
        strength="explicit", rule="gh.comment.addressed", policy_version="abc123",
    )


def test_opening_a_ticket_writes_mandate_subscription_assignment_and_dispatch(trigger):
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the login crash")
    assert ticket.short_name == f"t{ticket.pk}-fix-the-login-crash"
    mandate = Mandate.objects.get(ticket=ticket)
    assert (mandate.policy_version, mandate.scope, mandate.strength, mandate.rule) == (
        "abc123", "comment", "explicit", "gh.comment.addressed"
    )
    assert mandate.requester == "octocat"
    assert mandate.basis["source"] == "gh" and mandate.basis["addressed"] is True
    assert Subscription.objects.get(thread=trigger.thread).ticket == ticket
    assignment = Assignment.objects.get(ticket=ticket)
    assert assignment.state == "dispatching" and assignment.token_hash == ""
    token = executor.issue_assignment_token(assignment_id=assignment.pk)
    assert read.assignment_for_token(token) == assignment
    assert read.assignment_for_token(token + "x") is None
    newer = executor.issue_assignment_token(assignment_id=assignment.pk)
    assert read.assignment_for_token(token) is None and read.assignment_for_token(newer)
    effect = Effect.objects.get(kind="dispatch")
    assert effect.key == f"assignment:{assignment.pk}"
    assert effect.payload == {"assignment": assignment.pk, "ticket": ticket.pk}
    trigger.refresh_from_db()
    assert trigger.disposition == "admitted"
    assert stages([ticket])[ticket.pk][0] == "queued"


def test_a_thread_that_has_a_ticket_does_not_get_a_second_one(trigger):
    ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix")
    other = Trigger.objects.create(
        source=trigger.source, thread=trigger.thread, external_id="comment-2", scope="comment",
        actor="octocat", decision="explicit", strength="explicit", policy_version="abc123",
    )
    with pytest.raises(ThreadAlreadyBound):
        ticket_commands.open_ticket(trigger_id=other.pk, title="Again")
    assert Mandate.objects.count() == 1 and Effect.objects.count() == 1


def test_an_ignored_trigger_cannot_become_a_ticket(trigger):
    Trigger.objects.filter(pk=trigger.pk).update(decision="ignore", strength="")
    with pytest.raises(InvalidCommand):
        ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix")
    assert not Mandate.objects.exists()


def test_stopping_ends_the_ticket_and_tells_its_assignment(trigger):
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix")
    assignment = Assignment.objects.get(ticket=ticket)
    ticket_commands.stop_ticket(ticket_id=ticket.pk, by="operator")
    ticket.refresh_from_db()
    assert ticket.ended_at is not None and ticket.end_reason == "stopped"
    stop = Effect.objects.get(key=f"assignment:{assignment.pk}:stop")
    assert stop.payload["action"] == "stop"
    assert stages([ticket])[ticket.pk][0] == "ended"
    with pytest.raises(TicketEnded):
        ticket_commands.stop_ticket(ticket_id=ticket.pk, by="operator")
    with pytest.raises(NotFound):
        ticket_commands.stop_ticket(ticket_id=999_999, by="operator")


def test_inputs_are_delivered_through_the_outbox_and_a_failure_shows(trigger):
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix")
    item = ticket_commands.add_input(ticket_id=ticket.pk, text="Also check logout",
                                     author="octocat")
    assert Effect.objects.filter(kind="deliver", key=f"input:{item.pk}").exists()
    executor.delivery_failed(input_id=item.pk, reason="session archived")
    assert stages([ticket])[ticket.pk][0] == "input_not_delivered"
    executor.input_delivered(input_id=item.pk)
    executor.delivery_failed(input_id=item.pk, reason="late failure")  # never refused, no effect
    item.refresh_from_db()
    assert item.delivered_at is not None and item.failure == ""
    assert stages([ticket])[ticket.pk][0] == "queued"


def test_a_refused_input_writes_nothing(trigger):
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix")
    with pytest.raises(InvalidCommand):
        ticket_commands.add_input(ticket_id=ticket.pk, text=" ", author="octocat")
    assert not Input.objects.exists()
    assert not Effect.objects.filter(kind="deliver").exists()


def test_assignment_facts_move_the_stage_and_late_facts_change_nothing(trigger):
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix")
    assignment = Assignment.objects.get(ticket=ticket)
    executor.assignment_started(assignment_id=assignment.pk)
    assert stages([ticket])[ticket.pk][0] == "working"
    executor.assignment_ended(assignment_id=assignment.pk, reason="runtime crashed", failed=True)
    assert stages([ticket])[ticket.pk][0] == "failed"
    executor.assignment_started(assignment_id=assignment.pk)  # late: ignored, not refused
    assignment.refresh_from_db()
    assert assignment.state == "failed"


def test_binding_another_thread(trigger):
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix")
    pr = Thread.objects.create(source=trigger.source, key="octo/app#13", title="PR")
    ticket_commands.bind_thread(ticket_id=ticket.pk, thread_id=pr.pk)
    ticket_commands.bind_thread(ticket_id=ticket.pk, thread_id=pr.pk)  # idempotent
    assert Subscription.objects.filter(ticket=ticket).count() == 2
