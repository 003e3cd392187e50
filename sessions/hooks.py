"""What sessions asks of the apps above it (amux_common.ports; sessions never imports them).

- `timeline_mirrored(session_id, events)`: told, inside the transaction that stored them,
  of the timeline events of a session another place shows (`Session.mirrored`: a Lark
  conversation, conversations/ provides it). Only mirrored sessions pay for it: the flag
  comes with the session row the timeline locks anyway, so an unmirrored session costs
  nothing more per event. `events` are the stored `TimelineEvent` rows (with `turn_id`).
- `worker_defaults()`: `{"runtime", "provider", "model"}` of the agent settings' worker
  (tickets provides it), or None when none is configured: what a session started from
  chat uses while no Bot Profile exists.
"""

from __future__ import annotations

from amux_common.ports import Port

timeline_mirrored = Port("sessions.timeline_mirrored")
worker_defaults = Port("sessions.worker_defaults")
