"""Sending through a source: messages (the outbox handlers of relays and notices call it,
with the effect id as the message id) and pull requests (a GitHub source)."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from amux_common.integrity import violates
from intake.models import OutgoingMessage, Source, Thread
from intake.sources import OpensPullRequests, SendsCards, plugin
from intake.sources.base import CardSent, ConfigError, Context, Message, SendResult


def send(source: Source, *, message_id: str, thread: str, text: str,
         reply_to: str = "") -> SendResult:
    """Send one message through the source's plugin, once per message id."""
    plug = plugin(source.kind, source.config, source.secrets)

    def store_outgoing(thread_key: str, mid: str, body: str) -> bool:
        return outgoing_stored(source_id=source.pk, thread=thread_key, message_id=mid,
                               text=body)

    ctx = Context(store_outgoing=store_outgoing)
    # What the source learned about the thread (e.g. a commented document's type).
    meta = Thread.objects.filter(source=source, key=thread).values_list("meta", flat=True)
    return plug.send(Message(str(message_id), thread, text, reply_to,
                             dict(meta.first() or {})), ctx)


def thread_context(source: Source, thread: str) -> list[dict]:
    """The messages of a thread as its platform has them (the issue and its comments, the
    chat's messages), oldest first: [{"author", "text", "at"}] (triage reads them)."""
    plug = plugin(source.kind, source.config, source.secrets)
    meta = Thread.objects.filter(source=source, key=thread).values_list("meta", flat=True)
    return plug.thread_context(thread, dict(meta.first() or {}), Context())


def outgoing_stored(*, source_id: int, thread: str, message_id: str, text: str) -> bool:
    """Fact: a reply kept by amux itself (web chat) was written; once per message id."""
    try:
        with transaction.atomic(durable=True):
            OutgoingMessage.objects.create(
                source_id=source_id, thread_key=thread, message_id=message_id, text=text
            )
    except IntegrityError as exc:
        if violates(exc, "outgoing_unique_message"):
            return False
        raise
    return True


def open_pull_request(source: Source, *, repo: str, title: str, body: str, head: str,
                      base: str, closes: int | None = None) -> dict:
    """Open a pull request through the source (GitHub), once per head branch; `closes`
    is the issue it links."""
    plug = plugin(source.kind, source.config, source.secrets)
    if not isinstance(plug, OpensPullRequests):
        raise ConfigError({"source": f"a {source.kind} source cannot open pull requests"})
    return plug.open_pull_request(repo=repo, title=title, body=body, head=head, base=base,
                                  closes=closes)


def _card_plugin(source: Source):
    plug = plugin(source.kind, source.config, source.secrets)
    if not isinstance(plug, SendsCards):
        raise ConfigError({"source": f"a {source.kind} source cannot post cards"})
    return plug


def send_card(source: Source, *, key: str, card: dict, reply_to: str = "",
              chat_id: str = "", in_thread: bool = False) -> CardSent:
    """Post an interactive card through the source, once per `key`."""
    return _card_plugin(source).send_card(key=key, card=card, reply_to=reply_to,
                                          chat_id=chat_id, in_thread=in_thread)


def patch_card(source: Source, *, message_id: str, card: dict) -> SendResult:
    """Update a card sent before, in place."""
    return _card_plugin(source).patch_card(message_id, card)
