"""A new policy version (seed 002 策略版本): running evals are decided again under it, and
each live ticket it affects is told what changed. The rules: tickets/core/evals.py
(`requeue`) and policy/effects.py (who is affected)."""

from __future__ import annotations

from django.db import transaction

from amux_common.clock import now as clock
from intake.models import Trigger
from tickets import locks, policy_hooks
from tickets.actions import common
from tickets.actions.routing import route_locked, start_eval
from tickets.core import evals, rules
from tickets.core import main_session as main_rules
from tickets.models import Eval, Input


def policy_changed(*, old_version: str | None, new_version: str) -> dict:
    """Fact: a new policy version was saved. Every running eval is discarded and its trigger
    decided and routed again under the new version (an old judgement does not hold under new
    rules); each live ticket the change affects (policy.effects) receives one input telling
    its executor what changed, delivered through the outbox — unless that input would wake
    a worker with no run in flight whose source no longer stands (revalidation before a
    resume: then it ends, saying why). Nothing is cancelled and nobody else is told. One
    transaction per eval and per ticket (each its own aggregate); telling the same change
    twice adds nothing."""
    change = policy_hooks.change(old_version, new_version)
    running = Eval.objects.filter(state="running").order_by("pk").values_list("pk", flat=True)
    requeued = [pk for pk in list(running) if _requeue_eval(pk, change) is not None]
    for pk in _awaiting_main(new_version):
        _decide_awaiting_again(pk, change)
    informed = [a.ticket for a in change.affected if _tell_policy_change(a, new_version)]
    return {"requeued_evals": requeued, "informed_tickets": informed}


def _requeue_eval(eval_id: int, change: policy_hooks.PolicyChange) -> str | None:
    with transaction.atomic(durable=True):
        evaluation = Eval.objects.select_for_update(no_key=True).filter(pk=eval_id).first()
        if evaluation is None:
            return None
        trigger = locks.trigger(evaluation.trigger_id)
        decision = evals.requeue(
            state=evaluation.state, eval_version=evaluation.policy_version,
            new_version=change.new_version, handed_back=trigger.disposition == "handed_back",
            auto=change.policy.auto)
        if decision is evals.Requeue.KEEP:
            return None  # finished meanwhile, or started under the new rules already
        common.save_changes(evaluation, {"state": "discarded", "finished_at": clock()})
        if decision is evals.Requeue.EVALUATE_AGAIN:
            start_eval(trigger, policy_version=change.new_version)
        if decision is not evals.Requeue.DECIDE_AGAIN:
            return trigger.disposition  # handed back by a ticket: it never meets the gate
        verdict = policy_hooks.decide(trigger, change.policy)
        common.save_changes(trigger, {
            "decision": verdict.decision, "strength": verdict.strength or "",
            "rule": verdict.rule or "", "reason": verdict.reason or "",
            "policy_version": change.new_version, "disposition": ""})
        return route_locked(trigger)


def _awaiting_main(new_version: str) -> list[int]:
    return list(Trigger.objects.filter(disposition=main_rules.AWAITING)
                .exclude(policy_version=new_version).order_by("pk")
                .values_list("pk", flat=True))


def _decide_awaiting_again(trigger_id: int, change: policy_hooks.PolicyChange) -> None:
    """A request still awaiting the main session was admitted under the old rules: like a
    running eval, the gate decides it again under the new version and it is routed again
    (told to the main session again only if it is still an explicit request)."""
    with transaction.atomic(durable=True):
        trigger = locks.trigger(trigger_id)
        if (trigger.disposition != main_rules.AWAITING
                or trigger.policy_version == change.new_version):
            return
        verdict = policy_hooks.decide(trigger, change.policy)
        common.save_changes(trigger, {
            "decision": verdict.decision, "strength": verdict.strength or "",
            "rule": verdict.rule or "", "reason": verdict.reason or "",
            "policy_version": change.new_version, "disposition": ""})
        route_locked(trigger)


def _tell_policy_change(affected, new_version: str) -> bool:
    author = f"policy {new_version[:12]}"
    with transaction.atomic(durable=True):
        ticket = locks.ticket(affected.ticket)
        if ticket.ended_at is not None:
            return False  # ended meanwhile: nothing to tell
        if Input.objects.filter(ticket=ticket, kind="policy", author=author).exists():
            return False  # told already
        # With no run in flight the input would wake its worker under the old mandate (a
        # resume: revalidated first); a run in flight just reads it, nothing is cancelled.
        if common.live_assignment(ticket) is None and not common.resumable(ticket):
            return False  # ended instead, saying why
        item = Input.objects.create(ticket=ticket, kind="policy", text=affected.text,
                                    author=author, is_human=False)
        common.enqueue(rules.deliver(item.pk, ticket.pk))
    return True
