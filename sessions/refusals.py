"""What a session command refuses (one error shape for the API, the panel and the tools),
and the idle floor every session's timeout keeps: the lowest layer of sessions' commands,
imported by the modules services builds on (launch, profiles, app-servers) as well as by
services itself, which passes them on."""

from __future__ import annotations

MIN_IDLE_TIMEOUT = 60


def settled_or_at_least(idle_timeout_s: int) -> int:
    """A session's idle timeout: at least the floor, or 0 (``host.idle_after``: a task's
    or a schedule's own session, asleep once its turn has settled)."""
    return 0 if int(idle_timeout_s) == 0 else max(MIN_IDLE_TIMEOUT, int(idle_timeout_s))


class CommandError(Exception):
    """A refused command: ``status`` is the HTTP status the API answers with."""

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 field: str | None = None, fields: dict[str, list[str]] | None = None):
        super().__init__(message)
        if code:
            self.code = code
        if status:
            self.status = status
        self.field = field or (next(iter(fields)) if fields else None)
        # every faulty field with its messages, when the command names several at once
        self.fields = fields if fields is not None else (
            {field: [message]} if field else {})


class Conflict(CommandError):
    status = 409
    code = "conflict"
