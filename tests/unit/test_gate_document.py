"""The policy document (pure): validation names the bad field, canonical form, version hash."""

from __future__ import annotations

import copy
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.document import (
    PolicyInvalid,
    SourceInfo,
    diff,
    receives_all_scopes,
    validate,
    version_of,
)
from policy.gate import CELLS, SCOPES, cells_of

GH = SourceInfo("gh", "github", receives_all=frozenset(SCOPES["github"]))
GHM = SourceInfo("ghm", "github")
LK = SourceInfo("lk", "lark", receives_all=receives_all_scopes(
    "lark", {"groups": ["oc_1"], "receive_all": {"oc_1": True}}))
OFF = SourceInfo("off", "github", enabled=False)
SOURCES = {s.slug: s for s in (GH, GHM, LK, OFF)}


def bad(doc) -> dict:
    with pytest.raises(PolicyInvalid) as exc:
        validate(doc, SOURCES)
    return exc.value.fields


def test_unknown_source_scope_cell_and_malformed_list_name_the_field():
    assert "sources.nope" in bad({"acceptance": "manual", "sources": {"nope": {}}})
    assert "sources.gh.rows.group_other" in bad(
        {"acceptance": "manual", "sources": {"gh": {"rows": {"group_other": {}}}}})
    assert "sources.gh.rows.comment.cc" in bad(
        {"acceptance": "manual", "sources": {"gh": {"rows": {"comment": {"cc": True}}}}})
    assert "sources.gh.allowed" in bad(
        {"acceptance": "manual", "sources": {"gh": {"allowed": "octocat"}}})
    assert "sources.gh.allowed.1" in bad(
        {"acceptance": "manual", "sources": {"gh": {"allowed": ["a", 3]}}})
    assert "sources.gh.rows.comment.addressed" in bad(
        {"acceptance": "manual", "sources": {"gh": {"rows": {"comment": {"addressed": "yes"}}}}})
    assert "acceptance" in bad({"acceptance": "sometimes", "sources": {}})
    assert "sources" in bad({"acceptance": "manual"})


def test_a_policy_naming_a_disabled_source_is_refused():
    fields = bad({"acceptance": "manual", "sources": {"off": {"allowed": ["a"]}}})
    assert "disabled" in fields["sources.off"]


def test_unaddressed_cells_cannot_open_where_the_source_does_not_receive_all():
    fields = bad({"acceptance": "auto", "sources": {"ghm": {"rows": {
        "comment": {"addressed": True, "unaddressed_anyone": True}}}}})
    assert list(fields) == ["sources.ghm.rows.comment.unaddressed_anyone"]
    assert "receive all" in fields["sources.ghm.rows.comment.unaddressed_anyone"]


def test_ci_row_has_no_person_cells():
    fields = bad({"acceptance": "auto", "sources": {"gh": {"rows": {
        "ci_default_branch": {"addressed": True}}}}})
    assert "no sender" in fields["sources.gh.rows.ci_default_branch.addressed"]


def test_lark_receive_all_comes_from_the_group_config():
    assert "group_configured" in LK.receives_all and "direct" in LK.receives_all
    assert "group_other" not in LK.receives_all
    assert "group_configured" not in receives_all_scopes(
        "lark", {"groups": ["oc_1"], "receive_all": {"oc_1": False}})
    assert receives_all_scopes("github", {"receive_all": True}) == frozenset(SCOPES["github"])
    assert receives_all_scopes("github", {}) == frozenset()
    assert receives_all_scopes("webchat", {}) == frozenset({"direct"})


def test_canonical_form_fills_rows_sorts_lists_and_drops_empty_parts():
    doc = validate({"acceptance": "manual", "sources": {
        "gh": {"allowed": ["Zed", "alice", "zed"], "rows": {"comment": {"addressed": True}}},
        "lk": {}}}, SOURCES)
    part = doc["sources"]["gh"]
    assert part["allowed"] == ["alice", "zed"]
    assert set(part["rows"]) == set(SCOPES["github"])
    assert part["rows"]["ci_default_branch"] == {"unaddressed_anyone": False}
    assert "lk" not in doc["sources"]


# ---------------------------------------------------------------- hash properties

people = st.lists(st.sampled_from(["alice", "bob", "carol", "dave", "eve"]), unique=True,
                  max_size=5)


@st.composite
def documents(draw):
    sources = {}
    for slug in draw(st.lists(st.sampled_from(["gh", "lk"]), unique=True, min_size=1)):
        info = SOURCES[slug]
        rows = {scope: {cell: draw(st.booleans()) and (
            cell == "addressed" or scope in info.receives_all) for cell in cells_of(scope)}
            for scope in SCOPES[info.kind]}
        sources[slug] = {"allowed": draw(people), "bots": draw(people), "rows": rows}
    return {"acceptance": draw(st.sampled_from(["manual", "auto"])), "sources": sources}


def _shuffled(doc, rnd: random.Random):
    def shuffle_map(m):
        items = list(m.items())
        rnd.shuffle(items)
        return dict(items)

    out = {"sources": {}, "acceptance": doc["acceptance"]}
    for slug, part in shuffle_map(doc["sources"]).items():
        allowed = list(part["allowed"]) + list(part["allowed"][:1])  # a duplicate
        rnd.shuffle(allowed)
        bots = list(part["bots"])
        rnd.shuffle(bots)
        rows = {scope: shuffle_map({c: v for c, v in cells.items() if v or rnd.random() < .5})
                for scope, cells in shuffle_map(part["rows"]).items()}
        out["sources"][slug] = shuffle_map({"rows": rows, "bots": bots, "allowed": allowed})
    return out


@settings(max_examples=200, deadline=None)
@given(documents(), st.randoms(use_true_random=False))
def test_property_reordered_equivalent_content_has_the_same_version(doc, rnd):
    a = version_of(validate(doc, SOURCES))
    b = version_of(validate(_shuffled(doc, rnd), SOURCES))
    assert a == b


def _mutations(doc):
    """Every material single change of a document."""
    yield "acceptance", {**doc, "acceptance": "auto" if doc["acceptance"] == "manual"
                         else "manual"}
    for slug, part in doc["sources"].items():
        info = SOURCES[slug]
        for key in ("allowed", "bots"):
            m = copy.deepcopy(doc)
            m["sources"][slug][key] = [*part[key], "zoe"]
            yield f"{slug}.{key}+", m
            if part[key]:
                m = copy.deepcopy(doc)
                m["sources"][slug][key] = part[key][1:]
                yield f"{slug}.{key}-", m
        for scope in SCOPES[info.kind]:
            for cell in cells_of(scope):
                if cell != "addressed" and scope not in info.receives_all:
                    continue
                m = copy.deepcopy(doc)
                m["sources"][slug]["rows"][scope][cell] = not part["rows"][scope][cell]
                yield f"{slug}.{scope}.{cell}", m


@settings(max_examples=100, deadline=None)
@given(documents())
def test_property_any_material_change_gives_a_new_version(doc):
    base = validate(doc, SOURCES)
    for name, mutated in _mutations(base):
        assert version_of(validate(mutated, SOURCES)) != version_of(base), name


def test_version_is_a_sha256_hex():
    v = version_of(validate({"acceptance": "manual", "sources": {}}, SOURCES))
    assert len(v) == 64 and int(v, 16) >= 0


def test_diff_says_what_changed_in_plain_words():
    a = validate({"acceptance": "manual", "sources": {"gh": {"allowed": ["alice"], "rows": {
        "comment": {"addressed": True}}}}}, SOURCES)
    b = validate({"acceptance": "auto", "sources": {"gh": {"allowed": ["bob"], "rows": {
        "comment": {"addressed": False, "unaddressed_allowed": True}}}}}, SOURCES)
    texts = [c["text"] for c in diff(a, b)]
    assert any("auto" in t for t in texts)
    assert "gh: bob added to allowed people" in texts
    assert "gh: alice removed from allowed people" in texts
    assert any("An allowed person @mentions the agent: closed" in t for t in texts)
    assert diff(a, a) == []
    assert set(CELLS) >= {"addressed"}


def test_each_configured_lark_group_may_keep_its_own_row():
    from policy.document import places_of, row_label, rows_of
    from policy.gate import Facts, Policy, gate

    config = {"groups": ["oc_1", "oc_2"], "receive_all": ["oc_2"]}
    lk = SourceInfo("lk", "lark", receives_all=receives_all_scopes("lark", config),
                    places=places_of("lark", config))
    assert rows_of(lk) == ("group_configured", "group_configured:oc_1",
                           "group_configured:oc_2", "group_other", "direct", "doc_comment")
    assert row_label("group_configured:oc_2") == "Group oc_2"
    assert {"group_configured:oc_2", "group_configured"} <= lk.receives_all
    assert "group_configured:oc_1" not in lk.receives_all
    sources = {"lk": lk}
    doc = {"acceptance": "auto", "sources": {"lk": {"allowed": ["ou_a"], "rows": {
        "group_configured": {"addressed": True},
        "group_configured:oc_2": {"addressed": False, "unaddressed_allowed": True}}}}}
    canonical = validate(doc, sources)
    rows = canonical["sources"]["lk"]["rows"]
    assert "group_configured:oc_1" not in rows  # oc_1 keeps the default row
    assert rows["group_configured:oc_2"] == {"addressed": False, "unaddressed_allowed": True,
                                             "unaddressed_anyone": False}
    policy = Policy(canonical, {"lk": "lark"}, scopes=SCOPES)

    def decide(place, addressed, receives_all=False):
        return gate(Facts("lk", "lark", "group_configured", actor="ou_a", addressed=addressed,
                          receives_all=receives_all, place=place), policy)

    assert decide("oc_1", True).rule == "lk.group_configured.addressed"
    assert decide("oc_2", True).reason == "cell_closed"  # its own row closes the mention
    assert decide("oc_2", False, True).rule == "lk.group_configured:oc_2.unaddressed_allowed"
    assert decide("oc_3", True).rule == "lk.group_configured.addressed"  # no row: default

    errors = bad_with(sources, {"acceptance": "manual", "sources": {"lk": {"rows": {
        "group_configured:oc_9": {"addressed": True},
        "group_configured:oc_1": {"unaddressed_anyone": True},
        "group_other:oc_1": {}}}}})
    assert errors["sources.lk.rows.group_configured:oc_9"].startswith(
        "oc_9 is not one of the source's configured groups (oc_1, oc_2)")
    assert "not set to receive all" in errors[
        "sources.lk.rows.group_configured:oc_1.unaddressed_anyone"]
    assert "unknown scope" in errors["sources.lk.rows.group_other:oc_1"]


def bad_with(sources, doc) -> dict:
    with pytest.raises(PolicyInvalid) as exc:
        validate(doc, sources)
    return exc.value.fields
