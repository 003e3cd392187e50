"""Triage of inferred candidates runs from the outbox and reports one verdict."""

import pytest

from effects import outbox
from policy import services as policy_services
from tests import factories as f
from tickets import triage
from tickets.actions import routing
from tickets.models import Eval, Ticket

pytestmark = pytest.mark.django_db


@pytest.fixture
def candidate():
    saved = policy_services.save({"acceptance": "auto", "sources": {}}, None)
    trigger = f.TriggerFactory(
        thread__key="octo/app#3", thread__title="Typo in docs", external_id="i3",
        scope="issue_new", text="The README says 'teh'.", addressed=False,
        decision="inferred", rule="gh.issue_new.unaddressed_allowed", policy_version=saved.version,
    )
    assert routing.route_trigger(trigger_id=trigger.pk) == "evaluating"
    return trigger


def test_without_a_triage_model_the_candidate_needs_a_person(candidate):
    outbox.drain(seconds=10)
    evaluation = Eval.objects.get()
    assert evaluation.state == "done" and evaluation.result == "needs_person"
    assert evaluation.note == "No triage model is configured."
    candidate.refresh_from_db()
    assert candidate.disposition == "needs_person"
    assert not Ticket.objects.exists()


def test_a_discarded_eval_is_not_decided(candidate):
    Eval.objects.update(state="discarded")
    outbox.drain(seconds=10)
    assert Eval.objects.get().result == ""


def test_unreadable_answers_are_a_persons_call():
    assert triage.parse("not json").result == "needs_person"
    assert triage.parse('{"result": "maybe", "note": "x"}').result == "needs_person"
    verdict = triage.parse('{"result": "accept", "note": "' + "word " * 50 + '"}')
    assert verdict.result == "accept" and len(verdict.note.split()) == 30
