"""The model gateway's rules (sessions/gateway_rules.py): routes, the upstream URL, which
headers cross, the error shapes, and the usage read from a provider's answer."""

import json

import pytest

from sessions import gateway_rules as rules


def test_routes_and_methods():
    assert rules.route_of("/gateway/model/openai/responses", "POST") == rules.Route(
        "openai", "responses", "generate")
    assert rules.route_of("/gateway/model/openai/chat/completions/", "POST").kind == "generate"
    assert rules.route_of("/gateway/model/openai/models", "GET").kind == "list"
    assert rules.route_of("/gateway/model/anthropic/v1/messages", "POST").kind == "generate"
    assert rules.route_of("/gateway/model/anthropic/v1/messages/count_tokens",
                          "POST").kind == "count"
    for path in ("/gateway/model/openai/completions", "/gateway/model/azure/responses",
                 "/gateway/model/anthropic/messages", "/gateway/model/", "/gateway/git/x"):
        with pytest.raises(rules.NotFound):
            rules.route_of(path, "POST")
    with pytest.raises(rules.WrongMethod) as wrong:
        rules.route_of("/gateway/model/openai/responses", "GET")
    assert wrong.value.allowed == "POST"


def test_upstream_url_keeps_the_providers_base_and_query():
    openai = rules.route_of("/gateway/model/openai/responses", "POST")
    assert rules.upstream_url("https://api.example.com/v1/", openai, "") == \
        "https://api.example.com/v1/responses"
    anthropic = rules.route_of("/gateway/model/anthropic/v1/messages", "POST")
    assert rules.upstream_url("https://api.anthropic.com", anthropic, "beta=true") == \
        "https://api.anthropic.com/v1/messages?beta=true"
    assert rules.upstream_url("https://proxy.example/anthropic/v1", anthropic, "") == \
        "https://proxy.example/anthropic/v1/messages"


def test_credentials_and_headers():
    assert rules.credential_of({"authorization": "Bearer amxm_abc"}) == "amxm_abc"
    assert rules.credential_of({"x-api-key": "amxm_def"}) == "amxm_def"
    assert rules.credential_of({"authorization": "Basic x"}) is None
    assert rules.looks_like_credential("amxm_abc")
    assert not rules.looks_like_credential("sk-provider-key")
    out = rules.forwarded_headers({"authorization": "Bearer amxm_x", "x-api-key": "amxm_x",
                                   "host": "amux", "content-type": "application/json",
                                   "anthropic-version": "2023-06-01",
                                   "accept-encoding": "gzip", "cookie": "c=1"})
    assert out == {"content-type": "application/json", "anthropic-version": "2023-06-01",
                   "accept-encoding": "identity"}
    assert rules.auth_headers("openai", "sk") == {"authorization": "Bearer sk"}
    assert rules.auth_headers("anthropic", "sk") == {"x-api-key": "sk"}
    assert rules.answered_headers([(b"Content-Type", b"text/event-stream"),
                                   (b"Transfer-Encoding", b"chunked"),
                                   (b"set-cookie", b"x")]) == [
        (b"Content-Type", b"text/event-stream")]


def test_error_shapes():
    assert rules.error_body("openai", 429, "cap", "insufficient_quota") == {"error": {
        "message": "cap", "type": "insufficient_quota", "param": None,
        "code": "insufficient_quota"}}
    assert rules.error_body("anthropic", 429, "cap") == {
        "type": "error", "error": {"type": "rate_limit_error", "message": "cap"}}
    assert rules.error_body("anthropic", 504, "late")["error"]["type"] == "api_error"
    assert rules.error_body(None, 404, "where")["error"]["type"] == "invalid_request_error"


def _sse(events, event_names=False) -> bytes:
    out = b""
    for event in events:
        if event_names:
            out += f"event: {event['type']}\n".encode()
        out += b"data: " + json.dumps(event).encode() + b"\n\n"
    return out


def _read(api, payload: bytes, streaming=True, size=7):
    reader = rules.UsageReader(api, streaming)
    for i in range(0, len(payload), size):  # split anywhere, as the network does
        reader.feed(payload[i:i + size])
    return reader.finish()


def test_usage_of_a_responses_stream():
    stream = _sse([{"type": "response.created", "response": {"id": "r"}},
                   {"type": "response.output_text.delta", "delta": "hi"},
                   {"type": "response.completed", "response": {"usage": {
                       "input_tokens": 120, "output_tokens": 30, "total_tokens": 150}}}],
                  event_names=True)
    usage = _read("openai", stream)
    assert usage.seen and usage.total == 150


def test_usage_of_a_chat_stream_and_plain_answers():
    stream = _sse([{"choices": [{"delta": {"content": "x"}}]},
                   {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}])
    assert _read("openai", stream + b"data: [DONE]\n\n").total == 10
    plain = json.dumps({"usage": {"prompt_tokens": 4, "completion_tokens": 1}}).encode()
    assert _read("openai", plain, streaming=False).total == 5
    assert _read("openai", b"{not json", streaming=False).seen is False
    big = rules.UsageReader("openai", False, json_limit=10)
    big.feed(plain)
    assert big.finish().seen is False  # past the limit nothing is kept


def test_usage_of_an_anthropic_stream_counts_cache_as_input_and_the_last_output():
    stream = _sse([
        {"type": "message_start", "message": {"usage": {
            "input_tokens": 10, "cache_read_input_tokens": 500,
            "cache_creation_input_tokens": 20, "output_tokens": 1}}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}},
        {"type": "message_delta", "usage": {"output_tokens": 42}},
        {"type": "message_stop"}], event_names=True)
    usage = _read("anthropic", stream.replace(b"\n", b"\r\n"))
    assert (usage.input_tokens, usage.output_tokens) == (530, 42)


def test_a_stream_without_usage_reports_none():
    usage = _read("openai", _sse([{"type": "response.output_text.delta", "delta": "x"}]))
    assert usage.seen is False and usage.total == 0


def test_the_marked_prompt_is_replaced_in_the_json_bytes():
    old = rules.mark("Sign off as the heron.\nÜber alles.")
    body = json.dumps({"instructions": "base\n\n" + old, "input": [
        {"role": "developer", "content": old},
        {"role": "user", "content": "hi"}]}, ensure_ascii=False).encode()
    assert rules.has_marked(body)
    new, count = rules.replace_marked(body, 'Sign off as the "pelican".\n')
    assert count == 2
    parsed = json.loads(new)
    assert parsed["instructions"] == ("base\n\n<amux-prompt>\nSign off as the \"pelican\"."
                                      "\n</amux-prompt>\n")
    assert parsed["input"][0]["content"] == parsed["instructions"][len("base\n\n"):]
    assert parsed["input"][1] == {"role": "user", "content": "hi"}
    # once more: nothing accumulates
    again, _ = rules.replace_marked(new, 'Sign off as the "pelican".\n')
    assert again == new
    assert rules.replace_marked(b'{"input": "no block"}', "x") == (b'{"input": "no block"}', 0)
    unclosed = b'{"input": "<amux-prompt> and no end"}'
    assert rules.replace_marked(unclosed, "x") == (unclosed, 0)
