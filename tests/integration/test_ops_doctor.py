"""`manage.py amux doctor`, the doctor registry, worker/beat heartbeats and /healthz."""

import pytest
import redis
from django.conf import settings
from django.core.management import CommandError, call_command

from amux_site import doctor, heartbeat

pytestmark = pytest.mark.django_db

UNREACHABLE = "redis://127.0.0.1:1/0"


@pytest.fixture(autouse=True)
def no_heartbeats():
    """Start from no workers: heartbeats are real keys in the test Redis."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(match=heartbeat.PREFIX + "*"):
        client.delete(key)
    yield client
    for key in client.scan_iter(match=heartbeat.PREFIX + "*"):
        client.delete(key)


def _everyone_alive():
    heartbeat.worker_alive("default@test", ["default"])
    heartbeat.worker_alive("runtime@test", ["runtime", "runtime.test"])
    heartbeat.beat_alive()


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_doctor_prints_one_line_per_check_and_passes_when_all_are_alive(capsys):
    _everyone_alive()
    call_command("amux", "doctor")
    lines = _lines(capsys)
    names = [line.split()[1] for line in lines]
    assert names[:5] == ["database", "redis", "worker:default", "worker:runtime", "beat"]
    assert all(line.startswith("ok") for line in lines[:5])
    assert "runtime@test" in lines[3]


def test_doctor_fails_when_a_worker_queue_has_no_worker(capsys):
    heartbeat.worker_alive("default@test", ["default"])
    heartbeat.beat_alive()
    with pytest.raises(CommandError) as failure:
        call_command("amux", "doctor")
    assert failure.value.returncode == 1
    line = next(x for x in _lines(capsys) if "worker:runtime" in x)
    assert line.startswith("FAIL") and "no worker heartbeat for queue runtime" in line


def test_doctor_fails_when_beat_is_silent(capsys):
    heartbeat.worker_alive("default@test", ["default"])
    heartbeat.worker_alive("runtime@test", ["runtime"])
    with pytest.raises(CommandError):
        call_command("amux", "doctor")
    line = next(x for x in _lines(capsys) if x.split()[1] == "beat")
    assert line.startswith("FAIL") and "beat silent" in line


def test_doctor_fails_when_redis_is_unreachable(capsys, settings):
    settings.REDIS_URL = UNREACHABLE
    with pytest.raises(CommandError):
        call_command("amux", "doctor")
    lines = _lines(capsys)
    assert next(x for x in lines if x.split()[1] == "redis").startswith("FAIL")
    assert next(x for x in lines if x.split()[1] == "database").startswith("ok")


def test_registry_collects_checks_from_each_installed_apps_doctor_module(capsys, settings):
    settings.INSTALLED_APPS = [*settings.INSTALLED_APPS, "tests.integration.ops_doctor_app"]
    assert "tests.integration.ops_doctor_app.doctor" in doctor.app_modules()
    _everyone_alive()
    call_command("amux", "doctor")  # the failing check is not required: exit 0
    lines = _lines(capsys)
    assert any(x.startswith("ok") and "runtime:stand-in" in x for x in lines)
    assert any(x.startswith("warn") and "provider:stand-in" in x for x in lines)


def test_a_plugin_that_raises_is_a_failed_required_check():
    checks = list(doctor.plugin_checks(["tests.integration.ops_broken_doctor_app.doctor"]))
    assert len(checks) == 1
    assert not checks[0].ok and checks[0].required
    assert "cannot reach the provider" in checks[0].detail


def test_worker_heartbeat_expires_and_is_removed_on_shutdown(no_heartbeats):
    heartbeat.worker_alive("default@test", ["default"])
    ttl = no_heartbeats.ttl(heartbeat.WORKER_PREFIX + "default@test")
    assert 0 < ttl <= heartbeat.TTL
    assert heartbeat.queue_check("default") == {"ok": True, "workers": ["default@test"]}
    heartbeat.worker_gone("default@test")
    assert not heartbeat.queue_check("default")["ok"]


def test_healthz_reports_missing_workers_and_beat_without_failing(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["degraded"] == ["worker:default", "worker:runtime", "beat"]
    assert body["checks"]["worker:runtime"]["required"] is False
    assert body["checks"]["database"]["required"] is True


def test_healthz_with_workers_and_beat_alive_is_not_degraded(client):
    _everyone_alive()
    body = client.get("/healthz").json()
    assert "degraded" not in body
    assert body["checks"]["worker:default"]["workers"] == ["default@test"]
    assert body["checks"]["beat"]["ok"]


def test_healthz_answers_503_only_for_a_required_failure(client, settings):
    settings.REDIS_URL = UNREACHABLE
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "failing"
    assert not body["checks"]["redis"]["ok"] and body["checks"]["database"]["ok"]


def test_each_check_runs_on_its_own_so_one_failure_hides_nothing(capsys, settings):
    settings.INSTALLED_APPS = [*settings.INSTALLED_APPS,
                               "tests.integration.ops_partly_broken_doctor_app"]
    _everyone_alive()
    with pytest.raises(CommandError):
        call_command("amux", "doctor")
    lines = _lines(capsys)
    by_name = {line.split()[1]: line for line in lines}
    assert by_name["stand-in:first"].startswith("ok")
    assert by_name["stand-in:broken"].startswith("FAIL")
    assert "UnicodeEncodeError" in by_name["stand-in:broken"]
    assert by_name["stand-in:third"].startswith("ok")  # after the failure, still checked
    assert all(len(line.splitlines()) == 1 for line in lines)


def test_a_failing_built_in_check_hides_none_of_the_others(settings):
    _everyone_alive()
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there: Redis is down
    checks = {c.name: c for c in doctor.run(modules=[])}
    assert not checks["redis"].ok
    assert checks["database"].ok  # checked all the same, after and apart from Redis
    assert {"database", "redis", "beat"} <= set(checks)
