"""The session host in this process, with the real Codex app-server, Pi and Claude Code
against the scripted model server: turns in order in one native conversation, interrupts and
permission answers through Redis, watchdogs, idle sleep and wake, usage, no leaked
processes."""

from __future__ import annotations

import threading

import pytest

from runtimes.base import tagged_pids
from sessions import services, timeline
from sessions.core import turns
from sessions.models import Session, TimelineEvent, Turn
from sessions.new_session import Launch, SessionSpec
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]


def _session(runtime="codex", model="gpt-5.5", spec=None, **choices):
    session = services.create_session(Launch.direct(runtime=runtime, provider="scripted",
                                                    model=model, **choices),
                                      spec=spec)
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    return Session.objects.get(pk=session.pk)


def _terminals(session_id):
    return list(TimelineEvent.objects.filter(
        session_id=session_id, type__in=["turn.completed", "turn.failed", "turn.cancelled"])
        .values_list("turn__seq", "type"))


def _host_in_thread(session_id):
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("outcome",
                                                                run_host(session_id)))
    thread.start()
    return thread, result


@pytest.mark.parametrize("runtime,model", [("codex", "gpt-5.5"), ("pi", "scripted-model")])
def test_three_messages_one_conversation_then_idle_sleep_and_wake(runtime, model,
                                                                  openai_provider,
                                                                  session_dirs,
                                                                  model_server):
    session = _session(runtime, model)
    model_server.script(ToolCall("echo hello > out.txt"), Text("one"), Text("two"),
                        Text("three"), Text("four"))
    for text in ("write out.txt", "second", "third"):
        services.post_message(session.pk, text)
    assert run_host(session.pk) == "slept"
    session.refresh_from_db()
    assert session.lifecycle == "sleeping" and session.sleep_reason == "idle_timeout"
    assert session.native_ref and not session.lease_owner
    assert (session_dirs / "work" / f"session-{session.pk}" / "out.txt").read_text() == \
        "hello\n"
    assert _terminals(session.pk) == [(1, "turn.completed"), (2, "turn.completed"),
                                      (3, "turn.completed")]
    texts = [e.payload["text"] for e in TimelineEvent.objects.filter(
        session=session, type="message.completed").order_by("seq")]
    assert texts == ["one", "two", "three"]
    seqs = list(TimelineEvent.objects.filter(session=session).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    usage = session.usage
    assert usage["last"]["input_tokens"] == 100
    assert usage["cumulative"]["cumulative_input_tokens"] == 400  # 4 model calls, as reported
    native = session.native_ref
    # wake: a new input, a new host, the same native conversation
    services.post_message(session.pk, "fourth")
    assert run_host(session.pk) == "slept"
    session.refresh_from_db()
    assert session.native_ref == native
    assert _terminals(session.pk)[-1] == (4, "turn.completed")
    assert "write out.txt" in str(model_server.tool_requests()[-1].body)
    assert not tagged_pids(session.runtime_tag or "none")


def test_claude_session_sleeps_and_wakes_in_the_same_conversation(anthropic_provider,
                                                                   session_dirs, model_server):
    session = _session("claude", "claude-sonnet-4-5")
    model_server.script(Text("noted"), Text("a pelican"))
    services.post_message(session.pk, "remember the word pelican")
    assert run_host(session.pk) == "slept"
    native = Session.objects.get(pk=session.pk).native_ref
    assert native
    services.post_message(session.pk, "what was the word?")
    assert run_host(session.pk) == "slept"  # a new process resumes the native session
    session.refresh_from_db()
    assert session.native_ref == native
    assert _terminals(session.pk) == [(1, "turn.completed"), (2, "turn.completed")]
    assert not TimelineEvent.objects.filter(session=session, type="error").exists()  # no handoff
    last_request = str(model_server.tool_requests()[-1].body)
    assert "pelican" in last_request and "what was the word?" in last_request
    assert not tagged_pids(session.runtime_tag or "none")


def test_interrupt_through_redis_gives_one_cancelled_terminal(openai_provider, session_dirs,
                                                              model_server):
    session = _session()
    model_server.script(Text("slow", delay=30))
    services.post_message(session.pk, "take your time")
    thread, result = _host_in_thread(session.pk)
    try:
        model_server.wait_for_requests(1, timeout=60)
        wait_for(lambda: timeline.turn_in_flight(session.pk))
        services.interrupt(session.pk)
        wait_for(lambda: _terminals(session.pk), timeout=30)
        with pytest.raises(services.Conflict):
            services.interrupt(session.pk)  # nothing in flight any more
    finally:
        thread.join(60)
    assert result["outcome"] == "slept"
    assert _terminals(session.pk) == [(1, "turn.cancelled")]
    assert Turn.objects.get(session=session, seq=1).state == "cancelled"


def test_permission_answered_once_from_the_api(openai_provider, session_dirs, model_server):
    session = _session(permission_mode="ask")
    model_server.script(ToolCall("echo ok > allowed.txt",
                                 extra={"sandbox_permissions": "require_escalated",
                                        "justification": "outside the sandbox"}),
                        Text("done"))
    services.post_message(session.pk, "write allowed.txt")
    thread, result = _host_in_thread(session.pk)
    try:
        pending = wait_for(lambda: timeline.pending_requests(session.pk), timeout=60)
        (request_id, request), = pending.items()
        allow = next(o for o in request["payload"]["options"] if o["kind"] == "allow_once")
        services.answer_permission(session.pk, request_id, allow["id"])
        with pytest.raises(services.Conflict):
            services.answer_permission(session.pk, request_id, allow["id"])
        wait_for(lambda: _terminals(session.pk), timeout=60)
    finally:
        thread.join(60)
    assert _terminals(session.pk) == [(1, "turn.completed")]
    assert TimelineEvent.objects.filter(session=session, type="permission.answered").count() == 1
    assert (session_dirs / "work" / f"session-{session.pk}" / "allowed.txt").exists()


def test_repeated_tool_call_loop_fails_the_turn(openai_provider, session_dirs, model_server):
    session = _session(spec=SessionSpec(watchdog={"repeat_tool_call_limit": 3}))
    model_server.script(*[ToolCall("echo again >> loop.txt") for _ in range(10)])
    services.post_message(session.pk, "loop")
    assert run_host(session.pk) == "slept"
    terminal = TimelineEvent.objects.get(session=session, type="turn.failed")
    assert terminal.payload["code"] == "repeat_tool_loop"
    assert Turn.objects.get(session=session).error_code == "repeat_tool_loop"


def test_a_second_host_does_not_take_a_live_lease(openai_provider, session_dirs):
    from sessions.host import acquire_lease

    session = _session()
    assert acquire_lease(session.pk, "host-a", "here")
    services.post_message(session.pk, "work for host-a")
    assert run_host(session.pk) == "busy"
    session.refresh_from_db()
    assert session.lease_owner == "host-a"


def test_a_host_task_with_nothing_to_do_leaves_the_session_unpinned(openai_provider,
                                                                    session_dirs):
    """A stale host task (a duplicate wake, or one left for long in a host's own queue) for
    a session with no input takes no lease: a session that never ran stays free to start on
    whichever machine has room, instead of waiting for this one."""
    session = _session()
    assert run_host(session.pk) == "nothing_to_do"
    session.refresh_from_db()
    assert (session.lease_host, session.lease_owner, session.lease_expires_at) == ("", "", None)
    assert session.lifecycle == "created"


def test_an_interrupted_turn_cut_by_a_dead_host_is_not_continued(openai_provider,
                                                                  session_dirs):
    """Someone interrupted the turn and its host died before reading the request: the
    interrupt is kept on the turn, so the sweep ends it cancelled and continues nothing."""
    session = _session()
    turn, _ = timeline.enqueue_input(session.pk, "fix the parser")
    timeline.start_turn(session.pk, turn.pk)  # a host took it ...
    services.interrupt(session.pk, turn_id=turn.pk)  # ... and died before reading this
    assert Turn.objects.get(pk=turn.pk).input["interrupt_requested"] is True
    assert timeline.reconcile_running(session.pk) == 1
    assert Turn.objects.get(pk=turn.pk).state == "cancelled"
    assert not Turn.objects.filter(session=session, state="queued").exists()
    with pytest.raises(services.Conflict):  # only the turn named is interrupted
        other, _ = timeline.enqueue_input(session.pk, "next")
        timeline.start_turn(session.pk, other.pk)
        services.interrupt(session.pk, turn_id=turn.pk)


def test_a_turn_cut_by_a_dead_host_is_continued_at_most_twice(openai_provider, session_dirs):
    """A host's death is amux's fault: its running turn ends once, cancelled, and the same
    input comes back as a continuation; a continuation cut twice more ends failed."""
    session = _session()
    turn, _ = timeline.enqueue_input(session.pk, "fix the parser")
    for expected in ("cancelled", "cancelled", "failed"):
        Turn.objects.filter(pk=turn.pk).update(state="running")  # a host took it, then died
        assert timeline.reconcile_running(session.pk) == 1
        assert Turn.objects.get(pk=turn.pk).state == expected
        assert TimelineEvent.objects.filter(
            turn=turn, type__in=list(turns.TERMINALS)).count() == 1
        queued = Turn.objects.filter(session=session, state="queued").first()
        if expected == "failed":
            assert queued is None
            break
        assert queued.key == turn.key + turns.RESUME_SUFFIX
        assert queued.input["text"].startswith(turns.RESUME_TEXT)
        assert queued.input["text"].endswith("fix the parser")
        assert queued.input["text"].count(turns.RESUME_TEXT) == 1
        assert timeline.reconcile_running(session.pk) == 0  # nothing running: idempotent
        turn = queued


@pytest.mark.parametrize("runtime,model,saved", [
    ("codex", "gpt-5.5", "home/.codex/sessions"),  # Codex's rollouts of the thread
    ("pi", "scripted-model", "pi-sessions"),         # Pi's session file
])
def test_a_lost_native_conversation_is_replaced_and_told_what_was_said(
        runtime, model, saved, openai_provider, session_dirs, model_server):
    session = _session(runtime, model)
    model_server.script(Text("noted the pelican"), Text("noted the heron"), Text("a pelican"))
    services.post_message(session.pk, "remember the word pelican")
    services.post_message(session.pk, "and the word heron")
    assert run_host(session.pk) == "slept"
    lost = Session.objects.get(pk=session.pk).native_ref
    # the runtime's own record of the conversation is gone while the session sleeps
    kept = services.state_dir(Session.objects.get(pk=session.pk)) / saved
    if services.runtime_config(session, launch=False).shared_app_server:
        # a thread of a shared app-server (private-home): its rollout is in the shared home
        files = list((session_dirs / "runtime" / "codex-shared").rglob(f"*{lost}*.jsonl"))
    else:
        files = [p for p in kept.rglob("*") if p.is_file()]
    assert files
    for path in files:
        path.unlink()
    services.post_message(session.pk, "what was the first word?")
    assert run_host(session.pk) == "slept"
    session.refresh_from_db()
    assert session.native_ref and session.native_ref != lost  # a new native conversation
    assert _terminals(session.pk) == [(1, "turn.completed"), (2, "turn.completed"),
                                      (3, "turn.completed")]
    [note] = TimelineEvent.objects.filter(session=session, type="error")
    assert note.payload["code"] == "native_session_not_found" and note.payload["handoff"]
    assert note.payload["handoff_chars"] > 0
    # the new conversation's first request carried the old one, in order, from amux's record
    last = str(model_server.tool_requests()[-1].body)
    said = [last.index(s) for s in ("remember the word pelican", "noted the pelican",
                                    "and the word heron", "noted the heron",
                                    "what was the first word?")]
    assert said == sorted(said) and "could not be resumed" in last
    # the timeline keeps the input as it was sent
    third = Turn.objects.get(session=session, seq=3)
    assert third.input["text"] == "what was the first word?"
    assert not tagged_pids(session.runtime_tag or "none")
