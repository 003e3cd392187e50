"""Seed 002's admission table keeps one row per configured Lark group: a group's own row
decides for messages there (through the signed webhook and the real gate), a group
without one is decided by the "configured groups" row, and the Policy tab shows, saves
and tries each group's row. A ticket admitted by a group's row keeps the group in its
mandate, so a later policy change is judged by that same row."""

from __future__ import annotations

import pytest

from intake.models import Source, Trigger
from intake.sources.lark import Lark
from policy import services as policy_services
from policy.models import PolicyVersion
from tests.support.intake import processed
from tests.support.lark_events import bot_verified, message_event, sealed

pytestmark = pytest.mark.django_db

TOKEN, KEY, BOT = "v-token", "enc-key-123", "ou_bot"


@pytest.fixture
def lark():
    config = Lark.validate_config({"app_id": "cli_rows", "bot_open_id": BOT,
                                   "groups": ["oc_eng", "oc_ops", "oc_new"],
                                   "receive_all": ["oc_ops"]})
    source = Source(kind="lark", slug="lk", name="Lark", config=config)
    source.secrets = {"verification_token": TOKEN, "encrypt_key": KEY}
    source.save()
    bot_verified(source, BOT)  # mentions are admitted by the bot id Lark confirmed
    return source


def mention(client, chat: str, message_id: str, text="@_user_1 please look") -> dict:
    event = message_event(token=TOKEN, chat_id=chat, text=text, app_id="cli_rows",
                          mentions=[(BOT, "amux")] if "@_user_1" in text else [],
                          message_id=message_id)
    body, headers = sealed(event, encrypt_key=KEY)
    return processed(client.post("/hooks/lark/lk", data=body, content_type="application/json",
                                 **headers))


def test_a_groups_own_row_decides_there_and_the_default_row_elsewhere(client, lark):
    policy_services.save({"acceptance": "auto", "sources": {"lk": {
        "allowed": ["ou_alice"], "rows": {
            "group_configured": {"addressed": True},
            "group_configured:oc_eng": {"addressed": False},
            "group_configured:oc_ops": {"unaddressed_allowed": True}}}}}, None)
    new = Trigger.objects.get(pk=mention(client, "oc_new", "om_1")["trigger"])
    assert (new.decision, new.rule) == ("explicit", "lk.group_configured.addressed")
    eng = mention(client, "oc_eng", "om_2")  # its own row is closed
    assert eng["outcome"] == "ignored" and eng["reason"] == "scope_disabled"
    ops = Trigger.objects.get(pk=mention(client, "oc_ops", "om_3", "the deploy failed")[
        "trigger"])
    assert (ops.decision, ops.rule) == (
        "inferred", "lk.group_configured:oc_ops.unaddressed_allowed")


def test_the_api_names_a_group_the_source_does_not_configure(api, lark):
    base = api.get("/api/v1/policy/").json().get("version")
    bad = api.put("/api/v1/policy/", {"base_version": base, "acceptance": "manual",
                                      "sources": {"lk": {"rows": {
                                          "group_configured:oc_nope": {"addressed": True}}}}},
                  format="json")
    assert bad.status_code == 400, bad.content
    fields = bad.json()["error"]["fields"]
    assert any("oc_nope is not one of the source's configured groups (oc_eng, oc_ops, oc_new)" in
               str(v) for v in fields.values()), fields
    check = api.post("/api/v1/policy/check", {"source": "lk", "scope": "group_configured",
                                              "place": "oc_elsewhere", "actor": "ou_a"},
                     format="json")
    assert check.status_code == 400 and "place" in check.json()["error"]["fields"]


def test_the_policy_tab_shows_saves_and_tries_each_groups_row(client, operator, lark):
    client.force_login(operator)
    html = client.get("/panel/policy").content.decode()
    assert 'data-scope="group_configured:oc_eng"' in html and "Group oc_eng" in html
    assert 'data-scope="group_configured:oc_ops"' in html
    # only oc_ops receives all: only its row's unaddressed cells can open
    assert 'name="cell:lk:group_configured:oc_ops:unaddressed_allowed"' in html
    assert 'name="cell:lk:group_configured:oc_eng:unaddressed_allowed"' not in html
    form = {"base_version": "", "source": ["lk"], "allowed:lk": "ou_alice", "bots:lk": "",
            "cell:lk:group_configured:addressed": "on",
            "cell:lk:group_configured:oc_eng:addressed": "on"}
    saved = client.post("/panel/policy/save", form, HTTP_HX_REQUEST="true")
    assert saved.status_code == 204, saved.content
    rows = PolicyVersion.objects.get().document["sources"]["lk"]["rows"]
    assert rows["group_configured:oc_eng"]["addressed"] is True
    assert rows["group_configured:oc_ops"]["addressed"] is False  # its own row: closed
    tried = client.post("/panel/policy/try", {**form, "try_scope": "lk|group_configured:oc_ops",
                                              "try_actor": "ou_alice", "try_addressed": "on"})
    assert tried.status_code == 200 and "Ignored" in tried.content.decode()
    tried = client.post("/panel/policy/try", {**form, "try_scope": "lk|group_configured:oc_eng",
                                              "try_actor": "ou_alice", "try_addressed": "on"})
    assert "lk.group_configured:oc_eng.addressed" in tried.content.decode()
