"""amux's model gateway (/gateway/model/<api>/…) as a runtime meets it: the real ASGI app
under uvicorn (the `model_server` fixture), real session credentials, the scripted model
server as the provider behind it. Streaming is passed through as it arrives, the provider's
key is added by amux and never seen by the client, caps refuse a request before it leaves,
faults come back in the API's own error shape."""

from __future__ import annotations

import time

import httpx
import pytest
from django.conf import settings

from sessions import model_credentials, model_gateway, services
from sessions.models import ModelCredential
from sessions.new_session import Launch, Prompting
from tests import factories as f
from tests.support.model_server import Fail, Text
from tests.support.sessions import session_tokens, wait_for_tokens
from tickets import read
from tickets.models import AgentSettings

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def _session(provider):
    runtime = "codex" if provider.platform == "openai-compat" else "claude"
    session = services.create_session(Launch.direct(runtime=runtime, provider=provider.slug,
                                                    model=provider.model_names[0]))
    return session, model_credentials.issue(session.pk)


def _url(rest: str) -> str:
    return f"{settings.AMUX_URL}/gateway/model/{rest}"


def test_a_streamed_answer_is_passed_through_chunk_by_chunk_with_the_key_added_by_amux(
        session_dirs, openai_provider, model_server):
    session, token = _session(openai_provider)
    model_server.script(Text("hello there, streamed in pieces", stall=1.5))
    arrivals: list[tuple[float, bytes]] = []
    with httpx.stream("POST", _url("openai/responses"), timeout=30,
                      headers={"Authorization": f"Bearer {token}"},
                      json={"model": "gpt-5.5", "stream": True, "input": "hi",
                            "tools": [{"type": "function", "name": "shell"}]}) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        for chunk in answer.iter_raw():
            arrivals.append((time.monotonic(), chunk))
    first_delta = next(at for at, chunk in arrivals if b"output_text.delta" in chunk)
    # the first delta was here while the provider was still pausing mid-stream
    assert arrivals[-1][0] - first_delta > 1.0
    body = b"".join(chunk for _at, chunk in arrivals)
    assert b"response.completed" in body
    sent = model_server.requests[-1]
    assert sent.headers["authorization"] == "Bearer sk-test-secret"
    assert token not in str(sent.headers)
    assert b"sk-test-secret" not in body
    wait_for_tokens(session, 110)  # the provider's usage: 100 in + 10 out, counted once


def test_chat_completions_anthropic_messages_and_model_lists(
        session_dirs, openai_provider, model_server):
    session, token = _session(openai_provider)
    auth = {"Authorization": f"Bearer {token}"}
    plain = httpx.post(_url("openai/chat/completions/"), headers=auth, timeout=30, json={
        "model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "bash"}}]})
    assert plain.status_code == 200, plain.text
    assert plain.json()["usage"]["total_tokens"] == 110
    wait_for_tokens(session, 110)
    model_server.models = ["gpt-5.5"]
    listed = httpx.get(_url("openai/models"), headers=auth, timeout=30)
    assert listed.status_code == 200 and listed.json()["data"][0]["id"] == "gpt-5.5"
    assert session_tokens(session) == 110  # a list is not a model call
    # the session's provider speaks OpenAI: the Anthropic path is not its own
    wrong = httpx.post(_url("anthropic/v1/messages"), headers={"x-api-key": token},
                       json={}, timeout=30)
    assert wrong.status_code == 404 and wrong.json()["type"] == "error"


def test_anthropic_messages_take_the_key_as_x_api_key(session_dirs, anthropic_provider,
                                                      model_server):
    session, token = _session(anthropic_provider)
    model_server.script(Text("hi", usage={"cached_input_tokens": 40}))
    with httpx.stream("POST", _url("anthropic/v1/messages?beta=true"), timeout=30,
                      headers={"x-api-key": token, "anthropic-version": "2023-06-01"},
                      json={"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 50,
                            "messages": [{"role": "user", "content": "hi"}],
                            "tools": [{"name": "Bash", "input_schema": {}}]}) as answer:
        assert answer.status_code == 200
        body = answer.read()
    assert b"message_stop" in body
    sent = model_server.requests[-1]
    assert sent.headers["x-api-key"] == "sk-ant-test-secret"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    wait_for_tokens(session, 150)  # 100 in + 40 cache reads + 10 out


def test_unknown_and_revoked_credentials_are_refused_in_the_apis_own_shape(
        session_dirs, openai_provider, model_server):
    session, token = _session(openai_provider)
    body = {"model": "gpt-5.5", "input": "hi"}
    unknown = httpx.post(_url("openai/responses"), json=body, timeout=30,
                         headers={"Authorization": "Bearer amxm_not-a-real-one"})
    assert unknown.status_code == 401
    assert unknown.json()["error"]["code"] == "invalid_api_key"
    bare = httpx.post(_url("anthropic/v1/messages"), json=body, timeout=30)
    assert bare.status_code == 401
    assert bare.json() == {"type": "error", "error": {
        "type": "authentication_error", "message": "unknown or revoked session credential"}}
    # the provider's own key is not a gateway credential either
    provider_key = httpx.post(_url("openai/responses"), json=body, timeout=30,
                              headers={"Authorization": "Bearer sk-test-secret"})
    assert provider_key.status_code == 401
    assert httpx.post(_url("openai/responses"), json=body, timeout=30, headers={
        "Authorization": f"Bearer {token}"}).status_code == 200
    services.archive(session.pk)
    assert ModelCredential.objects.get(session=session).token_hash is None
    revoked = httpx.post(_url("openai/responses"), json=body, timeout=30,
                         headers={"Authorization": f"Bearer {token}"})
    assert revoked.status_code == 401
    assert len(model_server.requests) == 1  # nothing refused reached the provider


def test_bad_paths_and_methods(session_dirs, openai_provider, model_server):
    _session_row, token = _session(openai_provider)
    auth = {"Authorization": f"Bearer {token}"}
    missing = httpx.post(_url("openai/completions"), headers=auth, json={}, timeout=30)
    assert missing.status_code == 404 and "model gateway" in missing.json()["error"]["message"]
    assert httpx.get(_url("elsewhere/x"), timeout=30).status_code == 404
    wrong = httpx.get(_url("openai/responses"), headers=auth, timeout=30)
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert wrong.json()["error"]["type"] == "invalid_request_error"
    assert httpx.post(_url("openai/models"), headers=auth, timeout=30).status_code == 405


def test_a_request_past_the_tickets_cap_is_refused_and_the_ticket_shows_blocked(
        session_dirs, openai_provider, model_server):
    session, token = _session(openai_provider)
    ticket = f.TicketFactory(session=session)
    agents = AgentSettings.current()
    agents.ticket_token_cap = 200
    agents.save()
    auth = {"Authorization": f"Bearer {token}"}
    body = {"model": "gpt-5.5", "input": "hi", "tools": [{"type": "function",
                                                           "name": "shell"}]}
    for _ in range(2):  # 110 tokens each: the second crosses the cap of 200
        assert httpx.post(_url("openai/responses"), headers=auth, json=body,
                          timeout=30).status_code == 200
        time.sleep(0.2)
    wait_for_tokens(session, 220)
    refused = httpx.post(_url("openai/responses"), headers=auth, json=body, timeout=30)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "insufficient_quota"
    assert error["message"] == "amux: the ticket's token cap (200) is reached"
    assert len(model_server.requests) == 2  # the third never left amux
    stage, label = read.stages([ticket])[ticket.pk]
    assert stage == "blocked"
    assert label == "Blocked — the ticket's token cap (200) is reached"
    agents.ticket_token_cap = 1000
    agents.save()
    assert httpx.post(_url("openai/responses"), headers=auth, json=body,
                      timeout=30).status_code == 200


def test_the_next_request_waits_for_the_count_of_the_answer_before_it(
        session_dirs, openai_provider, model_server):
    """The tokens of an answer are counted after it is passed back (off its path). A runtime
    that asks again at once must still meet the cap those tokens reached: here the count is
    held up by a lock on the session's usage row, and the next request waits for it (up to
    model_gateway.COUNT_WAIT) instead of slipping past the cap."""
    import threading
    from datetime import UTC

    from django.db import connection, transaction
    from django.db.models import F
    from django.utils import timezone

    from sessions.models import UsageDay

    session, token = _session(openai_provider)
    f.TicketFactory(session=session)
    agents = AgentSettings.current()
    agents.ticket_token_cap = 100  # one answer spends 110
    agents.save()
    today = timezone.now().astimezone(UTC).date()
    UsageDay.objects.create(session=session, day=today, tokens=0)
    locked, release = threading.Event(), threading.Event()

    def hold_the_usage_row():
        try:
            with transaction.atomic():
                UsageDay.objects.filter(session=session, day=today).update(
                    tokens=F("tokens"))
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_usage_row)
    holder.start()
    auth = {"Authorization": f"Bearer {token}"}
    body = {"model": "gpt-5.5", "input": "hi", "tools": [{"type": "function",
                                                           "name": "shell"}]}
    answers = []
    try:
        assert locked.wait(10)
        first = httpx.post(_url("openai/responses"), headers=auth, json=body, timeout=30)
        assert first.status_code == 200  # answered; its count waits for the lock
        asked = threading.Thread(target=lambda: answers.append(httpx.post(
            _url("openai/responses"), headers=auth, json=body, timeout=30)))
        asked.start()
        time.sleep(1.0)
        assert not answers, "the next request went on before the last answer was counted"
    finally:
        release.set()
        holder.join(30)
    asked.join(30)
    assert answers[0].status_code == 429
    assert answers[0].json()["error"]["code"] == "insufficient_quota"
    assert len(model_server.requests) == 1  # the second never left amux
    assert session_tokens(session) == 110


def test_provider_faults_come_back_as_the_apis_errors(session_dirs, openai_provider,
                                                      model_server, monkeypatch):
    _session_row, token = _session(openai_provider)
    auth = {"Authorization": f"Bearer {token}"}
    body = {"model": "gpt-5.5", "input": "hi", "tools": [{"type": "function",
                                                           "name": "shell"}]}
    model_server.script(Fail("upstream broke", status=500))
    failed = httpx.post(_url("openai/responses"), headers=auth, json=body, timeout=30)
    assert failed.status_code == 500
    assert failed.json()["error"]["message"] == "upstream broke"

    monkeypatch.setattr(model_gateway, "TIMEOUT", httpx.Timeout(5.0, read=0.5))
    model_server.script(Text("late", delay=3))
    late = httpx.post(_url("openai/responses"), headers=auth, json=body, timeout=30)
    assert late.status_code == 504
    assert late.json()["error"]["message"] == "the model provider did not answer in time"

    openai_provider.base_url = "http://127.0.0.1:9/v1"  # nothing listens there
    openai_provider.save()
    refused = httpx.post(_url("openai/responses"), headers=auth, json=body, timeout=30)
    assert refused.status_code == 502
    assert refused.json()["error"] == {"message": "the model provider cannot be reached",
                                       "type": "server_error", "param": None,
                                       "code": "server_error"}


def test_a_client_leaving_mid_stream_closes_the_providers_request(
        session_dirs, openai_provider, model_server):
    _session_row, token = _session(openai_provider)
    model_server.script(Text("a long answer " * 20, stall=1.0))
    with httpx.stream("POST", _url("openai/responses"), timeout=30,
                      headers={"Authorization": f"Bearer {token}"},
                      json={"model": "gpt-5.5", "stream": True, "input": "hi",
                            "tools": [{"type": "function", "name": "shell"}]}) as answer:
        for chunk in answer.iter_raw():
            if b"output_text.delta" in chunk:
                break  # leave while the provider pauses
    logged = model_server.requests[-1]
    deadline = time.monotonic() + 10
    while not logged.disconnected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert logged.disconnected  # the provider's next write found the connection closed


def test_the_end_of_the_assignment_revokes_its_sessions_credential(
        session_dirs, openai_provider, model_server):
    from tickets.actions import executor

    session, token = _session(openai_provider)
    ticket = f.TicketFactory(session=session)
    run = f.AssignmentFactory(ticket=ticket, state="running")
    auth = {"Authorization": f"Bearer {token}"}
    body = {"model": "gpt-5.5", "input": "hi"}
    assert httpx.post(_url("openai/responses"), headers=auth, json=body,
                      timeout=30).status_code == 200
    executor.assignment_ended(assignment_id=run.pk, reason="done")
    refused = httpx.post(_url("openai/responses"), headers=auth, json=body, timeout=30)
    assert refused.status_code == 401
    # the next run launches the runtime again, with a credential of its own
    fresh = model_credentials.issue(session.pk)
    assert httpx.post(_url("openai/responses"), json=body, timeout=30, headers={
        "Authorization": f"Bearer {fresh}"}).status_code == 200


def test_a_goal_whose_token_quota_is_spent_refuses_its_sessions_requests(
        session_dirs, openai_provider, model_server, client, settings):
    from goals.models import Agent, Goal, WorkingSession
    from tests.integration.test_metrics import SCRAPER, figure, mover, scrape

    settings.AMUX_METRICS_TOKEN = SCRAPER["HTTP_AUTHORIZATION"].split()[1]
    before = scrape(client)
    session, token = _session(openai_provider)
    goal = Goal.objects.create(slug="ship", title="Ship", quota_unit="tokens",
                               quota_limit=1000, quota_spent=400)
    agent = Agent.objects.create(goal=goal, slug="builder", mode="managed_agent_runtime")
    WorkingSession.objects.create(agent=agent, session=session, mode="managed_agent_runtime")
    auth = {"Authorization": f"Bearer {token}"}
    body = {"model": "gpt-5.5", "input": "hi"}
    assert httpx.post(_url("openai/responses"), headers=auth, json=body,
                      timeout=30).status_code == 200
    Goal.objects.filter(pk=goal.pk).update(quota_spent=1000)
    refused = httpx.post(_url("openai/responses"), headers=auth, json=body, timeout=30)
    assert refused.status_code == 429
    message = refused.json()["error"]["message"]
    assert message == "amux: the goal ship's token quota (1,000) is spent"
    assert refused.headers["x-should-retry"] == "false"
    moved = mover(before, after := scrape(client))
    labels = {"provider": "scripted", "model": session.model}
    assert moved("amux_model_requests_total", outcome="ok", **labels) == 1
    assert moved("amux_model_requests_total", outcome="capped", **labels) == 1
    assert moved("amux_guard_blocks_total", cap="goal_tokens", what="model_request") == 1
    assert figure(after, "amux_model_tokens_total", kind="output", **labels) > 0


def test_each_request_carries_the_prompt_as_it_reads_at_that_moment(
        session_dirs, openai_provider, model_server):
    """The gateway keeps what never changes once saved (a version's configuration, a
    policy version's document, the sources' kinds by their stamp): a prompt, policy,
    source or expert change between two requests of one turn reaches the second, and the
    running turn records the revisions after the answer."""
    from execution import profiles
    from intake.models import Source
    from policy import services as policy
    from prompts_app import service as prompts
    from sessions import gateway_rules
    from sessions.models import Session, Turn

    profiles.create_profile({"version": 2, "name": "Heron", "description": "",
                             "instructions": "Marker-expert-one.", "skills": []})
    session = services.create_session(Launch.direct(runtime="codex",
                                                    provider=openai_provider.slug,
                                                    model="gpt-5.5"),
                                      Prompting(prompt_role="worker", profile="heron"))
    Session.objects.filter(pk=session.pk).update(lifecycle="running")
    turn = Turn.objects.create(session=session, seq=1, key="t1", state="running",
                               prompt_revisions=[0])
    auth = {"Authorization": f"Bearer {model_credentials.issue(session.pk)}"}
    body = {"model": "gpt-5.5", "input": "hi",
            "instructions": gateway_rules.mark("the prompt as the turn started")}

    def sent() -> str:
        model_server.script(Text("ok"))
        assert httpx.post(_url("openai/responses"), headers=auth, json=body,
                          timeout=30).status_code == 200
        return model_server.requests[-1].body["instructions"]

    first = sent()
    assert "Marker-expert-one." in first and "No source admits anything" in first
    assert "the prompt as the turn started" not in first
    assert sent() == first  # nothing changed: the same prompt (from what was kept)

    prompts.save("team.worker", "Marker-prompt-two.", 0, origin="api")
    assert "Marker-prompt-two." in sent()
    deadline = time.monotonic() + 10  # recorded after the answer, off the request's path
    while Turn.objects.get(pk=turn.pk).prompt_revisions != [0, 1]:
        assert time.monotonic() < deadline
        time.sleep(0.05)

    gh = Source.objects.create(kind="github", slug="gh", name="Our repo",
                               config={"repo": "acme/app", "handle": "amux-bot"})
    saved = policy.save({"acceptance": "auto", "sources": {"gh": {
        "allowed": ["octocat"],
        "rows": {"comment": {"addressed": True}}}}}, None).version
    text = sent()
    assert f"Policy version {saved[:12]}" in text and "Source gh (github):" in text
    assert "Allowed people: octocat." in text

    gh.kind = "lark"  # a changed source (its kind shows in the policy part)
    gh.save()
    assert "Source gh (lark):" in sent()
    gh.delete()
    assert "Source gh:" in sent()

    profiles.update_profile("heron", {"version": 2, "name": "Heron", "description": "",
                                      "instructions": "Marker-expert-two.", "skills": []})
    text = sent()
    assert "Marker-expert-two." in text and "Marker-expert-one." not in text
    assert "Marker-prompt-two." in text and f"Policy version {saved[:12]}" in text


def test_recording_a_turns_prompt_revisions_locks_the_turn_alone(session_dirs, openai_provider):
    """The record of a request's revisions waits for no lock on the session: the host
    locks the session's row before its turn's when a turn ends, and a record that also
    took the session's row (Turn's default ordering joins it) deadlocked with it."""
    import threading

    from django.db import connection, transaction

    from sessions import request_prompts
    from sessions.models import Session, Turn

    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's: SQLite serialises every write transaction, "
                    "so two writers wait in turn and cannot deadlock")
    session, _ = _session(openai_provider)
    turn = Turn.objects.create(session=session, seq=1, key="t1", state="running",
                               prompt_revisions=[1])
    locked, release = threading.Event(), threading.Event()

    def hold_the_session():
        try:
            with transaction.atomic():
                Session.objects.select_for_update().get(pk=session.pk)
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_session)
    holder.start()
    try:
        assert locked.wait(10)
        recorder = threading.Thread(target=lambda: (
            request_prompts.record(request_prompts.Used(turn.pk, (2,))), connection.close()))
        recorder.start()
        recorder.join(10)
        assert not recorder.is_alive(), "the record waited for the session's row"
    finally:
        release.set()
        holder.join(30)
    assert Turn.objects.get(pk=turn.pk).prompt_revisions == [1, 2]


def test_a_requests_grant_and_every_cap_are_read_in_one_statement(session_dirs,
                                                                   openai_provider):
    """Before each model request: the credential's grant and the probe of each registered
    cap (tickets', goals') come in one statement; a cap's own check runs only when its
    probe finds something, and then still refuses."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from goals.models import Agent, Goal, WorkingSession
    from sessions import gateway_rules
    from sessions.models import UsageDay

    session, token = _session(openai_provider)
    route = gateway_rules.route_of("/gateway/model/openai/responses", "POST")
    body = b'{"model": "gpt-5.5", "input": "hi"}'
    with CaptureQueriesContext(connection) as plain:
        grant, sent, used = model_gateway._admit(token, route, body)
    assert grant.session_id == session.pk and sent == body and used is None
    assert len(plain.captured_queries) == 1

    goal = Goal.objects.create(slug="ship", title="Ship", quota_unit="tokens",
                               quota_limit=1000, quota_spent=1000)
    agent = Agent.objects.create(goal=goal, slug="builder", mode="managed_agent_runtime")
    WorkingSession.objects.create(agent=agent, session=session, mode="managed_agent_runtime")
    refused = model_gateway._admit(token, route, body)
    assert isinstance(refused, model_gateway.Refused)
    assert refused.status == 429
    assert refused.message == "amux: the goal ship's token quota (1,000) is spent"
    Goal.objects.filter(pk=goal.pk).update(quota_limit=5000)
    with CaptureQueriesContext(connection) as open_goal:
        assert model_gateway._admit(token, route, body)[0].session_id == session.pk
    assert len(open_goal.captured_queries) == 1

    # a worker's session: its live ticket is found once, by the grant's statement, and the
    # ticket's caps are checked from it (the cap's own check looks for no ticket again)
    f.TicketFactory(session=session)
    with CaptureQueriesContext(connection) as worker:
        assert model_gateway._admit(token, route, body)[0].session_id == session.pk
    found_live = [q["sql"] for q in worker.captured_queries if "ended_at IS NULL" in q["sql"]]
    assert len(found_live) == 1 and "token_hash" in found_live[0]
    agents = AgentSettings.current()
    agents.ticket_token_cap = 1
    agents.save()
    UsageDay.objects.create(session=session, day=timezone.now().date(), tokens=5)
    capped = model_gateway._admit(token, route, body)
    assert isinstance(capped, model_gateway.Refused) and capped.status == 429
    assert capped.message == "amux: the ticket's token cap (1) is reached"


def test_a_cap_check_needs_a_probe_of_the_session():
    from sessions.hooks import Checks

    checks = Checks("test")
    with pytest.raises(ValueError, match="session"):
        checks.register(lambda session_id: None, "SELECT 1")
