"""The outbox handlers of the effects tickets owns, one per kind, and of the facts tickets
consumes from sessions (`session.turn_ended`); tickets/wiring.py registers them.

Each handler is idempotent per effect id: the id is the idempotency key of every send.
A handler makes one action call to report what happened; it never writes ticket state.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime

from django.db import transaction

from amux_common.clock import now as clock
from effects import outbox
from intake.send import thread_context
from prompts_app import service as prompts
from sessions import services as sessions
from sessions.models import TimelineEvent
from tickets import main_session, read, triage, worker, workspace
from tickets.actions import executor, routing
from tickets.actions import guards as guard_actions
from tickets.core import failure as failures
from tickets.core import guards
from tickets.models import Assignment, Eval, Input
from tickets.tools.worker_bin import WorkerSetupError

log = logging.getLogger(__name__)


def assess_candidate(effect_id: int, payload: dict) -> None:
    """Triage one inferred candidate with the configured model, then report the verdict."""
    evaluation = (
        Eval.objects.select_related("trigger__source", "trigger__thread")
        .filter(pk=payload.get("eval"))
        .first()
    )
    if evaluation is None or evaluation.state != "running":
        return  # discarded by a policy change, or already decided: nothing to do
    try:
        verdict = triage.assess(
            evaluation,
            system_prompt=prompts.current("triage").text,
            context=_thread_context(evaluation),
            idempotency_key=f"amux-effect-{effect_id}",
        )
    except triage.TriageUnavailable:
        verdict = triage.Verdict("needs_person", "No triage model is configured.")
    routing.eval_finished(eval_id=evaluation.pk, result=verdict.result, note=verdict.note)


def _thread_context(evaluation: Eval) -> str:
    """The candidate's thread as its platform has it, bounded (triage.context_text); a
    platform that cannot be read now leaves triage with the message alone."""
    trigger = evaluation.trigger
    try:
        messages = thread_context(trigger.source, trigger.thread.key)
    except Exception as exc:  # noqa: BLE001 - any platform fault: triage goes on without
        log.warning("triage of eval %s: the thread %s could not be read (%s)",
                    evaluation.pk, trigger.thread.key, type(exc).__name__)
        return ""
    return triage.context_text(messages)


def dispatch_assignment(effect_id: int, payload: dict) -> None:
    """Start (or stop) a ticket's worker run. The dispatch is one action (its caps, token,
    session and start, in one transaction: executor.run_dispatched); what it leaves to do
    outside the database comes back as this kind's ``start`` effect (`start_run`)."""
    assignment = (
        Assignment.objects.select_related("ticket__thread__source", "ticket__mandate__trigger")
        .filter(pk=payload.get("assignment"))
        .first()
    )
    if assignment is None:
        return
    ticket = assignment.ticket
    if payload.get("action") == "stop":
        if ticket.session_id:
            # No turn in flight means nothing to interrupt.
            with contextlib.suppress(sessions.CommandError):
                sessions.interrupt(ticket.session_id)
        executor.assignment_ended(assignment_id=assignment.pk, reason="stopped")
        return
    if payload.get("action") == "start":
        start_run(assignment, payload["session"])
        return
    _wait_if_capped(executor.run_dispatched(assignment_id=assignment.pk,
                                            open_session=_open_session))


def _open_session(ticket, token: str) -> int | failures.Failure:
    """The worker's session for a run being dispatched, written in the dispatch's
    transaction (executor.run_dispatched), with its token file; or why it cannot run."""
    try:
        config = worker.choose()
    except worker.WorkerNotConfigured as exc:
        return failures.dispatch_failure("settings", str(exc))
    # a file, written before the session as it always was: a rollback leaves in it a
    # token whose hash was never stored (inert), which the next dispatch overwrites
    worker.write_token(ticket, token)
    try:
        with transaction.atomic():  # a refusal leaves no session row behind
            return worker.open_session(ticket, config)
    except sessions.CommandError as exc:
        # The session layer refused (unknown runtime, provider, model): retrying the same
        # effect cannot help; the run fails visibly until input, Retry or new settings.
        return failures.dispatch_failure("session", str(exc), exc.code)


def start_run(assignment: Assignment, session_id: int) -> None:
    """A dispatched run's outside work, idempotent on replay: the worker's commands, the
    ticket's working copy (a clone there already is reused as it is) and the brief, posted
    once (its input key) — which wakes the session's host, so the runtime starts in the
    clone. Nothing is done for a run that ended or moved to another session meanwhile."""
    ticket = assignment.ticket
    if (assignment.state != "running" or ticket.ended_at is not None
            or ticket.session_id != session_id):
        return
    try:
        worker.setup()
        # the run's start (its dispatch's transaction) is when it asked for the repository
        workspace.prepare(ticket, asked=assignment.started_at.timestamp()
                          if assignment.started_at else None)
    except WorkerSetupError as exc:
        _start_failed(assignment, session_id, failures.dispatch_failure(
            "session", str(exc), failures.WORKER_SETUP))
        return
    except workspace.WorkspaceError as exc:
        log.warning("dispatch of ticket %s: %s", ticket.pk, exc)
        _start_failed(assignment, session_id, failures.dispatch_failure(
            "session", str(exc), failures.WORKSPACE))
        return
    try:
        sessions.post_message(session_id, worker.brief(ticket, assignment),
                              key=read.brief_key(assignment.pk))
    except sessions.CommandError as exc:
        _start_failed(assignment, session_id, failures.dispatch_failure(
            "session", str(exc), exc.code))
        return
    executor.run_briefed(assignment_id=assignment.pk)


def _start_failed(assignment: Assignment, session_id: int,
                  failure: failures.Failure) -> None:
    executor.run_start_failed(assignment_id=assignment.pk, session_id=session_id,
                              failure=failure)


def deliver_input(effect_id: int, payload: dict) -> None:
    """Put an input into the ticket's worker session as the next turn (once per input)."""
    item = Input.objects.select_related("ticket").filter(pk=payload.get("input")).first()
    if item is None or item.delivered_at is not None:
        return
    _wait_if_capped(guard_actions.input_held(input_id=item.pk))
    session_id = item.ticket.session_id
    if session_id is None or not read.briefed(item.ticket_id, session_id):
        verdict = executor.input_waiting(input_id=item.pk)
        if verdict is failures.Delivery.WAIT:
            raise outbox.Later(5, "the worker run is being dispatched")
        if verdict is failures.Delivery.UNDELIVERABLE:
            return  # shown as not delivered, with its reason; a new run re-queues it
        session_id = Input.objects.filter(pk=item.pk).values_list(
            "ticket__session_id", flat=True).first()
    author = f"{item.author}: " if item.author else ""
    try:
        sessions.post_message(session_id, f"{author}{item.text}", key=f"input:{item.pk}")
    except sessions.CommandError as exc:
        executor.delivery_failed(input_id=item.pk, reason=str(exc))
        return
    executor.input_delivered(input_id=item.pk)


def _wait_if_capped(found) -> None:
    """A reached cap holds new work (not a failure): the row waits in line until the cap
    resets; raising it or Retry makes it due at once (guard_actions.recheck)."""
    if found is not None:
        raise outbox.Later(guards.retry_in(found, clock()), found.text)


def worker_turn_ended(effect_id: int, payload: dict) -> None:
    """A session's turn ended (written by sessions/timeline.py with the terminal event);
    the action ignores sessions that are not a ticket's worker. The team's main session's
    turns answer for the request they were about (main_session.turn_ended)."""
    main_session.turn_ended(payload)
    ended_at = payload.get("ended_at")
    executor.worker_turn_ended(
        session_id=payload["session"], state=payload["state"],
        error_code=payload.get("error_code", ""),
        error_message=_failure_message(payload.get("turn")) if payload["state"] == "failed"
        else "",
        ended_at=datetime.fromisoformat(ended_at) if ended_at else None,
    )


def _failure_message(turn_id) -> str:
    """The failed turn's own words (its terminal event), so the ticket shows them whole."""
    payload = (TimelineEvent.objects.filter(turn_id=turn_id, type="turn.failed")
               .values_list("payload", flat=True).first()) or {}
    message = payload.get("message") or payload.get("error") or ""
    return message if isinstance(message, str) else str(message)
