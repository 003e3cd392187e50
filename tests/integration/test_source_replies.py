"""Replies through the real SDKs (PyGithub, lark-oapi) to a local recording server, once per
message id even across a crash between send and commit."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from effects import outbox
from effects.models import Effect
from intake.models import OutgoingMessage, Source
from intake.send import send
from intake.sources.base import SendResult
from intake.sources.github import GitHub
from intake.sources.lark import Lark
from tests.support.recording_server import RecordingServer

pytestmark = pytest.mark.django_db

REPO = "octo/demo"


@pytest.fixture
def server():
    with RecordingServer() as srv:
        srv.state.issues[(REPO, 7)] = {"title": "Flaky test", "body": "It fails"}
        yield srv


@pytest.fixture
def ghes():
    with RecordingServer(prefix="/api/v3") as srv:
        srv.state.issues[(REPO, 7)] = {"title": "Flaky test", "body": "It fails"}
        yield srv


def github_source(api_url, **secrets):
    config = GitHub.validate_config({"repo": [REPO], "api_url": api_url, "handle": "amux-bot"})
    source = Source(kind="github", slug="gh", name="GitHub", config=config)
    source.secrets = {"webhook_secret": "s", **(secrets or {"token": "ghp_test"})}
    source.save()
    return source


def lark_source(domain):
    config = Lark.validate_config({"app_id": "cli_test", "domain": domain, "bot_open_id": "ou_b"})
    source = Source(kind="lark", slug="lk", name="Lark", config=config)
    source.secrets = {"verification_token": "v", "app_secret": "sec"}
    source.save()
    return source


@pytest.fixture
def crashing_notice_handler():
    """A notice handler that sends, then dies before the outbox row is settled: the drain
    replays it (the effect id is the idempotency key)."""
    saved = outbox.handlers()
    calls = {"n": 0}

    @outbox.register("notice", replace=True)
    def handler(effect_id, payload):
        source = Source.objects.get(slug=payload["source"])
        result = send(source, message_id=f"effect-{effect_id}", thread=payload["thread"],
                             text=payload["text"])
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("crash between send and commit")
        assert result == SendResult.SENT

    yield calls
    outbox._handlers.clear()
    outbox._handlers.update(saved)


def _drain_twice():
    outbox.drain(seconds=5)
    Effect.objects.update(due_at=Effect.objects.first().created_at)  # retry now
    outbox.drain(seconds=5)


def test_github_comment_is_posted_once_across_a_crash(server, crashing_notice_handler):
    github_source(server.url)
    from django.db import transaction

    with transaction.atomic():
        outbox.enqueue("notice", "n-1", {"source": "gh", "thread": f"{REPO}#7", "text": "Done"})
    _drain_twice()
    assert crashing_notice_handler["n"] == 2 and not Effect.objects.exists()
    posts = server.matching("POST", rf"/repos/{REPO}/issues/7/comments")
    assert len(posts) == 1
    assert posts[0].body["body"].startswith("Done\n\n<!-- amux:message=effect-")
    assert posts[0].headers["authorization"] == "token ghp_test"


def test_github_enterprise_base_url_works_the_same(ghes):
    source = github_source(ghes.url)
    assert ghes.url.endswith("/api/v3")
    assert send(source, message_id="m1", thread=f"{REPO}#7", text="hi") == "sent"
    assert len(ghes.matching("POST", rf"/repos/{REPO}/issues/7/comments")) == 1


def test_github_app_auth_uses_an_installation_token(server):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    source = github_source(server.url, app_id="7", private_key=pem)
    assert send(source, message_id="m2", thread=f"{REPO}#7", text="hi") == "sent"
    lookup = server.matching("GET", rf"/repos/{REPO}/installation")[0]
    assert lookup.headers["authorization"].startswith("Bearer ey")  # the app's JWT
    assert server.matching("POST", r"/app/installations/42/access_tokens")
    post = server.matching("POST", rf"/repos/{REPO}/issues/7/comments")[0]
    assert post.headers["authorization"] == "token ghs_installation"


def test_github_send_answers_gone_for_a_missing_issue_and_retry_for_a_server_error(server):
    source = github_source(server.url)
    assert send(source, message_id="m3", thread=f"{REPO}#404", text="x") == "gone"
    server.state.fail_next.append(("POST", rf"/repos/{REPO}/issues/7/comments", 502))
    assert send(source, message_id="m4", thread=f"{REPO}#7", text="x") == "retry"
    assert send(source, message_id="m4", thread=f"{REPO}#7", text="x") == "sent"
    assert len(server.state.comments[(REPO, 7)]) == 1


def test_github_thread_context_reads_the_issue_and_its_comments(server):
    source = github_source(server.url)
    send(source, message_id="m5", thread=f"{REPO}#7", text="a reply")
    plug = GitHub(source.config, source.secrets)
    context = plug.thread_context(f"{REPO}#7", {}, None)
    assert context[0]["text"] == "Flaky test\n\nIt fails"
    assert context[1]["author"] == "amux-bot" and context[1]["text"].startswith("a reply")


def test_lark_reply_into_the_thread_once_across_a_crash(server, crashing_notice_handler):
    lark_source(server.url)
    server.lark_message("om_root", chat_id="oc_team")  # the topic's first message
    from django.db import transaction

    with transaction.atomic():
        outbox.enqueue("notice", "n-2", {"source": "lk", "thread": "oc_team:om_root",
                                         "text": "On it"})
    _drain_twice()
    replies = server.matching("POST", r"/open-apis/im/v1/messages/om_root/reply")
    assert len(replies) == 2  # the replay is sent with the same uuid …
    assert replies[0].body["uuid"] == replies[1].body["uuid"]
    assert len(server.state.lark_messages) == 1  # … so Lark keeps one message
    assert replies[0].body["reply_in_thread"] is True
    assert json.loads(replies[0].body["content"]) == {"text": "On it"}
    token = server.matching("POST", r"/open-apis/auth/v3/tenant_access_token/internal")[0]
    assert token.body == {"app_id": "cli_test", "app_secret": "sec"}


def test_lark_message_to_a_chat_without_a_thread(server):
    source = lark_source(server.url)
    server.state.lark_chats.add("oc_team")  # the bot is in the chat
    assert send(source, message_id="m6", thread="oc_team", text="hello") == "sent"
    create = server.matching("POST", r"/open-apis/im/v1/messages")[0]
    assert create.query["receive_id_type"] == ["chat_id"] and create.body["receive_id"] == "oc_team"


def test_webchat_replies_are_kept_once_per_message_id():
    source = Source.objects.create(kind="webchat", slug="chat", name="Chat")
    assert send(source, message_id="m7", thread="t1", text="hi") == "sent"
    assert send(source, message_id="m7", thread="t1", text="hi") == "sent"
    assert OutgoingMessage.objects.filter(source=source).count() == 1


def test_lark_thread_context_reads_the_chat(server):
    source = lark_source(server.url)
    server.lark_message("om_1", chat_id="oc_team", text="the build is red")
    server.lark_message("om_2", chat_id="oc_team", text="since this morning")
    plug = Lark(source.config, source.secrets)
    context = plug.thread_context("oc_team", {}, None)
    assert [c["text"] for c in context] == ["the build is red", "since this morning"]
    listed = server.matching("GET", r"/open-apis/im/v1/messages")[0]
    assert listed.query["container_id_type"] == ["chat"]
    assert listed.query["container_id"] == ["oc_team"]


def test_relay_handler_posts_once_when_replayed_after_a_crash(server):
    """The registered relay handler, run again for the same effect (the crash came after
    the send, before the row was settled), posts one comment."""
    from django.db import transaction

    from intake.models import Thread
    from tickets import reply_handlers

    source = github_source(server.url)
    thread = Thread.objects.create(source=source, key=f"{REPO}#7")
    with transaction.atomic():
        effect = outbox.enqueue("relay", "r-1", {"ticket": 0, "thread": thread.pk,
                                                 "text": "Blocked: need a token"})
    reply_handlers.relay(effect.pk, effect.payload)  # sent; then the process died
    outbox.drain(seconds=5)  # the replay finds the marker
    assert not Effect.objects.exists()
    assert len(server.matching("POST", rf"/repos/{REPO}/issues/7/comments")) == 1


def test_notice_handler_to_a_web_chat_channel():
    from django.db import transaction

    from intake.models import Channel

    source = Source.objects.create(kind="webchat", slug="chat", name="Chat")
    channel = Channel.objects.create(source=source, kind="chat", address="t1")
    with transaction.atomic():
        outbox.enqueue("notice", "n-9", {"ticket": 0, "channel": channel.pk, "text": "Merged"},
                       channel=outbox.channel_key(source.slug, channel.address))
    outbox.drain(seconds=5)
    assert list(OutgoingMessage.objects.values_list("thread_key", "text")) == [("t1", "Merged")]


def test_a_reply_asked_again_after_it_was_sent_posts_nothing_more(server):
    """An executor whose `amux reply` lost its answer to a crash asks again with the same
    text: the first relay was already sent and settled, the second finds its marker (the
    reply's id is its run and its text) and posts nothing."""
    from intake.models import Thread, Trigger
    from tickets import reply_handlers
    from tickets.actions import commands as ticket_commands
    from tickets.actions import executor
    from tickets.models import Assignment

    source = github_source(server.url)
    thread = Thread.objects.create(source=source, key=f"{REPO}#7")
    trigger = Trigger.objects.create(
        source=source, thread=thread, external_id="c-7", scope="comment", actor="octocat",
        text="@amux-bot please fix it", decision="explicit", strength="explicit",
        policy_version="v1")
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix it")
    assignment = Assignment.objects.get(ticket=ticket)
    sent = []
    for _ in range(2):
        executor.reply_requested(assignment_id=assignment.pk, text="On it.")
        effect = Effect.objects.get(kind="relay")
        reply_handlers.relay(effect.pk, effect.payload)
        effect.delete()  # settled, as the drain does after the handler returned
        sent.append(effect.payload["message_id"])
    executor.reply_requested(assignment_id=assignment.pk, text="Fixed in the PR.")
    effect = Effect.objects.get(kind="relay")
    reply_handlers.relay(effect.pk, effect.payload)
    assert sent[0] == sent[1]
    posts = server.matching("POST", rf"/repos/{REPO}/issues/7/comments")
    assert [p.body["body"].split("\n\n")[0] for p in posts] == ["On it.", "Fixed in the PR."]
