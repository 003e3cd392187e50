"""Each resource's OpenAPI links really lead somewhere: for every create (a POST answering
201 with links), schemathesis-generated valid data is sent until the create answers 2xx,
then each link is followed from that answer (its parameters taken from the created body,
as a client generator would) with generated valid data until it answers 2xx: read, then
replace and update, then delete. Every answer on the way is held to the document.

The stateful fuzz (test_api_stateful_fuzz.py) wanders the same links at random; this
walks each chain to its end, so a link whose parameters name the wrong field, or an
update no valid body can pass, fails here by name. References in bodies are steered to
the stored rows of tests/support/api_world.py."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support import api_steering, api_world

pytestmark = pytest.mark.django_db

DOCUMENT = SchemaGenerator().get_schema(request=None, public=True)
schema = schemathesis.openapi.from_dict(DOCUMENT)
schema.app = get_wsgi_application()
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
ATTEMPTS = 12  # generated bodies tried per step before it counts as not reached
ORDER = ("Read", "Replace", "Update", "Delete")  # delete last: it ends the chain

# Creates whose generated valid data cannot pass a rule no schema states, with the body a
# user would send: the chain starts from that instead, so its links are still walked.
WORLD_BODIES = {
    # the settings must fit the source kind's table (goals/core/connectors.py) and a Lark
    # kind names a stored Lark source and one of its chats
    "/api/v1/connectors/": lambda world: {"goal": world["goal"], "agent": world["agent"],
                                          "source_kind": "web_chat",
                                          "ingress_mode": "session_queue"},
    # a cron expression must be one Celery's parser takes (a day that occurs in its month)
    "/api/v1/schedules/": lambda world: {"name": "chain", "every_seconds": 60,
                                         "mode": "subtask", "prompt": "Summarise.",
                                         "runtime": api_world.RUNTIME,
                                         "provider": world["provider"],
                                         "model": api_world.MODEL},
}

CREATES = sorted(path for path, operations in DOCUMENT["paths"].items()
                 if (operations.get("post") or {}).get("responses", {})
                 .get("201", {}).get("links"))


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    api_world.hold_test_connection()
    yield
    api_world.stop_app_servers()
    api_world.release_test_connection()


@pytest.fixture
def world(api):
    return api_world.World(api)


@pytest.fixture
def headers(operator):
    from knox.models import AuthToken

    return {"Authorization": f"Token {AuthToken.objects.create(user=operator)[1]}"}


def _first_2xx(operation, path_parameters: dict, world, headers) -> tuple[int, object]:
    """Generated valid requests, sent until one answers 2xx: (how many were sent, the
    answer's body, or None when none did)."""
    sent: list = []
    found: list = []

    @settings(max_examples=ATTEMPTS, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=path_parameters))
    def attempt(case):
        if found:
            return
        api_steering.steer(case, world, paths=False)
        response = case.call(headers=headers)
        sent.append(response.status_code)
        case.validate_response(response, checks=CHECKS, headers=headers,
                               transport_kwargs={"headers": headers})
        if 200 <= response.status_code < 300:
            found.append(response.json() if response.content else {})

    attempt()
    return sent, (found[0] if found else None)


def _value(expression: str, body: dict, request_path: dict):
    where, _, name = expression.partition("#/")
    if where == "$response.body":
        return body[name]
    assert expression.startswith("$request.path."), expression
    return request_path[expression.removeprefix("$request.path.")]


@pytest.mark.parametrize("path", CREATES)
def test_each_link_of_a_create_reaches_a_2xx(path, world, headers, api):
    parents = {name: str(api_steering.path_value(path, name, world))
               for name in _parameters(path)}
    created_sent, created = _first_2xx(schema[path]["POST"], parents, world, headers)
    if created is None and path in WORLD_BODIES:
        made = api.post(path, WORLD_BODIES[path](world), format="json")
        api_world.hold_test_connection()
        assert made.status_code == 201, made.content
        created = made.json()
    assert created is not None, f"POST {path}: no 2xx in {created_sent}"
    links = DOCUMENT["paths"][path]["post"]["responses"]["201"]["links"]
    unreached = {}
    for label in sorted(links, key=ORDER.index):
        link = links[label]
        operation = schema.find_operation_by_id(link["operationId"])
        parameters = {name: str(_value(expr, created, parents))
                      for name, expr in link["parameters"].items()}
        sent, answer = _first_2xx(operation, parameters, world, headers)
        if answer is None:
            unreached[f"{label} ({operation.label})"] = sent
    assert not unreached, f"POST {path}: links that never answered 2xx: {unreached}"


def _parameters(path: str) -> list[str]:
    import re

    return re.findall(r"\{(\w+)\}", path)
