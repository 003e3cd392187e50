"""Agent modes and lifecycle, todo and goal transitions."""

from __future__ import annotations

ATTACHED = "attached_app_session"
MANAGED = "managed_agent_runtime"
MODES = (ATTACHED, MANAGED)

# Lifecycle of an agent's working-session binding. "terminal" also stands for "no working
# session": an agent never bound, or one whose binding was detached.
LIFECYCLES = ("starting", "ready", "running", "waiting", "interrupted", "stale", "terminal")

AGENT_TRANSITIONS: dict[str, frozenset[str]] = {
    "terminal": frozenset({"starting"}),
    "starting": frozenset({"ready", "stale", "terminal"}),
    "ready": frozenset({"running", "waiting", "interrupted", "stale", "terminal"}),
    "running": frozenset({"ready", "waiting", "interrupted", "stale", "terminal"}),
    "waiting": frozenset({"ready", "running", "interrupted", "stale", "terminal"}),
    "interrupted": frozenset({"ready", "running", "stale", "terminal"}),
    "stale": frozenset({"terminal"}),
}

TODO_STATES = ("open", "claimed", "done", "dropped")
TODO_TRANSITIONS: dict[str, frozenset[str]] = {
    "open": frozenset({"claimed", "dropped"}),
    "claimed": frozenset({"open", "done", "dropped"}),
    "dropped": frozenset({"open"}),
    "done": frozenset(),
}

GOAL_STATES = ("active", "paused", "done", "abandoned")
GOAL_TRANSITIONS: dict[str, frozenset[str]] = {
    "active": frozenset({"paused", "done", "abandoned"}),
    "paused": frozenset({"active", "abandoned"}),
    "done": frozenset(),
    "abandoned": frozenset(),
}


class Refused(Exception):
    """A command the rules refuse: ``status`` is the HTTP answer, ``field`` what was wrong
    (``fields``: each faulty field's messages, when there are several)."""

    def __init__(self, message: str, *, code: str, status: int = 409, field: str | None = None,
                 fields: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.code = code
        self.status = status
        self.field = field
        self.fields = fields if fields is not None else ({field: [message]} if field else {})


class Faults:
    """Collects the input faults of one command, so a request learns every faulty field at
    once: `check` runs a rule and keeps its 400 refusal (any other refusal, a conflict,
    passes through); `settle` refuses them all, one alone as it was raised."""

    def __init__(self):
        self.found: list[Refused] = []

    def check(self, rule, *args, **kwargs):
        try:
            return rule(*args, **kwargs)
        except Refused as exc:
            if exc.status != 400 or not exc.fields:
                raise
            self.found.append(exc)
            return None

    def add(self, message: str, *, field: str, code: str = "invalid") -> None:
        self.found.append(Refused(message, code=code, status=400, field=field))

    def __bool__(self) -> bool:
        return bool(self.found)

    def settle(self) -> None:
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            fields: dict[str, list[str]] = {}
            for exc in self.found:
                for name, messages in exc.fields.items():
                    fields.setdefault(name, []).extend(messages)
            raise Refused("; ".join(f"{name}: {' '.join(messages)}"
                                    for name, messages in fields.items()),
                          code="invalid", status=400, field=next(iter(fields)), fields=fields)


def transition(table: dict[str, frozenset[str]], what: str, current: str, target: str) -> str:
    if target == current:
        return current
    if target not in table.get(current, frozenset()):
        allowed = ", ".join(sorted(table.get(current, ()))) or "none"
        raise Refused(f"a {what} cannot go from {current} to {target} (allowed: {allowed})",
                      code="invalid_transition", field="state")
    return target


def todo_transition(current: str, target: str, evidence: str) -> str:
    if target not in TODO_STATES:
        raise Refused(f"state must be one of {', '.join(TODO_STATES)}", code="invalid",
                      status=400, field="state")
    new = transition(TODO_TRANSITIONS, "todo", current, target)
    if new == "done" and current != "done" and not evidence.strip():
        raise Refused("a todo is done only with evidence", code="evidence_required",
                      status=400, field="evidence")
    return new


def mode_change(current: str, target: str, has_active_session: bool) -> str:
    """Changing mode is its own operation, refused while a working session is bound."""
    if target not in MODES:
        raise Refused(f"mode must be one of {', '.join(MODES)}", code="invalid", status=400,
                      field="mode")
    if has_active_session and target != current:
        raise Refused("detach the agent's working session before changing its mode",
                      code="session_active", field="mode")
    return target


def project_lifecycle(stored: str, *, bound: bool, session_archived: bool,
                      turn_running: bool, waiting_for_person: bool,
                      last_turn_cancelled: bool) -> str:
    """What the agent's lifecycle is, from its stored lifecycle and its session's facts."""
    if not bound:
        return "terminal" if stored != "stale" else "stale"
    if session_archived or stored == "stale":
        return "stale"
    if stored == "starting":
        return "starting"
    if waiting_for_person:
        return "waiting"
    if turn_running:
        return "running"
    if last_turn_cancelled:
        return "interrupted"
    return "ready"
