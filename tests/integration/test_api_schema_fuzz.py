"""The OpenAPI document tells the truth: schemathesis fuzzes every operation of the REST API
in-process (the real WSGI app, the test database, an operator's token) and checks that no
answer is a server error, every status code, content type and body is the documented one,
schema-valid requests are accepted and schema-violating ones refused. Path parameters and
reference fields are steered to stored rows (tests/support/api_world.py), so detail, update
and action operations are exercised rather than answering 404.

Bounded: 5 examples per operation (positive and negative), about two CPU minutes;
AMUX_FUZZ_EXAMPLES raises it and AMUX_FUZZ_REPORT writes the figures (docs/contributors.md,
"Fuzzing the API")."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support import api_steering, api_world, fuzz_figures

pytestmark = pytest.mark.django_db

DOCUMENT = SchemaGenerator().get_schema(request=None, public=True)
schema = schemathesis.openapi.from_dict(DOCUMENT)
schema.app = get_wsgi_application()
schema.config.generation.update(
    # AMUX_FUZZ_EXAMPLES raises the bound for a longer hunt outside the suite.
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=int(os.environ.get("AMUX_FUZZ_EXAMPLES", "5")),
    # PostgreSQL cannot store NUL in text: amux refuses it at the door with a 400
    # (amux_common/nul.py, tested on its own) that the schema cannot express, so NUL is
    # left out of generated strings.
    allow_x00=False,
)

# AMUX_FUZZ_OPERATIONS (a regular expression of labels, "POST /api/v1/goals/") runs only
# the operations it matches: a finding is rerun without the rest.
if os.environ.get("AMUX_FUZZ_OPERATIONS"):
    schema = schema.include(name_regex=os.environ["AMUX_FUZZ_OPERATIONS"])

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, negative_data_rejection, positive_data_acceptance]

# Operations whose schema-valid requests may still be refused with a 400 although every
# stored name in them is steered to a stored row (tests/support/api_steering.py): what makes
# them valid is a rule across fields or against the world outside that no JSON Schema
# states. These keep every other check, negative_data_rejection included.
REFUSED_BY_STORED_STATE = {
    "POST /api/v1/policy/preview/": "sources are keyed by stored source slugs (a generated key "
                                    "names none)",
    "PUT /api/v1/policy/": "sources are keyed by stored source slugs",
    "POST /api/v1/sessions/": "the provider must serve the runtime's platform (named, bound "
                              "by the preset, or the only one stored that can): a fit of "
                              "runtime, preset and provider only the stored rows decide",
    "POST /api/v1/sources/": "config must fit the kind's rules (intake/sources/<kind>.py), "
                             "per kind and key, which the document keeps one open object",
    "PUT /api/v1/sources/{slug}/": "config must fit the kind's rules",
    "PATCH /api/v1/sources/{slug}/": "config must fit the kind's rules",
    "POST /api/v1/providers/": "base_url must pass Django's URL validator (a top-level "
                               "domain, a host of at most 253 characters that IDNA encodes), "
                               "which no pattern states exactly",
    "PUT /api/v1/providers/{slug}/": "a model is listed once by its name, whether given as a "
                                     "string or as an object, which uniqueItems cannot state",
    "PATCH /api/v1/providers/{slug}/": "a model is listed once by its name",
    "POST /api/v1/schedules/": "a cron expression must be one Celery's parser takes (each "
                               "field's range, a day that occurs in the month named), which "
                               "no pattern states exactly",
    "POST /api/v1/connectors/": "the settings must fit the source kind's table "
                                "(goals/core/connectors.py), and a Lark kind names a stored "
                                "Lark source and one of its chats",
    "PATCH /api/v1/connectors/{id}/": "the reply mode must fit the stored connector's kind, "
                                      "and mirror_ref goes only with configured_mirror",
    "POST /api/v1/attachable-sessions/": "registering one needs an app-server answering at "
                                         "the url now (a generated url names none)",
}


def test_the_exceptions_name_real_operations():
    everything = schemathesis.openapi.from_dict(DOCUMENT)
    labels = {op.ok().label for op in everything.get_all_operations()}
    assert set(REFUSED_BY_STORED_STATE) <= labels, set(REFUSED_BY_STORED_STATE) - labels


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    api_world.hold_test_connection()
    yield
    api_world.release_test_connection()


@pytest.fixture
def operator_token(operator):
    from knox.models import AuthToken

    return AuthToken.objects.create(user=operator)[1]


@pytest.fixture(autouse=True)
def _figures_written():
    yield
    # after each operation: a long run stopped part way still leaves its figures so far
    fuzz_figures.write()


@pytest.fixture
def world(api):
    return api_world.World(api)


@pytest.fixture(autouse=True)
def _throttle_raised(settings):
    """Each operation's examples come from one account within seconds: the account rate
    (1200/minute in production, unchanged there) would answer 429 to the longer hunt and
    hide the operations behind it."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "account": "1000000/minute"}}


@schema.parametrize()
# Derandomized: the suite runs the same examples each time (a failure reproduces); the
# generation is still schemathesis's, positive and negative.
@settings(deadline=None, derandomize=not os.environ.get("AMUX_FUZZ_EXAMPLES"),
          suppress_health_check=list(HealthCheck))
def test_every_operation_answers_as_documented(case, operator_token, world):
    checks = CHECKS
    # AMUX_FUZZ_NO_EXCUSES=1: every check on every operation (is an excuse still needed?)
    if case.operation.label in REFUSED_BY_STORED_STATE \
            and not os.environ.get("AMUX_FUZZ_NO_EXCUSES"):
        checks = [c for c in CHECKS if c is not positive_data_acceptance]
    api_steering.steer(case, world)
    headers = {"Authorization": f"Token {operator_token}"}
    try:
        response = case.call(headers=headers)
    finally:
        api_world.stop_app_servers()
    fuzz_figures.record(case, response, DOCUMENT)
    with fuzz_figures.failures_recorded(case):
        case.validate_response(response, checks=checks, headers=headers,
                               transport_kwargs={"headers": headers})
