"""`manage.py amux schedule add|list|pause|resume|delete` acts as --user, with the same
rules and refusals as the REST API."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from execution import profiles
from execution.models import Schedule

pytestmark = pytest.mark.django_db


def _amux(*args) -> list[dict]:
    out = StringIO()
    call_command("amux", "schedule", *args, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def test_schedule_add_keeps_the_runtime_for_every_firing(operator, openai_provider):
    profiles.ensure_builtin()
    (added,) = _amux("add", "--name", "N", "--every", "60", "--mode", "subtask",
                     "--runtime", "pi", "--model", "gpt-5.5", "--prompt", "P",
                     "--extra-arg=--thinking", "--extra-arg=off", "--user", "operator")
    assert (added["name"], added["every_seconds"], added["mode"], added["runtime"]) == \
        ("N", 60, "subtask", "pi")
    assert added["extra_args"] == ["--thinking", "off"]
    stored = Schedule.objects.get(pk=added["id"])
    assert stored.owner == operator and stored.execution["runtime"] == "pi"
    assert [s["id"] for s in _amux("list", "--user", "operator")] == [added["id"]]
    (paused,) = _amux("pause", str(added["id"]), "--user", "operator")
    assert paused["paused"] is True
    (resumed,) = _amux("resume", str(added["id"]), "--user", "operator")
    assert resumed["paused"] is False


@pytest.mark.parametrize(("args", "says"), [
    (["--every", "5"], "every_seconds"),
    (["--cron", "99 * * * *"], "cron"),
    (["--every", "60", "--runtime", "nope"], "runtime"),
])
def test_schedule_add_refuses_bad_input_naming_it(operator, openai_provider, args, says):
    profiles.ensure_builtin()
    with pytest.raises(CommandError) as refused:
        call_command("amux", "schedule", "add", "--name", "bad", "--mode", "subtask",
                     "--prompt", "P", "--user", "operator", *args, stdout=StringIO())
    assert says in str(refused.value)
    assert not Schedule.objects.exists()


def test_schedule_commands_act_only_for_their_user(operator, viewer, openai_provider):
    profiles.ensure_builtin()
    (added,) = _amux("add", "--name", "mine", "--every", "60", "--mode", "subtask",
                     "--runtime", "codex", "--model", "gpt-5.5", "--prompt", "P",
                     "--user", "operator")
    assert _amux("list", "--user", "viewer") == []
    with pytest.raises(CommandError, match="no schedule"):
        call_command("amux", "schedule", "delete", str(added["id"]), "--user", "viewer",
                     stdout=StringIO())
    with pytest.raises(CommandError, match="no active user"):
        call_command("amux", "schedule", "list", "--user", "ghost", stdout=StringIO())


def test_the_admin_shows_schedules_and_runs_read_only(client, operator, admin_user,
                                                     openai_provider):
    profiles.ensure_builtin()
    _amux("add", "--name", "audited", "--every", "60", "--mode", "subtask", "--runtime",
          "codex", "--model", "gpt-5.5", "--prompt", "P", "--user", "operator")
    client.force_login(admin_user)
    listing = client.get("/admin/execution/schedule/")
    assert listing.status_code == 200 and b"audited" in listing.content
    assert client.get("/admin/execution/schedulerun/").status_code == 200
    assert client.get("/admin/execution/schedule/add/").status_code == 403
    # the pages they had while schedules lived in sessions lead there
    moved = client.get("/admin/agent_sessions/schedule/?paused__exact=0")
    assert moved.status_code == 301
    assert moved["Location"] == "/admin/execution/schedule/?paused__exact=0"
    assert client.get("/admin/agent_sessions/providerprofile/").status_code == 200


def test_schedule_add_takes_json_with_the_api_rule(operator, openai_provider, tmp_path):
    profiles.ensure_builtin()
    body = tmp_path / "schedule.json"
    body.write_text(json.dumps({"name": "J", "every_seconds": 60, "mode": "subtask",
                                "prompt": "P", "runtime": "pi", "model": "gpt-5.5"}))
    (added,) = _amux("add", "--json", str(body), "--user", "operator")
    assert (added["name"], added["every_seconds"], added["runtime"]) == ("J", 60, "pi")
    body.write_text(json.dumps({"name": "K", "every_secs": 60, "mode": "daily",
                                "extra_args": "--x"}))
    with pytest.raises(CommandError) as refused:
        call_command("amux", "schedule", "add", "--json", str(body), "--user", "operator",
                     stdout=StringIO())
    said = str(refused.value).splitlines()
    assert "every_secs: unknown field" in said
    assert {line.split(":")[0] for line in said} == {"every_secs", "mode", "prompt",
                                                      "extra_args"}
    with pytest.raises(CommandError) as mixed:
        call_command("amux", "schedule", "add", "--json", str(body), "--name", "L",
                     "--user", "operator", stdout=StringIO())
    assert "name: give it in --json or as an option, not both" in str(mixed.value)
    with pytest.raises(CommandError) as bare:
        call_command("amux", "schedule", "add", "--user", "operator", stdout=StringIO())
    assert {line.split(":")[0] for line in str(bare.value).splitlines()} == {
        "name", "mode", "prompt"}
    assert [s.name for s in Schedule.objects.all()] == ["J"]


def test_task_submit_refuses_unknown_json_fields_naming_each(operator, tmp_path,
                                                              monkeypatch):
    from execution.models import TaskRun

    monkeypatch.setattr("sys.stdin", StringIO(json.dumps(
        {"prompt": "", "runtme": "pi", "extra_args": [1], "permission_policy": "yolo"})))
    with pytest.raises(CommandError) as refused:
        call_command("amux", "task", "submit", "--json", "-", "--user", "operator",
                     stdout=StringIO())
    said = str(refused.value).splitlines()
    assert "runtme: unknown field" in said
    assert {line.split(":")[0] for line in said} == {"prompt", "runtme", "extra_args",
                                                      "permission_policy"}
    with pytest.raises(CommandError) as bare:
        call_command("amux", "task", "submit", "--user", "operator", stdout=StringIO())
    assert str(bare.value) == "prompt: This field is required."
    assert not TaskRun.objects.exists()
