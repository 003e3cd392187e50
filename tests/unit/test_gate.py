"""The gate (pure): one test per rule a user would name, then properties (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.document import SourceInfo, compile_policy, validate
from policy.gate import (
    CELLS,
    EXPLICIT,
    IGNORE,
    INFERRED,
    SCOPES,
    Facts,
    Policy,
    cells_of,
    gate,
)

GH = SourceInfo("gh", "github", receives_all=frozenset(SCOPES["github"]))
GH_MENTIONS_ONLY = SourceInfo("ghm", "github")
LARK = SourceInfo("lk", "lark", receives_all=frozenset({"direct", "group_configured"}))
SOURCES = {s.slug: s for s in (GH, GH_MENTIONS_ONLY, LARK)}


def policy(acceptance="auto", **parts):
    return compile_policy(validate({"acceptance": acceptance, "sources": parts}, SOURCES),
                          SOURCES)


def facts(**kw):
    base = {"source": "gh", "kind": "github", "scope": "comment", "actor": "octocat"}
    base.update(kw)
    return Facts(**base)


COMMENT_ALL = {"allowed": ["octocat"], "rows": {"comment": {
    "addressed": True, "unaddressed_allowed": True, "unaddressed_anyone": False}}}


def test_seed_example_allowed_without_mention_and_stranger_with_mention_differ():
    """Seed 002: on the same thread, an allowed person without @ and a non-listed person
    with @ get different results."""
    p = policy(gh=COMMENT_ALL)
    allowed_no_at = gate(facts(actor="octocat", addressed=False, receives_all=True), p)
    stranger_at = gate(facts(actor="mallory", addressed=True, receives_all=True), p)
    assert allowed_no_at.decision == INFERRED
    assert allowed_no_at.rule == "gh.comment.unaddressed_allowed"
    assert stranger_at.decision == IGNORE and stranger_at.reason == "not_allowed"
    assert allowed_no_at != stranger_at


def test_allowed_person_mentioning_the_agent_is_an_explicit_request():
    v = gate(facts(addressed=True), policy(gh=COMMENT_ALL))
    assert (v.decision, v.strength, v.rule, v.reason) == (
        EXPLICIT, EXPLICIT, "gh.comment.addressed", None)


def test_github_logins_compare_case_insensitively():
    assert gate(facts(actor="OctoCat", addressed=True), policy(gh=COMMENT_ALL)).decision == EXPLICIT


def test_manual_acceptance_never_lets_an_inferred_candidate_through():
    v = gate(facts(receives_all=True), policy("manual", gh=COMMENT_ALL))
    assert (v.decision, v.strength, v.reason) == (INFERRED, INFERRED, "acceptance_manual")
    assert v.rule == "gh.comment.unaddressed_allowed" and not v.becomes_work
    assert gate(facts(receives_all=True), policy("auto", gh=COMMENT_ALL)).becomes_work
    assert gate(facts(addressed=True), policy("manual", gh=COMMENT_ALL)).decision == EXPLICIT


def test_unaddressed_message_where_source_does_not_receive_all_is_not_addressed():
    v = gate(facts(receives_all=False), policy(gh=COMMENT_ALL))
    assert (v.decision, v.reason) == (IGNORE, "not_addressed")


def test_anyone_cell_admits_strangers_without_mention_as_inferred():
    part = {"rows": {"issue_new": {"unaddressed_anyone": True}}}
    v = gate(facts(scope="issue_new", actor="mallory", receives_all=True), policy(gh=part))
    assert (v.decision, v.rule) == (INFERRED, "gh.issue_new.unaddressed_anyone")


def test_disabled_row_unknown_scope_and_missing_source():
    p = policy(gh=COMMENT_ALL)
    assert gate(facts(scope="pr_new", addressed=True), p).reason == "scope_disabled"
    assert gate(facts(scope="nonsense", addressed=True), p).reason == "unknown_scope"
    # a row the source's kind declares but the policy left out (a CI result, the policy
    # written before the CI row existed) is a closed row, not an unknown scope
    ci = facts(scope="ci_default_branch", is_human=False, receives_all=True)
    assert gate(ci, p).reason == "scope_disabled"
    assert gate(facts(source="lk", kind="lark", scope="direct"), p).reason == (
        "source_not_in_policy")


def test_the_gate_knows_the_scopes_it_was_given():
    """The vocabulary is an input of the compiled policy, not a global read by the gate: the
    same document read against other scope rows decides by those."""
    document = validate({"acceptance": "auto", "sources": {"gh": COMMENT_ALL}}, SOURCES)
    grown = Policy(document, {"gh": "github"},
                   scopes={"github": (*SCOPES["github"], "discussion")})
    assert gate(facts(scope="discussion", addressed=True), grown).reason == "scope_disabled"
    assert gate(facts(scope="comment", addressed=True), grown).decision == EXPLICIT
    declared = Policy(document, {"gh": "github"}, scopes=SCOPES)
    assert gate(facts(scope="discussion", addressed=True), declared).reason == "unknown_scope"


def test_own_message_is_ignored_first():
    v = gate(facts(addressed=True, is_self=True), policy(gh=COMMENT_ALL))
    assert v.reason == "self_message"


def test_bots_use_only_the_bot_list():
    part = {**COMMENT_ALL, "bots": ["dependabot[bot]"]}
    p = policy(gh=part)
    listed = gate(facts(actor="dependabot[bot]", is_bot=True, is_human=False, addressed=True), p)
    assert (listed.decision, listed.strength, listed.rule) == (
        INFERRED, INFERRED, "gh.comment.bots")
    other = gate(facts(actor="renovate[bot]", is_bot=True, is_human=False, addressed=True), p)
    assert other.reason == "bot_not_listed"
    # a bot whose name is on the people's allowlist still does not pass a person's cell
    sneaky = gate(facts(actor="octocat", is_bot=True, is_human=False, addressed=True), p)
    assert sneaky.decision == IGNORE and sneaky.reason == "bot_not_listed"


def test_ci_row_has_only_the_anyone_cell_and_needs_receive_all():
    part = {"rows": {"ci_default_branch": {"unaddressed_anyone": True}}}
    p = policy(gh=part)
    ci = facts(scope="ci_default_branch", actor="", is_human=False, receives_all=True)
    assert gate(ci, p).rule == "gh.ci_default_branch.unaddressed_anyone"
    assert gate(facts(scope="ci_default_branch", actor="", is_human=False), p).reason == (
        "not_receiving_all")
    assert cells_of("ci_default_branch") == ("unaddressed_anyone",)


def test_lark_direct_messages_from_allowed_people():
    part = {"allowed": ["ou_alice"], "rows": {"direct": {"addressed": True,
                                                          "unaddressed_allowed": True}}}
    p = policy(lk=part)
    v = gate(Facts("lk", "lark", "direct", "ou_alice", addressed=False, receives_all=True), p)
    assert v.decision == INFERRED
    # Lark open ids are case-sensitive
    v = gate(Facts("lk", "lark", "direct", "OU_ALICE", addressed=True, receives_all=True), p)
    assert v.reason == "not_allowed"


# ---------------------------------------------------------------- properties (hypothesis)

names = st.sampled_from(["octocat", "alice", "bob", "mallory", "dependabot[bot]", ""])
cell_values = st.fixed_dictionaries({c: st.booleans() for c in CELLS})


@st.composite
def github_policies(draw):
    receives_all = draw(st.booleans())
    info = SourceInfo("gh", "github",
                      receives_all=frozenset(SCOPES["github"]) if receives_all else frozenset())
    rows = {}
    for scope in SCOPES["github"]:
        row = draw(cell_values)
        rows[scope] = {c: v and (c == "addressed" or receives_all) for c, v in row.items()
                       if c in cells_of(scope)}
    part = {"allowed": draw(st.lists(names.filter(bool), max_size=3)),
            "bots": draw(st.lists(names.filter(bool), max_size=2)), "rows": rows}
    doc = validate({"acceptance": draw(st.sampled_from(["manual", "auto"])),
                    "sources": {"gh": part}}, {"gh": info})
    return doc, compile_policy(doc, {"gh": info})


github_facts = st.builds(
    Facts, source=st.just("gh"), kind=st.just("github"),
    scope=st.sampled_from(SCOPES["github"]), actor=names, is_human=st.booleans(),
    is_bot=st.booleans(), addressed=st.booleans(), receives_all=st.booleans(),
    is_self=st.booleans())


@settings(max_examples=400, deadline=None)
@given(github_policies(), github_facts)
def test_property_someone_not_on_the_allowlist_is_never_an_explicit_request(pol, f):
    doc, p = pol
    if f.actor.lower() not in doc["sources"].get("gh", {}).get("allowed", []):
        v = gate(f, p)
        assert v.decision != EXPLICIT and v.strength != EXPLICIT


@settings(max_examples=400, deadline=None)
@given(github_policies(), github_facts)
def test_property_an_unaddressed_cell_never_admits_where_the_source_does_not_receive_all(pol, f):
    _, p = pol
    v = gate(f, p)
    if v.rule and v.rule.endswith(("unaddressed_allowed", "unaddressed_anyone")):
        assert f.receives_all
    if not f.receives_all and not f.addressed and not (f.is_bot or not f.is_human):
        assert not v.admitted


@settings(max_examples=400, deadline=None)
@given(github_policies(), github_facts)
def test_property_a_bot_never_passes_through_a_persons_cell(pol, f):
    doc, p = pol
    v = gate(f, p)
    if (f.is_bot or not f.is_human) and f.scope != "ci_default_branch":
        assert v.rule is None or v.rule.endswith(".bots")
        assert v.decision != EXPLICIT
        if v.admitted:
            assert f.actor.lower() in doc["sources"]["gh"]["bots"]


@settings(max_examples=200, deadline=None)
@given(github_policies(), github_facts)
def test_property_the_gate_is_deterministic_and_admitted_means_a_rule(pol, f):
    _, p = pol
    v = gate(f, p)
    assert v == gate(f, p)
    assert (v.decision == IGNORE) == (v.strength is None)
    if v.admitted:
        assert v.rule and v.reason in (None, "acceptance_manual")
        assert (v.reason is None) == (v.decision == EXPLICIT or p.auto)
    else:
        assert v.reason


@pytest.mark.parametrize("scope", SCOPES["github"])
def test_every_github_row_is_closed_by_default(scope):
    p = policy(gh={"allowed": ["octocat"]})
    assert gate(facts(scope=scope, addressed=True, receives_all=True), p).reason == (
        "scope_disabled")
