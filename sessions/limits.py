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
MANIFEST_KEYS = 20      # a v2 manifest's top-level keys (execution.core.manifest reads six)
MANIFEST_BYTES = 4 * 1024 * 1024       # 50 skills of 64 KiB and the instructions
MEMORY_TITLE = 200      # MemoryEntry.title
MEMORY_TEXT = 20_000    # MemoryEntry.text
CRON = 120              # Schedule.cron
PROMPT = 65_536         # a task's or a schedule's prompt (TaskRun.prompt, Schedule.prompt)
PROFILE_DESCRIPTION = 2_000             # AgentProfile.description, a skill's description
PROFILE_INSTRUCTIONS = 65_536           # AgentProfile.instructions, a skill's text
PROFILE_SKILLS = 50
SKILLS_BYTES = MANIFEST_BYTES           # AgentProfile.skills
ARGS_BYTES = 128 * 1024                 # LaunchPreset.extra_args: ARGS of at most ARG
PROVIDER_MODELS_BYTES = 256 * 1024      # ProviderProfile.model_names
BASE_URL = 250          # a provider's base URL (the column is 300; a host is at most 253)
WORKDIR = 500           # a session's work directory, under the data directory's work/
MESSAGE_TEXT = 65_536   # a message to a session, a native goal command
CONTENT_PARTS = 64
PERMISSION_OPTION = 200
SEQ_MAX = 2**31 - 1     # a timeline sequence number
TIMELINE_PAGE = 10_000
APP_SERVER_WORKSPACE = 1_000
APP_SERVER_URL = 300
APP_SERVER_TOKEN = 500
APP_SERVER_NAME = 120
