"""Whom a Lark conversation's session acts for (sessions.ownership): in a direct chat only
its person writes, so the session acts for, and reads the memory of, the amux user they map
to; in a group's topic or the bot's one conversation anyone admitted may write, so it acts
for nobody and reads the team's memory — never that of whoever wrote first."""

from __future__ import annotations

import pytest

from conversations.models import Conversation
from prompts_app import service as prompts
from sessions import ownership
from tests.integration.conversations.test_lark_conversations import (
    ALICE,
    BOB,
    lark_server,  # noqa: F401 - fixture
    lark_source,
    say,
    worker_settings,  # noqa: F401 - fixture
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def mapped(settings, operator, django_user_model):
    team = django_user_model.objects.create_user("team-notes")
    settings.AMUX_MEMORY_TEAM = team.username
    prompts.save(ownership.IDENTITIES, f"Lark {ALICE} is amux {operator.username}", 0)
    return operator, team


def scope_of_place(chat_id: str, thread_key: str) -> dict:
    conversation = Conversation.objects.get(chat_id=chat_id, thread_key=thread_key)
    return conversation.session.snapshot["scope"] | {"owner_id": conversation.session.owner_id}


def test_a_direct_chat_acts_for_its_person(client, lark_server, worker_settings, mapped):  # noqa: F811
    operator, _team = mapped
    lark_source(lark_server)
    outcome = say(client, lark_server, text="what is on today?", message_id="om_dm",
                  chat_id="oc_alice", chat_type="p2p", mention=False)
    assert outcome["outcome"] == "admitted", outcome
    assert scope_of_place("oc_alice", "") == {
        "kind": "lark", "owner": operator.pk, "memory_owner": operator.pk,
        "via": "identities", "owner_id": operator.pk}


def test_a_group_topic_acts_for_nobody_and_reads_the_teams_memory(
        client, lark_server, worker_settings, mapped):  # noqa: F811
    _operator, team = mapped
    lark_source(lark_server)
    # Alice, whom the identities map to an operator, starts the topic; Bob writes next
    outcome = say(client, lark_server, text="@amux what is on today?", message_id="om_1",
                  thread_id="omt_1")
    assert outcome["outcome"] == "admitted", outcome
    say(client, lark_server, text="read me Alice's notes", message_id="om_2",
        thread_id="omt_1", root_id="om_1", sender=BOB)
    assert scope_of_place("oc_team", "omt_1") == {
        "kind": "lark", "owner": None, "memory_owner": team.pk, "via": "team",
        "owner_id": None}


def test_the_bots_one_conversation_is_shared_too(client, lark_server, worker_settings,  # noqa: F811
                                                  mapped):
    _operator, team = mapped
    lark_source(lark_server, mode="singleton")
    outcome = say(client, lark_server, text="hello", message_id="om_s", chat_id="oc_alice",
                  chat_type="p2p", mention=False)
    assert outcome["outcome"] == "admitted", outcome
    assert scope_of_place("", "") == {
        "kind": "lark", "owner": None, "memory_owner": team.pk, "via": "team",
        "owner_id": None}
