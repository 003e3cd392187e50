"""The stage is derived from facts, first match wins (seed 002's seven stages)."""

from tickets.core.stage import LABELS, Stage, StageFacts, derive, label


def test_a_new_ticket_is_queued():
    assert derive(StageFacts(assignment="dispatching")) is Stage.QUEUED


def test_a_running_assignment_is_working():
    assert derive(StageFacts(assignment="running")) is Stage.WORKING


def test_ended_wins_over_everything():
    assert derive(StageFacts(ended=True, open_question=True, latest_report="failed")) is Stage.ENDED


def test_only_a_structured_question_waits_for_a_person():
    assert derive(StageFacts(assignment="running", open_question=True)) is Stage.WAITING_FOR_PERSON
    # Free text ("I need you to confirm") arrives as a progress report: still working.
    assert derive(StageFacts(assignment="running", latest_report="progress")) is Stage.WORKING


def test_an_input_that_failed_to_arrive_is_shown_before_failures():
    facts = StageFacts(assignment="running", undelivered_failed_input=True, latest_report="failed")
    assert derive(facts) is Stage.INPUT_NOT_DELIVERED


def test_failed_and_blocked_reports():
    assert derive(StageFacts(assignment="running", latest_report="failed")) is Stage.FAILED
    assert derive(StageFacts(assignment="running", latest_report="blocked")) is Stage.BLOCKED
    assert derive(StageFacts(assignment="failed")) is Stage.FAILED


def test_a_person_speaking_hands_a_blocked_or_failed_ticket_back_to_the_executor():
    for report in ("blocked", "failed"):
        facts = StageFacts(
            assignment="running", latest_report=report, person_spoke_since_report=True
        )
        assert derive(facts) is Stage.WORKING


def test_done_with_an_open_pr_awaits_review_but_done_alone_does_not_end():
    assert derive(StageFacts(assignment="ended", latest_report="done", pr_open=True)) is (
        Stage.AWAITING_REVIEW
    )
    assert derive(StageFacts(assignment="ended", latest_report="done")) is Stage.QUEUED


def test_every_stage_has_a_label_that_is_not_a_code():
    for stage in Stage:
        assert LABELS[stage] and "_" not in LABELS[stage]


def test_a_run_whose_session_finds_no_free_slot_waits_for_capacity():
    facts = StageFacts(assignment="running", waiting_for_capacity=True)
    assert derive(facts) is Stage.WAITING_FOR_CAPACITY
    assert "capacity" in LABELS[Stage.WAITING_FOR_CAPACITY].lower()
    # what needs a person still shows first; a slot freeing makes it working again
    assert derive(StageFacts(assignment="running", waiting_for_capacity=True,
                             open_question=True)) is Stage.WAITING_FOR_PERSON
    assert derive(StageFacts(assignment="running")) is Stage.WORKING
    assert derive(StageFacts(assignment="ended", waiting_for_capacity=True)) is Stage.QUEUED


def test_a_worker_that_stopped_says_so_instead_of_working_for_ever():
    from tickets.core.stage import NEEDS_ME

    running = {"assignment": "running", "turn_settled": True}
    # stopped with its pull request open, with or without `done`: the review is next
    assert derive(StageFacts(**running, pr_open=True)) is Stage.AWAITING_REVIEW
    assert derive(StageFacts(**running, pr_open=True, latest_report="progress")) is \
        Stage.AWAITING_REVIEW
    # stopped with neither a pull request nor a report: it waits on a person
    idle = derive(StageFacts(**running))
    assert idle is Stage.IDLE and idle in NEEDS_ME
    assert "without a report" in label(idle, StageFacts(**running))
    assert derive(StageFacts(**running, latest_report="progress")) is Stage.IDLE
    # a person wrote after its `done` and it stopped again without a new one
    assert derive(StageFacts(**running, latest_report="done",
                             person_spoke_since_report=True)) is Stage.IDLE
    # a turn queued or running, or no turn ended yet: working
    assert derive(StageFacts(assignment="running")) is Stage.WORKING
    # blocked and failed reports keep their own stages
    assert derive(StageFacts(**running, latest_report="blocked")) is Stage.BLOCKED
