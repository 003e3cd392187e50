"""Pure rules behind the first-run panel: which policy cells admit work, what became of a
web chat message in words, and which provider keys an HTTP header can carry."""

from __future__ import annotations

import pytest

from intake.outcome import describe
from policy.document import SourceInfo, open_cells
from sessions.keys import api_key_problem, with_key

INFOS = {"chat": SourceInfo("chat", "webchat"), "gh": SourceInfo("gh", "github"),
         "off": SourceInfo("off", "webchat", enabled=False)}


def test_open_cells_counts_open_cells_on_enabled_sources_only():
    document = {"acceptance": "manual", "sources": {
        "chat": {"rows": {"direct": {"addressed": True, "unaddressed_anyone": False}}},
        "gh": {"allowed": ["octocat"], "rows": {"issue_new": {"addressed": False}}},
        "off": {"rows": {"direct": {"addressed": True}}},
        "gone": {"rows": {"direct": {"addressed": True}}},
    }}
    assert open_cells(document, INFOS) == ["chat.direct.addressed"]
    assert open_cells({"acceptance": "manual", "sources": {}}, INFOS) == []
    assert open_cells({}, INFOS) == []


@pytest.mark.parametrize(("decision", "reason", "disposition", "admitted", "text"), [
    ("explicit", "", "admitted", True, "Admitted: a new ticket was opened for it."),
    ("inferred", "", "evaluating", True,
     "Admitted as a candidate: triage decides whether it becomes work."),
    ("explicit", "", "follow_up", True,
     "Admitted: added to the live ticket of this conversation."),
    ("ignore", "not_allowed", "ignore", False, "Ignored: the sender is not on the allowlist."),
    ("ignore", "source_not_in_policy", "", False,
     "Ignored: the policy allows nothing on this source."),
    ("ignore", "some_new_reason", "", False, "Ignored: some new reason."),
    ("inferred", "acceptance_manual", "not_accepted", False,
     "Not taken as work: it is an inferred candidate and acceptance is manual."),
    ("explicit", "", "handed_back", False, "Handed back: the agent decided it is not for it."),
    ("explicit", "", "", True, "Admitted as an explicit request."),
])
def test_a_messages_outcome_in_words(decision, reason, disposition, admitted, text):
    said = describe(decision, reason, disposition)
    assert (said.admitted, said.text) == (admitted, text)


def test_an_undecided_message_has_no_outcome_yet():
    assert describe("", "", "") is None


@pytest.mark.parametrize("key", ["sk-abc_DEF.123", "sk-" + "x" * 200])
def test_keys_a_header_can_carry(key):
    assert api_key_problem(key) is None


@pytest.mark.parametrize("key", ["sk-café", "sk-abc\n", " sk-abc", "sk-\u200babc", "sk-\x00"])
def test_keys_a_header_cannot_carry(key):
    assert "ASCII" in api_key_problem(key)


def test_an_empty_key_field_keeps_the_key_a_typed_one_replaces_it_clear_removes_it():
    stored = {"api_key": "old", "other": "x"}
    assert with_key(stored, "", False) == stored
    assert with_key(stored, "new", False) == {"api_key": "new", "other": "x"}
    assert with_key(stored, "new", True) == {"other": "x"}
    assert with_key(None, "", False) == {}
    assert stored == {"api_key": "old", "other": "x"}  # never changed in place
