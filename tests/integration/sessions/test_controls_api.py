"""REST for message content parts and the runtime controls (model, clear, compact): what is
refused says which part or why, and nothing is written; what is accepted is kept in order,
durably, with images shown on the timeline as metadata only."""

from __future__ import annotations

import base64
import io

import pytest

from sessions import timeline
from sessions.models import Session, TimelineEvent, Turn

pytestmark = pytest.mark.django_db


def image_b64(fmt="PNG", size=(4, 3)):
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, (200, 10, 10)).save(buf, fmt)
    return base64.b64encode(buf.getvalue()).decode()


def _session(api, runtime="codex", model="gpt-5.5"):
    response = api.post("/api/v1/sessions", {"runtime": runtime, "provider": "scripted",
                                             "model": model}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _post(api, sid, content):
    return api.post(f"/api/v1/sessions/{sid}/messages", {"content": content}, format="json")


def test_content_parts_are_kept_in_order_and_the_timeline_shows_only_metadata(
        api, openai_provider, session_dirs):
    sid = _session(api)
    png, gif = image_b64("PNG", (4, 3)), image_b64("GIF", (2, 2))
    response = _post(api, sid, [{"type": "image", "mime": "image/png", "data": png},
                                {"type": "text", "text": "what is in these?"},
                                {"type": "image", "mime": "image/gif", "data": gif}])
    assert response.status_code == 202, response.content
    turn = Turn.objects.get(session_id=sid, seq=response.json()["turn"])
    parts = turn.input["parts"]
    assert [p["type"] for p in parts] == ["image", "text", "image"]
    assert parts[0]["data"] == png and parts[2]["mime_type"] == "image/gif"
    assert turn.input["text"] == "what is in these?"
    queued = TimelineEvent.objects.get(session_id=sid, type="turn.queued")
    assert queued.payload["images"] == 2
    assert queued.payload["content"][0] == {"type": "image", "mime": "image/png",
                                            "size": len(base64.b64decode(png)),
                                            "width": 4, "height": 3}
    assert png not in str(timeline.events_after(sid)) and gif not in str(queued.payload)


@pytest.mark.parametrize("part, needle", [
    ({"type": "image", "mime": "image/bmp", "data": "AAAA"}, "mime must be one of"),
    # an object where the MIME type goes was a TypeError (500), found by the API fuzz
    ({"type": "image", "mime": {}, "data": "AAAA"}, "mime must be one of"),
    ({"type": "image", "mime": "image/png", "data": "not base64!"}, "not valid base64"),
    ({"type": "image", "mime": "image/png", "data": base64.b64encode(b"garbage").decode()},
     "does not decode"),
    ({"type": "image", "mime": "image/jpeg", "data": None}, "non-empty base64"),
    ({"type": "text", "text": "   "}, "non-blank"),
    ({"type": "video"}, "type must be"),
])
def test_a_bad_part_is_refused_naming_its_index_and_nothing_is_queued(
        api, openai_provider, session_dirs, part, needle):
    sid = _session(api)
    response = _post(api, sid, [{"type": "text", "text": "look"}, part])
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert list(error["fields"]) == ["content.1"] and needle in error["message"]
    assert not Turn.objects.filter(session_id=sid).exists()


def test_declared_format_size_and_pixel_limits(api, openai_provider, session_dirs,
                                               monkeypatch):
    from sessions import content

    sid = _session(api)
    response = _post(api, sid, [{"type": "image", "mime": "image/jpeg",
                                 "data": image_b64("PNG")}])
    assert response.status_code == 400 and "not the declared JPEG" in \
        response.json()["error"]["message"]
    monkeypatch.setattr(content, "MAX_SIDE", 3)
    response = _post(api, sid, [{"type": "image", "mime": "image/png",
                                 "data": image_b64("PNG", (4, 3))}])
    assert response.status_code == 400 and "exceeds the limit" in \
        response.json()["error"]["message"]
    monkeypatch.setattr(content, "MAX_IMAGE_BYTES", 20)
    response = _post(api, sid, [{"type": "image", "mime": "image/png",
                                 "data": image_b64("PNG")}])
    assert response.status_code == 400 and "larger than" in response.json()["error"]["message"]
    both = api.post(f"/api/v1/sessions/{sid}/messages",
                    {"text": "x", "content": [{"type": "text", "text": "y"}]}, format="json")
    assert both.status_code == 400 and "text" in both.json()["error"]["fields"]
    assert not Turn.objects.filter(session_id=sid).exists()


def test_an_agent_known_not_to_take_images_refuses_them_at_post_time(
        api, openai_provider, session_dirs):
    sid = _session(api, runtime="acp")
    png = image_b64()
    ok = _post(api, sid, [{"type": "text", "text": "a"},
                          {"type": "image", "mime": "image/png", "data": png}])
    assert ok.status_code == 202  # not known before the agent answered initialize
    # what the host keeps once the agent declared no promptCapabilities.image
    Session.objects.filter(pk=sid).update(runtime_facts={"image_input": False})
    refused = _post(api, sid, [{"type": "text", "text": "a"},
                               {"type": "image", "mime": "image/png", "data": png}])
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "images_unsupported"
    assert list(refused.json()["error"]["fields"]) == ["content.1"]
    assert Turn.objects.filter(session_id=sid).count() == 1


def test_model_and_clear_without_a_host_are_recorded_for_the_next_start(
        api, openai_provider, session_dirs):
    sid = _session(api)
    Session.objects.filter(pk=sid).update(native_ref="thread-1")
    response = api.post(f"/api/v1/sessions/{sid}/model", {"model": "gpt-5.4",
                                                          "effort": "high"}, format="json")
    assert response.status_code == 202, response.content
    session = Session.objects.get(pk=sid)
    assert session.model == "gpt-5.4"
    assert (session.snapshot["model"], session.snapshot["effort"]) == ("gpt-5.4", "high")
    assert session.native_ref == "thread-1"  # the conversation is resumed, not replaced
    changed = TimelineEvent.objects.get(session_id=sid, type="session.model_changed")
    assert changed.payload["previous"] == {"model": "gpt-5.5", "effort": None}
    assert changed.payload["request_id"] == response.json()["request_id"]
    assert api.post(f"/api/v1/sessions/{sid}/model", {"model": " "},
                    format="json").status_code == 400
    # without an effort the session's effort stays
    response = api.post(f"/api/v1/sessions/{sid}/model", {"model": "gpt-5.5"}, format="json")
    assert response.status_code == 202 and response.json()["effort"] == "high"
    assert Session.objects.get(pk=sid).snapshot["effort"] == "high"
    response = api.post(f"/api/v1/sessions/{sid}/clear")
    assert response.status_code == 202
    assert Session.objects.get(pk=sid).native_ref == ""
    assert TimelineEvent.objects.filter(session_id=sid, type="session.cleared").count() == 1


def test_controls_are_refused_while_a_turn_runs(api, openai_provider, session_dirs):
    sid = _session(api)
    turn = api.post(f"/api/v1/sessions/{sid}/messages", {"text": "hi"}, format="json")
    timeline.start_turn(sid, Turn.objects.get(session_id=sid, seq=turn.json()["turn"]).pk)
    for path, body in (("model", {"model": "gpt-5.4"}), ("clear", None), ("compact", None)):
        response = api.post(f"/api/v1/sessions/{sid}/{path}", body, format="json")
        assert response.status_code == 409 and response.json()["error"]["code"] == "busy"
    assert Session.objects.get(pk=sid).model == "gpt-5.5"


def test_compact_is_refused_naming_why(api, openai_provider, session_dirs):
    acp = _session(api, runtime="acp")
    response = api.post(f"/api/v1/sessions/{acp}/compact")
    assert response.status_code == 409 and "not advertised" in \
        response.json()["error"]["message"]
    Session.objects.filter(pk=acp).update(runtime_facts={"commands": ["review", "init"]})
    response = api.post(f"/api/v1/sessions/{acp}/compact")
    assert response.status_code == 409 and "does not advertise a compact" in \
        response.json()["error"]["message"]
    Session.objects.filter(pk=acp).update(runtime_facts={"commands": ["compact"]})
    response = api.post(f"/api/v1/sessions/{acp}/compact")
    assert response.status_code == 202
    turn = Turn.objects.get(session_id=acp, seq=response.json()["turn"])
    assert turn.input["command"] == "compact"
