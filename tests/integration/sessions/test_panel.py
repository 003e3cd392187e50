"""The Sessions tab: list with lifecycle/runtime/model/usage, the session page, the message
box and interrupt; viewers read but cannot act."""

from __future__ import annotations

import pytest

from sessions import services
from sessions.models import Session, Turn

pytestmark = pytest.mark.django_db


def test_list_and_detail_render_for_a_viewer(client, viewer, openai_provider, session_dirs):
    session = services.create_session(runtime="codex", provider="scripted", model="gpt-5.5",
                                       name="tab test")
    Session.objects.filter(pk=session.pk).update(usage={
        "last": {"input_tokens": 100, "total_tokens": 110},
        "cumulative": {"cumulative_total_tokens": 440}})
    client.force_login(viewer)
    page = client.get("/panel/sessions/").content.decode()
    assert "tab test" in page and "codex" in page and "gpt-5.5" in page
    assert "440 tokens" in page and "created" in page
    detail = client.get(f"/panel/sessions/{session.pk}/").content.decode()
    assert f"/ws/sessions/{session.pk}/timeline" in detail
    assert "message-form" not in detail  # viewers do not get the controls
    response = client.post(f"/panel/sessions/{session.pk}/message/", {"text": "hi"})
    assert response.status_code == 403 and not Turn.objects.exists()


def test_operator_queues_a_message_and_is_told_when_nothing_runs(client, operator,
                                                                 openai_provider,
                                                                 session_dirs):
    session = services.create_session(runtime="codex", provider="scripted", model="gpt-5.5")
    client.force_login(operator)
    assert "message-form" in client.get(f"/panel/sessions/{session.pk}").content.decode()
    response = client.post(f"/panel/sessions/{session.pk}/message", {"text": "do it"})
    assert "Queued as turn 1" in response.content.decode()
    assert Turn.objects.get(session=session).input["text"] == "do it"
    response = client.post(f"/panel/sessions/{session.pk}/interrupt/")
    assert "no turn is in flight" in response.content.decode()
    response = client.post(f"/panel/sessions/{session.pk}/question/nope/", {"q:a": "x"})
    assert "already answered" in response.content.decode() or \
        "no open question" in response.content.decode()
