"""The Sessions tab: list with lifecycle/runtime/model/usage, the session page, the message
box and interrupt; viewers read but cannot act."""

from __future__ import annotations

import pytest

from sessions import services
from sessions.models import Session, Turn
from sessions.new_session import Launch, SessionSpec

pytestmark = pytest.mark.django_db


def test_list_and_detail_render_for_a_viewer(client, viewer, openai_provider, session_dirs):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"),
                                      spec=SessionSpec(name="tab test"))
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
    assert 'id="session-live" class="read-only"' in detail  # nor the answer forms
    response = client.post(f"/panel/sessions/{session.pk}/message/", {"text": "hi"})
    assert response.status_code == 403 and not Turn.objects.exists()


def test_operator_queues_a_message_and_is_told_when_nothing_runs(client, operator,
                                                                 openai_provider,
                                                                 session_dirs):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
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


def test_each_session_shows_the_isolation_backend_it_runs_under_and_why(
        client, viewer, openai_provider, session_dirs, settings):
    from sessions import isolation

    settings.AMUX_ISOLATION = "private-home"
    first = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                  model="gpt-5.5"),
                                    spec=SessionSpec(name="home session"))
    settings.AMUX_ISOLATION = "bwrap"
    services.create_session(Launch.direct(runtime="codex", provider="scripted", model="gpt-5.5"),
                            spec=SessionSpec(name="sandboxed session"))
    client.force_login(viewer)
    page = client.get("/panel/sessions/").content.decode()
    # new sessions' backend with its reason; each row the backend frozen with the session
    assert "New sessions run under the <strong>bwrap</strong>" in page
    assert "AMUX_ISOLATION=bwrap" in page
    cells = [c.split(">", 1)[1].split("<", 1)[0] for c in page.split('class="isolation"')[1:]]
    assert cells == ["bwrap", "private-home"], cells
    detail = client.get(f"/panel/sessions/{first.pk}/").content.decode()
    assert "Runs under the <strong>private-home</strong> isolation backend " \
        "(AMUX_ISOLATION=private-home)" in detail
    settings.AMUX_ISOLATION = ""
    assert isolation.selection_reason().startswith("automatic")


def test_an_ended_turn_shows_its_time_and_the_tokens_it_used(client, viewer, openai_provider,
                                                            session_dirs):
    from runtimes import events as rt
    from sessions import timeline

    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    first, _ = timeline.enqueue_input(session.pk, "one")
    timeline.start_turn(session.pk, first.pk)
    # Codex reports its own cumulative figure: the turn used what it added
    timeline.record(session.pk, first.pk, [
        rt.UsageObserved(last={"input_tokens": 200, "output_tokens": 40},
                         cumulative={"cumulative_total_tokens": 1240}),
        rt.TurnCompleted()])
    quiet, _ = timeline.enqueue_input(session.pk, "two")
    timeline.start_turn(session.pk, quiet.pk)
    timeline.record(session.pk, quiet.pk, [rt.TurnFailed(code="x")])
    client.force_login(viewer)
    page = client.get(f"/panel/sessions/{session.pk}/turns/1/").content.decode()
    assert '<span class="num turn-tokens">1,240</span> tokens in this turn' in page
    assert "took " in page
    page = client.get(f"/panel/sessions/{session.pk}/turns/2").content.decode()
    assert "no token usage reported" in page
    assert client.get(f"/panel/sessions/{session.pk}/turns/9/").status_code == 404
