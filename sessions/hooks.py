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
  of a session (sessions/model_gateway.py). Each takes the session id and answers None or
  the reason the request is refused (a cap reached: tickets registers its token and message
  caps). Registered with `register`, from the apps' wiring.
"""

from __future__ import annotations

from collections.abc import Callable

from amux_common.ports import Port

timeline_mirrored = Port("sessions.timeline_mirrored")
worker_defaults = Port("sessions.worker_defaults")
# `session_cli() -> str`: the directory holding the `amux` command (memory tools through
# amux's REST API) for a session whose runtime takes no MCP (Pi); tickets writes it
session_cli = Port("sessions.session_cli")


class Checks:
    """Checks registered by the apps above; the first refusal wins."""

    def __init__(self, name: str):
        self.name = name
        self._checks: list[Callable[[int], str | None]] = []

    def register(self, fn: Callable[[int], str | None]) -> None:
        if fn not in self._checks:
            self._checks.append(fn)

    def forget(self, fn: Callable[[int], str | None]) -> None:
        if fn in self._checks:
            self._checks.remove(fn)

    def refusal(self, session_id: int) -> str | None:
        for check in list(self._checks):
            found = check(session_id)
            if found:
                return found
        return None


model_request_caps = Checks("sessions.model_request_caps")
