"""`manage.py amux task submit` as an operator types it: the task runs on a real worker and
real Pi against the scripted model server; the command prints the task id and, with
--wait, the agent's answer; bad input is refused naming the option, keeping nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from execution.models import TaskRun
from tests.support.model_server import Text
from tests.support.workers import ROOT, amux_workers, purge_queues, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]


def _amux(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", "amux", "task", "submit", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def test_task_submit_prints_the_id_and_with_wait_the_result(operator, openai_provider,
                                                            session_dirs, model_server,
                                                            tmp_path):
    purge_queues()
    env = worker_env(session_dirs)
    refused = _amux(env, "--runtime", "nope", "--user", "operator", "hello")
    assert refused.returncode == 1 and "runtime" in refused.stderr
    assert not TaskRun.objects.exists()
    model_server.script(Text("Pi says: the tide is high."))
    workers = amux_workers("cli", env, sessions=3, logs=tmp_path)
    try:
        done = _amux(env, "--runtime", "pi", "--model", "scripted-model", "--profile", "pi",
                     "--user", "operator", "--wait", "--timeout", "150", "How is the tide?")
    finally:
        for worker in workers:
            worker.stop()
    assert done.returncode == 0, done.stderr
    run = TaskRun.objects.get()
    lines = done.stdout.splitlines()
    assert lines == [str(run.pk), "state: succeeded", "Pi says: the tide is high."]
    assert (run.owner.username, run.profile.slug) == ("operator", "pi")
    assert (run.execution["runtime"], run.execution["model"]) == ("pi", "scripted-model")
    assert model_server.tool_requests()[0].body["model"] == "scripted-model"
