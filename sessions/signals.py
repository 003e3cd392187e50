"""What sessions tell other apps, without importing them (they connect receivers)."""

from django.dispatch import Signal

# Sent after commit when a turn's one terminal event is accepted.
# Arguments: session_id, turn_id, state ("completed" / "failed" / "cancelled"), error_code.
turn_ended = Signal()
