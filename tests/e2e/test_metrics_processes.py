"""GET /metrics adds up the counts of every amux process: a signed webhook answered here (the
web process) is decided by a real `default` Celery worker's pool child, and a session's
turn runs in a real `runtime` worker against real Pi — each counts in its own process, and
one scrape shows all of them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from intake.models import Delivery
from sessions import services
from sessions.models import Session, TimelineEvent
from sessions.new_session import Launch
from tests.integration.test_github_hooks import gh, post  # noqa: F401 - the gh fixture
from tests.runtimes.conftest import require_runtime
from tests.support.github_payloads import example
from tests.support.model_server import Text
from tests.support.sessions import (  # noqa: F401 - fixtures
    model_server,
    openai_provider,
    session_dirs,
)
from tests.support.workers import amux_workers, purge_queues, wait_for, worker_env

pytestmark = [pytest.mark.xdist_group("processes"),
              pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]


def scrape(client) -> dict[tuple[str, tuple], float]:
    answer = client.get("/metrics", REMOTE_ADDR="10.0.0.9",
                        HTTP_AUTHORIZATION="Token scrape-me")
    assert answer.status_code == 200, answer.content
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.content.decode())
            for s in family.samples}


def test_one_scrape_counts_the_work_of_the_web_and_the_workers(
        client, settings, gh, openai_provider, session_dirs, model_server,  # noqa: F811
        tmp_path):
    require_runtime("pi")
    settings.AMUX_METRICS_TOKEN = "scrape-me"
    purge_queues()
    counts = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    before = scrape(client)
    session = services.create_session(Launch.direct(runtime="pi", provider="scripted",
                                                    model="gpt-5.5"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    model_server.script(Text("hello from a worker"))
    workers = amux_workers("metrics", worker_env(session_dirs), sessions=1, logs=tmp_path)
    try:
        answer = post(client, "issues", example("issues", "opened"), delivery="metrics-e2e")
        assert answer.status_code == 202, answer.content
        services.post_message(session.pk, "say hello")
        wait_for(lambda: Delivery.objects.filter(delivery_id="metrics-e2e",
                                                 processed_at__isnull=False).exists(),
                 timeout=60)
        wait_for(lambda: TimelineEvent.objects.filter(session_id=session.pk,
                                                      type="turn.completed").exists(),
                 timeout=120)
        # a count is written after its transaction commits: give the workers that moment
        wait_for(lambda: scrape(client).get(
            ("amux_turns_total", (("runtime", "pi"), ("state", "completed"))), 0)
            > before.get(("amux_turns_total", (("runtime", "pi"), ("state", "completed"))),
                         0), timeout=10)
        after = scrape(client)
    finally:
        for worker in workers:
            worker.stop()
    moved = {key: after[key] - before.get(key, 0.0) for key in after}
    assert moved[("amux_deliveries_received_total", (("source", "gh"),))] == 1
    assert moved[("amux_triggers_total", (("decision", "ignore"), ("source", "gh")))] == 1
    assert moved[("amux_turns_total", (("runtime", "pi"), ("state", "completed")))] == 1
    assert moved[("amux_first_action_seconds_count", (("runtime", "pi"),))] == 1
    # the trigger and the turn were counted by other processes, in files of their own
    pids = {p.stem.rsplit("_", 1)[1] for p in counts.glob("*.db")}
    assert len(pids - {str(os.getpid())}) >= 2, pids
