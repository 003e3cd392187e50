"""A goal's check runs what the agent wrote (its Makefile, its test script): amux runs it
as the session's identity, in its sandbox, with a clean environment, on the machine that
holds the work directory — never as amux's user with amux's environment. Real Pi against
the scripted model server; the agent plants the script the check then calls."""

from __future__ import annotations

import json
import os
import pwd
import time
from pathlib import Path

import pytest
from django.conf import settings

from amux_site import heartbeat
from effects import outbox
from goals import checks, turns
from goals.models import GoalTurn
from sessions.models import RuntimeIdentity, Session
from tests.support.isolation import as_root, backend, runtime_user
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

TURNS = "/api/v1/goals/ship/agents/builder/turns/"
# what the clean environment may hold (the backend adds the user's names and git's trust)
CLEAN_KEYS = {"HOME", "TMPDIR", "PATH", "LANG", "LC_ALL", "TERM", "NO_COLOR", "PWD",
              "SHLVL", "_", "AMUX_RUNTIME_TAG", "USER", "LOGNAME", "IS_SANDBOX",
              "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0", "OLDPWD"}


def set_check(api, command):
    response = api.patch("/api/v1/goals/ship/", {"check_command": command})
    assert response.status_code == 200, response.content
    response = api.post("/api/v1/goals/ship/todos/", {"title": "the work"})
    assert response.status_code == 201, response.content


def ended_attempt(api, key, session_id, model_server, *script):
    """The turn posted and its session turn run by the real Pi; the envelope is at the
    check step."""
    model_server.script(*script)
    assert api.post(TURNS, {"key": key}).status_code == 202
    pk = GoalTurn.objects.get(key=key).pk
    assert turns.advance(pk).state == "running"
    assert run_host(session_id) == "slept"
    return pk


@as_root
def test_the_check_runs_the_agents_script_as_the_session_user_with_a_clean_environment(
        api, session_id, model_server):
    planted = Path(settings.DATA_DIR) / "planted-by-the-check"
    set_check(api, "sh ./check.sh")
    script = (f"id -u; env | sort; touch {planted} && echo WROTE-AMUX-DATA; "
              "touch ok-from-check")
    pk = ended_attempt(api, "c1", session_id, model_server,
                       ToolCall(f"printf '%s\\n' '{script}' > check.sh"), Text("planted"))
    row = turns.advance(pk)
    validation = row.validation
    assert validation["passed"] is True, validation
    lines = validation["output"].splitlines()
    uid = int(lines[0])
    assert uid != 0 and uid != os.geteuid()
    assert backend() in ("linux-dac", "bwrap")
    # the session's own identity, the one its runtime ran the turn as
    identity = RuntimeIdentity.objects.get(session_id=session_id)
    assert uid == identity.uid == pwd.getpwnam(identity.user).pw_uid
    assert identity.user != runtime_user()
    keys = {line.split("=", 1)[0] for line in lines[1:] if "=" in line}
    assert keys <= CLEAN_KEYS, f"amux's environment leaked into the check: {keys - CLEAN_KEYS}"
    # amux's data directory is untouched (under bwrap the write may land in the sandbox's
    # own private /tmp, where this test's data directory lies: nothing reaches the host)
    assert not planted.exists()
    if backend() == "linux-dac":
        assert "WROTE-AMUX-DATA" not in validation["output"]
    workdir = Path(Session.objects.get(pk=session_id).workdir)
    assert (workdir / "ok-from-check").stat().st_uid == uid  # its work directory: writable


def test_a_check_past_its_deadline_is_killed_with_what_it_left_in_the_background(
        api, session_id, model_server, settings):
    settings.AMUX_GOAL_CHECK_TIMEOUT_S = 1
    set_check(api, "(sleep 37.25 &) ; (setsid sleep 37.5 &) ; echo started; sleep 37.75")
    pk = ended_attempt(api, "c2", session_id, model_server, Text("nothing to do"))
    began = time.monotonic()
    row = turns.advance(pk)
    assert time.monotonic() - began < 10
    assert row.validation["timed_out"] is True and row.validation["passed"] is False
    assert "started" in row.validation["output"]
    assert "timed out after 1 s" in row.validation["output"]
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[:1] == [b"sleep"] and cmdline[1:2] in ([b"37.25"], [b"37.5"], [b"37.75"]):
            left.append(pid)
    assert left == [], "the check's processes outlived its deadline"


def test_a_check_that_cannot_start_says_why_and_fails(api, session_id, model_server):
    set_check(api, "true")
    pk = ended_attempt(api, "c3", session_id, model_server, Text("done"))
    session = Session.objects.get(pk=session_id)
    Session.objects.filter(pk=session_id).update(workdir="/etc/amux-not-a-work-dir")
    row = turns.advance(pk)
    assert row.validation["passed"] is False and row.validation["exit_code"] is None
    assert "the check could not run" in row.validation["output"]
    Session.objects.filter(pk=session_id).update(workdir=session.workdir)


def test_the_check_moves_to_the_machine_that_holds_the_work_directory(
        api, session_id, model_server):
    set_check(api, "true")
    pk = ended_attempt(api, "c4", session_id, model_server, Text("done"))
    Session.objects.filter(pk=session_id).update(lease_host="elsewhere")
    heartbeat.worker_alive("runtime@elsewhere", ["runtime", "runtime.elsewhere"], slots=4)
    try:
        row = turns.advance(pk)
        assert row.state == "running" and not row.validation  # not checked here
        assert turns.check_queue(row) == "runtime.elsewhere"
        from amux_site.celery import app

        with app.connection_for_write() as conn:
            redis = conn.default_channel.client
            before = redis.llen("runtime.elsewhere")
            # the envelope's supervisor row sends the check there and waits for it
            with pytest.raises(outbox.Later) as later:
                turns.drive(0, {"turn": pk})
            assert later.value.delay >= checks.check_timeout_s()
            sent = [json.loads(m) for m in redis.lrange("runtime.elsewhere", 0, -1)]
            assert len(sent) == before + 1
            assert sent[0]["headers"]["task"] == "goals.turn"
            redis.delete("runtime.elsewhere")
        # that machine gone: the check runs where the supervisor is (the directory is here)
        heartbeat.worker_gone("runtime@elsewhere")
        assert turns.check_queue(GoalTurn.objects.get(pk=pk)) is None
        assert turns.advance(pk).state == "done"
    finally:
        heartbeat.worker_gone("runtime@elsewhere")
