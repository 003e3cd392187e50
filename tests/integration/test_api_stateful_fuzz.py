"""The OpenAPI links tell the truth: schemathesis follows them (create → read → update →
delete of the same resource) in-process, on the test database with an operator's token,
and holds every answer to the document (no server error; status code, content type and
body as documented). Bodies name the stored rows of tests/support/api_world.py where they
reference one, so a create can succeed and its links be followed.

Bounded: a few short scenarios (AMUX_FUZZ_STEPS raises the count)."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support import api_steering, api_world

pytestmark = pytest.mark.django_db

DOCUMENT = SchemaGenerator().get_schema(request=None, public=True)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


def test_every_create_links_to_the_read_update_and_delete_of_what_it_made():
    for path, operations in DOCUMENT["paths"].items():
        created = (operations.get("post") or {}).get("responses", {}).get("201")
        detail = next((p for p in DOCUMENT["paths"] if p.startswith(path)
                       and p[len(path):].count("/") == 1 and p[len(path):].startswith("{")),
                      None)
        if created and detail:
            assert "Read" in created.get("links", {}), path


@pytest.fixture
def world(api):
    return api_world.World(api)


def test_linked_operations_answer_as_documented(world, operator):
    from knox.models import AuthToken

    token = AuthToken.objects.create(user=operator)[1]
    schema = schemathesis.openapi.from_dict(DOCUMENT)
    schema.app = get_wsgi_application()

    followed: Counter = Counter()  # (link, answered 2xx or not) over every scenario

    class Machine(schema.as_state_machine()):
        def step(self, input):
            output = super().step(input)
            if input.transition is not None and input.is_applied:
                ok = 200 <= output.response.status_code < 300
                followed[(input.transition.id, ok)] += 1
            return output

        def before_call(self, case):
            # the links fill the path; only references in bodies are steered
            api_steering.steer(case, world, paths=False)

        def get_call_kwargs(self, case):
            return {"headers": {"Authorization": f"Token {token}"}}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

        def teardown(self):
            # an app-server a scenario started outlives its rolled-back row otherwise (a
            # later test in the same worker then counts it as its own)
            api_world.stop_app_servers()
            super().teardown()

    api_world.hold_test_connection()
    try:
        run_state_machine_as_test(Machine, settings=settings(
            max_examples=int(os.environ.get("AMUX_FUZZ_STEPS", "10")), stateful_step_count=6,
            deadline=None, derandomize=not os.environ.get("AMUX_FUZZ_STEPS"),
            suppress_health_check=list(HealthCheck)))
    finally:
        api_world.release_test_connection()
    # At this bound the scenarios cannot follow every link (test_api_link_chains.py walks
    # each to a 2xx by name); here links are followed, and some reach a 2xx.
    reached = sorted({link for (link, ok) in followed if ok})
    _report(followed)
    assert followed, "no link was followed"
    assert reached, f"no link was followed to a 2xx: {dict(followed)}"


def _report(followed: Counter) -> None:
    """AMUX_FUZZ_REPORT: the links followed, and how many answered 2xx, in a JSON file
    beside the schema fuzz's (its name with .stateful before the suffix)."""
    path = os.environ.get("AMUX_FUZZ_REPORT")
    if not path:
        return
    links = sorted({link for link, _ in followed})
    figures = {link: {"followed": followed[(link, True)] + followed[(link, False)],
                      "answered_2xx": followed[(link, True)]} for link in links}
    root, dot, suffix = path.rpartition(".")
    with open(f"{root}.stateful.{suffix}" if dot else f"{path}.stateful", "w") as out:
        json.dump({"links_followed": len(links),
                   "links_reaching_2xx": sum(1 for f in figures.values() if f["answered_2xx"]),
                   "links": figures}, out, indent=1)
