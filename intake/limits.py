"""The bounds of what the sources and chat APIs take (amux_common.limits)."""

from __future__ import annotations

from amux_common.limits import JSON_BYTES, MAP

CONFIG_KEYS = MAP            # a source's settings (Source.config)
CONFIG_BYTES = JSON_BYTES    # a Lark source's groups included
SECRET_KEYS = 20             # a kind declares a handful
SECRETS_BYTES = 64 * 1024
CHAT_TEXT = 20_000
CHAT_THREAD = 200
CHAT_ID = 100
