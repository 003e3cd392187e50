"""The bounds of what the ticket API and the executor's tools take (amux_common.limits).

The tools' texts and options keep the bounds the tool service has always checked
(tickets.core.messages); the REST body and the models read them from here.
"""

from __future__ import annotations

from amux_common.limits import ID_MAX, KEY, NAME, SHORT_TEXT, SLUG, URL
from tickets.core.messages import MAX_OPTIONS, MAX_TEXT

__all__ = ["ID_MAX", "SLUG"]

REPORT_TEXT = MAX_TEXT       # Report.text
QUESTION = MAX_TEXT          # Question.text
QUESTION_OPTIONS = MAX_OPTIONS
QUESTION_OPTION = NAME
QUESTION_OPTIONS_BYTES = 128 * 1024  # Question.options
MESSAGE_REF = 300            # the Question.message_ref column
REASON = MAX_TEXT
REPLY_TEXT = MAX_TEXT
PR_TITLE = 256               # GitHub refuses a longer pull request title
PR_BRANCH = NAME             # a git ref name
PR_BODY = MAX_TEXT
MEMORY_QUERY = SHORT_TEXT
MEMORY_ID = KEY
GIT_PROTOCOL = 16
GIT_HOST = 253               # a DNS name
GIT_PATH = URL
TOKEN_CAP_MAX = 10**15         # a token cap (0: none); far past any spend, within the column
MESSAGES_PER_HOUR_MAX = 100_000
