"""The caller tools on amux's MCP server end to end: the real ASGI app under uvicorn
(lifespan on), a real Celery worker running the Codex runtime against the scripted model
server, and the official `mcp` client with an amux API token. An assignment token still
sees only the worker's tools; a caller sees only what it owns."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from knox.models import AuthToken

from execution import profiles
from execution.models import AgentInstance, TaskRun
from sessions.models import Session
from tests.e2e.test_executor_tools_e2e import _open
from tests.runtimes.conftest import require_runtime
from tests.support.asgi import free_port
from tests.support.model_server import Text
from tests.support.runtimes import run_async
from tests.support.workers import ROOT, amux_workers, purge_queues, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(400)]

CALLER_TOOLS = {"session_run", "task_run", "task_submit", "task_get", "instance_spawn"}
WORKER_TOOLS = {"report", "ask", "hand_back", "reply", "pull_request", "context",
                "memory_search", "memory_read"}


@pytest.fixture
def env(session_dirs, openai_provider):
    require_runtime("codex")
    purge_queues()
    profiles.ensure_builtin()
    yield worker_env(session_dirs, AMUX_ALLOWED_HOSTS="127.0.0.1,localhost",
                     PYTHONUNBUFFERED="1")
    purge_queues()


@pytest.fixture
def web(env, tmp_path):
    """uvicorn (lifespan on) on this test's database."""
    port = free_port()
    log = tmp_path / "uvicorn.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "amux_site.asgi:application", "--host",
             "127.0.0.1", "--port", str(port), "--lifespan", "on", "--no-access-log"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/mcp", timeout=2)
            except urllib.error.HTTPError as error:
                if error.code == 401:
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"uvicorn did not start:\n{log.read_text()[-4000:]}")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(15)
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]
    assert "Application shutdown complete" in text


@pytest.fixture
def stack(web, env, tmp_path):
    """The web server and a worker for both queues (session hosts, the outbox)."""
    workers = amux_workers("callers", env, sessions=4, logs=tmp_path)
    try:
        yield web
    finally:
        for worker in workers:
            worker.stop()


def _token(user) -> str:
    return AuthToken.objects.create(user=user)[1]


async def _mcp(url: str, token: str, calls: list[tuple[str, dict]]):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=300) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        tools = await client.list_tools()
        results = [await client.call_tool(name, args) for name, args in calls]
    return {t.name: t for t in tools.tools}, results


def _text(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_each_caller_tool_through_the_mcp_client(stack, model_server, operator,
                                                 django_user_model):
    # one reply per turn, in the order the turns run (each call waits for its own)
    model_server.script(Text("session answer one"), Text("task answer"),
                        Text("submitted answer"), Text("session answer two"),
                        Text("instance answer"))
    codex = {"runtime": "codex", "model": "gpt-5.5"}
    tools, results = run_async(_mcp(f"{stack}/mcp", _token(operator), [
        ("session_run", {"prompt": "First question", **codex, "timeout_s": 180}),
        ("task_run", {"prompt": "Do the task", **codex, "extra_args": [],
                      "timeout_s": 180}),
        ("task_submit", {"prompt": "Do it later", **codex}),
        ("instance_spawn", {"name": "reviewer", **codex, "profile": "codex"}),
        ("session_run", {"prompt": "no runtime"}),
    ]))
    assert set(tools) == CALLER_TOOLS
    schema = tools["task_run"].input_schema["properties"]
    assert {"runtime", "model", "profile", "extra_args", "provider"} <= set(schema)
    ran, task, submitted, spawned, refused = results
    assert not ran.is_error, _text(ran)
    assert ran.structured_content["result"] == "session answer one"
    assert ran.structured_content["state"] == "succeeded"
    session_id = ran.structured_content["session"]
    assert Session.objects.get(pk=session_id).owner == operator
    assert ran.structured_content["execution"]["runtime"] == "codex"
    assert not task.is_error, _text(task)
    assert (task.structured_content["state"], task.structured_content["result"]) == \
        ("succeeded", "task answer")
    assert task.structured_content["execution"]["model"] == "gpt-5.5"
    assert not submitted.is_error and submitted.structured_content["state"] == "queued"
    submitted_id = submitted.structured_content["task"]
    assert not spawned.is_error, _text(spawned)
    instance_id = spawned.structured_content["instance"]
    assert AgentInstance.objects.get(pk=instance_id).owner == operator
    assert refused.is_error and "runtime" in _text(refused)
    deadline = time.monotonic() + 120
    while TaskRun.objects.get(pk=submitted_id).state not in TaskRun.TERMINAL:
        assert time.monotonic() < deadline, "the submitted task never ended"
        time.sleep(0.5)
    assert TaskRun.objects.get(pk=submitted_id).result == "submitted answer"

    # the same caller continues its session, reads its submitted task, tasks its instance
    _tools, (again, got, on_instance) = run_async(_mcp(f"{stack}/mcp/", _token(operator), [
        ("session_run", {"prompt": "Second question", "session": session_id,
                         "timeout_s": 180}),
        ("task_get", {"task": submitted_id}),
        ("task_run", {"prompt": "Review this", "instance": instance_id, "timeout_s": 180}),
    ]))
    assert not again.is_error, _text(again)
    assert again.structured_content["session"] == session_id
    assert again.structured_content["result"] == "session answer two"
    assert got.structured_content["task"] == submitted_id
    assert (got.structured_content["state"], got.structured_content["result"]) == \
        ("succeeded", "submitted answer")
    assert not on_instance.is_error, _text(on_instance)
    assert on_instance.structured_content["result"] == "instance answer"
    assert on_instance.structured_content["session"] == spawned.structured_content["session"]

    # another caller sees none of it
    other = django_user_model.objects.create_user("other", password="x-pass-123",
                                                  is_staff=True)
    _tools, (foreign_task, foreign_session) = run_async(_mcp(f"{stack}/mcp", _token(other), [
        ("task_get", {"task": submitted_id}),
        ("session_run", {"prompt": "peek", "session": session_id}),
    ]))
    assert foreign_task.is_error and "404" in _text(foreign_task)
    assert foreign_session.is_error and "404" in _text(foreign_session)
    assert Session.objects.get(pk=session_id).turns.count() == 2

    # a viewer's token reads but starts nothing
    viewer = django_user_model.objects.create_user("watcher", password="x-pass-123")
    _tools, (denied,) = run_async(_mcp(f"{stack}/mcp", _token(viewer), [
        ("task_submit", {"prompt": "try", **codex}),
    ]))
    assert denied.is_error and "403" in _text(denied)


def test_an_assignment_token_sees_only_the_worker_tools(web):
    _ticket, _assignment, token = _open(7, "Fix the flaky test")
    tools, (context,) = run_async(_mcp(f"{web}/mcp", token, [("context", {})]))
    assert set(tools) == WORKER_TOOLS
    assert not context.is_error
    _tools, (called,) = run_async(_mcp(f"{web}/mcp", token, [
        ("task_submit", {"prompt": "escape", "runtime": "codex"})]))
    assert called.is_error and "task_submit" in _text(called)  # not a tool of this server
    assert not TaskRun.objects.exists()
    request = urllib.request.Request(
        f"{web}/mcp", method="POST", data=b"{}",
        headers={"Authorization": "Bearer not-a-token", "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as unknown:
        urllib.request.urlopen(request, timeout=10)
    assert unknown.value.code == 401

