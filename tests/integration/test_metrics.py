"""GET /metrics, scraped with Prometheus' own parser: its figures move with real work (signed
webhooks — received, forged, redelivered — drained by the real drainer, an effect in the
outbox, a real Pi turn through the model gateway, caps holding a ticket's work back), and
only a scraper allowed to read it gets an answer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.db import transaction
from prometheus_client.parser import text_string_to_metric_families

from effects import outbox
from sessions import hooks as session_hooks
from sessions import services
from sessions.models import Session
from sessions.new_session import Launch
from tests.integration.test_github_hooks import gh, post  # noqa: F401 - the gh fixture
from tests.integration.test_guards import (  # noqa: F401 - fixtures
    chat,
    drain,
    open_ticket,
    reply,
    report_usage,
    worker_settings,
)
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
from tickets.actions import executor
from tickets.models import Assignment

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

SCRAPER = {"REMOTE_ADDR": "10.0.0.7", "HTTP_AUTHORIZATION": "Token scrape-me"}


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.AMUX_METRICS_TOKEN = "scrape-me"


def scrape(client) -> dict[tuple[str, tuple], float]:
    answer = client.get("/metrics", **SCRAPER)
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain; version=")
    figures = {}
    for family in text_string_to_metric_families(answer.content.decode()):
        for sample in family.samples:
            figures[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return figures


def figure(figures, name, **labels) -> float:
    return figures.get((name, tuple(sorted(labels.items()))), 0.0)


def mover(before, after):
    def moved(name, **labels):
        return figure(after, name, **labels) - figure(before, name, **labels)
    return moved


def test_the_figures_move_with_real_work(
        client, gh, openai_provider, session_dirs, model_server):  # noqa: F811 - fixtures
    require_runtime("pi")
    before = scrape(client)
    # a signed webhook, drained: a delivery received and a trigger decided
    payload = example("issues", "opened")
    outcome = processed(post(client, "issues", payload, delivery="metrics-1"))
    assert outcome["trigger"] is not None
    # the same delivery again, a forged one and one for a source that does not exist
    assert post(client, "issues", payload, delivery="metrics-1").json()["duplicate"] is True
    assert post(client, "issues", payload, secret="wrong").status_code == 401
    assert post(client, "issues", payload, slug="nope").status_code == 404
    # an effect waiting in the outbox, due now
    with transaction.atomic():
        outbox.enqueue("relay", "metrics-test", {"text": "hi"}, channel="gh:x")
    # a real Pi turn, through amux's model gateway
    session = services.create_session(Launch.direct(runtime="pi", provider="scripted",
                                                    model="gpt-5.5"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    model_server.script(Text("hello from pi"))
    services.post_message(session.pk, "say hello")
    assert run_host(session.pk) == "slept"
    after = scrape(client)
    moved = mover(before, after)

    assert moved("amux_deliveries_received_total", source="gh") == 1
    assert moved("amux_deliveries_refused_total", source="gh", reason="duplicate") == 1
    assert moved("amux_deliveries_refused_total", source="gh", reason="bad_signature") == 1
    assert moved("amux_deliveries_refused_total", source="", reason="unknown_source") == 1
    assert moved("amux_triggers_total", source="gh", decision="ignore") == 1
    assert moved("amux_effects", kind="relay", state="due") == 1
    assert figure(after, "amux_effect_oldest_due_seconds", kind="relay") >= 0
    # a kind with nothing in the outbox is there too, as 0
    assert (("amux_effects", (("kind", "assess"), ("state", "dead"))) in after
            and figure(after, "amux_effects", kind="assess", state="dead") == 0)
    assert moved("amux_turns_total", runtime="pi", state="completed") == 1
    assert moved("amux_turn_duration_seconds_count", runtime="pi") == 1
    assert moved("amux_turn_duration_seconds_sum", runtime="pi") > 0
    assert moved("amux_turn_duration_seconds_bucket", runtime="pi", le="+Inf") == 1
    assert moved("amux_first_action_seconds_count", runtime="pi") == 1
    assert figure(after, "amux_sessions", runtime="pi", lifecycle="sleeping") == 1
    requests = moved("amux_model_requests_total", provider="scripted", model="gpt-5.5",
                     outcome="ok")
    assert requests >= 1
    assert moved("amux_model_tokens_total", provider="scripted", model="gpt-5.5",
                 kind="input") > 0
    assert moved("amux_model_tokens_total", provider="scripted", model="gpt-5.5",
                 kind="output") > 0
    assert figure(after, "amux_queue_length", queue="default") >= 0
    # nothing waits for capacity: no runtime worker holds every slot
    assert figure(after, "amux_sessions_waiting_for_capacity", runtime="pi") == 0

    # the counters are this process's files, not a copy a scrape rebuilds from rows: a
    # second scrape after deleting the rows they counted shows the same totals
    Session.objects.filter(pk=session.pk).delete()
    again = scrape(client)
    assert figure(again, "amux_turns_total", runtime="pi", state="completed") == \
        figure(after, "amux_turns_total", runtime="pi", state="completed")
    assert figure(again, "amux_sessions", runtime="pi", lifecycle="sleeping") == 0


def test_caps_that_hold_work_back_are_counted(
        client, api, worker_settings, chat):  # noqa: F811 - fixtures
    worker_settings.ticket_token_cap = 50_000
    worker_settings.messages_per_ticket_hour = 1
    worker_settings.save()
    before = scrape(client)
    ticket = open_ticket(41, source=chat)
    drain()
    token = executor.issue_assignment_token(
        assignment_id=Assignment.objects.get(ticket=ticket).pk)
    reply(token, "first")
    reply(token, "second")  # over the hourly cap: held
    drain()
    session = Session.objects.get(name=f"worker-{ticket.pk}")
    report_usage(session, 50_200)  # past the ticket's token cap
    posted = api.post(f"/api/v1/tickets/{ticket.pk}/inputs", {"text": "and logout"},
                      format="json")
    assert posted.status_code == 201, posted.content
    drain()
    drain()  # the held input's retry: still held, counted once
    # the check the model gateway makes before forwarding a model request
    assert session_hooks.model_request_caps.refusal(session.pk)
    moved = mover(before, scrape(client))
    assert moved("amux_guard_blocks_total", cap="hourly_messages", what="message") == 1
    assert moved("amux_guard_blocks_total", cap="ticket_tokens", what="input") == 1
    assert moved("amux_guard_blocks_total", cap="ticket_tokens", what="model_request") == 1


def test_a_counter_file_still_being_created_does_not_fail_the_scrape(client):
    """A process that is creating its counter file (or was killed doing so) leaves it
    empty for a moment: the scrape reads the others."""
    from amux_common import metrics as counters

    torn = counters.directory() / "counter_4194303.db"
    torn.write_bytes(b"")
    try:
        assert scrape(client)  # 200, the other processes' figures
    finally:
        torn.unlink()


def test_only_an_allowed_scraper_reads_it(client, settings):
    settings.AMUX_METRICS_TOKEN = ""
    # neither a token nor an allow-list: nobody, not even this machine (behind a reverse
    # proxy on this machine every client would be loopback)
    off = client.get("/metrics")
    assert off.status_code == 403
    assert "AMUX_METRICS_TOKEN" in off.json()["error"]["message"]

    settings.AMUX_METRICS_TOKEN = "scrape-me"
    refused = client.get("/metrics")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == \
        "not_authenticated"
    assert refused["WWW-Authenticate"].startswith("Token")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="scrape-me").status_code == 401
    assert client.get("/metrics/", **SCRAPER).status_code == 200  # with the slash too
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.7",
                      HTTP_AUTHORIZATION="Bearer scrape-me").status_code == 200

    import ipaddress
    settings.AMUX_METRICS_TOKEN = ""
    settings.AMUX_METRICS_ALLOW = (ipaddress.ip_network("10.1.0.0/16"),)
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    outside = client.get("/metrics", REMOTE_ADDR="10.2.0.1")
    assert outside.status_code == 403 and outside.json()["error"]["code"] == \
        "permission_denied"

    wrong = client.post("/metrics", **SCRAPER)
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"


def test_the_grafana_dashboard_reads_only_what_metrics_exposes():
    from prometheus_client.metrics import MetricWrapperBase

    from amux_common import metrics as counters
    from amux_site.metrics import StateCollector

    exposed = {f.name for f in StateCollector().collect()}
    for value in vars(counters).values():
        if isinstance(value, MetricWrapperBase):
            suffixes = ("_total",) if value._type == "counter" else ("_bucket", "_count", "_sum")
            exposed |= {value._name + suffix for suffix in suffixes}
    dashboard = json.loads((Path(settings.BASE_DIR) / "docs" / "grafana-amux.json").read_text())
    used = {name for panel in dashboard["panels"] for target in panel.get("targets", [])
            for name in re.findall(r"\bamux_\w+", target["expr"])}
    assert len(used) >= 12 and used <= exposed, used - exposed
