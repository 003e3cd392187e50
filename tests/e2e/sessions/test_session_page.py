"""The session page in a real browser, while a real Codex runs a real turn against the
scripted model: one block for the turn with its input, the failed command shown failed,
the agent's message shown once as Markdown (its HTML as text), the turn's tokens as
numbers, and every raw event behind the toggle."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from sessions import services
from sessions.models import TimelineEvent
from sessions.new_session import Launch, SessionSpec
from tests.support.asgi import AsgiServer
from tests.support.model_server import Text, ToolCall
from tests.support.workers import Worker, purge_queues, wait_for, worker_env

pytestmark = [pytest.mark.xdist_group("processes"), pytest.mark.e2e,
              pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

ANSWER = ("The directory is **missing**: `ls` failed.\n\n"
          "<script>document.title = 'pwned'</script> <img src=x>")


def _log_in(page, url, user="operator"):
    page.goto(f"{url}/panel/login/")
    page.fill("#id_username", user)
    page.fill("#id_password", f"{user}-pass-123")
    page.click("button[type=submit]")
    page.wait_for_url("**/panel/**")


def test_a_turn_reads_as_one_block_with_its_tool_message_and_tokens(
        page, operator, openai_provider, model_server, session_dirs, tmp_path):
    purge_queues()
    env = worker_env(session_dirs)
    server = AsgiServer(env, log=tmp_path / "uvicorn.log")
    worker = Worker("page", env, log=tmp_path / "worker.log")
    try:
        session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                        model="gpt-5.5"),
                                          spec=SessionSpec(name="page test"))
        # the answer's stream pauses after its first piece: the page shows it streaming
        model_server.script(ToolCall("ls /no/such/dir-amux"), Text(ANSWER, stall=3))
        _log_in(page, server.url)
        page.goto(f"{server.url}/panel/sessions/{session.pk}/")
        page.fill("#message-text", "list the missing directory")
        page.click("#message-form button[type=submit]")
        turn = page.locator("#timeline-turns > .turn")
        expect(turn).to_have_count(1, timeout=30_000)
        expect(turn.locator(".turn-input")).to_have_text("list the missing directory")
        streaming = turn.locator(".msg.agent.streaming")
        expect(streaming).to_have_count(1, timeout=120_000)
        expect(streaming).to_contain_text("The dire")
        expect(turn).to_have_attribute("data-state", "completed", timeout=120_000)
        expect(streaming).to_have_count(0)  # the final text took the stream's place

        # the failed command: one collapsible block, marked failed, its output inside
        tool = turn.locator("details.tool")
        expect(tool).to_have_count(1)
        expect(tool).to_have_attribute("data-state", "failed")
        expect(tool.locator("[data-part=status]")).to_contain_text("failed")
        expect(tool.locator("[data-part=status]")).not_to_contain_text("✓")
        expect(tool.locator(".tool-title")).to_contain_text("ls /no/such/dir-amux")
        expect(tool.locator("[data-part=duration]")).to_have_text(re.compile(r"^\d+\.\d s$"))
        tool.locator("summary").click()
        expect(tool.locator("[data-part=output]")).to_contain_text("No such file")

        # the message: once, as Markdown; the agent's HTML stays text
        message = turn.locator(".msg.agent")
        expect(message).to_have_count(1)
        expect(message.locator("strong")).to_have_text("missing")
        expect(message.locator("code")).to_have_text("ls")
        expect(message).to_contain_text("<script>document.title = 'pwned'</script>")
        assert message.locator("script, img").count() == 0
        assert page.title() != "pwned"
        assert page.locator("#timeline-turns").inner_text().count("The directory is") == 1
        deltas = TimelineEvent.objects.filter(session=session, type="message.delta").count()
        assert deltas > 1  # it streamed in pieces, and the pieces became one message

        # time and tokens of the turn, as numbers
        summary = turn.locator(".turn-summary")
        expect(summary).to_contain_text("tokens in this turn", timeout=15_000)
        tokens = summary.locator(".turn-tokens").inner_text()
        assert re.fullmatch(r"[\d,]+", tokens) and int(tokens.replace(",", "")) > 0
        expect(summary).to_contain_text(re.compile(r"took \d+\.\d s"))
        expect(turn.locator("[data-part=usage]")).to_contain_text(
            re.compile(r"session total [\d,]+"))
        assert "tokens: ;" not in turn.inner_text()

        # what the live events built is what a fresh load of the same events builds
        live = page.locator("#timeline-turns").inner_text()
        page.reload()
        expect(summary).to_contain_text("tokens in this turn", timeout=15_000)
        tool.locator("summary").click()
        assert page.locator("#timeline-turns").inner_text() == live

        # the raw events: hidden until asked for, every stored event there once
        raw = page.locator("#timeline-events > .ev")
        expect(raw.first).to_be_hidden()
        page.click("#raw-events summary")
        expect(raw.first).to_be_visible()
        stored = list(TimelineEvent.objects.filter(session=session).order_by("seq")
                      .values_list("seq", flat=True))
        wait_for(lambda: raw.count() == len(stored), timeout=10)
        assert [int(s) for s in raw.evaluate_all("els => els.map(e => e.dataset.seq)")] \
            == stored
        expect(page.locator("#timeline-events > .ev[data-type='message.delta']").first
               ).to_contain_text("message.delta")
    finally:
        worker.stop()
        server.stop()


def test_permission_requests_and_questions_are_answered_in_their_turn(
        page, operator, viewer, openai_provider, session_dirs, tmp_path):
    """The forms arrive live inside their turn's block and work there; the answer, once
    the timeline records it, takes the form's place."""
    from runtimes import events as rt
    from sessions import timeline

    purge_queues()
    server = AsgiServer(worker_env(session_dirs), log=tmp_path / "uvicorn.log")
    try:
        session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                        model="gpt-5.5"),
                                          spec=SessionSpec(name="asks"))
        turn, _ = timeline.enqueue_input(session.pk, "deploy it")
        timeline.start_turn(session.pk, turn.pk)
        _log_in(page, server.url)
        page.goto(f"{server.url}/panel/sessions/{session.pk}/")
        block = page.locator("#timeline-turns > .turn[data-turn='1']")
        expect(block).to_have_attribute("data-state", "running")
        timeline.record(session.pk, turn.pk, [rt.PermissionRequested(
            request_id="p1", title="rm -rf build", options=(
                rt.PermissionOption("allow", "Allow once", "allow_once"),
                rt.PermissionOption("deny", "Deny", "reject_once")))])
        block.locator("form.permission button[value=allow]").click()
        expect(block.locator(".request.permission")).to_contain_text("Answered.")
        timeline.record(session.pk, turn.pk, [rt.PermissionAnswered(request_id="p1",
                                                                     option_id="allow")])
        expect(block.locator(".request.permission")).to_have_text("Answered: allow")
        timeline.record(session.pk, turn.pk, [rt.QuestionAsked(
            request_id="q1", questions=(rt.Question(text="Which region?", id="region"),))])
        question = block.locator(".request.question")
        question.locator("input[name='q:region']").fill("eu-west")
        question.locator("button[type=submit]").click()
        expect(question).to_contain_text("Answered.")
        assert page.locator("#timeline-turns > .turn").count() == 1
        # a viewer sees an open question, but no form to answer it
        timeline.record(session.pk, turn.pk, [rt.QuestionAsked(
            request_id="q2", questions=(rt.Question(text="Which zone?", id="zone"),))])
        page.click("text=Log out")
        _log_in(page, server.url, "viewer")
        page.goto(f"{server.url}/panel/sessions/{session.pk}/")
        open_question = page.locator(".request.question[data-key='request:q2']")
        expect(open_question.get_by_text("Which zone?")).to_be_visible()
        expect(open_question.locator("input")).to_be_hidden()
    finally:
        server.stop()
