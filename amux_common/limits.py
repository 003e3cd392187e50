"""The sizes every app's inputs share, in one place.

Each app names its own bounds in its ``limits.py`` from these; a model column and the API
field that writes it use the same constant, so the API never accepts what the model would
refuse (or the other way round). Numbers already promised by a column (slugs are 60
characters in every table) stay what they are: narrowing a column would break an upgrade
over rows that already use the room.

Pure: no Django.
"""

from __future__ import annotations

SLUG = 60            # every SlugField column in amux
KEY = 120            # idempotency keys, client-chosen ids
NAME = 200           # a person's, a model's, a branch's name
TITLE = 200
SHORT_TEXT = 2_000   # a reason, a question, a search query
TEXT = 100_000       # free text: prompts, policy, mandates, reports, PR bodies
URL = 2_048
ARGS = 32            # a command line's extra arguments
ARG = 500            # one of them
OPTIONS = 100        # a list of choices offered to a person
MAP = 200            # keys of a free-form object (a source's config, a manifest)
JSON_BYTES = 256 * 1024  # a free-form object's JSON encoding, in bytes

# Row ids are BigAutoField: a path or body id past this names nothing.
ID_MAX = 2**63 - 1

# Path parameters by name: the OpenAPI document bounds each (amux_common.schema); a longer
# one names nothing, so it is a 404 like any other unknown name.
PATH_MAX_LENGTH = {
    "slug": SLUG,
    "agent": SLUG,
    "provider": SLUG,
    "name": SLUG,
    "role": SLUG,
    "key": KEY,
    "ref": KEY,
    "request_id": KEY,
    "version": 64,       # a policy version is a sha256 hex digest
}
