"""Prompts reach every model request of a running session, on every real runtime (Codex
app-server, Pi RPC, Claude Code through the Agent SDK sidecar, codex-acp as a generic ACP
agent) against the scripted model server behind amux's model gateway: the host assembles
the current worker prompt before each turn, the gateway puts the prompt current at each
request into it (a save during a turn reaches that turn's next model request, with no
restart), each turn.started records the revisions it started with and the turn keeps
every revision its requests used."""

from __future__ import annotations

import threading

import pytest

from prompts_app import service as prompts
from runtimes.base import tagged_pids
from sessions import services
from sessions.models import Session, TimelineEvent, Turn
from sessions.new_session import Launch, Prompting
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.host_idle(2),
              pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

MODEL = {"codex": "gpt-5.5", "pi": "scripted-model", "acp": "gpt-5.5",
         "claude": "claude-sonnet-4-5"}
ONE = "Marker-one: always sign off as the heron."
TWO = "Marker-two: always sign off as the pelican."


def _terminals(session_id):
    return list(TimelineEvent.objects.filter(
        session_id=session_id, type__in=["turn.completed", "turn.failed", "turn.cancelled"])
        .order_by("seq").values_list("turn__seq", "type"))


def _started(session_id):
    return [e.payload for e in TimelineEvent.objects.filter(
        session_id=session_id, type="turn.started").order_by("seq")]


@pytest.mark.parametrize("runtime", ["codex", "pi", "claude", "acp"])
def test_a_prompt_saved_between_turns_reaches_the_next_turn(runtime, request, session_dirs,
                                                            model_server):
    require_runtime(runtime)
    request.getfixturevalue("anthropic_provider" if runtime == "claude"
                            else "openai_provider")
    assert prompts.save("team.worker", ONE, 0, origin="api").revision == 1
    session = services.create_session(Launch.direct(runtime=runtime, provider="scripted",
                                                    model=MODEL[runtime]),
                                      Prompting(prompt_role="worker"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=2)
    assert session.snapshot["prompt_role"] == "worker"
    # turn 1: a tool call (its model request slow enough to save meanwhile), then a reply
    model_server.script(ToolCall("echo one > one.txt", delay=2), Text("first done"),
                        Text("second done"), Text("third done"))
    services.post_message(session.pk, "write one.txt")
    outcome: dict = {}
    host = threading.Thread(target=lambda: outcome.setdefault("v", run_host(session.pk)))
    host.start()
    try:
        model_server.wait_for_requests(1, timeout=120)
        # saved while turn 1 is in flight: the turn goes on with the prompt it started with
        assert prompts.save("team.worker", TWO, 1, origin="api").revision == 2
        wait_for(lambda: _terminals(session.pk) == [(1, "turn.completed")], timeout=120)
        tag = Session.objects.get(pk=session.pk).runtime_tag
        first_turn = model_server.tool_requests()
        services.post_message(session.pk, "and now?")
        wait_for(lambda: len(_terminals(session.pk)) == 2, timeout=120)
        second_turn = model_server.tool_requests()[len(first_turn):]
        services.post_message(session.pk, "once more")
        wait_for(lambda: len(_terminals(session.pk)) == 3, timeout=120)
    finally:
        host.join(180)
    assert outcome.get("v") == "slept"
    assert _terminals(session.pk) == [(1, "turn.completed"), (2, "turn.completed"),
                                      (3, "turn.completed")]
    assert (session_dirs / "work" / f"session-{session.pk}" / "one.txt").exists()

    # every model request reads the prompt current when it passes amux's model gateway:
    # turn 1's first request (before the save) revision 1, its next step already revision 2
    assert len(first_turn) >= 2
    assert ONE in str(first_turn[0].body) and TWO not in str(first_turn[0].body)
    for req in first_turn[1:] + second_turn:
        # every marked block in the request, earlier turns' included, is the current one
        assert TWO in str(req.body) and ONE not in str(req.body)
    assert second_turn

    started = _started(session.pk)
    assert [p["prompt_revisions"] for p in started] == [[1], [2], [2]]
    # the turn keeps every revision its requests used: turn 1 read both
    assert [t.prompt_revisions for t in Turn.objects.filter(session=session)
            .order_by("seq")] == [[1, 2], [2], [2]]
    assert {p["prompt_role"] for p in started} == {"worker"}
    assert started[0]["prompt_hash"] != started[1]["prompt_hash"] == started[2]["prompt_hash"]
    channel = {"codex": "per_turn", "pi": "per_turn", "claude": "session_start",
               "acp": "inline"}[runtime]
    assert {p["prompt_channel"] for p in started} == {channel}

    restarts = list(TimelineEvent.objects.filter(session=session, type="session.restarted")
                    .values_list("payload", flat=True))
    # a save never restarts a runtime (Claude Code, which takes its prompt only when the
    # session starts, included: the gateway puts the current one into each request)
    assert restarts == []  # the same process served all three turns
    assert "write one.txt" in str(model_server.tool_requests()[-1].body)
    if runtime == "acp":
        # the inline block went with turns 1 and 2 only (turn 3: unchanged)
        assert [p["prompt_inline"] for p in started] == [True, True, False]
        last = str(model_server.tool_requests()[-1].body)
        assert last.count("</amux-system-prompt>") == 2
    assert not tagged_pids(tag)


def test_an_acp_conversation_resumed_after_sleep_is_not_sent_the_same_prompt_again(
        openai_provider, session_dirs, model_server):
    """The inline block is sent when the conversation has not seen this prompt: a session
    that slept and resumed its native conversation (session/load) does not get it again."""
    require_runtime("acp")
    prompts.save("team.worker", ONE, 0, origin="api")
    session = services.create_session(Launch.direct(runtime="acp", provider="scripted",
                                                    model="gpt-5.5"),
                                      Prompting(prompt_role="worker"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    model_server.script(Text("first"), Text("second"), Text("third"))
    services.post_message(session.pk, "hello")
    assert run_host(session.pk) == "slept"
    services.post_message(session.pk, "hello again")
    assert run_host(session.pk) == "slept"  # a new process, the same conversation loaded
    prompts.save("team.worker", TWO, 1, origin="api")
    services.post_message(session.pk, "and again")
    assert run_host(session.pk) == "slept"
    started = _started(session.pk)
    assert [p["prompt_inline"] for p in started] == [True, False, True]
    assert [p["prompt_revisions"] for p in started] == [[1], [1], [2]]
    requests = model_server.tool_requests()
    assert str(requests[1].body).count("</amux-system-prompt>") == 1
    last = str(requests[-1].body)
    assert last.count("</amux-system-prompt>") == 2 and TWO in last
