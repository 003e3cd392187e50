"""The prompt of each model request (seed 002's third prompt invariant): the model gateway
replaces amux's marked prompt block in a request with the session's prompt as it reads at
that moment, so a prompt saved during a turn reaches that turn's next model request, with
no restart. The revisions each request used are added to the running turn's set
(`Turn.prompt_revisions`, which the worker looks up as before) and logged per request.

This runs before every model request, inside the gateway's latency budget: one plain
statement reads everything the prompt is made from (the session's snapshot, its expert's
profile as the execution model's reading joins it, its running turn, and what
`prompts_app.service.request_sql` names: the latest prompt version, the policy head, the
sources' stamp). What never changes once saved (a version's configuration, a policy
version's document) is kept per process by the key that statement read, so nothing read
is older than the request. The turn's record is written after the answer has been passed
back (`record`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import connection, transaction

from prompts_app import service as prompts
from sessions import gateway_rules, hooks, locks, services
from sessions.models import Session, Turn, TurnState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Used:
    """Revisions a request used that its turn does not list yet."""

    turn_id: int
    revisions: tuple[int, ...]


def applied(session_id: int, body: bytes) -> tuple[bytes, Used | None]:
    """`body` with the session's current prompt in every marked block (on a gateway lookup
    thread), and what its running turn has to record (`record`), if anything."""
    with connection.cursor() as cursor:
        cursor.execute(_statement(prompts.request_sql()), [TurnState.RUNNING.value, session_id])
        row = cursor.fetchone()
    if row is None:
        return body, None
    expert = hooks.expert_reading()
    snapshot, turn_id, listed, *values = row
    expert_values, values = values[:expert.width], values[expert.width:]
    snap = _field(Session, "snapshot", snapshot) or {}
    role = snap.get("prompt_role")
    role_text, revisions = prompts.for_request(role, values) if role else (None, [])
    # marked or not, the inner text is the same: a request here is a routed session's
    prompt = services.composed_prompt(snap, True, role_text, revisions,
                                      expert.text(snap.get("profile"), expert_values))
    inner = (prompt.text or "").strip()
    if inner.startswith(gateway_rules.PROMPT_START) and inner.endswith(gateway_rules.PROMPT_END):
        inner = inner[len(gateway_rules.PROMPT_START):-len(gateway_rules.PROMPT_END)]
    body, count = gateway_rules.replace_marked(body, inner)
    if not count:
        return body, None
    log.info("model gateway: session %s request with prompt revisions %s (%d blocks)",
             session_id, prompt.revisions, count)
    missing = set(prompt.revisions) - set(_field(Turn, "prompt_revisions", listed) or [])
    return body, (Used(turn_id, tuple(prompt.revisions))
                  if turn_id is not None and missing else None)


def record(used: Used) -> None:
    """The turn that was running when the request was admitted keeps every revision its
    requests used (by its id: it may have ended since the answer was passed back)."""
    with transaction.atomic():
        # only the turn's row: the host locks the session's before the turn's when a turn
        # ends, so locking both here in the other order could deadlock (sessions/locks.py)
        turn = locks.turn(used.turn_id, "prompt_revisions")
        if turn is None:
            return
        merged = sorted({*(turn.prompt_revisions or []), *used.revisions})
        if merged != turn.prompt_revisions:
            Turn.objects.filter(pk=used.turn_id).update(prompt_revisions=merged)


def _field(model, name: str, value):
    return model._meta.get_field(name).from_db_value(value, None, connection)


# The expert's profile is found by the id the snapshot recorded (the execution model's
# reading joins it: sessions.hooks.expert_reading).
_PROFILE_ID = {"postgresql": "CAST(s.snapshot -> 'profile' ->> 'id' AS bigint)",
               "sqlite": "json_extract(s.snapshot, '$.profile.id')"}
_statements: dict[tuple[str, ...], str] = {}


def _statement(values: tuple[str, ...]) -> str:
    """One plain statement, built once per set of value expressions: the ORM's compiling
    of these reads cost about 0.5 ms each, per request."""
    found = _statements.get(values)
    if found is None:
        expert = hooks.expert_reading()
        found = _statements[values] = (
            f"SELECT s.snapshot, t.id, t.prompt_revisions, "
            f"{', '.join((*expert.columns, *values))} "
            f"FROM {Session._meta.db_table} s "
            f"{expert.join(_PROFILE_ID[connection.vendor])} "
            f"LEFT JOIN {Turn._meta.db_table} t ON t.session_id = s.id AND t.state = %s "
            f"WHERE s.id = %s")
    return found
