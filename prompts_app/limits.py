"""The bounds of what the prompts API takes."""

from __future__ import annotations

from prompts_app.core import MAX_TEXT_CHARS

TEXT = MAX_TEXT_CHARS        # one fragment or team text (PromptText.text)
REVISION_MAX = 2**31 - 1     # PromptVersion.revision, a PositiveIntegerField
