"""The bounds of what the ticket API and the executor's tools take (amux_common.limits)."""

from __future__ import annotations

from amux_common.limits import ID_MAX, KEY, NAME, OPTIONS, SHORT_TEXT, SLUG, TEXT, TITLE, URL

__all__ = ["ID_MAX", "SLUG"]

REPORT_TEXT = TEXT
QUESTION = SHORT_TEXT * 10   # a question may quote what it asks about
QUESTION_OPTIONS = OPTIONS
QUESTION_OPTION = NAME
QUESTION_OPTIONS_BYTES = 128 * 1024  # Question.options: OPTIONS of at most NAME
MESSAGE_REF = 300            # the Question.message_ref column
REASON = SHORT_TEXT
REPLY_TEXT = TEXT
PR_TITLE = TITLE * 2         # GitHub takes up to 256
PR_BRANCH = NAME             # a git ref name
PR_BODY = 65_536             # GitHub's own limit on a pull request body
MEMORY_QUERY = SHORT_TEXT
MEMORY_ID = KEY
GIT_PROTOCOL = 16
GIT_HOST = 253               # a DNS name
GIT_PATH = URL
