"""The executor's tools end to end: the real ASGI app under uvicorn (a subprocess on a free
port, pointed at this test's database), called with the `mcp` SDK's own streamable HTTP
client and with the `amux` command (installed into a worker bin directory) as a
subprocess. What the tools did is checked in the engine's tables."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from effects.models import Effect
from intake.models import Source, Thread, Trigger
from tests.support.runtimes import run_async
from tickets.actions import commands as ticket_commands
from tickets.actions import executor, routing
from tickets.models import Assignment, Input, Question, Report
from tickets.tools import install_worker_bin, mcp_server_config, worker_env

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] or ""
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    host = f"{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}"
    return f"postgres://{auth}@{host}/{db['NAME']}"


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    """uvicorn serving amux_site.asgi:application (lifespan on) against the test database."""
    port = _free_port()
    log = tmp_path_factory.mktemp("uvicorn") / "server.log"
    from django.conf import settings

    env = dict(os.environ, DATABASE_URL=_database_url(), REDIS_URL=settings.REDIS_URL,
               DJANGO_SETTINGS_MODULE="amux_site.settings", PYTHONUNBUFFERED="1")
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "amux_site.asgi:application", "--host",
             "127.0.0.1", "--port", str(port), "--lifespan", "on", "--no-access-log"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
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
            process.kill()
            pytest.fail(f"uvicorn did not start:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)
    yield base
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]
    assert "Application startup complete" in text and "Application shutdown complete" in text


def _open(number: int, title: str):
    source, _ = Source.objects.get_or_create(kind="github", slug="gh",
                                             defaults={"name": "GitHub"})
    thread = Thread.objects.create(source=source, key=f"octo/app#{number}", title=title)
    trigger = Trigger.objects.create(
        source=source, thread=thread, external_id=f"comment-{number}", scope="comment",
        actor="octocat", addressed=True, text=f"@amux please fix #{number}",
        decision="explicit", strength="explicit", rule="gh.comment.addressed",
        policy_version="v1hash",
    )
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title=title)
    assignment = Assignment.objects.get(ticket=ticket)
    return ticket, assignment, executor.issue_assignment_token(assignment_id=assignment.pk)


async def _mcp(url: str, token: str, calls: list[tuple[str, dict]]):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        tools = await client.list_tools()
        results = [await client.call_tool(name, args) for name, args in calls]
    return tools, results


def _text(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_mcp_tools_act_on_the_tokens_ticket_only(server):
    ticket, assignment, token = _open(1, "Fix the login crash")
    other, _other_assignment, other_token = _open(2, "Speed up search")
    tools, results = run_async(_mcp(f"{server}/mcp", token, [
        ("context", {}),
        ("report", {"status": "progress", "text": "reproduced"}),
        ("ask", {"question": "Which branch?", "options": ["main", "release"]}),
        ("ask", {"question": "  "}),
        ("report", {"status": "finished"}),
        ("reply", {"text": "On it."}),
        ("hand_back", {"trigger": Trigger.objects.get(external_id="comment-2").pk,
                       "reason": "not mine"}),
        ("pull_request", {"title": "Take theirs", "head": f"amux/{other.short_name}"}),
        ("report", {"status": "progress", "txt": "a typo"}),
    ]))
    names = {t.name for t in tools.tools}
    assert {"report", "ask", "hand_back", "reply", "context"} <= names
    described = {t.name: t.description for t in tools.tools}
    assert "progress, done, blocked, failed" in described["report"]

    (context, progress, asked, empty_ask, bad_status, replied, foreign, their_pr,
     typo) = results
    # an argument a tool does not declare is refused by name, and its schema says so
    assert typo.is_error and "txt" in _text(typo)
    assert all(t.input_schema.get("additionalProperties") is False for t in tools.tools)
    assert not context.is_error
    assert context.structured_content["ticket"]["id"] == ticket.pk
    assert context.structured_content["mandate"]["requester"] == "octocat"
    assert not progress.is_error and progress.structured_content["ticket"] == ticket.pk
    assert not asked.is_error and asked.structured_content["stage"] == "waiting_for_person"
    assert empty_ask.is_error and "question" in _text(empty_ask)
    assert bad_status.is_error and "unknown report status" in _text(bad_status)
    assert not replied.is_error
    assert foreign.is_error and "404" in _text(foreign)
    # Another ticket's branch is never this ticket's pull request.
    assert their_pr.is_error and "409 not_own_branch" in _text(their_pr)
    assert f"head must be this ticket's branch amux/{ticket.short_name}" in _text(their_pr)

    # the engine's tables: everything landed on ticket 1, nothing on ticket 2
    assert list(Report.objects.values_list("ticket_id", "assignment_id", "status")) == [
        (ticket.pk, assignment.pk, "progress")
    ]
    question = Question.objects.get()
    assert question.ticket_id == ticket.pk and question.options == ["main", "release"]
    relays = Effect.objects.filter(kind="relay")
    assert {e.payload["ticket"] for e in relays} == {ticket.pk}
    assert {e.payload["text"] for e in relays} >= {"On it."}
    assert Trigger.objects.get(external_id="comment-2").disposition == "admitted"
    assert not Report.objects.filter(ticket=other).exists()

    # the other token reads its own ticket
    config = mcp_server_config(server + "/", other_token)
    assert config["url"] == f"{server}/mcp"
    _tools, (own,) = run_async(_mcp(f"{server}/mcp/", other_token, [("context", {})]))
    assert own.structured_content["ticket"]["id"] == other.pk


def test_mcp_refuses_unknown_and_ended_tokens(server):
    _ticket, assignment, token = _open(3, "Old work")
    request = urllib.request.Request(
        f"{server}/mcp", method="POST", data=b"{}",
        headers={"Authorization": "Bearer amx_unknown", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as unknown:
        urllib.request.urlopen(request, timeout=10)
    assert unknown.value.code == 401
    executor.assignment_ended(assignment_id=assignment.pk, reason="done")
    request.add_header("Authorization", f"Bearer {token}")
    with pytest.raises(urllib.error.HTTPError) as ended:
        urllib.request.urlopen(request, timeout=10)
    assert ended.value.code == 403
    assert json.loads(ended.value.read())["error"]["code"] == "assignment_ended"


def _amux(bin_dir: Path, server: str, token: str, *args: str, stdin: str | None = None,
          **extra: str):
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LANG": "C.UTF-8", **worker_env(server, token),
           **extra}
    return subprocess.run(["amux", *args], env=env, capture_output=True, text=True,
                          timeout=60, input=stdin)


def test_the_amux_command_on_the_workers_path(server, tmp_path):
    ticket, assignment, token = _open(4, "Fix the parser")
    later = Trigger.objects.create(
        source=ticket.thread.source, thread=ticket.thread, external_id="later-4",
        scope="comment", actor="colleague", text="please also port it to Windows",
        decision="inferred", strength="inferred", policy_version="v1hash",
    )
    routing.route_trigger(trigger_id=later.pk)
    item = Input.objects.get(trigger=later)
    bin_dir = tmp_path / "worker-bin"
    shim = install_worker_bin(bin_dir)
    assert shim == bin_dir / "amux" and os.access(shim, os.X_OK)

    ctx = _amux(bin_dir, server, token, "context")
    assert ctx.returncode == 0, ctx.stderr
    assert "Fix the parser" in ctx.stdout and "please also port it to Windows" in ctx.stdout
    assert f"trigger {later.pk}" in ctx.stdout
    as_json = _amux(bin_dir, server, token, "context", "--json")
    assert json.loads(as_json.stdout)["ticket"]["id"] == ticket.pk

    done = _amux(bin_dir, server, token, "report", "done", "PR opened")
    assert done.returncode == 0, done.stderr
    assert f"reported done on ticket {ticket.pk}" in done.stdout

    asked = _amux(bin_dir, server, token, "ask", "Which OS first?", "--option", "Linux",
                  "--option", "Windows", "--multi", "--answers", f"input:{item.pk}")
    assert asked.returncode == 0, asked.stderr

    handed = _amux(bin_dir, server, token, "hand-back", str(later.pk), "Windows port is new work")
    assert handed.returncode == 0, handed.stderr

    replied = _amux(bin_dir, server, token, "reply", "-", stdin="Fixed in the PR.\n")
    assert replied.returncode == 0, replied.stderr

    bad = _amux(bin_dir, server, token, "report", "finished", "x")
    assert bad.returncode == 1
    assert "refused (400 invalid)" in bad.stderr and "unknown report status" in bad.stderr
    no_question = _amux(bin_dir, server, token, "ask", "")
    assert no_question.returncode == 1 and "question" in no_question.stderr
    unknown = _amux(bin_dir, server, "amx_nope", "report", "done")
    assert unknown.returncode == 1 and "401" in unknown.stderr
    unset = _amux(bin_dir, server, "", "context")
    assert unset.returncode == 2 and "AMUX_ASSIGNMENT_TOKEN" in unset.stderr
    # amux down: the command waits a while for it to come back (a restart), then says so
    down = _amux(bin_dir, "http://127.0.0.1:1", token, "context", AMUX_RETRY_SECONDS="2")
    assert down.returncode == 3 and "cannot reach amux" in down.stderr

    assert list(Report.objects.values_list("ticket_id", "assignment_id", "status", "text")) == [
        (ticket.pk, assignment.pk, "done", "PR opened")
    ]
    question = Question.objects.get()
    assert (question.ticket_id, question.options, question.multi, question.message_ref) == (
        ticket.pk, ["Linux", "Windows"], True, f"input:{item.pk}"
    )
    later.refresh_from_db()
    assert later.disposition == "handed_back" and later.reason == "Windows port is new work"
    assert Effect.objects.filter(kind="relay", payload__text="Fixed in the PR.\n").exists()


def _open_lark(key: str, title: str):
    source, _ = Source.objects.get_or_create(kind="lark", slug="team-lark",
                                             defaults={"name": "Lark"})
    thread = Thread.objects.create(source=source, key=key, title=title)
    trigger = Trigger.objects.create(
        source=source, thread=thread, external_id=f"message:{key}", scope="group_configured",
        actor="ou_asker", addressed=True, text="@amux please look", decision="explicit",
        strength="explicit", rule="lark.group_configured.addressed", policy_version="v1hash",
    )
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title=title)
    assignment = Assignment.objects.get(ticket=ticket)
    return ticket, executor.issue_assignment_token(assignment_id=assignment.pk)


def test_lark_cli_posts_on_the_tickets_lark_thread_through_amux(server, tmp_path):
    """The `lark-cli` shim takes Lark's own CLI's two sending shortcuts and posts through
    amux (the bot's credential never reaches the worker), on the ticket's thread only."""
    ticket, token = _open_lark("oc_team:om_root", "Check the dashboard")
    bin_dir = tmp_path / "worker-bin"
    install_worker_bin(bin_dir, disabled=["curl"])

    def lark(*args, stdin=None, who=token):
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LANG": "C.UTF-8",
               **worker_env(server, who)}
        return subprocess.run(["lark-cli", *args], env=env, capture_output=True, text=True,
                              timeout=60, input=stdin)

    sent = lark("im", "+messages-send", "--chat-id", "oc_team", "--text", "Looking now.")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout) == {"ok": True, "queued": True, "ticket": ticket.pk,
                                       "chat_id": "oc_team"}
    replied = lark("im", "+messages-reply", "--message-id", "om_root", "--markdown", "-",
                   stdin="**Found it**: the cache.\n")
    assert replied.returncode == 0, replied.stderr
    texts = list(Effect.objects.filter(kind="relay").order_by("id")
                 .values_list("payload__text", flat=True))
    assert texts == ["Looking now.", "**Found it**: the cache.\n"]

    elsewhere = lark("im", "+messages-send", "--chat-id", "oc_other", "--text", "hi")
    assert elsewhere.returncode == 1
    assert "--chat-id oc_other is not this ticket's thread (chat oc_team" in elsewhere.stderr
    other_message = lark("im", "+messages-reply", "--message-id", "om_x", "--text", "hi")
    assert other_message.returncode == 1 and "first message om_root" in other_message.stderr
    listing = lark("im", "+chat-messages-list", "--chat-id", "oc_team")
    assert listing.returncode == 1 and "posts on this ticket's Lark thread only" in listing.stderr
    extra = lark("im", "+messages-send", "--chat-id", "oc_team", "--text", "x", "--as", "user")
    assert extra.returncode == 2 and "does not take --as user" in extra.stderr
    _, _, github_token = _open(9, "A GitHub ticket")
    on_github = lark("im", "+messages-send", "--chat-id", "oc_team", "--text", "x",
                     who=github_token)
    assert on_github.returncode == 1 and "is on github, not Lark" in on_github.stderr
    assert Effect.objects.filter(kind="relay").count() == 2  # nothing refused was sent

    curl = subprocess.run(["curl", "https://example.com"], capture_output=True, text=True,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert curl.returncode == 126 and "curl is disabled for amux workers" in curl.stderr
