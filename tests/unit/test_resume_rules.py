"""Revalidation before a ticket resumes (pure): the source must exist, be enabled and
listen to the thread; a refusal ends the ticket with the reason and tells the asker once."""

from __future__ import annotations

from datetime import UTC, datetime

from tickets.core import resume
from tickets.core.resume import SourceStanding
from tickets.core.stage import Stage, StageFacts, derive, label

NOW = datetime(2026, 12, 6, 5, 0, tzinfo=UTC)
STANDS = SourceStanding(exists=True, enabled=True, listens=True)


def revalidate(source, *, ended=False, end_reason="", told=False):
    return resume.revalidate(source, ended=ended, end_reason_now=end_reason, told=told,
                             now=NOW)


def test_a_source_that_stands_lets_the_ticket_resume_and_changes_nothing():
    outcome = revalidate(STANDS)
    assert outcome.ok and outcome.changes == {} and outcome.tell is None


def test_each_way_a_source_falls_is_named_first_missing_then_disabled_then_deaf():
    assert resume.refusal(SourceStanding(exists=False)) == "source_missing"
    assert resume.refusal(SourceStanding(exists=True, enabled=False, listens=False)) == (
        "source_disabled")
    assert resume.refusal(SourceStanding(exists=True, enabled=True, listens=False)) == (
        "not_listening")


def test_a_refusal_ends_a_live_ticket_with_the_reason_and_tells_the_asker():
    outcome = revalidate(SourceStanding(exists=True, enabled=False, listens=True))
    assert outcome.refused == "source_disabled"
    assert outcome.changes == {"ended_at": NOW, "end_reason": "not_resumable:source_disabled"}
    assert "cannot resume — amux has been switched off here" in outcome.tell


def test_an_ended_ticket_refused_a_revival_keeps_its_end_time_and_names_the_new_reason():
    outcome = revalidate(SourceStanding(exists=True, enabled=True, listens=False), ended=True,
                         end_reason="merged")
    assert outcome.changes == {"end_reason": "not_resumable:not_listening"}
    again = revalidate(SourceStanding(exists=True, enabled=True, listens=False), ended=True,
                       end_reason="not_resumable:not_listening", told=True)
    assert not again.ok and again.changes == {} and again.tell is None


def test_the_asker_is_told_once_and_never_through_a_source_that_is_gone():
    deaf = SourceStanding(exists=True, enabled=True, listens=False)
    assert revalidate(deaf, told=True).tell is None
    assert revalidate(SourceStanding(exists=False)).tell is None
    # the same refusal before any new run has the same key: one message
    assert resume.tell_key(2) == resume.tell_key(2) != resume.tell_key(3)


def test_the_ended_label_says_why_the_ticket_could_not_resume():
    facts = StageFacts(ended=True, end_reason="not_resumable:not_listening")
    assert derive(facts) is Stage.ENDED
    assert label(Stage.ENDED, facts) == (
        "Ended — could not resume: amux no longer listens to this thread")
    assert label(Stage.ENDED, StageFacts(ended=True, end_reason="merged")) == "Ended"
    assert resume.refused_why("not_resumable:bogus") is None
