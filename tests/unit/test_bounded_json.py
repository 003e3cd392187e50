"""The nesting bound on JSON from outside (amux_common/bounded_json.py), at its edge."""

import json
from collections import OrderedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amux_common import bounded_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=60)


def depth(value) -> int:
    """The reference: levels of lists and objects, counted the plain recursive way."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@given(JSON, st.integers(min_value=0, max_value=8))
def test_too_deep_agrees_with_the_plain_recursive_count(value, limit):
    assert bounded_json.too_deep(value, limit) is (depth(value) > limit)


def nested(depth: int, shape: str) -> object:
    """`depth` levels of lists, objects, or both in turn, with leaves beside each level."""
    value: object = 1
    for level in range(depth):
        kind = shape if shape != "mixed" else ("list", "object")[level % 2]
        value = ["x", value, 2.5, None] if kind == "list" else {"a": "x", "b": value,
                                                                 "c": True}
    return value


@pytest.mark.parametrize("shape", ["list", "object", "mixed"])
def test_the_bound_is_exact_for_every_shape(shape):
    assert not bounded_json.too_deep(nested(bounded_json.MAX_DEPTH, shape))
    assert bounded_json.too_deep(nested(bounded_json.MAX_DEPTH + 1, shape))
    assert not bounded_json.too_deep(nested(3, shape), limit=3)
    assert bounded_json.too_deep(nested(4, shape), limit=3)


def test_the_deepest_branch_counts_wherever_it_is():
    # many shallow siblings (passed over level by level) and one deep branch at the end
    value = {"users": [{"login": "a", "id": n} for n in range(50)],
             "deep": nested(bounded_json.MAX_DEPTH - 1, "mixed")}
    assert not bounded_json.too_deep(value)
    value["deep"] = nested(bounded_json.MAX_DEPTH, "mixed")
    assert bounded_json.too_deep(value)


def test_empty_containers_and_leaves_are_one_level_or_none():
    assert not bounded_json.too_deep("text")
    assert not bounded_json.too_deep(None)
    assert not bounded_json.too_deep({}, limit=1)
    assert bounded_json.too_deep([[]], limit=1)
    assert bounded_json.too_deep({"a": {}}, limit=1)


def test_containers_of_other_classes_still_count():
    # what a hook of json.loads could make: a dict subclass is a level like a dict
    value: object = 1
    for _ in range(bounded_json.MAX_DEPTH + 1):
        value = OrderedDict(a=value)
    assert bounded_json.too_deep(value)


def test_loads_refuses_too_deep_text_with_a_value_error():
    deep = "[" * (bounded_json.MAX_DEPTH + 1) + "]" * (bounded_json.MAX_DEPTH + 1)
    with pytest.raises(ValueError, match="nested deeper than 64 levels"):
        bounded_json.loads(deep)
    with pytest.raises(ValueError, match="nested deeper"):
        bounded_json.loads("[" * 100_000 + "]" * 100_000)  # the parser's own recursion
    ok = "[" * bounded_json.MAX_DEPTH + "]" * bounded_json.MAX_DEPTH
    assert bounded_json.loads(ok) == json.loads(ok)
