"""Intake's registries: plugin capabilities are declared and checked at start-up; one
consumer takes what intake records, one handler answers card callbacks; one trigger-facts
type, one gate view of it."""

from __future__ import annotations

import pytest

from amux_common.trigger_facts import TriggerFacts
from conversations import card_actions
from intake import card_hooks, consumers
from intake.sources import (
    KINDS,
    CapabilityMissing,
    DocumentPolling,
    OpensPullRequests,
    Polling,
    check_capabilities,
    plugin,
)
from intake.sources.base import SourceKind
from policy.gate import Facts


def test_plugins_answer_their_declared_capabilities():
    check_capabilities()  # what start-up runs
    github, lark, webchat = plugin("github"), plugin("lark"), plugin("webchat")
    assert isinstance(github, Polling) and isinstance(github, OpensPullRequests)
    assert not isinstance(github, DocumentPolling)
    assert isinstance(lark, DocumentPolling) and not isinstance(lark, Polling)
    assert not any(isinstance(webchat, cap) for cap in (Polling, DocumentPolling,
                                                         OpensPullRequests))


def test_a_plugin_claiming_a_capability_without_its_methods_stops_start_up():
    class Halfway(SourceKind, DocumentPolling):
        kind = "halfway"

        def documents(self):
            return []

    with pytest.raises(CapabilityMissing) as refused:
        check_capabilities({**KINDS, "halfway": Halfway})
    assert str(refused.value) == ("source plugin Halfway ('halfway') declares DocumentPolling "
                                  "but does not implement poll_document")


def test_only_a_whole_consumer_is_registered():
    class NotQuite:
        def locate(self, source, result):
            return result

    with pytest.raises(TypeError) as refused:
        consumers.register(NotQuite())
    assert "NotQuite is not an intake consumer" in str(refused.value)
    assert "route_new" in str(refused.value) and "locate" not in str(refused.value).split(
        "lacks")[1]


def test_the_gate_sees_the_facts_without_their_content():
    facts = TriggerFacts(external_id="comment:1", thread="octo/app#7", scope="comment",
                         actor="alice", addressed=True, receives_all=True,
                         text="@amux fix it", meta={"own_message": True})
    assert Facts.of("gh", "github", facts) == Facts(
        source="gh", kind="github", scope="comment", actor="alice", is_human=True,
        is_bot=False, addressed=True, receives_all=True, is_self=True)


def test_card_callbacks_have_one_handler():
    card_hooks.register(card_actions.handle)  # the wiring's own handler again: no change
    with pytest.raises(RuntimeError, match="handled already by"):
        card_hooks.register(lambda source, payload: {})
    assert card_hooks._handler is card_actions.handle
