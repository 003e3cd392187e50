"""A guard over the whole API: every operation the published OpenAPI document lists refuses a
field it does not document with 400 naming it as "unknown field" — an operation with a
request body when the rest of the body is valid enough, one without a body when it is sent
one at all. Fixtures make every object a path names exist, so each operation really parses
its body (a 404 here would hide an operation that ignores what it is sent)."""

from __future__ import annotations

import re

import pytest
from drf_spectacular.generators import SchemaGenerator

pytestmark = pytest.mark.django_db

UNKNOWN = "zz_unknown"
DOCUMENT = SchemaGenerator().get_schema(request=None, public=True)
SCHEMAS = DOCUMENT["components"]["schemas"]


def _operations():
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            if method in ("post", "put", "patch", "delete"):
                yield pytest.param(method, path, operation, id=f"{method.upper()} {path}")


def _resolved(schema: dict) -> dict:
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[1]]
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _resolved(schema["allOf"][0])
    return schema


def _required(schema: dict) -> list[str]:
    """The fields an object needs: its own, each allOf part's, and the first option's of
    a oneOf or anyOf (amux_common.schema's ``openapi_request_rules``)."""
    names = list(schema.get("required", []))
    parts = list(schema.get("allOf", []))
    parts += [options[0] for options in (schema.get("oneOf"), schema.get("anyOf")) if options]
    for part in parts:
        names += [name for name in _required(_resolved(part)) if name not in names]
    return names


def _example(schema: dict):
    """A value of the documented type (its checks past the type are not the point)."""
    schema = _resolved(schema)
    if "enum" in schema:
        return next(v for v in schema["enum"] if v is not None)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if kind == "object" and "properties" in schema:
        # its fields, and those a rule across them asks for (the first way of each rule)
        properties = schema["properties"]
        return {name: _example(properties[name]) for name in _required(schema)
                if name in properties}
    for option in schema.get("oneOf", []) + schema.get("anyOf", []):
        return _example(option)
    if kind == "object":
        return {}
    if kind == "array":
        return []
    if kind == "integer":
        return max(1, schema.get("minimum", 1))
    if kind == "number":
        return 1
    if kind == "boolean":
        return True
    return "x"


def body_for(operation: dict) -> dict:
    content = operation.get("requestBody", {}).get("content", {})
    if not content:
        return {}
    return _example(content["application/json"]["schema"])


@pytest.fixture
def world(api, operator, tmp_path):
    """One of everything a path names, and the value of each path parameter."""
    from django.utils import timezone
    from rest_framework.test import APIClient

    from execution.models import AgentInstance, AgentProfile, BotProfile, LaunchPreset, Schedule
    from goals.models import Agent, Connector, Goal, GoalTurn, InboxEvent, IngressReceipt
    from intake.models import Source
    from sessions.models import AppServer, MemoryEntry, ProviderProfile, Session
    from tests import factories as f
    from tickets.actions import commands, executor
    from tickets.models import Assignment

    provider = ProviderProfile.objects.create(slug="prov", platform="openai-compat",
                                              base_url="http://127.0.0.1:9/v1")
    source = Source.objects.create(kind="webchat", slug="chat", name="Chat", config={})
    Source.objects.create(kind="lark", slug="team-lark", name="Lark",
                          config={"domain": "https://open.feishu.cn", "app_id": "cli_x",
                                  "groups": ["oc_a"]})
    session = Session.objects.create(runtime="pi", provider=provider, model="m",
                                     workdir=str(tmp_path))
    goal = Goal.objects.create(slug="ship", title="Ship")
    agent = Agent.objects.create(goal=goal, slug="builder", mode="managed_agent_runtime",
                                 provider=provider, model="m")
    connector = Connector.objects.create(goal=goal, agent=agent, provider_kind="lark",
                                         source_kind="web_chat", source=source,
                                         ingress_mode="async_inbox")
    receipt = IngressReceipt.objects.create(connector=connector, dedupe_key="e1",
                                            event_kind="message", outcome="queued")
    inboxed_receipt = IngressReceipt.objects.create(connector=connector, dedupe_key="e2",
                                                    event_kind="message", outcome="inboxed")
    inbox = InboxEvent.objects.create(receipt=inboxed_receipt, agent=agent, kind="message",
                                      received_at=timezone.now())
    todo = goal.todos.create(title="t")
    decision = goal.decisions.create(kind="pending_decision", text="Reopen it?")
    turn = GoalTurn.objects.create(goal=goal, agent=agent, key="t1")
    expert = AgentProfile.objects.create(slug="helper", name="Helper")
    preset = LaunchPreset.objects.get_or_create(slug="fast", defaults={
        "runtime": "pi", "model": "m"})[0]
    bot = BotProfile.objects.create(slug="bot", name="Bot")
    instance_session = Session.objects.create(runtime="pi", model="m", workdir=str(tmp_path))
    instance = AgentInstance.objects.create(owner=operator, name="solo",
                                            session=instance_session)
    schedule = Schedule.objects.create(owner=operator, name="s", every_seconds=60,
                                       mode="new-session-per-run", prompt="p",
                                       anchor=timezone.now())
    memory = MemoryEntry.objects.create(owner=operator, title="Deploys", text="Friday")
    app_server = AppServer.objects.create(ref="ref1", origin="registered",
                                          url="ws://127.0.0.1:9")
    trigger = f.TriggerFactory(thread__key="octo/app#1", external_id="c1", text="fix",
                               addressed=False, rule="")
    ticket = commands.open_ticket(trigger_id=trigger.pk, title="Fix")
    token = executor.issue_assignment_token(
        assignment_id=Assignment.objects.get(ticket=ticket).pk)
    worker = APIClient()
    worker.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    key = api.get("/api/v1/prompts/").json()["results"][0]["key"]
    return {
        "params": {
            "agent": agent.slug,
            "key": key,
            "revision": 0,
            "request_id": "req-1",
            "ref": app_server.ref,
        },
        # {slug} and {id} name the object of the collection before them
        "slugs": {"sources": source.slug, "providers": provider.slug, "goals": goal.slug,
                  "profiles": expert.slug, "bot-profiles": bot.slug,
                  "launch-presets": preset.slug},
        "ids": {"connectors": connector.pk, "ingress-receipts": receipt.pk,
                "instances": instance.pk, "memory": memory.pk, "schedules": schedule.pk,
                "sessions": session.pk, "tickets": ticket.pk,
                "inbox": inbox.pk, "todos": todo.pk, "decisions": decision.pk},
        "turn": turn.key,
        "worker": worker,
    }


def _url(path: str, world) -> str:
    def fill(match):
        name = match.group(1)
        before = path[:match.start()].rstrip("/").rsplit("/", 1)[-1]
        if name == "slug":
            return str(world["slugs"][before])
        if name == "id":
            return str(world["ids"][before])
        if name == "key" and before == "turns":
            return world["turn"]
        return str(world["params"][name])

    return re.sub(r"\{(\w+)\}", fill, path)


@pytest.mark.parametrize(("method", "path", "operation"), list(_operations()))
def test_every_operation_names_an_unknown_field(method, path, operation, world, api):
    client = world["worker"] if path.startswith("/api/v1/tools/") else api
    body = {**body_for(operation), UNKNOWN: 1}
    answer = getattr(client, method)(_url(path, world), body, format="json")
    assert answer.status_code == 400, (answer.status_code, answer.content)
    error = answer.json()["error"]
    assert error["code"] == "invalid"
    assert error["fields"].get(UNKNOWN) == ["unknown field"], error
