"""Pooled PostgreSQL connections (AMUX_DB_POOL_SIZE): on only for PostgreSQL, safe in real
Celery prefork children and under the real ASGI server, bounded under concurrent load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from django.conf import settings

from tests.support.asgi import AsgiServer
from tests.support.github_payloads import example, signed
from tests.support.pg_activity import Sampled, backends, postgres_only
from tests.support.workers import ROOT, Worker, purge_queues, wait_for, worker_env


def _settings_pool(tmp_path, **env) -> subprocess.CompletedProcess:
    code = ("from amux_site import settings; "
            "print(settings.DATABASES['default'].get('OPTIONS', {}).get('pool'))")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "AMUX_DB"))}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**base, "AMUX_DATA_DIR": str(tmp_path),
                                          "REDIS_URL": "redis://127.0.0.1:1/0", **env})


def test_the_pool_is_for_postgresql_only_and_sized_by_its_setting(tmp_path):
    pg = "postgres://u@127.0.0.1:5432/x"
    assert _settings_pool(tmp_path, DATABASE_URL=pg).stdout.strip() == \
        "{'min_size': 1, 'max_size': 10}"
    assert _settings_pool(tmp_path, DATABASE_URL=pg, AMUX_DB_POOL_SIZE="3").stdout.strip() == \
        "{'min_size': 1, 'max_size': 3}"
    assert _settings_pool(tmp_path, DATABASE_URL=pg, AMUX_DB_POOL_SIZE="0").stdout.strip() == \
        "None"
    assert _settings_pool(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path}/a.sqlite3"
                          ).stdout.strip() == "None"
    bad = _settings_pool(tmp_path, DATABASE_URL=pg, AMUX_DB_POOL_SIZE="many")
    assert bad.returncode != 0
    assert "AMUX_DB_POOL_SIZE must be a whole number of connections" in bad.stderr


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_prefork_children_never_use_or_close_a_connection_of_their_parent(tmp_path):
    purge_queues()
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete("pool-probe:parent", "pool-probe:results")
    from amux_site.celery import app

    # two prefork children, each replaced after one task: forked while the parent is connected
    worker = Worker("pool", worker_env(tmp_path), queues="default", log=tmp_path / "worker.log",
                    extra=("-P", "prefork", "-c", "2", "--max-tasks-per-child", "1",
                           "-I", "tests.support.pool_probe"))
    try:
        parent = json.loads(wait_for(lambda: client.get("pool-probe:parent"), 60))
        assert len(set(parent["backends"])) == 3, parent
        for _ in range(6):
            app.send_task("tests.pool_probe", args=[0.5], queue="default")
        wait_for(lambda: client.llen("pool-probe:results") >= 6, 90, 0.2)
        results = [json.loads(r) for r in client.lrange("pool-probe:results", 0, -1)]
        # every child was forked by the parent after it had connections (max-tasks-per-child)
        assert all(r["ppid"] == parent["pid"] != r["pid"] for r in results), results
        assert len({r["pid"] for r in results}) == 6
        # each child made its own connections: none is one of the parent's, none shared
        assert not {r["backend"] for r in results} & set(parent["backends"])
        assert len({r["backend"] for r in results}) == 6
        # and no child closed one of the parent's: all three are still connected
        time.sleep(1)
        assert set(parent["backends"]) <= backends(), worker.log()
        assert "Traceback" not in worker.log()
    finally:
        worker.stop()


def _deliver(url: str, issue: int) -> int:
    payload = example("issue_comment", "created")
    payload["comment"]["id"] = 90_000 + issue
    payload["issue"]["number"] = issue
    body, headers = signed("issue_comment", payload, "pool-secret")
    request = urllib.request.Request(
        f"{url}/hooks/github/pool-gh", data=body, method="POST",
        headers={"Content-Type": "application/json",
                 **{k[5:].replace("_", "-"): v for k, v in headers.items()}})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_asgi_server_serves_concurrent_requests_from_a_bounded_pool(tmp_path):
    from intake.models import Delivery, Source
    from intake.sources.github import GitHub

    source = Source(kind="github", slug="pool-gh", name="pool",
                    config=GitHub.validate_config({"repo": ["Codertocat/Hello-World"]}))
    source.secrets = {"webhook_secret": "pool-secret", "token": "unused"}
    source.save()
    with Sampled() as sampled:
        server = AsgiServer(worker_env(tmp_path, AMUX_DB_POOL_SIZE="4"),
                            log=tmp_path / "uvicorn.log")
        try:
            with ThreadPoolExecutor(max_workers=16) as pool:
                statuses = list(pool.map(lambda i: _deliver(server.url, i), range(1, 81)))
        finally:
            server.stop()
    assert statuses == [202] * 80
    assert Delivery.objects.filter(source=source).count() == 80
    # 16 requests at a time through at most 4 connections, the same ones all along
    # (without a pool every request opens one of its own: dozens of backends)
    assert 1 <= sampled.peak <= 4, sampled.peak
    assert len(sampled.seen) <= 4, sampled.seen
