"""One request-parsing rule for the API: a field an operation does not document is refused
with 400 naming it (a typo never becomes a silent default), a nested object's required
members are required, and every faulty field is named at once, in the one error shape."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def fields_of(response) -> dict:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    return error["fields"]


def test_a_goal_quota_with_a_typo_is_refused_not_a_quota_of_zero(api):
    answer = api.post("/api/v1/goals/", {"slug": "ship", "title": "Ship",
                                         "quota": {"turns": 1}}, format="json")
    assert fields_of(answer) == {"quota.turns": ["unknown field"],
                                 "quota.limit": ["This field is required."]}
    answer = api.post("/api/v1/goals/", {"slug": "ship", "title": "Ship",
                                         "quota": {"unit": "turns"}}, format="json")
    assert fields_of(answer) == {"quota.limit": ["This field is required."]}
    assert api.get("/api/v1/goals/").json()["count"] == 0


def test_unknown_top_level_fields_are_named_with_every_other_fault(api):
    answer = api.post("/api/v1/goals/", {"slug": "ship", "title": 5, "titel": "Ship",
                                         "colour": "red"}, format="json")
    assert fields_of(answer) == {"title": ["Must be a string."],
                                 "titel": ["unknown field"], "colour": ["unknown field"]}


def test_a_read_only_field_sent_back_is_not_unknown(api):
    made = api.post("/api/v1/goals/", {"slug": "ship", "title": "Ship"}, format="json")
    assert made.status_code == 201, made.content
    body = api.get("/api/v1/goals/ship/").json()
    patched = api.patch("/api/v1/goals/ship/", {"title": "Shipped"}, format="json")
    assert patched.status_code == 200, patched.content
    assert set(body) >= {"slug", "title"}


def test_a_session_with_an_unknown_field_is_refused(api):
    answer = api.post("/api/v1/sessions/", {"runtime": "pi", "model": "m",
                                            "provider": "nope", "idle_timeout": 5},
                      format="json")
    assert fields_of(answer)["idle_timeout"] == ["unknown field"]


def test_a_prompt_write_with_an_unknown_field_is_refused(api):
    key = api.get("/api/v1/prompts/").json()["results"][0]["key"]
    answer = api.put(f"/api/v1/prompts/{key}/", {"text": "x", "base_revision": 0,
                                                 "revison": 1}, format="json")
    assert fields_of(answer) == {"revison": ["unknown field"]}


def test_a_worker_tool_with_an_unknown_field_is_refused(db):
    from rest_framework.test import APIClient

    from tests import factories as f
    from tickets.actions import commands, executor
    from tickets.models import Assignment

    trigger = f.TriggerFactory(thread__key="octo/app#1", external_id="c1", text="fix",
                               addressed=False, rule="")
    ticket = commands.open_ticket(trigger_id=trigger.pk, title="Fix")
    token = executor.issue_assignment_token(
        assignment_id=Assignment.objects.get(ticket=ticket).pk)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    answer = client.post("/api/v1/tools/report/", {"status": "progress", "txt": "typo"},
                         format="json")
    assert fields_of(answer) == {"txt": ["unknown field"]}


def test_an_operation_without_a_body_refuses_one_and_does_nothing(api, tmp_path):
    from sessions.models import Session

    session = Session.objects.create(runtime="pi", model="m", workdir=str(tmp_path))
    url = f"/api/v1/sessions/{session.pk}/archive/"
    answer = api.post(url, {"force": True, "reason": "done"}, format="json")
    assert fields_of(answer) == {"force": ["unknown field"], "reason": ["unknown field"]}
    refused = api.post(url, ["force"], format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "This operation takes no body."
    session.refresh_from_db()
    assert session.lifecycle != "archived"
    assert api.post(url, {}, format="json").status_code == 200
    assert api.delete("/api/v1/memory/0/", {"all": True}, format="json").status_code == 400


def test_nested_faults_are_named_by_their_dotted_path(api):
    from intake.models import Source

    Source.objects.create(kind="github", slug="gh", name="GH", config={"repo": "octo/app"})
    part = {"bots": ["ok", ""], "rows": {"comment": {"adressed": True}}}
    answer = api.put("/api/v1/policy/", {"acceptance": "manual", "base_version": None,
                                         "sources": {"gh": part}}, format="json")
    fields = fields_of(answer)
    assert set(fields) == {"sources.gh.bots.1", "sources.gh.rows.comment.adressed"}
    assert all(isinstance(messages, list) for messages in fields.values())


def test_flat_fields_names_every_depth():
    from amux_common.api import flat_fields

    drf = {"items": [{}, {"name": ["Required."]}], "tags": {0: ["Not a string."]},
           "quota": {"limit": ["Required."], "non_field_errors": ["Bad quota."]},
           "title": ["Too long.", "Bad."], "base": "stale"}
    assert flat_fields(drf) == {"items.1.name": ["Required."], "tags.0": ["Not a string."],
                                "quota.limit": ["Required."], "quota": ["Bad quota."],
                                "title": ["Too long.", "Bad."], "base": ["stale"]}


def test_a_connector_names_every_fault_at_once(api):
    assert api.post("/api/v1/goals/", {"slug": "ship", "title": "Ship"}).status_code == 201
    for slug in ("builder", "reviewer"):
        made = api.post("/api/v1/goals/ship/agents/",
                        {"slug": slug, "mode": "attached_app_session"})
        assert made.status_code == 201, made.content
    answer = api.post("/api/v1/connectors/", {
        "goal": "ship", "source_kind": "web_chat", "ingress_mode": "async_inbox",
        "reply_mode": "source_comment", "fallback": "session_queue"}, format="json")
    assert set(fields_of(answer)) == {"agent", "ingress_mode", "reply_mode", "fallback"}
    lark = api.post("/api/v1/connectors/", {
        "goal": "ship", "agent": "nobody", "source_kind": "lark_group_message",
        "ingress_mode": "session_queue", "reply_mode": "configured_mirror"}, format="json")
    assert set(fields_of(lark)) == {"agent", "source", "source_ref", "mirror_ref"}
    nowhere = api.post("/api/v1/connectors/", {
        "goal": "nowhere", "source_kind": "web_chat", "ingress_mode": "async_inbox"},
        format="json")
    assert set(fields_of(nowhere)) == {"goal", "ingress_mode"}
    assert api.get("/api/v1/connectors/").json()["count"] == 0


def test_a_prompt_write_names_every_fault_at_once(api):
    key = api.get("/api/v1/prompts/").json()["results"][0]["key"]
    answer = api.put(f"/api/v1/prompts/{key}/", {"text": 5, "revison": 1}, format="json")
    assert set(fields_of(answer)) == {"text", "base_revision", "revison"}
    restore = api.post(f"/api/v1/prompts/{key}/restore/", {"base": 0}, format="json")
    assert set(fields_of(restore)) == {"base", "base_revision"}


def test_a_policy_names_its_base_and_its_document_faults_at_once(api):
    answer = api.put("/api/v1/policy/", {"acceptance": "sometimes", "sources": {}},
                     format="json")
    assert set(fields_of(answer)) == {"base_version", "acceptance"}
    check = api.post("/api/v1/policy/check/", {"scope": "comment", "version": "nope",
                                               "adressed": True}, format="json")
    assert set(fields_of(check)) == {"source", "version", "adressed"}
