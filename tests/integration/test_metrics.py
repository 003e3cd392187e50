"""GET /metrics, scraped with Prometheus' own parser: its figures move with real work (a
signed webhook drained by the real drainer, an effect in the outbox, a real Pi turn through
the model gateway), and only a scraper allowed to read it gets an answer."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from effects import outbox
from sessions import services
from sessions.models import Session
from tests.integration.test_github_hooks import gh, post  # noqa: F401 - the gh fixture
from tests.runtimes.conftest import require_runtime
from tests.support.github_payloads import example
from tests.support.intake import processed
from tests.support.model_server import Text
from tests.support.sessions import (  # noqa: F401 - fixtures
    model_server,
    openai_provider,
    run_host,
    session_dirs,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def scrape(client, **headers) -> dict[tuple[str, tuple], float]:
    answer = client.get("/metrics", **headers)
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain; version=")
    figures = {}
    for family in text_string_to_metric_families(answer.content.decode()):
        for sample in family.samples:
            figures[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return figures


def figure(figures, name, **labels) -> float:
    return figures.get((name, tuple(sorted(labels.items()))), 0.0)


def test_the_figures_move_with_real_work(
        client, gh, openai_provider, session_dirs, model_server):  # noqa: F811 - fixtures
    require_runtime("pi")
    before = scrape(client)
    # a signed webhook, drained: a delivery and a trigger
    outcome = processed(post(client, "issues", example("issues", "opened")))["outcome"]
    # an effect waiting in the outbox, due now
    with outbox_transaction():
        outbox.enqueue("relay", "metrics-test", {"text": "hi"}, channel="gh:x")
    # a real Pi turn, through amux's model gateway
    session = services.create_session(runtime="pi", provider="scripted", model="gpt-5.5")
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    model_server.script(Text("hello from pi"))
    services.post_message(session.pk, "say hello")
    assert run_host(session.pk) == "slept"
    after = scrape(client)

    def moved(name, **labels):
        return figure(after, name, **labels) - figure(before, name, **labels)

    assert moved("amux_webhook_deliveries_total", source="gh", outcome=outcome) == 1
    assert moved("amux_triggers_total", source="gh", decision="ignore") == 1
    assert moved("amux_effects", kind="relay", state="due") == 1
    assert figure(after, "amux_effect_oldest_due_seconds", kind="relay") >= 0
    assert moved("amux_turns_total", runtime="pi", state="completed") == 1
    assert moved("amux_turn_duration_seconds_count", runtime="pi") == 1
    assert moved("amux_turn_duration_seconds_sum", runtime="pi") > 0
    assert figure(after, "amux_sessions", runtime="pi", lifecycle="sleeping") == 1
    assert moved("amux_model_tokens_total", provider="scripted", model="gpt-5.5") > 0
    assert figure(after, "amux_queue_length", queue="default") >= 0


def outbox_transaction():
    from django.db import transaction

    return transaction.atomic()


def test_only_an_allowed_scraper_reads_it(client, settings):
    # no token configured: this machine only
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.7").status_code == 403
    assert client.get("/metrics").status_code == 200  # the test client is 127.0.0.1
    settings.AMUX_METRICS_TOKEN = "scrape-me"
    refused = client.get("/metrics")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == \
        "not_authenticated"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="scrape-me").status_code == 401
    assert scrape(client, HTTP_AUTHORIZATION="Token scrape-me", REMOTE_ADDR="10.0.0.7")
    assert scrape(client, HTTP_AUTHORIZATION="Bearer scrape-me", REMOTE_ADDR="10.0.0.7")
    assert client.post("/metrics").status_code == 405
