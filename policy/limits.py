"""The bounds of a policy document and of the policy API's other inputs.

Pure: no Django (policy/document.py reads them).
"""

from __future__ import annotations

from amux_common.limits import SLUG

MAX_NAME = 200       # one allowed person or bot
MAX_LIST = 5000      # names in one allowed or bots list
MAX_SOURCES = 100    # sources in one document
MAX_ROWS = 20        # scopes of one source (a kind has at most eight)
VERSION = 64         # a version is a sha256 hex digest
SCOPE = 40
ACTOR = 200
SOURCE = SLUG
