"""An attached agent's "done", through amux (goals.core.writeback): the todo stays claimed
with ``writeback.state = "validating"`` while an outbox effect runs the goal's check in
the agent's working session (goals/checks.py), outside any lock; then, under the goal's
lock, the todo becomes done with evidence and the goal's quota is spent, or the todo stays
claimed and says why (``writeback.state = "refused"``, ``reason``). A crash between the
two runs the check again; a newer request supersedes an older one."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from effects import outbox
from goals import checks, locks
from goals.core import lifecycle as lc
from goals.core import writeback as rules
from goals.core.lifecycle import Refused
from goals.models import Agent, Goal, Todo, WorkingSession
from sessions.models import UsageDay

EFFECT_KIND = "goals.attached_writeback"


def session_tokens(session_id: int) -> int:
    """What the model gateway has counted for the session, all days."""
    return int(UsageDay.objects.filter(session_id=session_id)
               .aggregate(total=Sum("tokens"))["total"] or 0)


def _binding(agent: Agent) -> WorkingSession | None:
    return WorkingSession.objects.filter(agent=agent, active=True).first()


def note_claim(todo: Todo, agent: Agent) -> None:
    """An attached agent claimed the todo: what its session had spent until now, so its
    writeback pays for what came after (a tokens quota)."""
    binding = _binding(agent)
    todo.writeback = {"claimed_tokens": session_tokens(binding.session_id) if binding else 0}


def request_in_txn(goal: Goal, todo: Todo, agent: Agent, evidence: str) -> Todo:
    """The agent says the todo is done: keep (or take) its claim, remember its evidence
    and queue the check. The caller holds the goal and the todo locked."""
    lc.todo_transition("claimed", "done", evidence)  # evidence is required, as for anyone
    binding = _binding(agent)
    if binding is None:
        raise Refused("the agent has no working session to check the work in",
                      code=rules.BINDING_LOST)
    if todo.state != "claimed":
        todo.state = lc.todo_transition(todo.state, "claimed", todo.evidence)
        todo.claimed_by = agent
        note_claim(todo, agent)
    request = uuid.uuid4().hex[:12]
    todo.writeback = {"claimed_tokens": (todo.writeback or {}).get("claimed_tokens", 0),
                      "state": rules.VALIDATING, "request": request, "evidence": evidence,
                      "binding": binding.pk, "requested_at": timezone.now().isoformat()}
    todo.save()
    outbox.enqueue(EFFECT_KIND, f"writeback:{todo.pk}",
                   {"todo": todo.pk, "request": request, "agent": agent.pk,
                    "binding": binding.pk})
    return todo


def validate(effect_id: int, payload: dict) -> None:
    """The outbox handler: run the check, then settle the writeback once."""
    todo = Todo.objects.select_related("goal").filter(pk=payload.get("todo")).first()
    if todo is None or not _current(todo, payload):
        return  # superseded, or settled before a crash cut the effect's end
    binding = WorkingSession.objects.select_related("session").filter(
        pk=payload.get("binding"), active=True).first()
    command = todo.goal.check_command.strip()
    result = checks.run(binding.session, command) if command and binding else None
    with transaction.atomic(durable=True):
        goal = locks.goal(pk=todo.goal_id)
        agent = locks.agent(payload["agent"])
        row = locks.todo(goal, todo.pk)
        if row is None or not _current(row, payload):
            return
        live = WorkingSession.objects.filter(pk=payload["binding"], active=True).exists()
        spent_tokens = 0
        if live:
            spent_tokens = max(0, session_tokens(binding.session_id)
                               - int(row.writeback.get("claimed_tokens") or 0))
        verdict = rules.outcome(
            goal_state=goal.state, has_check=bool(command),
            passed=bool(result and result["passed"]), binding_live=live,
            still_claimed=row.state == "claimed" and row.claimed_by_id == agent.pk,
            unit=goal.quota_unit, limit=goal.quota_limit, spent=goal.quota_spent,
            tokens=spent_tokens)
        record = {**row.writeback, "checked_at": timezone.now().isoformat(),
                  "exit_code": result["exit_code"] if result else None,
                  "output": result["output"][-4000:] if result else ""}
        if verdict.accepted:
            row.state = lc.todo_transition(row.state, "done", row.writeback["evidence"])
            row.evidence = rules.evidence(row.writeback["evidence"], command,
                                          result["exit_code"], result["output"])
            goal.quota_spent += verdict.spend
            goal.save(update_fields=["quota_spent", "updated_at"])
            record.update(state=rules.ACCEPTED, reason="", spent=verdict.spend)
        else:
            record.update(state=rules.REFUSED, reason=verdict.reason, spent=0)
        row.writeback = record
        row.save()


def _current(todo: Todo, payload: dict) -> bool:
    wb = todo.writeback or {}
    return wb.get("state") == rules.VALIDATING and wb.get("request") == payload.get("request")
