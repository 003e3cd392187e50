"""The only writer of ticket-domain state (ARCHITECTURE.md "The engine").

Each public function is one command (imperative; may be refused with a typed error from
tickets.core.errors) or one fact reported by an executor (past tense; never refused). Each
runs in one durable transaction, locks its aggregate root through tickets.locks, lets the
pure rules in tickets.core decide, saves, and enqueues external work as outbox rows in the
same transaction; the outbox kicks a drainer on commit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Q, Subquery

from amux_common.clock import now as clock
from effects import outbox
from intake import rules as intake_core
from intake.models import Channel, Source, Thread, Trigger
from prompts_app.contract import clip_routing_note
from tickets import guarding, locks, policy_hooks
from tickets.core import failure as failures
from tickets.core import guards, linking, messages, notices, rules
from tickets.core.errors import InvalidCommand, NotFound, ThreadAlreadyBound
from tickets.core.routing import EndFacts, Route, RoutingFacts, end_reason, route
from tickets.models import (
    LIVE_ASSIGNMENT,
    Assignment,
    Eval,
    Input,
    Mandate,
    Question,
    Report,
    Subscription,
    Ticket,
    TicketMessage,
)


def _enqueue(plan: rules.Plan) -> None:
    for effect in plan.effects:
        outbox.enqueue(effect.kind, effect.key, effect.payload, channel=effect.channel)


def _view(ticket: Ticket) -> rules.TicketView:
    live = (
        Assignment.objects.filter(LIVE_ASSIGNMENT, ticket=ticket)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    return rules.TicketView(id=ticket.pk, ended=ticket.ended_at is not None, live_assignment=live)


def _new_assignment(ticket: Ticket, attempt: int = 1) -> Assignment:
    return Assignment.objects.create(ticket=ticket, attempt=attempt)


def _run_facts(ticket: Ticket) -> failures.RunFacts:
    runs = list(Assignment.objects.filter(ticket=ticket).order_by("-pk")
                .values_list("pk", "state")[:1])
    live = (Assignment.objects.filter(LIVE_ASSIGNMENT, ticket=ticket).order_by("-pk")
            .values_list("pk", flat=True).first())
    return failures.RunFacts(
        ticket=ticket.pk, ended=ticket.ended_at is not None, live_assignment=live,
        last_state=runs[0][1] if runs else None,
        attempts=Assignment.objects.filter(ticket=ticket).count(),
    )


def _last_failure(ticket: Ticket) -> failures.Failure | None:
    run = Assignment.objects.filter(ticket=ticket).order_by("-pk").first()
    if run is None:
        return None
    return failures.last_failure(run.state, run.failure_code, run.failure_message,
                                 run.ended_at, run.end_reason)


def _redispatch(ticket: Ticket, cause: failures.Cause) -> Assignment | None:
    """A failed run is dispatched again (same mandate, a new run) when the rule says so;
    inputs shown as not delivered go back in line for the new run."""
    attempt = failures.redispatch(_run_facts(ticket), cause)
    if attempt is None:
        return None
    assignment = _new_assignment(ticket, attempt=attempt)
    _enqueue(rules.open_plan(ticket.pk, assignment.pk))
    stranded = Input.objects.filter(ticket=ticket, delivered_at__isnull=True,
                                    failed_at__isnull=False, kind__in=_DELIVERED_KINDS)
    for item in stranded:
        item.failed_at = None
        item.failure = ""
        item.save(update_fields=["failed_at", "failure"])
        effect = rules.deliver(item.pk, ticket.pk)
        outbox.enqueue(effect.kind, effect.key, effect.payload)
    return assignment


# Inputs that are put into the worker's session (recorded follow-ups are kept, not sent).
_DELIVERED_KINDS = ("message", "answer", "policy", "operator")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_assignment_token(*, assignment_id: int) -> str:
    """A new bearer token scoped to one assignment (the executor's tools use it). Issued at
    dispatch; issuing again (a re-dispatch after a crash) invalidates the old one. Only the
    hash is stored."""
    token = "amx_" + secrets.token_urlsafe(32)
    with transaction.atomic(durable=True):
        _ticket, assignment = locks.ticket_of_assignment(assignment_id)
        assignment.token_hash = token_hash(token)
        assignment.save(update_fields=["token_hash"])
    return token


# --- commands ---------------------------------------------------------------------------


def open_ticket(*, trigger_id: int, title: str) -> Ticket:
    """Accept a trigger as work: the ticket, its immutable mandate, the subscription to its
    thread and the first assignment, dispatched through the outbox."""
    with transaction.atomic(durable=True):
        trigger = locks.trigger(trigger_id)
        return _open(trigger, title)


def _open(trigger: Trigger, title: str) -> Ticket:
    title = (title or "").strip()
    if not title:
        raise InvalidCommand("title must not be empty")
    if trigger.decision not in ("explicit", "inferred") or not trigger.strength:
        raise InvalidCommand(f"trigger {trigger.pk} was not admitted by the policy")
    if Subscription.objects.filter(thread=trigger.thread).exists():
        raise ThreadAlreadyBound(
            f"thread {trigger.thread} already belongs to a ticket; follow-ups flow there"
        )
    ticket = Ticket.objects.create(
        short_name=f"pending-{secrets.token_hex(8)}", title=title[:300], thread=trigger.thread,
        channel=_chat_channel_of(trigger),
    )
    ticket.short_name = rules.short_name(ticket.pk, title)
    ticket.save(update_fields=["short_name"])
    Mandate.objects.create(
        ticket=ticket,
        trigger=trigger,
        policy_version=trigger.policy_version,
        scope=trigger.scope,
        strength=trigger.strength,
        rule=trigger.rule,
        requester=trigger.actor,
        basis={
            "source": trigger.source.slug,
            "source_kind": trigger.source.kind,
            "scope": trigger.scope,
            "addressed": trigger.addressed,
            "receives_all": trigger.receives_all,
            "trigger": trigger.external_id,
        },
    )
    Subscription.objects.create(ticket=ticket, thread=trigger.thread)
    if trigger.disposition != "admitted":
        trigger.disposition = "admitted"
        trigger.save(update_fields=["disposition"])
    assignment = _new_assignment(ticket)
    _enqueue(rules.open_plan(ticket.pk, assignment.pk))
    return ticket


def _chat_channel_of(trigger: Trigger) -> Channel | None:
    """A request that came from a chat (Lark, web chat) hears the result there."""
    if trigger.source.kind == "github":
        return None
    channel, _ = Channel.objects.get_or_create(
        source=trigger.source, address=trigger.thread.key,
        defaults={"kind": "chat", "name": trigger.thread.title[:200]},
    )
    return channel


def bind_thread(*, ticket_id: int, thread_id: int) -> Subscription:
    """Subscribe one more thread to a ticket (e.g. the PR it opened): its follow-ups flow in."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        thread = Thread.objects.filter(pk=thread_id).first()
        if thread is None:
            raise NotFound(f"thread {thread_id} does not exist")
        existing = Subscription.objects.filter(thread=thread).first()
        if existing is not None:
            if existing.ticket_id == ticket.pk:
                return existing
            raise ThreadAlreadyBound(f"thread {thread} belongs to ticket {existing.ticket_id}")
        try:
            with transaction.atomic():
                return Subscription.objects.create(ticket=ticket, thread=thread)
        except IntegrityError as exc:
            raise ThreadAlreadyBound(f"thread {thread} was bound meanwhile") from exc


def stop_ticket(*, ticket_id: int, by: str) -> Ticket:
    """An operator ends a ticket now; its live assignment is told to stop."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        plan = rules.stop(_view(ticket), by=by, now=clock())
        for name, value in plan.changes.items():
            setattr(ticket, name, value)
        ticket.save(update_fields=list(plan.changes))
        _enqueue(plan)
    return ticket


def add_input(*, ticket_id: int, text: str, author: str, kind: str = "operator",
              is_human: bool = True) -> Input:
    """Give the executor something to read; delivered into its session by the outbox."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        rules.add_input(_view(ticket), text=text)
        item = Input.objects.create(
            ticket=ticket, kind=kind, text=text, author=author, is_human=is_human
        )
        if is_human:  # the new run first, so the input finds its session
            _redispatch(ticket, failures.Cause.INPUT)
        effect = rules.deliver(item.pk, ticket.pk)
        outbox.enqueue(effect.kind, effect.key, effect.payload)
    return item


def retry_ticket(*, ticket_id: int) -> Assignment | None:
    """An operator dispatches a failed ticket again (refused when it ended or has not
    failed). On a ticket a cap blocked, Retry waives what was spent so far (one more cap's
    worth), sends its held messages and lets its held inputs and dispatch go."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        now = clock()
        found = guarding.reached([ticket], now)[ticket.pk]
        if found is None:
            return _redispatch(ticket, failures.Cause.RETRY)
        spend = guarding.spends([ticket], now)[ticket.pk]
        before = guards.Waiver.from_dict(ticket.guard_waiver)
        ticket.guard_waiver = guards.waive(found, spend, now, before).as_dict()
        ticket.save(update_fields=["guard_waiver"])
        if found.cap == guards.HOURLY_MESSAGES:
            _release_messages(ticket, now, everything=True)
        _release_held_work(ticket)
        if _run_facts(ticket).last_state == "failed":
            return _redispatch(ticket, failures.Cause.RETRY)
        return None


def agent_settings_changed() -> list[int]:
    """Fact: the agent settings were saved. Every live ticket whose last run failed is
    dispatched again (the new settings may be what it lacked); one transaction per ticket.
    Answers the tickets dispatched again."""
    latest = Assignment.objects.filter(ticket=OuterRef("pk")).order_by("-pk")
    candidates = (
        Ticket.objects.filter(ended_at__isnull=True)
        .annotate(last_state=Subquery(latest.values("state")[:1]))
        .filter(last_state="failed").order_by("pk").values_list("pk", flat=True)
    )
    again = []
    for ticket_id in list(candidates):
        with transaction.atomic(durable=True):
            ticket = locks.ticket(ticket_id)
            if _redispatch(ticket, failures.Cause.SETTINGS) is not None:
                again.append(ticket_id)
    guards_rechecked()  # a raised cap lets held work and messages go now
    return again


def guards_rechecked() -> list[int]:
    """Fact: time passed or a cap changed. On each live ticket with something held (a
    message, an input, a dispatch), what no cap blocks any more goes now: held messages
    that fit in this hour, in order; held inputs and dispatches are made due at once.
    One transaction per ticket. Answers the tickets where something was released."""
    held = (
        set(TicketMessage.objects.filter(released_at__isnull=True)
            .values_list("ticket_id", flat=True))
        | set(Input.objects.exclude(held="").filter(delivered_at__isnull=True,
                                                    ticket__ended_at__isnull=True)
              .values_list("ticket_id", flat=True))
        | set(Assignment.objects.filter(state="dispatching", ticket__ended_at__isnull=True)
              .exclude(held="").values_list("ticket_id", flat=True))
    )
    released = []
    for ticket_id in sorted(held):
        with transaction.atomic(durable=True):
            ticket = locks.ticket(ticket_id)
            now = clock()
            sent = _release_messages(ticket, now)
            found = guarding.reached([ticket], now)[ticket.pk]
            if (found is None and _release_held_work(ticket)) or sent:
                released.append(ticket_id)
    return released


def _release_held_work(ticket: Ticket) -> bool:
    """Held inputs and the held dispatch are made due now; their handlers look again."""
    items = list(Input.objects.filter(ticket=ticket, delivered_at__isnull=True).exclude(held=""))
    for item in items:
        effect = rules.deliver(item.pk, ticket.pk)
        outbox.enqueue(effect.kind, effect.key, effect.payload)
    runs = list(Assignment.objects.filter(ticket=ticket, state="dispatching").exclude(held=""))
    for run in runs:
        effect = rules.dispatch(run.pk, ticket.pk)
        outbox.enqueue(effect.kind, effect.key, effect.payload)
    return bool(items or runs)


def _held(ticket: Ticket, now) -> guards.Reached | None:
    """The cap that keeps new work from the ticket's worker now, if any (a blocked ticket
    gets nothing new, whichever cap blocks it)."""
    return guarding.reached([ticket], now)[ticket.pk]


def input_held(*, input_id: int) -> guards.Reached | None:
    """Fact: a `deliver` effect is about to put an input into the worker's session. While
    a cap blocks the ticket the input is held (it says why) and the cap is answered;
    otherwise a hold is lifted and None answered."""
    with transaction.atomic(durable=True):
        ticket, item = locks.ticket_of_input(input_id)
        return _note_hold(ticket, item)


def dispatch_held(*, assignment_id: int) -> guards.Reached | None:
    """Fact: a run is about to be started. While a cap blocks the ticket it waits (the run
    says why)."""
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        return _note_hold(ticket, assignment)


def _note_hold(ticket: Ticket, row: Input | Assignment) -> guards.Reached | None:
    """Record on an input or a run why a cap holds it (or that nothing does any more)."""
    found = _held(ticket, clock()) if ticket.ended_at is None else None
    text = (found.text if found else "")[:200]
    if row.held != text:
        row.held = text
        row.save(update_fields=["held"])
    return found


# --- facts ------------------------------------------------------------------------------


def assignment_started(*, assignment_id: int, session_id: int | None = None) -> None:
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        if assignment.state in ("ended", "failed"):
            return  # stopped meanwhile: the late fact changes nothing
        assignment.state = "running"
        assignment.started_at = assignment.started_at or clock()
        assignment.save(update_fields=["state", "started_at"])
        if session_id is not None and ticket.session_id != session_id:
            ticket.session_id = session_id
            ticket.save(update_fields=["session"])


def assignment_ended(*, assignment_id: int, reason: str = "", failed: bool = False,
                     failure: failures.Failure | None = None) -> None:
    """Fact: a run ended; a failed one keeps its failure whole (code and message)."""
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        if assignment.state in ("ended", "failed"):
            return
        if failed and failure is None:
            failure = failures.Failure(failures.DISPATCH_ERROR, reason)
        assignment.state = "failed" if failed else "ended"
        assignment.ended_at = clock()
        assignment.end_reason = ((failure.code if failure else "") or reason)[:60]
        assignment.failure_code = failure.code[:60] if failure else ""
        assignment.failure_message = failure.message if failure else ""
        assignment.save(update_fields=["state", "ended_at", "end_reason", "failure_code",
                                       "failure_message"])
        _end_if_due(ticket)


def worker_turn_ended(*, session_id: int, state: str, error_code: str = "",
                      error_message: str = "", ended_at: datetime | None = None) -> None:
    """Fact: the worker session of a ticket finished a turn. A failed turn fails the run
    (the stage says so until a person speaks); any end of turn answers the messages the
    worker owned, so a closed PR may now end the ticket. `ended_at` is when the turn ended:
    the fact may arrive later (through the outbox, after a crash), and a person who spoke
    in between spoke after the worker's last word."""
    ticket_id = (
        Ticket.objects.filter(session_id=session_id).values_list("pk", flat=True).first()
    )
    if ticket_id is None:
        return  # not a worker session
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        assignment = (
            Assignment.objects.filter(LIVE_ASSIGNMENT, ticket=ticket).order_by("-pk").first()
        )
        if assignment is None:
            return
        assignment.last_turn_at = ended_at or clock()
        fields = ["last_turn_at"]
        if state == "failed":
            failure = failures.turn_failure(error_code, error_message)
            assignment.state = "failed"
            assignment.ended_at = assignment.last_turn_at
            assignment.end_reason = failure.code[:60]
            assignment.failure_code = failure.code[:60]
            assignment.failure_message = failure.message
            fields += ["state", "ended_at", "end_reason", "failure_code", "failure_message"]
        assignment.save(update_fields=fields)
        _end_if_due(ticket)


def input_delivered(*, input_id: int) -> None:
    with transaction.atomic(durable=True):
        _ticket, item = locks.ticket_of_input(input_id)
        if item.delivered_at is None:
            item.delivered_at = clock()
            item.failed_at = None
            item.failure = ""
            item.save(update_fields=["delivered_at", "failed_at", "failure"])


def input_waiting(*, input_id: int) -> failures.Delivery:
    """Fact: a `deliver` effect found no worker session for its input. While a run is
    being dispatched it waits (bounded: the dispatch settles either way); with no run that
    could take it the input is marked not delivered, with the run's failure as reason."""
    with transaction.atomic(durable=True):
        ticket, item = locks.ticket_of_input(input_id)
        if item.delivered_at is not None or item.failed_at is not None:
            return failures.Delivery.UNDELIVERABLE  # settled already
        facts = _run_facts(ticket)
        verdict = failures.delivery(has_session=ticket.session_id is not None,
                                    ended=facts.ended, live_assignment=facts.live_assignment)
        if verdict is failures.Delivery.UNDELIVERABLE:
            item.failed_at = clock()
            item.failure = failures.undelivered_reason(_last_failure(ticket), facts.ended)
            item.save(update_fields=["failed_at", "failure"])
        return verdict


def delivery_failed(*, input_id: int, reason: str) -> None:
    with transaction.atomic(durable=True):
        _ticket, item = locks.ticket_of_input(input_id)
        if item.delivered_at is not None:
            return  # a late failure after a success changes nothing
        item.failed_at = clock()
        item.failure = reason
        item.save(update_fields=["failed_at", "failure"])


# --- routing: the two fates of a message (seed 002) ------------------------------------


def route_trigger(*, trigger_id: int) -> str:
    """Fact: a trigger was recorded and the gate decided. Route it: follow-up, revival,
    a new ticket, an eval, or nothing. Returns the route taken (the trigger's disposition).
    Intake routes in its own transaction; this is for triggers decided elsewhere."""
    with transaction.atomic(durable=True):
        trigger = locks.trigger(trigger_id)
        if trigger.disposition:
            return trigger.disposition  # routed already: a redelivery changes nothing
        return _route(trigger)


def _route(trigger: Trigger, acceptance: str | None = None) -> str:
    """Route a locked trigger that has no disposition yet; returns its disposition."""
    taken, ticket = _route_of(trigger, acceptance)
    _take(trigger, taken, ticket)
    return trigger.disposition


def _route_of(trigger: Trigger, acceptance: str | None) -> tuple[Route, Ticket | None]:
    """Which route a trigger takes (its subscribed ticket locked); the trigger need not be
    stored yet, so intake can insert it with its disposition in one statement."""
    subscription = Subscription.objects.filter(thread_id=trigger.thread_id).first()
    ticket = locks.ticket(subscription.ticket_id) if subscription else None
    taken = route(
        RoutingFacts(
            decision=trigger.decision or "ignore",
            acceptance=acceptance or policy_hooks.acceptance_mode(),
            is_human=trigger.is_human and not trigger.is_bot,
            own_message=bool(trigger.meta.get("own_message")),
            subscribed_ticket=ticket.pk if ticket else None,
            ticket_ended=bool(ticket and ticket.ended_at),
        )
    )
    return taken, ticket


def _disposition(taken: Route) -> str:
    if taken is Route.OPEN:
        return "admitted"
    return "evaluating" if taken is Route.EVALUATE else str(taken)


def _take(trigger: Trigger, taken: Route, ticket: Ticket | None) -> None:
    """Do what the route says, and record it as the trigger's disposition (a trigger
    inserted with it already set is not written again)."""
    if taken in (Route.FOLLOW_UP, Route.REVIVE, Route.RECORD):
        if taken is Route.REVIVE:
            _revive(ticket)
        _input_from_trigger(ticket, trigger, deliver=taken is not Route.RECORD)
    elif taken is Route.EVALUATE:
        _start_eval(trigger)
    if taken is Route.OPEN:
        _open(trigger, _title(trigger))
    elif trigger.disposition != _disposition(taken):
        trigger.disposition = _disposition(taken)
        trigger.save(update_fields=["disposition"])


def _title(trigger: Trigger) -> str:
    return trigger.thread.title or (trigger.text or "").strip().splitlines()[0][:120] or (
        f"{trigger.scope} from {trigger.actor}"
    )


def _input_from_trigger(ticket: Ticket, trigger: Trigger, *, deliver: bool) -> Input:
    item = Input.objects.create(
        ticket=ticket,
        kind="message",
        text=trigger.text,
        author=trigger.actor,
        is_human=trigger.is_human and not trigger.is_bot,
        trigger=trigger,
    )
    if deliver:
        if item.is_human:  # the new run first, so the input finds its session
            _redispatch(ticket, failures.Cause.INPUT)
        effect = rules.deliver(item.pk, ticket.pk)
        outbox.enqueue(effect.kind, effect.key, effect.payload)
    return item


def _revive(ticket: Ticket) -> None:
    """Same mandate, a new run: no new eval, no new authority."""
    ticket.ended_at = None
    ticket.end_reason = ""
    ticket.save(update_fields=["ended_at", "end_reason"])
    attempt = ticket.assignments.count() + 1
    assignment = _new_assignment(ticket, attempt=attempt)
    _enqueue(rules.open_plan(ticket.pk, assignment.pk))


def _start_eval(trigger: Trigger, policy_version: str = "") -> Eval:
    evaluation = Eval.objects.create(
        trigger=trigger,
        policy_version=policy_version or trigger.policy_version or policy_hooks.current_version(),
    )
    outbox.enqueue("assess", f"eval:{evaluation.pk}", {"eval": evaluation.pk})
    return evaluation


def eval_finished(*, eval_id: int, result: str, note: str = "") -> str:
    """Fact: triage of an inferred candidate ended. A discarded eval's result is dropped."""
    if result not in ("accept", "decline", "needs_person"):
        raise InvalidCommand(f"unknown eval result {result!r}")
    with transaction.atomic(durable=True):
        evaluation = (
            Eval.objects.select_for_update(no_key=True).select_related("trigger")
            .filter(pk=eval_id).first()
        )
        if evaluation is None:
            raise NotFound(f"eval {eval_id} does not exist")
        if evaluation.state != "running":
            return evaluation.state
        evaluation.state = "done"
        evaluation.result = result
        evaluation.note = clip_routing_note(note)
        evaluation.finished_at = clock()
        evaluation.save(update_fields=["state", "result", "note", "finished_at"])
        trigger = locks.trigger(evaluation.trigger_id)
        accepted = result == "accept" and policy_hooks.acceptance_mode() == "auto"
        if accepted and not Subscription.objects.filter(thread=trigger.thread).exists():
            _open(trigger, _title(trigger))
        else:
            trigger.disposition = {"decline": "declined", "needs_person": "needs_person"}.get(
                result, "not_accepted"
            )
            trigger.save(update_fields=["disposition"])
        return trigger.disposition


# --- a new policy version (seed 002 策略版本) -------------------------------------------


def policy_changed(*, old_version: str | None, new_version: str) -> dict:
    """Fact: a new policy version was saved. Every running eval is discarded and its trigger
    decided and routed again under the new version (an old judgement does not hold under new
    rules); each live ticket the change affects (policy.effects) receives one input telling
    its executor what changed, delivered through the outbox. Nothing is cancelled and nobody
    else is told. One transaction per eval and per ticket (each its own aggregate); telling
    the same change twice adds nothing."""
    change = policy_hooks.change(old_version, new_version)
    running = Eval.objects.filter(state="running").order_by("pk").values_list("pk", flat=True)
    requeued = [pk for pk in list(running) if _requeue_eval(pk, change) is not None]
    informed = [a.ticket for a in change.affected if _tell_policy_change(a, new_version)]
    return {"requeued_evals": requeued, "informed_tickets": informed}


def _requeue_eval(eval_id: int, change: policy_hooks.PolicyChange) -> str | None:
    with transaction.atomic(durable=True):
        evaluation = Eval.objects.select_for_update(no_key=True).filter(pk=eval_id).first()
        if evaluation is None or evaluation.state != "running":
            return None  # finished meanwhile
        if evaluation.policy_version == change.new_version:
            return None  # started under the new rules already
        evaluation.state = "discarded"
        evaluation.finished_at = clock()
        evaluation.save(update_fields=["state", "finished_at"])
        trigger = locks.trigger(evaluation.trigger_id)
        if trigger.disposition == "handed_back":
            # handed back by a ticket: no gate, it is a candidate again if acceptance allows
            if change.policy.auto:
                _start_eval(trigger, policy_version=change.new_version)
            return trigger.disposition
        verdict = policy_hooks.decide(trigger, change.policy)
        trigger.decision = verdict.decision
        trigger.strength = verdict.strength or ""
        trigger.rule = verdict.rule or ""
        trigger.reason = verdict.reason or ""
        trigger.policy_version = change.new_version
        trigger.disposition = ""
        trigger.save(update_fields=["decision", "strength", "rule", "reason", "policy_version",
                                    "disposition"])
        return _route(trigger)


def _tell_policy_change(affected, new_version: str) -> bool:
    author = f"policy {new_version[:12]}"
    with transaction.atomic(durable=True):
        ticket = locks.ticket(affected.ticket)
        if ticket.ended_at is not None:
            return False  # ended meanwhile: nothing to tell
        if Input.objects.filter(ticket=ticket, kind="policy", author=author).exists():
            return False  # told already
        item = Input.objects.create(ticket=ticket, kind="policy", text=affected.text,
                                    author=author, is_human=False)
        effect = rules.deliver(item.pk, ticket.pk)
        outbox.enqueue(effect.kind, effect.key, effect.payload)
    return True


# --- what the executor reports (through its scoped tools) ------------------------------


def report_received(*, assignment_id: int, status: str, text: str = "") -> Report:
    """Fact: the executor reported. Blocked and failed reports are relayed to the thread;
    progress and done are not (the PR speaks for itself)."""
    messages.check_report(status, text)
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        report = Report.objects.create(
            ticket=ticket, assignment=assignment, status=status, text=text
        )
        if status in ("blocked", "failed") and text.strip():
            _relay(ticket, f"report:{report.pk}", text)
        _end_if_due(ticket)
    return report


def question_asked(*, assignment_id: int, text: str, options: list | None = None,
                   multi: bool = False, message_ref: str = "") -> Question:
    """Fact: the executor asked a structured question; only this waits for a person."""
    options = messages.check_question(text, options)
    with transaction.atomic(durable=True):
        ticket, _assignment = locks.ticket_of_assignment(assignment_id)
        question = Question.objects.create(
            ticket=ticket, text=text, options=options, multi=multi, message_ref=message_ref[:300]
        )
        body = text if not options else text + "\n" + "\n".join(f"- {o}" for o in options)
        _relay(ticket, f"question:{question.pk}", body)
    return question


def answer_question(*, question_id: int, answer, by: str) -> Input:
    """A person answers an open question; the answer reaches the executor as an input."""
    with transaction.atomic(durable=True):
        ticket_id = Question.objects.filter(pk=question_id).values_list("ticket_id", flat=True)
        ticket_id = ticket_id.first()
        if ticket_id is None:
            raise NotFound(f"question {question_id} does not exist")
        ticket = locks.ticket(ticket_id)
        question = Question.objects.get(pk=question_id)
        if question.answered_at is not None:
            raise InvalidCommand("this question has already been answered")
        text = answer if isinstance(answer, str) else ", ".join(map(str, answer or []))
        messages.check_text(text, "answer")
        rules.add_input(_view(ticket), text=text)
        question.answered_at = clock()
        question.answer = answer
        question.save(update_fields=["answered_at", "answer"])
        item = Input.objects.create(
            ticket=ticket, kind="answer", text=f"Answer to “{question.text}”: {text}", author=by
        )
        _redispatch(ticket, failures.Cause.INPUT)  # the new run first: the answer follows
        effect = rules.deliver(item.pk, ticket.pk)
        outbox.enqueue(effect.kind, effect.key, effect.payload)
    return item


def reply_requested(*, assignment_id: int, text: str) -> None:
    """The executor posts on its thread through the source (ordered per thread).

    The run and the text are the reply's idempotency key: an executor that asks again
    because a crash cut the answer to its first ask (or a turn resumed after its host died
    repeats it) gets the same effect while it waits, and the same message id once sent, so
    the thread shows it once."""
    messages.check_text(text, "reply text")
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        digest = hashlib.sha256(text.encode()).hexdigest()[:24]
        _relay(ticket, f"reply:{assignment.pk}:{digest}", text,
               message_id=f"reply-{assignment.pk}-{digest}")


def hand_back(*, assignment_id: int, trigger_id: int, reason: str) -> Trigger:
    """Work outside the mandate goes back; only now may it become an eval candidate."""
    messages.check_text(reason, "reason")
    with transaction.atomic(durable=True):
        ticket, _assignment = locks.ticket_of_assignment(assignment_id)
        trigger = Trigger.objects.select_for_update(no_key=True).filter(pk=trigger_id).first()
        if trigger is None or not Input.objects.filter(ticket=ticket, trigger=trigger).exists():
            raise NotFound(f"trigger {trigger_id} is not a message this ticket received")
        trigger.disposition = "handed_back"
        trigger.reason = reason[:80]
        trigger.save(update_fields=["disposition", "reason"])
        if policy_hooks.acceptance_mode() == "auto":
            _start_eval(trigger)
    return trigger


# --- what the sources report about pull requests ----------------------------------------


def pr_linked(*, ticket_id: int, pr_thread_id: int, url: str = "") -> None:
    """Fact: a PR for this ticket exists (opened by the agent, or by hand linking the
    ticket's thread). Its thread joins the ticket's subscriptions."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        thread = Thread.objects.get(pk=pr_thread_id)
        holder = Subscription.objects.filter(thread=thread).first()
        if holder is None:
            Subscription.objects.create(ticket=ticket, thread=thread)
        _note_open(thread)
        ticket.pr_url = url or thread.url or ticket.pr_url
        ticket.pr_state = "open"
        ticket.save(update_fields=["pr_url", "pr_state"])


def pr_opened(*, ticket_id: int, thread_key: str, url: str, title: str = "") -> Thread:
    """Fact: the worker opened a pull request on the ticket's source. The PR's thread joins
    the ticket's subscriptions, so its reviews and its merge reach the ticket."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        thread, _ = Thread.objects.get_or_create(
            source=ticket.thread.source, key=thread_key,
            defaults={"url": url[:500], "title": title[:300]},
        )
        if not Subscription.objects.filter(thread=thread).exists():
            Subscription.objects.create(ticket=ticket, thread=thread)
        _note_open(thread)
        ticket.pr_url = url[:500]
        ticket.pr_state = "open"
        ticket.save(update_fields=["pr_url", "pr_state"])
    return thread


def pr_closed(*, pr_thread_id: int, merged: bool) -> Ticket | None:
    """Fact: the PR was merged or closed. The ticket ends when nothing is in flight;
    otherwise it ends as soon as the executor answers or its run ends."""
    with transaction.atomic(durable=True):
        return _pr_final(pr_thread_id, merged)


def _note_open(thread: Thread) -> None:
    # A webhook may have told its state already (it raced the tool): that one stands.
    if "pr_state" not in thread.meta:
        thread.meta = {**thread.meta, "pr_state": "open"}
        thread.save(update_fields=["meta"])


def _pr_final(pr_thread_id: int, merged: bool) -> Ticket | None:
    subscription = Subscription.objects.filter(thread_id=pr_thread_id).first()
    if subscription is None:
        return None
    ticket = locks.ticket(subscription.ticket_id)
    other_open = (
        Thread.objects.filter(subscription__ticket=ticket, meta__pr_state="open")
        .exclude(pk=pr_thread_id).exists()
    )
    ticket.pr_state = linking.pr_state_after(merged, other_open)
    ticket.save(update_fields=["pr_state"])
    _end_if_due(ticket)
    return ticket


def _pull_request_reported(source: Source, thread: Thread, facts: dict) -> None:
    """A pull request's state, head or text was reported. An unlinked one joins the
    ticket whose branch is its head or whose issue it closes, whoever opened it; a merged
    or closed one may end its ticket; a reopened one is open again."""
    subscription = Subscription.objects.filter(thread=thread).first()
    if subscription is not None:
        ticket_id = subscription.ticket_id
    else:
        ticket_id = _ticket_for_pull(source, thread, facts)
        if ticket_id is None:
            return
        Subscription.objects.create(ticket_id=ticket_id, thread=thread)
    ticket = locks.ticket(ticket_id)
    url = (facts.get("pr_url") or thread.url or ticket.pr_url)[:500]
    if subscription is None and url != ticket.pr_url:
        ticket.pr_url = url
        ticket.save(update_fields=["pr_url"])
    state = facts.get("pr_state")
    if state in ("merged", "closed"):
        _pr_final(thread.pk, state == "merged")
    elif ticket.pr_state != "open":
        ticket.pr_state = "open"
        ticket.save(update_fields=["pr_state"])


def _ticket_for_pull(source: Source, thread: Thread, facts: dict) -> int | None:
    pull = linking.PullFacts(facts.get("pr_state") or "", facts.get("head_ref") or "",
                             tuple(facts.get("closes") or ()))
    short = linking.short_name_of_branch(pull.head_ref)
    by_branch = None
    if short:
        row = Ticket.objects.filter(short_name=short).values_list("pk", "ended_at").first()
        by_branch = linking.Candidate(row[0], row[1] is not None) if row else None
    repo = thread.key.partition("#")[0]
    keys = [f"{repo}#{n}" for n in pull.closes]
    found = {
        key: linking.Candidate(pk, ended is not None)
        for pk, key, ended in Ticket.objects.filter(thread__source=source, thread__key__in=keys)
        .values_list("pk", "thread__key", "ended_at")
    }
    return linking.ticket_to_link(pull, by_branch, [found[k] for k in keys if k in found])


def _issue_reported(thread: Thread) -> None:
    """The ticket's own issue was closed (or reopened): it may end now."""
    subscription = Subscription.objects.filter(thread=thread).first()
    if subscription is None:
        return
    ticket = locks.ticket(subscription.ticket_id)
    if ticket.thread_id == thread.pk:
        _end_if_due(ticket)


def _end_if_due(ticket: Ticket) -> None:
    if ticket.ended_at is not None:
        return
    pr_final = ticket.pr_state in ("merged", "closed")
    issue_closed = not pr_final and Thread.objects.filter(
        pk=ticket.thread_id, meta__issue_state="closed").exists()
    if not pr_final and not issue_closed:
        return
    in_flight = Assignment.objects.filter(ticket=ticket, state="dispatching").exists()
    answered_at = _last_answer_at(ticket)
    unanswered = Input.objects.filter(ticket=ticket, is_human=True, kind="message")
    if answered_at is not None:
        unanswered = unanswered.filter(created_at__gt=answered_at)
    reason = end_reason(EndFacts(
        pr_final, in_flight, unanswered.exists(), issue_closed=issue_closed,
        pr_open=ticket.pr_state == "open", merged=ticket.pr_state == "merged",
    ))
    if reason is None:
        return
    ticket.ended_at = clock()
    ticket.end_reason = reason
    ticket.save(update_fields=["ended_at", "end_reason"])
    _notice_result(ticket)


def _last_answer_at(ticket: Ticket):
    """When the executor last answered: a non-progress report, the end of a turn or run."""
    report = (
        Report.objects.filter(ticket=ticket).exclude(status="progress")
        .order_by("-id").values_list("created_at", flat=True).first()
    )
    runs = Assignment.objects.filter(ticket=ticket).values_list("ended_at", "last_turn_at")
    times = [t for t in (report, *(x for pair in runs for x in pair)) if t]
    return max(times, default=None)


def _notice_result(ticket: Ticket) -> None:
    """One notice of the final result where the request came from: the chat thread that
    asked, else the notice channel its source names; otherwise none (the PR shows it)."""
    channel = ticket.channel or _configured_notice_channel(ticket.thread.source)
    if channel is None:
        return
    if ticket.end_reason == "issue_closed":
        text = f"{ticket.title}: issue closed. {ticket.thread.url}".strip()
    else:
        verb = "merged" if ticket.pr_state == "merged" else "closed without merging"
        text = f"{ticket.title}: pull request {verb}. {ticket.pr_url}".strip()
    _send(ticket, "notice", f"ticket:{ticket.pk}:end:{ticket.assignments.count()}",
          {"ticket": ticket.pk, "channel": channel.pk, "text": text},
          channel=outbox.channel_key(channel.source.slug, channel.address))


def _configured_notice_channel(source: Source) -> Channel | None:
    target = notices.parse_notice_channel((source.config or {}).get("notice_channel"))
    if target is None:
        return None
    chat = Source.objects.filter(slug=target[0], kind__in=notices.CHAT_KINDS).first()
    if chat is None:
        return None  # the named chat source is gone: no notice rather than a wrong one
    channel, _ = Channel.objects.get_or_create(
        source=chat, address=target[1][:300], defaults={"kind": "chat"})
    return channel


def _relay(ticket: Ticket, key: str, text: str, message_id: str = "") -> None:
    thread = ticket.thread
    payload = {"ticket": ticket.pk, "thread": thread.pk, "text": text}
    if message_id:  # else the effect's id is the message's
        payload["message_id"] = message_id
    _send(ticket, "relay", f"ticket:{ticket.pk}:{key}", payload,
          channel=outbox.channel_key(thread.source.slug, thread.key))


def _send(ticket: Ticket, kind: str, key: str, payload: dict, channel: str) -> None:
    """A message on the ticket's behalf (its lock held): out now, or held by the hourly
    message cap (kept, shown on the ticket, released in order by _release_messages)."""
    now = clock()
    spend = guarding.spends([ticket], now)[ticket.pk]
    released = now if guards.may_send(guarding.caps(), spend) else None
    TicketMessage.objects.create(ticket=ticket, kind=kind, key=key, channel=channel,
                                 payload=payload, created_at=now, released_at=released)
    if released is not None:
        outbox.enqueue(kind, key, payload, channel=channel)


def _release_messages(ticket: Ticket, now, everything: bool = False) -> int:
    """Held messages that fit in this hour go out, oldest first (all of them on Retry)."""
    spend = guarding.spends([ticket], now)[ticket.pk]
    count = spend.held if everything else guards.releasable(guarding.caps(), spend)
    if not count:
        return 0
    held = list(TicketMessage.objects.filter(ticket=ticket, released_at__isnull=True)
                .order_by("pk")[:count])
    for message in held:
        message.released_at = now
        message.save(update_fields=["released_at"])
        outbox.enqueue(message.kind, message.key, message.payload, channel=message.channel)
    return len(held)



# --- intake's consumer (tickets/consumer.py) ---------------------------------------------


def _locate_on_pull_request(source: Source, result):
    """A CI result on a pull request's head reaches only a followed pull request (one
    that belongs to a ticket); one that names no pull request (a commit status, a fork's
    check) belongs to the open, followed pull request whose head is its commit or branch.
    Anything else concerns no ticket and leaves no trigger."""
    if not intake_core.is_trigger(result) or result.scope != "ci_pull_request":
        return result
    if result.thread:
        followed = Subscription.objects.filter(thread__source=source,
                                               thread__key=result.thread).exists()
        return result if followed else intake_core.ignored("pull_request_not_followed")
    match = result.meta.get("match_pr") or {}
    sha, branches = match.get("sha") or "", list(match.get("branches") or [])
    rows = (
        Thread.objects.filter(source=source, subscription__isnull=False,
                              key__startswith=f"{match.get('repo')}#", meta__pr_state="open")
        .filter(Q(meta__head_sha=sha) | Q(meta__head_ref__in=branches))
        .values_list("key", "meta")
    )
    key = linking.pr_for_commit(sha, branches, [
        (k, m.get("head_ref") or "", m.get("head_sha") or "") for k, m in rows])
    if key is None:
        return intake_core.ignored("pull_request_not_followed")
    return dataclasses.replace(result, thread=key)
