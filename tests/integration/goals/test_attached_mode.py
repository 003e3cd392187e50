"""Attached mode (seed 003, "Validation criteria → Attached mode"): an agent works in a
Codex app-server that is already running — started through amux's broker and given a
thread by the operator's own client — and amux starts no second executor. Real
``codex app-server --listen ws://…`` against the scripted model server; the session host
runs in this process."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
import threading
import time
from pathlib import Path

import pytest

from effects import outbox
from goals.models import Goal, Todo, WorkingSession
from runtimes import isolation, wsrpc
from runtimes.base import CANCEL_GRACE_SECONDS
from runtimes.codex import CLIENT_INFO
from sessions import app_servers, identities, services
from sessions.models import AppServer, Session, TimelineEvent, Turn
from tests.integration.goals.conftest import add_agent
from tests.support.isolation import backend, runtime_user
from tests.support.model_server import Text, ToolCall
from tests.support.runtimes import run_async
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(90)]


@pytest.fixture
def broker(db, openai_provider, session_dirs):
    """Stops every app-server amux started during the test (only those: by their pid and
    the tag amux gave them)."""
    yield
    for row in AppServer.objects.filter(origin="spawned").exclude(pid=None):
        app_servers._kill(row.pid, row.ref)


# --------------------------------------------------------------------- helpers
def codex_processes() -> list[int]:
    """Live codex processes descended from this test process (the app-server amux started
    here, and any runtime a host here would launch); other agents' are not counted."""
    parents: dict[int, int] = {}
    exes: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            parents[int(entry)] = int(fields[1])
            exes[int(entry)] = os.readlink(f"/proc/{entry}/exe")
        except OSError:
            continue
    me = os.getpid()

    def ours(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == me:
                return True
        return False

    codex = {p for p, exe in exes.items() if exe.endswith("/codex") and ours(p)}
    # a child codex forks for a command is codex too until it execs: not another runtime
    return sorted(p for p in codex if parents[p] not in codex)


class OperatorClient:
    """The operator's own Codex client on the app-server (not amux): it creates the
    thread the agent later works in, and reads it back."""

    def __init__(self, row: AppServer):
        self.url, self.token = row.url, row.secrets["token"]

    async def _session(self, work):
        ws = await wsrpc.connect(self.url, self.token)
        notes: list[dict] = []
        rpc = wsrpc.WebSocketLines(ws, notes.append, lambda: None)

        async def call(method, params, timeout=30):
            msg = await rpc.request({"method": method, "params": params}, timeout=timeout)
            assert "error" not in msg, msg
            return msg["result"]

        try:
            await call("initialize", {"clientInfo": {**CLIENT_INFO, "name": "operator-app"},
                                      "capabilities": {"experimentalApi": True}})
            await rpc.send({"method": "initialized"})
            return await work(call, notes)
        finally:
            await rpc.aclose()

    def start_thread(self, cwd: str, text: str) -> str:
        async def work(call, notes):
            thread = (await call("thread/start", {"cwd": cwd}))["thread"]["id"]
            turn = (await call("turn/start", {"threadId": thread, "input": [
                {"type": "text", "text": text}]}))["turn"]["id"]
            for _ in range(600):
                if any(n.get("method") == "turn/completed"
                       and n["params"]["turn"]["id"] == turn for n in notes):
                    return thread
                await asyncio.sleep(0.05)
            raise TimeoutError(f"the operator's turn did not complete: {notes[-6:]}")

        return run_async(self._session(work))

    def run_turn(self, thread: str, text: str) -> str:
        """One turn of the app's own loop on ``thread`` (its automation prompt): amux is
        not on this connection. Answers the turn's final status."""
        async def work(call, notes):
            await call("thread/resume", {"threadId": thread})
            turn = (await call("turn/start", {"threadId": thread, "input": [
                {"type": "text", "text": text}]}))["turn"]["id"]
            for _ in range(1200):
                for n in notes:
                    if (n.get("method") == "turn/completed"
                            and n["params"]["turn"]["id"] == turn):
                        return n["params"]["turn"]["status"]
                await asyncio.sleep(0.05)
            raise TimeoutError("the automation turn did not complete")

        return run_async(self._session(work))

    def turns(self, thread: str) -> list[str]:
        async def work(call, notes):
            read = await call("thread/read", {"threadId": thread, "includeTurns": True})
            return [t["id"] for t in read["thread"].get("turns") or []]

        return run_async(self._session(work))

    def threads(self) -> list[str]:
        async def work(call, notes):
            return [t["id"] for t in (await call("thread/list", {}))["data"]]

        return run_async(self._session(work))


def running_app_server(api, model_server):
    """An app-server started through the broker, with one thread the operator made."""
    answer = api.post("/api/v1/attachable-sessions/", {
        "provider": "scripted", "model": "scripted-model", "goal": "ship",
        "agent": "builder"})
    assert answer.status_code == 201, answer.content
    descriptor = answer.json()
    row = AppServer.objects.get(ref=descriptor["id"])
    model_server.script(Text("ready when you are"))
    thread = OperatorClient(row).start_thread(row.workspace, "hello from the app")
    return row, thread


def attach(api, row, thread=None, agent="builder"):
    body = {"session": row.ref, **({"thread": thread} if thread else {})}
    answer = api.post(f"/api/v1/goals/ship/agents/{agent}/attach/", body)
    if answer.status_code == 201:  # the host sleeps one second after its last turn
        Session.objects.filter(pk=answer.json()["session"]).update(idle_timeout_s=1)
    return answer


def say(api, text, agent="builder"):
    answer = api.post(f"/api/v1/goals/ship/agents/{agent}/messages/", {"text": text})
    assert answer.status_code == 202, answer.content
    return answer.json()


def replies(session_id):
    return [e.payload["text"] for e in TimelineEvent.objects.filter(
        session_id=session_id, type="message.completed").order_by("seq")]


@pytest.fixture
def attached_agent(api, goal, broker):
    return add_agent(api, "builder", mode="attached_app_session")


# ----------------------------------------------------------------------- criteria
def test_attaching_to_a_running_session_starts_no_second_agent_process(
        api, attached_agent, model_server):
    row, thread = running_app_server(api, model_server)
    before = codex_processes()
    assert row.pid in before
    # its agent's commands never run as amux: the app-server runs as the app-servers' own
    # runtime user, none of the sessions' and not the base user whose group they share
    if backend() in (isolation.LINUX_DAC, isolation.BWRAP):
        user = identities.app_server_user()
        assert user != runtime_user()
        assert isolation.process_euid(row.pid) == pwd.getpwnam(user).pw_uid
    attached = attach(api, row)
    assert attached.status_code == 201, attached.content
    session_id = attached.json()["session"]
    assert attached.json()["lifecycle"] == "ready"
    model_server.script(Text("working on it", delay=1.5))
    say(api, "what is left to do?")
    outcome: list[str] = []
    host = threading.Thread(target=lambda: outcome.append(run_host(session_id)))
    host.start()
    model_server.wait_for_requests(2)  # the operator's turn, then the agent's
    during = codex_processes()  # while the attached turn is with the model
    host.join(60)
    assert outcome == ["slept"]
    assert during == before and codex_processes() == before
    assert replies(session_id) == ["working on it"]
    session = Session.objects.get(pk=session_id)
    assert (session.runtime, session.native_ref) == ("codex-attached", thread)
    assert OperatorClient(row).threads() == [thread]  # no second upstream session


def test_a_spawned_app_server_reaches_its_provider_only_through_the_gateway(
        api, attached_agent, model_server, settings):
    """The provider's key never enters the app-server (its agent's commands run under it):
    its config names amux's model gateway, its key is a credential of its own, which
    stops working when the operator stops it."""
    import httpx

    row, _thread = running_app_server(api, model_server)
    state = Path(row.state_dir)
    config = (state / "home" / ".codex" / "config.toml").read_text()
    environ = Path(f"/proc/{row.pid}/environ").read_bytes().decode(errors="replace")
    for seen in (config, environ):
        assert "sk-test-secret" not in seen
    assert f"{settings.AMUX_URL}/gateway/model/openai" in config
    key = next(v for k, _, v in (e.partition("=") for e in environ.split("\0"))
               if k == "AMUX_PROVIDER_KEY")
    assert key.startswith("amxm_")
    # the operator's turn went out through the gateway, which added the provider's key
    assert model_server.tool_requests()[-1].headers["authorization"] == "Bearer sk-test-secret"
    models = f"{settings.AMUX_URL}/gateway/model/openai/models"
    assert httpx.get(models, headers={"authorization": f"Bearer {key}"}).status_code == 200
    assert api.delete(f"/api/v1/attachable-sessions/{row.ref}/").status_code in (200, 204)
    assert httpx.get(models, headers={"authorization": f"Bearer {key}"}).status_code == 401


def test_three_consecutive_user_messages_use_the_same_upstream_thread(
        api, attached_agent, model_server):
    row, thread = running_app_server(api, model_server)
    session_id = attach(api, row).json()["session"]
    model_server.script(Text("one"), Text("two"), Text("three"))
    for text in ("first", "second", "third"):
        say(api, text)
    assert run_host(session_id) == "slept"
    assert replies(session_id) == ["one", "two", "three"]
    requests = model_server.tool_requests()
    assert len(requests) == 4  # the operator's turn and three of the agent's
    # each request carries the whole conversation of the one thread, in order
    last = json.dumps(requests[-1].body)
    for text in ("hello from the app", "first", "second", "third"):
        assert text in last
    assert Session.objects.get(pk=session_id).native_ref == thread
    assert len(OperatorClient(row).turns(thread)) == 4
    assert OperatorClient(row).threads() == [thread]


def test_interrupt_and_resume_preserve_the_session_identity(api, attached_agent,
                                                           model_server):
    row, thread = running_app_server(api, model_server)
    session_id = attach(api, row).json()["session"]
    [first_turn] = OperatorClient(row).turns(thread)
    model_server.script(Text("too slow", delay=20))
    say(api, "take your time")
    outcome: list[str] = []
    host = threading.Thread(target=lambda: outcome.append(run_host(session_id)))
    host.start()
    model_server.wait_for_requests(2)
    wait_for(lambda: Turn.objects.filter(session_id=session_id, state="running").exists())
    asked = time.monotonic()
    services.interrupt(session_id)
    wait_for(lambda: TimelineEvent.objects.filter(session_id=session_id,
                                                  type="turn.cancelled").exists(), timeout=30)
    # the app-server's own turn/interrupt ended it, not amux's cancel grace running out
    assert time.monotonic() - asked < CANCEL_GRACE_SECONDS
    host.join(60)
    assert outcome == ["slept"]
    assert TimelineEvent.objects.filter(session_id=session_id,
                                        type="turn.cancelled").count() == 1
    assert api.get("/api/v1/goals/ship/agents/builder/").json()["lifecycle"] == "interrupted"
    # a new host reconnects and resumes the same thread (never a new one)
    model_server.script(Text("back again"))
    say(api, "continue")
    assert run_host(session_id) == "slept"
    assert replies(session_id)[-1] == "back again"
    assert Session.objects.get(pk=session_id).native_ref == thread
    assert OperatorClient(row).threads() == [thread]
    turns = OperatorClient(row).turns(thread)
    assert turns[0] == first_turn and len(turns) >= 2  # the same conversation, continued
    assert "hello from the app" in json.dumps(model_server.tool_requests()[-1].body)
    assert row.pid in codex_processes()  # sleeping the amux side left the app-server


def test_detaching_leaves_the_app_server_session_and_the_goal_unchanged(
        api, attached_agent, model_server):
    row, thread = running_app_server(api, model_server)
    api.post("/api/v1/goals/ship/todos/", {"title": "cut the release"})
    goal_before = api.get("/api/v1/goals/ship/").json()
    todos_before = api.get("/api/v1/goals/ship/todos/").json()
    session_id = attach(api, row).json()["session"]
    listed = api.get("/api/v1/attachable-sessions/").json()["results"]
    assert listed[0]["threads"][0]["attached"] == {"goal": "ship", "agent": "builder"}
    model_server.script(Text("noted"))
    say(api, "a read-only question")
    assert run_host(session_id) == "slept"
    detached = api.post("/api/v1/goals/ship/agents/builder/detach/")
    assert detached.status_code == 200
    assert (detached.json()["lifecycle"], detached.json()["session"]) == ("terminal", None)
    assert api.get("/api/v1/goals/ship/").json() == goal_before
    assert api.get("/api/v1/goals/ship/todos/").json() == todos_before
    listed = api.get("/api/v1/attachable-sessions/").json()["results"]
    assert [(d["id"], d["live"]) for d in listed] == [(row.ref, True)]
    assert [(t["id"], t["attached"]) for t in listed[0]["threads"]] == [(thread, None)]
    assert row.pid in codex_processes()
    assert len(OperatorClient(row).turns(thread)) == 2
    # the same thread can be attached again, explicitly
    again = attach(api, row, thread)
    assert again.status_code == 201, again.content
    assert Session.objects.get(pk=again.json()["session"]).native_ref == thread


def test_loss_of_the_app_server_is_stale_and_never_a_managed_fallback(
        api, attached_agent, model_server):
    row, thread = running_app_server(api, model_server)
    session_id = attach(api, row).json()["session"]
    os.killpg(row.pid, signal.SIGKILL)
    wait_for(lambda: row.pid not in codex_processes())
    app_servers.reap()
    agent = api.get("/api/v1/goals/ship/agents/builder/").json()
    assert (agent["lifecycle"], agent["session"]) == ("stale", session_id)
    refused = api.post("/api/v1/goals/ship/agents/builder/messages/", {"text": "hello?"})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "session_stale"
    # input reaching the amux session another way fails closed in its host
    services.post_message(session_id, "still there?")
    assert run_host(session_id) == "start_failed"
    assert codex_processes() == []  # nothing started in the app-server's place
    failed = TimelineEvent.objects.get(session_id=session_id, type="turn.failed")
    assert "did not start" in failed.payload["message"]
    error = TimelineEvent.objects.filter(session_id=session_id, type="error").last()
    assert error.payload["code"] == "app_server_unreachable"
    assert model_server.tool_requests()[-1:] and len(model_server.tool_requests()) == 1
    listed = api.get("/api/v1/attachable-sessions/").json()["results"]
    assert [(d["live"], d["state"], d["threads"]) for d in listed] == [(False, "lost", [])]
    assert WorkingSession.objects.get(session_id=session_id).active  # still bound: stale
    assert Goal.objects.get(slug="ship").state == "active"


def agent_curl(todo_id: int, body: str) -> str:
    """What the app's own agent runs: amux's todos resource with its binding's token, the
    URL and the token file from the app-server's environment (as the broker started it)."""
    return ('curl -sS -f -X PATCH -H "Authorization: Bearer $(cat "$AMUX_AGENT_TOKEN_FILE")" '
            "-H 'Content-Type: application/json' "
            f"-d '{body}' \"$AMUX_API_URL/goals/ship/todos/{todo_id}/\"")


def test_automation_prompt_driven_work_updates_loopx_state_and_is_projected_without_a_managed_turn_launch(  # noqa: E501
        api, operator, attached_agent, model_server):
    from django.test import Client

    from goals.models import GoalTurn

    # the app-server's agent reaches amux's API (and its provider, through the model
    # gateway) at settings.AMUX_URL, served by model_server's fixture
    todo_id = api.post("/api/v1/goals/ship/todos/", {"title": "cut the release"}).json()["id"]
    row, thread = running_app_server(api, model_server)
    session_id = attach(api, row, thread).json()["session"]
    token = (Path(row.state_dir) / "agent-token").read_text()
    assert token.startswith("amxg_")
    assert WorkingSession.objects.get(session_id=session_id).token_digest not in ("", token)
    before = codex_processes()
    # the app's own loop (its automation prompt, on the operator's connection, not amux's)
    # claims the todo, does the work and writes it back through amux's todos resource
    # amux checks the work itself in the agent's session: the release file must be there
    assert api.patch("/api/v1/goals/ship/", {"check_command": "test -s RELEASE"}
                     ).status_code == 200
    evidence = '{"state": "done", "evidence": "release cut: v1.2.0 tagged"}'
    model_server.script(
        ToolCall(agent_curl(todo_id, '{"state": "claimed"}') + " && echo v1.2.0 > RELEASE"
                 + " && " + agent_curl(todo_id, evidence)),
        Text("cut the release; the todo is done"))
    status = OperatorClient(row).run_turn(
        thread, "Automation: advance goal ship. Claim the next open todo, do it, then "
                "write it back to amux with your agent token.")
    assert status == "completed"
    # the agent's word alone is not done: the todo stays claimed while amux checks
    todo = api.get(f"/api/v1/goals/ship/todos/{todo_id}/").json()
    assert (todo["state"], todo["writeback"]["state"]) == ("claimed", "validating")
    outbox.drain(seconds=30)
    # LoopX state changed, through amux's own rules: checked, done with evidence, paid
    todo = api.get(f"/api/v1/goals/ship/todos/{todo_id}/").json()
    assert (todo["state"], todo["claimed_by"], todo["writeback"]["state"]) == (
        "done", "builder", "accepted"), todo["writeback"]
    assert todo["evidence"].startswith("release cut: v1.2.0 tagged\n\nchecked by amux: "
                                       "`test -s RELEASE` passed (exit 0)")
    listed = api.get("/api/v1/goals/ship/todos/").json()["results"]
    assert [(t["id"], t["state"]) for t in listed] == [(todo_id, "done")]
    # ... projected on the goal page
    client = Client()
    client.force_login(operator)
    page = client.get("/panel/sessions/goals/ship/").content.decode()
    start = page.index(f'data-todo="{todo_id}"')
    assert page[start:page.index("</tr>", start)].count("<td>") == 3
    assert "<td>done</td><td>builder</td>" in page[start:page.index("</tr>", start)]
    # ... and no managed turn was launched: no envelope, no amux turn, no spend, no process
    assert GoalTurn.objects.count() == 0
    assert Turn.objects.filter(session_id=session_id).count() == 0
    assert api.get("/api/v1/goals/ship/").json()["quota"]["spent"] == 1  # like a turn
    # a "done" the check does not hold stays claimed and says why; nothing is spent
    second = api.post("/api/v1/goals/ship/todos/", {"title": "publish notes"}).json()["id"]
    agent_api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert agent_api.patch(f"/api/v1/goals/ship/todos/{second}/", '{"state": "claimed"}',
                           content_type="application/json").status_code == 200
    assert api.patch("/api/v1/goals/ship/", {"check_command": "test -s NOTES"}
                     ).status_code == 200
    said = agent_api.patch(f"/api/v1/goals/ship/todos/{second}/",
                           '{"state": "done", "evidence": "notes published"}',
                           content_type="application/json")
    assert said.status_code == 200 and said.json()["state"] == "claimed"
    outbox.drain(seconds=30)
    refused = api.get(f"/api/v1/goals/ship/todos/{second}/").json()
    assert (refused["state"], refused["writeback"]["state"], refused["writeback"]["reason"],
            refused["writeback"]["exit_code"]) == ("claimed", "refused", "check_failed", 1)
    assert api.get("/api/v1/goals/ship/").json()["quota"]["spent"] == 1
    page = client.get("/panel/sessions/goals/ship/").content.decode()
    assert "done refused: check failed" in page
    assert codex_processes() == before == [row.pid]
    assert OperatorClient(row).threads() == [thread]
    # the token is the binding's: detaching ends it and takes the file back
    assert api.post("/api/v1/goals/ship/agents/builder/detach/").status_code == 200
    assert (Path(row.state_dir) / "agent-token").read_text() == ""
    anon = Client()
    ended = anon.patch(f"/api/v1/goals/ship/todos/{todo_id}/", '{"title": "x"}',
                       content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert ended.status_code == 403


def test_an_agent_token_reaches_only_its_own_goal_and_claims_only_for_itself(
        api, attached_agent, model_server):
    from django.test import Client

    add_agent(api, "runner", provider="scripted", model="scripted-model")
    api.post("/api/v1/goals/", {"slug": "docs", "title": "Docs"})
    mine = api.post("/api/v1/goals/ship/todos/", {"title": "mine"}).json()["id"]
    theirs = api.post("/api/v1/goals/ship/todos/", {"title": "theirs"}).json()["id"]
    api.patch(f"/api/v1/goals/ship/todos/{theirs}/", {"state": "claimed", "agent": "runner"})
    other_goal = api.post("/api/v1/goals/docs/todos/", {"title": "other"}).json()["id"]
    row, thread = running_app_server(api, model_server)
    attach(api, row, thread)
    token = (Path(row.state_dir) / "agent-token").read_text()
    agent = Client()

    def patch(path, body):
        return agent.patch(path, json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")

    assert agent.get("/api/v1/goals/ship/todos/",
                     HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    assert agent.get("/api/v1/goals/docs/todos/",
                     HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 403
    assert patch(f"/api/v1/goals/docs/todos/{other_goal}/", {"state": "claimed"}) \
        .status_code == 403
    named = patch(f"/api/v1/goals/ship/todos/{mine}/", {"state": "claimed", "agent": "runner"})
    assert (named.status_code, named.json()["error"]["code"]) == (403, "other_agent")
    taken = patch(f"/api/v1/goals/ship/todos/{theirs}/", {"state": "done", "evidence": "x"})
    assert (taken.status_code, taken.json()["error"]["code"]) == (409, "claimed_elsewhere")
    dropped = patch(f"/api/v1/goals/ship/todos/{mine}/", {"state": "dropped"})
    assert (dropped.status_code, dropped.json()["error"]["code"]) == (403, "owner_decision")
    claimed = patch(f"/api/v1/goals/ship/todos/{mine}/", {"state": "claimed"})
    assert claimed.status_code == 200 and claimed.json()["claimed_by"] == "builder"
    # its own inbox: urgency and drain; another agent's inbox is not its own
    own = "/api/v1/goals/ship/agents/builder/inbox"
    assert agent.get(f"{own}/urgency/", HTTP_AUTHORIZATION=f"Bearer {token}").json() \
        ["pending"] == 0
    drained = agent.post(f"{own}/drain/", "{}", content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}")
    assert drained.status_code == 200 and drained.json()["events"] == []
    foreign = agent.post("/api/v1/goals/ship/agents/runner/inbox/drain/", "{}",
                         content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert (foreign.status_code, foreign.json()["error"]["code"]) == (403, "other_agent")
    # it reaches nothing else: not the goal, not the agents, not another resource
    for path in ("/api/v1/goals/ship/", "/api/v1/goals/ship/agents/",
                 "/api/v1/sessions/"):
        assert agent.get(path, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401
    wrong = agent.get("/api/v1/goals/ship/todos/", HTTP_AUTHORIZATION="Bearer amxg_nope")
    assert wrong.status_code == 401
    assert Todo.objects.get(pk=theirs).claimed_by.slug == "runner"


# ----------------------------------------------------------------------- refusals
def test_attach_is_refused_for_a_managed_agent_a_second_attach_and_unknown_sessions(
        api, attached_agent, model_server):
    row, thread = running_app_server(api, model_server)
    add_agent(api, "runner", provider="scripted", model="scripted-model")
    managed = attach(api, row, agent="runner")
    assert (managed.status_code, managed.json()["error"]["code"]) == (409, "wrong_mode")
    unknown = attach(api, AppServer(ref="nope"))
    assert unknown.status_code == 400 and "session" in unknown.json()["error"]["fields"]
    no_thread = attach(api, row, "no-such-thread")
    assert no_thread.status_code == 400 and "thread" in no_thread.json()["error"]["fields"]
    assert attach(api, row).status_code == 201
    second = attach(api, row)
    assert (second.status_code, second.json()["error"]["code"]) == (409, "session_active")
    assert Todo.objects.count() == 0 and Session.objects.count() == 1


def test_attachable_sessions_show_no_token_url_or_local_path(api, goal, broker,
                                                            model_server):
    row, thread = running_app_server(api, model_server)
    text = api.get("/api/v1/attachable-sessions/").content.decode()
    for secret in (row.secrets["token"], row.url, str(row.pid), row.workspace,
                   row.state_dir):
        assert secret not in text
    listed = json.loads(text)["results"]
    assert listed[0]["threads"][0]["id"] == thread
    assert listed[0]["workspace"] == listed[0]["threads"][0]["workspace"]
    assert listed[0]["workspace"].startswith("ws-")
    bad = api.post("/api/v1/attachable-sessions/", {"url": "http://127.0.0.1:9"})
    assert bad.status_code == 400 and "url" in bad.json()["error"]["fields"]
    gone = api.post("/api/v1/attachable-sessions/", {"url": "ws://127.0.0.1:9"})
    assert gone.status_code == 400 and gone.json()["error"]["code"] == \
        "app_server_unreachable"
    # a running app-server registered by URL and token answers the same way
    registered = api.post("/api/v1/attachable-sessions/", {
        "url": row.url, "token": row.secrets["token"], "name": "my app"})
    assert registered.status_code == 201, registered.content
    assert registered.json()["origin"] == "registered"
    assert [t["id"] for t in registered.json()["threads"]] == [thread]
    wrong = api.post("/api/v1/attachable-sessions/", {"url": row.url, "token": "wrong"})
    assert wrong.status_code == 400
    stopped = api.delete(f"/api/v1/attachable-sessions/{row.ref}/")
    assert stopped.status_code == 200 and stopped.json()["state"] == "stopped"
    wait_for(lambda: row.pid not in codex_processes())


# ----------------------------------------------------------------------- the goal page
def test_goal_page_attaches_and_detaches_an_attached_agent_and_shows_stale(
        api, operator, attached_agent, model_server):
    from django.test import Client

    row, thread = running_app_server(api, model_server)
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    page = client.get("/panel/sessions/goals/ship/").content.decode()
    assert 'data-action="attach"' in page and f'value="{row.ref}:{thread}"' in page
    for secret in (row.secrets["token"], row.url, row.workspace):
        assert secret not in page
    csrf = client.cookies["csrftoken"].value
    empty = client.post("/panel/sessions/goals/ship/agents/builder/attach/",
                        {"csrfmiddlewaretoken": csrf}, follow=True)
    assert "choose an attachable session" in empty.content.decode()
    wrong = client.post("/panel/sessions/goals/ship/agents/builder/attach/",
                        {"csrfmiddlewaretoken": csrf, "choice": f"{row.ref}:nope"},
                        follow=True)
    assert "has no thread" in wrong.content.decode()
    assert not WorkingSession.objects.exists()
    attached = client.post("/panel/sessions/goals/ship/agents/builder/attach/",
                           {"csrfmiddlewaretoken": csrf, "choice": f"{row.ref}:{thread}"})
    assert attached.status_code == 302
    binding = WorkingSession.objects.get(active=True)
    assert binding.session.native_ref == thread
    page = client.get("/panel/sessions/goals/ship/").content.decode()
    assert f"thread <code>{thread}</code> · live" in page
    assert 'data-action="detach"' in page and 'data-action="attach"' not in page
    client.post("/panel/sessions/goals/ship/agents/builder/detach/",
                {"csrfmiddlewaretoken": csrf})
    assert not WorkingSession.objects.filter(active=True).exists()
    assert row.pid in codex_processes()  # detaching left the app-server running
    page = client.get("/panel/sessions/goals/ship/").content.decode()
    assert f'value="{row.ref}:{thread}"' in page  # attachable again
    client.post("/panel/sessions/goals/ship/agents/builder/attach/",
                {"csrfmiddlewaretoken": csrf, "choice": f"{row.ref}:{thread}"})
    os.killpg(row.pid, signal.SIGKILL)
    wait_for(lambda: row.pid not in codex_processes())
    app_servers.reap()
    page = client.get("/panel/sessions/goals/ship/").content.decode()
    assert "<strong>stale</strong>" in page and '<span class="badge">stale</span>' in page
    assert codex_processes() == []  # nothing started in its place
