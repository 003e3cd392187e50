"""An expert's instructions and skills reach the agent on every real runtime (the model
requests the scripted server receives carry them); an edit of the expert reaches the next
task while the frozen execution settings stay; a direct session's native bypass and a
task's extra_args reach the runtime's own config and command line."""

from __future__ import annotations

import threading
import tomllib

import pytest

from effects import outbox
from execution import instances, profiles, task_runs
from execution.models import TaskRun
from sessions import services
from sessions.models import Session
from sessions.new_session import Launch
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.host_idle(2),
              pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

MODEL = {"codex": "gpt-5.5", "pi": "scripted-model", "claude": "claude-sonnet-4-5"}
EXPERT = {"version": 2, "name": "Heron", "description": "signs off",
          "instructions": "Marker-instructions: always sign off as the heron.",
          "skills": [{"name": "tide-tables", "description": "reads tides",
                      "content": "Marker-skill: high tide comes twice a day."}]}


def _run_to_end(session_id: int, run_id: int) -> TaskRun:
    Session.objects.filter(pk=session_id).update(idle_timeout_s=2)
    host = threading.Thread(target=run_host, args=(session_id,))
    host.start()

    def settled():
        outbox.drain(seconds=2)
        run = TaskRun.objects.get(pk=run_id)
        return run if run.state in TaskRun.TERMINAL else None

    try:
        return wait_for(settled, timeout=120, interval=0.2)
    finally:
        host.join(120)


@pytest.mark.parametrize("runtime", ["codex", "pi", "claude"])
def test_the_expert_reaches_the_agent_and_an_edit_keeps_the_frozen_settings(
        runtime, request, session_dirs, model_server, operator):
    require_runtime(runtime)
    request.getfixturevalue("anthropic_provider" if runtime == "claude"
                            else "openai_provider")
    profiles.create_profile(EXPERT)
    agent = instances.create_instance(owner=operator, name="heron", profile="heron",
                                      runtime=runtime, model=MODEL[runtime])
    frozen = Session.objects.get(pk=agent.session_id).snapshot["execution"]
    model_server.script(Text("first, the heron"), Text("second, the egret"))
    first = task_runs.submit_task(owner=operator, prompt="hello", instance=agent)
    assert _run_to_end(agent.session_id, first.pk).state == "succeeded"
    requests = model_server.tool_requests()
    assert requests and all("Marker-instructions" in str(r.body) and
                            "Marker-skill: high tide" in str(r.body) for r in requests)
    # the expert is edited: its new content reaches the next task, the settings do not move
    profiles.update_profile("heron", {**EXPERT, "instructions":
                                      "Marker-edited: always sign off as the egret."})
    second = task_runs.submit_task(owner=operator, prompt="again", instance=agent)
    assert _run_to_end(agent.session_id, second.pk).result == "second, the egret"
    later = model_server.tool_requests()[len(requests):]
    assert later and all("Marker-edited" in str(r.body) for r in later)
    assert Session.objects.get(pk=agent.session_id).snapshot["execution"] == frozen
    assert second.execution == first.execution == frozen


def test_a_direct_codex_session_launches_with_the_native_bypass(session_dirs, model_server,
                                                                openai_provider):
    require_runtime("codex")
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    assert session.snapshot["execution"]["permission"]["source"] == "native-default"
    model_server.script(Text("hi"))
    services.post_message(session.pk, "hello")
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=2)
    assert run_host(session.pk) == "slept"
    config = tomllib.loads((services.state_dir(session) / "home" / ".codex"
                            / "config.toml").read_text())
    assert (config["approval_policy"], config["sandbox_mode"]) == ("never",
                                                                   "danger-full-access")


def test_a_task_s_extra_args_configure_the_native_engine(session_dirs, model_server,
                                                        openai_provider, operator):
    require_runtime("pi")
    model_server.script(Text("only two tools"))
    run = task_runs.submit_task(owner=operator, prompt="list your tools", runtime="pi",
                                model="scripted-model", extra_args=["--tools", "read,bash"])
    assert run.execution["extra_args"] == ["--tools", "read,bash"]
    assert _run_to_end(run.session_id, run.pk).state == "succeeded"
    assert sorted(model_server.tool_requests()[0].tool_names) == ["bash", "read"]
