"""The bounds of what the sessions, providers, experts and execution APIs take.

Most are the widths of the columns the values land in (a slug 60, a model 120, a runtime
20); the rest name the size of a list or text amux passes on (amux_common.limits).
"""

from __future__ import annotations

from amux_common.limits import ARG, ARGS, ID_MAX, KEY, SLUG

__all__ = ["ARG", "ARGS", "ID_MAX", "KEY", "SLUG"]

RUNTIME = 20            # Session.runtime, LaunchPreset.runtime
MODEL = 120             # Session.model, LaunchPreset.model
EFFORT = 20             # LaunchPreset.effort
PERMISSION = 20         # LaunchPreset.permission
SESSION_NAME = 120      # Session.name
API_KEY = 1_000         # longer than any provider's keys
IDLE_TIMEOUT_MAX_S = 7 * 24 * 3600
WATCHDOG_BYTES = 1_024  # four integers
ANSWERS = 50            # questions in one ask (Claude's AskUserQuestion takes up to 4)
ANSWERS_BYTES = 256 * 1024
CONTENT_PART_KEYS = 8   # {type, text} or {type, mime, data}
CONTENT_PART_BYTES = 16 * 1024 * 1024  # one image, base64 (sessions.content bounds it decoded)
MANIFEST_KEYS = 20      # a v2 manifest's top-level keys (sessions.manifest reads six)
MANIFEST_BYTES = 4 * 1024 * 1024       # 50 skills of 64 KiB and the instructions
