"""The runtime controls and image input with the real runtimes against the scripted model
server, through the REST-facing services and the session host: a model switch in place
(Codex, codex-acp) or by a handoff restart (Pi), clear, compact, images only where the agent
declared it takes them."""

from __future__ import annotations

import json
import threading

import pytest

from sessions import services
from sessions.models import Session, TimelineEvent
from sessions.new_session import Launch
from tests.integration.sessions.test_controls_api import image_b64
from tests.runtimes.conftest import require_runtime
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]


class Hosted:
    """A session served by a host thread in this process until ``stop()`` sleeps it."""

    def __init__(self, runtime, model):
        require_runtime(runtime)
        self.session = services.create_session(Launch.direct(runtime=runtime, provider="scripted",
                                                             model=model))
        Session.objects.filter(pk=self.session.pk).update(idle_timeout_s=600)
        self.pk = self.session.pk
        self.result = {}
        self.thread = None

    def say(self, text=None, content=None):
        turn = services.post_message(self.pk, text, content=content)
        if self.thread is None:
            self.thread = threading.Thread(
                target=lambda: self.result.setdefault("outcome", run_host(self.pk)))
            self.thread.start()
        self.wait_ended(turn.seq)
        return turn

    def wait_ended(self, seq):
        wait_for(lambda: TimelineEvent.objects.filter(
            session_id=self.pk, turn__seq=seq,
            type__in=["turn.completed", "turn.failed", "turn.cancelled"]).exists(), 180)
        return self.events(turn__seq=seq)

    def wait_event(self, type_, **payload):
        return wait_for(lambda: next((e for e in self.events(type=type_)
                                      if all(e.payload.get(k) == v
                                             for k, v in payload.items())), None), 120)

    def events(self, **filters):
        return list(TimelineEvent.objects.filter(session_id=self.pk, **filters)
                    .order_by("seq"))

    def refresh(self):
        return Session.objects.get(pk=self.pk)

    def stop(self):
        if self.thread is not None:
            wait_for(lambda: not services.timeline.turn_in_flight(self.pk), 120)
            services.sleep(self.pk)
            self.thread.join(120)
            assert self.result.get("outcome") == "slept"


@pytest.fixture
def hosted():
    made = []

    def make(runtime, model):
        h = Hosted(runtime, model)
        made.append(h)
        return h

    yield make
    for h in made:
        h.stop()


def _model_requests(server):
    return [r for r in server.tool_requests()]


def _terminal(events):
    return [e.type for e in events if e.type.startswith("turn.") and e.type not in
            ("turn.queued", "turn.started")]


@pytest.mark.parametrize("runtime", ["codex", "acp"])
def test_an_idle_model_switch_applies_in_place_on_the_same_conversation(
        runtime, hosted, openai_provider, session_dirs, model_server):
    h = hosted(runtime, "gpt-5.5")
    h.say("one")
    native, tag = h.refresh().native_ref, h.refresh().runtime_tag
    before = len(_model_requests(model_server))
    request_id = services.set_model(h.pk, "gpt-5.4", "high")
    changed = h.wait_event("session.model_changed", request_id=request_id)
    assert changed.payload["how"] == "hot"
    assert changed.payload["previous"]["model"] == "gpt-5.5"
    assert _terminal(h.wait_ended(h.say("two").seq)) == ["turn.completed"]
    after = _model_requests(model_server)[before:]
    assert after and all(r.body["model"] == "gpt-5.4" for r in after)
    assert after[0].body.get("reasoning", {}).get("effort") == "high"
    assert all(r.body["model"] == "gpt-5.5" for r in _model_requests(model_server)[:before])
    session = h.refresh()
    assert (session.native_ref, session.runtime_tag) == (native, tag)  # no restart
    assert (session.snapshot["model"], session.snapshot["effort"]) == ("gpt-5.4", "high")
    assert not h.events(type="session.restarted")
    assert "one" in json.dumps(after[0].body)  # same conversation


def test_an_acp_model_the_agent_does_not_advertise_is_an_error_and_changes_nothing(
        hosted, openai_provider, session_dirs, model_server):
    h = hosted("acp", "gpt-5.5")
    h.say("one")
    tag = h.refresh().runtime_tag
    request_id = services.set_model(h.pk, "no-such-model")
    error = h.wait_event("error", request_id=request_id)
    assert error.payload["code"] == "config_rejected" and "no-such-model" in \
        error.payload["message"]
    request_id = services.set_model(h.pk, "gpt-5.4", "ultra")  # not a reasoning level
    assert h.wait_event("error", request_id=request_id).payload["code"] == "config_rejected"
    before = len(_model_requests(model_server))
    h.say("two")
    assert all(r.body["model"] == "gpt-5.5" for r in _model_requests(model_server)[before:])
    session = h.refresh()
    assert session.snapshot["model"] == "gpt-5.5" and session.runtime_tag == tag
    assert not h.events(type="session.model_changed")


def test_pi_switches_by_a_handoff_restart_that_resumes_the_conversation(
        hosted, openai_provider, session_dirs, model_server):
    h = hosted("pi", "scripted-model")
    h.say("remember the word kumquat")
    native, tag = h.refresh().native_ref, h.refresh().runtime_tag
    request_id = services.set_model(h.pk, "other-model")
    assert h.wait_event("session.model_changed", request_id=request_id).payload["how"] == \
        "restart"
    before = len(_model_requests(model_server))
    h.say("which word?")
    after = _model_requests(model_server)[before:]
    assert after and all(r.body["model"] == "other-model" for r in after)
    assert "kumquat" in json.dumps(after[0].body)  # the native conversation was resumed
    session = h.refresh()
    assert session.native_ref == native and session.runtime_tag != tag
    assert [e.payload["reason"] for e in h.events(type="session.restarted")] == [
        "model_changed"]


@pytest.mark.parametrize("runtime", ["codex", "acp", "pi"])
def test_clear_starts_a_new_native_conversation_and_keeps_the_session(
        runtime, hosted, openai_provider, session_dirs, model_server):
    h = hosted(runtime, "gpt-5.5")
    h.say("remember the word kumquat")
    native, tag = h.refresh().native_ref, h.refresh().runtime_tag
    request_id = services.clear(h.pk)
    assert h.wait_event("session.cleared", request_id=request_id).payload["how"] == \
        "in_place"
    before = len(_model_requests(model_server))
    h.say("which word?")
    after = _model_requests(model_server)[before:]
    assert after and "kumquat" not in json.dumps(after[0].body)
    session = h.refresh()
    assert session.native_ref not in ("", native)
    assert session.runtime_tag == tag and session.workdir == h.session.workdir
    assert session.pk == h.pk and session.turns.count() == 2


@pytest.mark.parametrize("runtime", ["codex", "acp", "pi"])
def test_compact_runs_as_a_correlated_turn(runtime, hosted, openai_provider, session_dirs,
                                           model_server):
    h = hosted(runtime, "gpt-5.5")
    h.say("a first message to compact")
    if runtime == "acp":  # what codex-acp advertised, as the host kept it
        wait_for(lambda: "compact" in (h.refresh().runtime_facts.get("commands") or []), 60)
    before = len(model_server.requests)
    turn = services.compact(h.pk)
    events = h.wait_ended(turn.seq)
    assert _terminal(events) == ["turn.completed"], [(e.type, e.payload) for e in events]
    assert events[0].type == "turn.queued" and events[0].payload["command"] == "compact"
    assert len(model_server.requests) > before  # the runtime summarised with the model
    assert _terminal(h.wait_ended(h.say("after").seq)) == ["turn.completed"]


@pytest.mark.parametrize("runtime", ["codex", "acp"])
def test_an_image_reaches_the_model_in_order(runtime, hosted, openai_provider, session_dirs,
                                             model_server):
    h = hosted(runtime, "gpt-5.5")
    png = image_b64("PNG", (5, 4))
    h.say(content=[{"type": "text", "text": "before the image"},
                   {"type": "image", "mime": "image/png", "data": png},
                   {"type": "text", "text": "after the image"}])
    if runtime == "acp":  # codex-acp declares promptCapabilities.image = true
        assert h.refresh().runtime_facts["image_input"] is True
    body = json.dumps(_model_requests(model_server)[-1].body)
    assert png in body
    assert body.index("before the image") < body.index(png) < body.index("after the image")
    assert not h.events(type="error")
    assert png not in json.dumps([e.payload for e in h.events()])
