"""JSON from outside amux parsed with a bound on its nesting.

Python's parser recurses once per level: a body of 100,000 ``[`` raises RecursionError
(not ValueError) from the parser, and a body just under the interpreter's limit parses but
breaks whatever walks it next (a serializer, the database adapter) deeper in the stack.
Both are a 500 for input anyone can send; here both are a ``ValueError`` naming the bound,
which the callers already answer with 400. No real payload comes near the bound (GitHub's
deepest is under 10 levels).

Pure: no Django.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64


class TooDeep(ValueError):
    pass


# What json.loads makes that holds nothing: a container holding only these has no level
# below it, which one C-level pass over the types of its values tells.
_LEAVES = frozenset((str, int, float, bool, type(None)))
_CONTAINERS = (dict, list)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` levels (no recursion).

    Level by level; a container whose values are all leaves (most of a webhook payload's
    objects) is passed over without a Python step per value, which made this cost a
    quarter of what parsing the same payload costs instead of as much."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            if not _LEAVES.issuperset(map(type, children)):
                below += [child for child in children if isinstance(child, _CONTAINERS)]
        level = below
    return False


def check(value: Any) -> Any:
    if too_deep(value):
        raise TooDeep(f"the JSON is nested deeper than {MAX_DEPTH} levels")
    return value


def loads(raw: str | bytes | bytearray, **kwargs: Any) -> Any:
    """``json.loads`` whose every failure, too deep included, is a ``ValueError``."""
    try:
        value = json.loads(raw, **kwargs)
    except RecursionError:
        raise TooDeep(f"the JSON is nested deeper than {MAX_DEPTH} levels") from None
    return check(value)
