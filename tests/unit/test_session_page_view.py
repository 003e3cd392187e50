"""How timeline events show on the session page (sessions/timeline_view.py) and how an
agent's Markdown becomes HTML (amux_common/markdown.py): the agent is untrusted."""

import pytest

from amux_common.markdown import to_html
from sessions.fanout import render_event
from sessions.timeline_view import key_of, place_of, usage_figures


def _event(type_, payload=None, turn=1, seq=5):
    return {"seq": seq, "turn": turn, "type": type_, "payload": payload or {},
            "at": "2026-01-01T00:00:00+00:00"}


@pytest.mark.parametrize("text, absent", [
    ("<script>alert(1)</script>", "<script"),
    ("<img src=x onerror=alert(1)>", "<img"),
    ("[x](javascript:alert(1))", 'href="javascript'),
    ("![tracker](https://evil.example/p.png)", "<img"),
    ('<a href="https://x" onclick="f()">x</a>', '<a href='),
])
def test_agent_markdown_cannot_inject_markup(text, absent):
    assert absent not in to_html(text)


def test_agent_markdown_renders_and_links_open_safely():
    html = to_html("**bold** `code`\n\n- one\n\n[docs](https://example.com/a)")
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html
    assert "<li>one</li>" in html
    assert 'rel="nofollow noopener noreferrer"' in html


@pytest.mark.parametrize("type_, payload, place, key", [
    ("turn.queued", {"text": "hi"}, "turn", ""),
    ("turn.started", {}, "patch", "turn"),
    ("message.delta", {"text": "a", "item_id": "m1"}, "stream", "m1"),
    ("reasoning", {"text": "a"}, "stream", ""),
    ("message.completed", {"text": "a", "item_id": "m1"}, "final", "m1"),
    ("tool.started", {"call_id": "c1"}, "item", "tool:c1"),
    ("tool.completed", {"call_id": "c1", "status": "failed"}, "patch", "tool:c1"),
    ("permission.requested", {"request_id": "r1"}, "item", "request:r1"),
    ("question.answered", {"request_id": "r1"}, "patch", "request:r1"),
    ("usage.observed", {}, "patch", "turn"),
    ("turn.failed", {"code": "x"}, "patch", "turn"),
    ("error", {"code": "x"}, "item", ""),
])
def test_each_event_says_where_it_goes(type_, payload, place, key):
    event = _event(type_, payload)
    assert (place_of(event), key_of(event)) == (place, key)


def test_an_event_outside_any_turn_is_a_note_but_an_answer_still_finds_its_question():
    assert place_of(_event("session.cleared", turn=None)) == "note"
    assert place_of(_event("question.answered", {"request_id": "r"}, turn=None)) == "patch"


def test_usage_shows_only_the_figures_reported_as_numbers():
    assert usage_figures({"cumulative": {"cumulative_total_tokens": 240}}) == [
        ("session total", "240")]
    figures = dict(usage_figures({"last": {"input_tokens": 1200, "output_tokens": 40,
                                           "cached_input_tokens": 0},
                                  "context_used": 1200, "context_window": 200000}))
    assert figures == {"last call in": "1,200", "last call out": "40",
                       "context": "1,200 / 200,000"}
    assert usage_figures({}) == []


def test_a_failed_tool_is_shown_failed_never_ticked():
    html = render_event(_event("tool.completed", {"call_id": "c", "status": "failed",
                                                  "exit_code": 2, "output": "boom"}), 1)
    assert "✗ failed" in html and "(exit 2)" in html and "✓" not in html
    assert 'data-state="failed"' in html


def test_the_completed_message_is_markdown_and_deltas_are_text():
    done = render_event(_event("message.completed", {"text": "**hi** <b>x</b>"}), 1)
    assert "<strong>hi</strong>" in done and "&lt;b&gt;x&lt;/b&gt;" in done
    delta = render_event(_event("message.delta", {"text": "<b>x"}), 1)
    assert "&lt;b&gt;x" in delta and "<b>x" not in delta


def test_a_huge_payload_is_cut_in_the_raw_view():
    html = render_event(_event("tool.completed", {"call_id": "c", "output": "y" * 50000}), 1)
    assert "more characters" in html and len(html) < 40000


def test_an_event_without_a_turn_names_none():
    html = render_event(_event("usage.observed", {"context_used": 5}, turn=None), 1)
    assert 'data-turn=""' in html and "None" not in html
