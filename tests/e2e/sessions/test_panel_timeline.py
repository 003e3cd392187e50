"""The Sessions tab in a real browser against the real ASGI app: timeline events appear
live over the websocket, the message box queues a turn, and after the server drops the
connection the page resumes from its last event with no gap and no duplicate."""

from __future__ import annotations

import pytest

from sessions import services, timeline
from sessions.new_session import Launch, SessionSpec
from tests.support.asgi import AsgiServer
from tests.support.workers import purge_queues, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]


def _seqs(page):
    return page.eval_on_selector_all("#timeline-events > .ev",
                                     "els => els.map(e => parseInt(e.dataset.seq))")


def _wait_seqs(page, n):
    # a locator, not wait_for_function: Playwright evaluates a string there, which the
    # panel's Content-Security-Policy (no eval) refuses
    # (attached: the raw list stays folded behind its toggle)
    page.locator("#timeline-events > .ev").nth(n - 1).wait_for(state="attached",
                                                               timeout=30_000)
    return _seqs(page)


def test_timeline_is_live_and_resumes_after_a_dropped_connection(page, operator,
                                                                 openai_provider,
                                                                 session_dirs, tmp_path):
    purge_queues()
    env = worker_env(session_dirs)
    server = AsgiServer(env, log=tmp_path / "uvicorn.log")
    try:
        session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                        model="gpt-5.5"),
                                          spec=SessionSpec(name="browser test"))
        timeline.note(session.pk, "error", {"code": "before", "message": "stored first"})
        page.goto(f"{server.url}/panel/login/")
        page.fill("#id_username", "operator")
        page.fill("#id_password", "operator-pass-123")
        page.click("button[type=submit]")
        page.wait_for_url("**/panel/**")
        page.goto(f"{server.url}/panel/sessions/")
        page.click("text=browser test")
        assert _wait_seqs(page, 2) == [1, 2]  # snapshot + replay
        # live: stored by another process, pushed to the page
        timeline.note(session.pk, "error", {"code": "live", "message": "pushed"})
        assert _wait_seqs(page, 3) == [1, 2, 3]
        page.fill("#message-text", "hello from the browser")
        page.click("#message-form button[type=submit]")
        page.wait_for_selector("text=Queued as turn 1")
        assert _wait_seqs(page, 4) == [1, 2, 3, 4]
        assert page.text_content(".ev[data-seq='4'] .ev-type") == "turn.queued"
        assert page.inner_text("#timeline-turns > .turn[data-turn='1'] .turn-input") \
            == "hello from the browser"
        # the server goes away; events are stored meanwhile; a server comes back
        port = server.port
        server.stop()
        for i in range(3):
            timeline.note(session.pk, "error", {"code": f"offline{i}", "message": ""})
        server = AsgiServer(env, log=tmp_path / "uvicorn.log", port=port)
        assert _wait_seqs(page, 7) == [1, 2, 3, 4, 5, 6, 7]
        timeline.note(session.pk, "error", {"code": "after", "message": ""})
        assert _wait_seqs(page, 8) == list(range(1, 9))
        page.wait_for_timeout(500)
        assert _seqs(page) == list(range(1, 9))  # nothing twice
    finally:
        server.stop()
