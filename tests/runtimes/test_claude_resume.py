"""Claude Code resumes from the transcript its CLI keeps under the private HOME; a process
that died before the first turn's answer left no conversation, and resuming it says so
before any process starts (the host then hands off to a new conversation)."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from runtimes import errors
from runtimes.base import tagged_pids
from runtimes.claude import transcript_has_conversation
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text
from tests.support.runtimes import adapter_for, assert_no_leak, collect, make_config, run_async
from tests.support.workers import wait_for

pytestmark = pytest.mark.timeout(240)


def test_a_process_killed_before_any_input_is_not_resumable(tmp_path, model_server):
    """Nothing was ever said: there is no conversation, and resuming says so before any
    process starts."""
    require_runtime("claude")

    async def main():
        one = adapter_for("claude", make_config("claude", tmp_path, model_server.base_url))
        try:
            native = await one.start()
            os.kill(one.proc.pid, signal.SIGKILL)
            await asyncio.to_thread(wait_for, lambda: not tagged_pids(one.tag), 10)
        finally:
            await one.close()
        two = adapter_for("claude", make_config("claude", tmp_path, model_server.base_url))
        try:
            with pytest.raises(errors.NativeSessionNotFound,
                               match="no Claude Code conversation"):
                await two.start(resume=native)
        finally:
            await two.close()
        return one, two

    one, two = run_async(main())
    assert two.proc is None  # refused before spawning anything
    assert_no_leak([one.tag])


def test_killed_before_the_first_answer_resumes_only_what_the_transcript_holds(
        tmp_path, model_server):
    """Killed while its first request is with the model: whether the CLI had written the
    prompt to its transcript by then is Claude's own timing (on a busy machine it often
    has). Resuming follows the transcript: no conversation there, refused before any
    process starts; the prompt there, the same conversation resumes."""
    require_runtime("claude")
    model_server.script(Text("never arrives", delay=60))

    async def main():
        one = adapter_for("claude", make_config("claude", tmp_path, model_server.base_url))
        try:
            native = await one.start()
            turn = asyncio.create_task(collect(one, "remember the word pelican"))
            await asyncio.to_thread(model_server.wait_for_requests, 1)
            os.kill(one.proc.pid, signal.SIGKILL)
            await asyncio.to_thread(wait_for, lambda: not tagged_pids(one.tag), 10)
            await turn
        finally:
            await one.close()
        recorded = transcript_has_conversation(one.claude_dir, native)
        two = adapter_for("claude", make_config("claude", tmp_path, model_server.base_url))
        try:
            if recorded:
                assert await two.start(resume=native) == native
            else:
                with pytest.raises(errors.NativeSessionNotFound,
                                   match="no Claude Code conversation"):
                    await two.start(resume=native)
                assert two.proc is None  # refused before spawning anything
        finally:
            await two.close()
        return one, two

    one, two = run_async(main())
    assert_no_leak([one.tag, two.tag])


def test_only_a_transcript_with_a_conversation_counts(tmp_path):
    sid = "0b00bed6-116d-4ac7-aeae-1617c86b71c1"
    project = tmp_path / "projects" / "-some-other-workdir"
    project.mkdir(parents=True)
    assert not transcript_has_conversation(tmp_path, sid)  # no file
    path = project / f"{sid}.jsonl"
    path.write_text(json.dumps({"type": "queue-operation", "operation": "enqueue"}) + "\n"
                    + "not json\n")
    assert not transcript_has_conversation(tmp_path, sid)  # a prompt queued, never recorded
    with path.open("a") as fh:
        fh.write(json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}})
                 + "\n")
    assert transcript_has_conversation(tmp_path, sid)  # found in any project directory
    assert not transcript_has_conversation(tmp_path, "../projects/-some-other-workdir/x")
