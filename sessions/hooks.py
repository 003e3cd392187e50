"""What sessions asks of the apps above it (amux_common.ports; sessions never imports them).

- `timeline_mirrored(session_id, events)`: told, inside the transaction that stored them,
  of the timeline events of a session another place shows (`Session.mirrored`: a Lark
  conversation, conversations/ provides it). Only mirrored sessions pay for it: the flag
  comes with the session row the timeline locks anyway, so an unmirrored session costs
  nothing more per event. `events` are the stored `TimelineEvent` rows (with `turn_id`).
- `worker_defaults()`: `{"runtime", "provider", "model"}` of the agent settings' worker
  (tickets provides it), or None when none is configured: what a session started from
  chat uses while no Bot Profile exists.
- `model_request_caps`: checks run by the model gateway before it forwards a model request
  of a session (sessions/model_gateway.py), registered with `register` from the apps'
  wiring (tickets: its token and message caps; goals: a spent token quota). Each comes
  with its probe: one SQL query of the session's id (written `{session}`) answering one
  value, NULL when there is nothing to refuse. The probes are read in the statement that
  reads the credential's grant, so a request pays no round trip of its own per cap; a
  check is called only with a value its probe found, `(session_id, value)`, and answers
  None or the reason the request is refused.

What the execution model (seed 000: experts, presets, task runs; execution/, provided from
its wiring) answers sessions:
- `launch_settings(preset, **caller)`: a direct session's frozen execution settings,
  resolved from what the caller set and the preset it chose (a refusal is a CommandError
  naming the caller's field).
- `expert_snapshot(slug)`: the expert (Agent Profile) a new session carries, as recorded in
  its snapshot, or None for none (an unknown slug is refused).
- `expert_text(recorded)`: the expert's text for a turn's prompt, as its profile reads now.
- `expert_reading()`: the same for one model request, read in the gateway's one statement:
  `.columns` (its select list), `.join(profile_id_sql)` (the join that reads them) and
  `.text(recorded, values)` (sessions/request_prompts.py).
- `task_turn_started(session_id, turn_key)`: a turn of a session with task runs has
  started (inside the timeline's transaction): its task run is running now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection

from amux_common.ports import Port

timeline_mirrored = Port("sessions.timeline_mirrored")
worker_defaults = Port("sessions.worker_defaults")
# `session_cli() -> str`: the directory holding the `amux` command (memory tools through
# amux's REST API) for a session whose runtime takes no MCP (Pi); tickets writes it
session_cli = Port("sessions.session_cli")
launch_settings = Port("sessions.launch_settings")
expert_snapshot = Port("sessions.expert_snapshot")
expert_text = Port("sessions.expert_text")
expert_reading = Port("sessions.expert_reading")
task_turn_started = Port("sessions.task_turn_started")


class Checks:
    """Checks registered by the apps above, each with its probe (see `model_request_caps`);
    the first refusal wins."""

    def __init__(self, name: str):
        self.name = name
        self._checks: dict[Callable[[int, Any], str | None], str] = {}

    def register(self, fn: Callable[[int, Any], str | None], probe: str) -> None:
        if "{session}" not in probe:
            raise ValueError(f"{self.name}: a probe reads the session's id as {{session}}")
        self._checks[fn] = probe

    def forget(self, fn: Callable[[int, Any], str | None]) -> None:
        self._checks.pop(fn, None)

    def probes(self, session: str) -> tuple[str, ...]:
        """The probes, in order, as SQL values reading the session's id from ``session``."""
        return tuple(f"({probe.format(session=session)})" for probe in self._checks.values())

    def refusal(self, session_id: int, probed: tuple | None = None) -> str | None:
        """``probed``: what the probes read (in `probes`' order) with the caller's own
        statement; None: read here."""
        if probed is None or len(probed) != len(self._checks):
            probed = self._read(session_id)
        for check, value in zip(list(self._checks), probed, strict=True):
            if value is not None and (found := check(session_id, value)):
                return found
        return None

    def _read(self, session_id: int) -> tuple:
        probes = self.probes("s.id")
        if not probes:
            return ()
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {', '.join(probes)} FROM (SELECT CAST(%s AS bigint) AS id) s",
                           [session_id])
            return tuple(cursor.fetchone())


model_request_caps = Checks("sessions.model_request_caps")
