"""Policy effects (pure): exactly the affected live tickets, and why."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.document import SourceInfo, validate
from policy.effects import (
    ACCEPTANCE_CLOSED,
    REQUESTER_INELIGIBLE,
    RULE_CHANGED,
    RULE_DISABLED,
    policy_effects,
)
from policy.gate import CELLS, SCOPES, cells_of

GH = SourceInfo("gh", "github", receives_all=frozenset(SCOPES["github"]))
SOURCES = {"gh": GH}


def doc(acceptance="auto", allowed=("alice", "bob"), bots=("dependabot[bot]",), **cells):
    rows = {"comment": {"addressed": True, "unaddressed_allowed": True},
            "issue_new": {"addressed": True}}
    for key, value in cells.items():
        scope, cell = key.split("__")
        rows.setdefault(scope, {})[cell] = value
    return validate({"acceptance": acceptance, "sources": {"gh": {
        "allowed": list(allowed), "bots": list(bots), "rows": rows}}}, SOURCES)


def mandate(ticket, rule, requester="alice", strength="explicit", **basis):
    scope = rule.split(".")[1]
    return {"ticket": ticket, "source": "gh", "scope": scope, "strength": strength,
            "rule": rule, "requester": requester, "basis": basis}


EXPLICIT_ALICE = mandate(1, "gh.comment.addressed", addressed=True)
INFERRED_BOB = mandate(2, "gh.comment.unaddressed_allowed", "bob", "inferred",
                       addressed=False, receives_all=True)
BOT = mandate(3, "gh.comment.bots", "dependabot[bot]", "inferred", is_bot=True,
              is_human=False)
ISSUE_ALICE = mandate(4, "gh.issue_new.addressed", addressed=True)
LIVE = [EXPLICIT_ALICE, INFERRED_BOB, BOT, ISSUE_ALICE]


def effects(old, new, mandates=LIVE):
    return {a.ticket: a.reasons for a in policy_effects(old, new, mandates, SOURCES, "o", "n")}


def test_an_unrelated_change_affects_nobody():
    assert effects(doc(), doc(allowed=("alice", "bob", "carol"))) == {}
    assert effects(doc(), doc()) == {}


def test_closing_the_rule_affects_only_the_tickets_resting_on_it():
    assert effects(doc(), doc(comment__addressed=False)) == {1: (RULE_DISABLED,)}
    assert effects(doc(), doc(issue_new__addressed=False)) == {4: (RULE_DISABLED,)}


def test_a_requester_removed_from_the_allowlist():
    assert effects(doc(), doc(allowed=("alice",))) == {2: (REQUESTER_INELIGIBLE,)}
    assert effects(doc(), doc(bots=())) == {3: (REQUESTER_INELIGIBLE,)}


def test_closing_proactive_acceptance_affects_inferred_tickets_only():
    assert effects(doc(), doc("manual")) == {2: (ACCEPTANCE_CLOSED,), 3: (ACCEPTANCE_CLOSED,)}


def test_a_ticket_admitted_under_the_new_version_already_is_not_affected():
    """The version's application runs from the outbox, after work it already admitted."""
    admitted_under_new = {**EXPLICIT_ALICE, "policy_version": "n"}
    closed = doc(comment__addressed=False)
    assert effects(doc(), closed, [admitted_under_new, ISSUE_ALICE]) == {}
    assert effects(doc(), closed, [{**admitted_under_new, "policy_version": "o"}]) == {
        1: (RULE_DISABLED,)}


def test_rule_changed_when_admitted_by_another_cell():
    # bob's inferred ticket now rests on the "anyone" cell instead of the allowed cell
    new = doc(allowed=("alice",), comment__unaddressed_anyone=True)
    got = policy_effects(doc(), new, LIVE, SOURCES, "o", "n")
    assert {a.ticket: a.reasons for a in got} == {2: (RULE_CHANGED,)}
    assert got[0].after.rule == "gh.comment.unaddressed_anyone"
    assert "Nothing has been cancelled" in got[0].text


def test_removing_the_source_part_disables_every_rule():
    empty = validate({"acceptance": "auto", "sources": {}}, SOURCES)
    got = effects(doc(), empty)
    assert got == {1: (RULE_DISABLED,), 2: (RULE_DISABLED,), 3: (RULE_DISABLED,),
                   4: (RULE_DISABLED,)}


def test_message_names_what_changed_without_content():
    (a,) = policy_effects(doc(), doc(comment__addressed=False), [EXPLICIT_ALICE], SOURCES,
                          "abcdef1234567890", "0987654321fedcba")
    assert "0987654321fe" in a.text and "turned off" in a.text
    assert "gh.comment.addressed" in a.text


# ---------------------------------------------------------------- properties (hypothesis)

people = st.lists(st.sampled_from(["alice", "bob", "carol"]), unique=True, max_size=3)


@st.composite
def documents(draw):
    rows = {scope: {c: draw(st.booleans()) for c in cells_of(scope)}
            for scope in SCOPES["github"]}
    return validate({"acceptance": draw(st.sampled_from(["manual", "auto"])), "sources": {
        "gh": {"allowed": draw(people), "bots": draw(st.lists(st.just("dependabot[bot]"),
                                                               max_size=1)),
               "rows": rows}}}, SOURCES)


mandates = st.builds(
    lambda n, scope, cell, who, strength: mandate(
        n, f"gh.{scope}.{cell}", who, strength, addressed=cell == "addressed",
        receives_all=True),
    st.integers(1, 50), st.sampled_from(["comment", "issue_new"]),
    st.sampled_from(CELLS), st.sampled_from(["alice", "bob", "carol"]),
    st.sampled_from(["explicit", "inferred"]))


@settings(max_examples=200, deadline=None)
@given(documents(), st.lists(mandates, max_size=6, unique_by=lambda m: m["ticket"]))
def test_property_saving_the_same_content_affects_nobody(doc, live):
    assert policy_effects(doc, doc, live, SOURCES) == []


@settings(max_examples=200, deadline=None)
@given(documents(), documents(), st.lists(mandates, max_size=6, unique_by=lambda m: m["ticket"]))
def test_property_affected_tickets_are_live_ones_each_once_with_a_reason(old, new, live):
    got = policy_effects(old, new, live, SOURCES)
    tickets = [a.ticket for a in got]
    assert len(tickets) == len(set(tickets)) and set(tickets) <= {m["ticket"] for m in live}
    assert all(a.reasons and "Nothing has been cancelled" in a.text for a in got)


def test_a_ticket_from_a_group_is_judged_by_that_groups_row():
    """A mandate keeps the configured group it came from (basis ``place``): closing that
    group's own row affects it, closing another group's row does not, and a ticket the
    default row admitted is affected when its group gets a closed row of its own."""
    lk = SourceInfo("lk", "lark", receives_all=frozenset({"direct"}),
                    places=("oc_eng", "oc_ops"))
    sources = {"lk": lk}

    def lark_doc(**own):
        rows = {"group_configured": {"addressed": True}}
        rows.update({f"group_configured:{chat}": {"addressed": on} for chat, on in own.items()})
        return validate({"acceptance": "auto", "sources": {"lk": {
            "allowed": ["ou_a"], "rows": rows}}}, sources)

    def lark_mandate(ticket, rule, place):
        return {"ticket": ticket, "source": "lk", "scope": "group_configured",
                "strength": "explicit", "rule": rule, "requester": "ou_a",
                "basis": {"addressed": True, "receives_all": False, "place": place}}

    live = [lark_mandate(1, "lk.group_configured:oc_eng.addressed", "oc_eng"),
            lark_mandate(2, "lk.group_configured.addressed", "oc_ops")]

    def changed(old, new):
        return {a.ticket: a.reasons
                for a in policy_effects(old, new, live, sources, "o", "n")}

    before = lark_doc(oc_eng=True)
    assert changed(before, lark_doc(oc_eng=True)) == {}
    assert changed(before, lark_doc(oc_eng=False)) == {1: (RULE_DISABLED,)}
    assert changed(before, lark_doc(oc_eng=True, oc_ops=False)) == {2: (RULE_DISABLED,)}
