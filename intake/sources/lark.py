"""Lark (Feishu) as a source: schema 2.0 events in, thread replies out (lark-oapi).

Verification as the platform documents it: the verification token in the event header;
with an encrypt key, `X-Lark-Signature == sha256(timestamp + nonce + encrypt_key + body)`
(plain SHA-256, compared in constant time, timestamp within a freshness window) and an
AES-256-CBC body keyed by sha256(encrypt_key). Mentions are matched by the bot's open_id,
never by display name. Thread = the message's root thread, else the chat; for a document
comment `doc:<file_token>:<comment_id>`, answered by a reply on that comment.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from amux_common import bounded_json
from intake.sources import lark_history, lark_identity
from intake.sources.base import (
    CardSent,
    Context,
    Envelope,
    Field,
    HealthItem,
    Ignored,
    Incoming,
    Malformed,
    Message,
    SendResult,
    SourceKind,
    TriggerFacts,
    Unauthorized,
)
from intake.sources.capabilities import (
    ChatPolling,
    DocumentPolling,
    ReadsRepliesBack,
    RepliesInChat,
    SendsCards,
)
from intake.sources.lark_api import LarkApiError
from policy.gate import SCOPES

log = logging.getLogger(__name__)

# Lark error codes meaning the message can never be delivered there (docs, reply.md).
GONE_CODES = {230002, 230011}  # the bot is not in the chat; the message was withdrawn
# Updating a card (docs message/patch): not a card the bot sent, not updatable (no
# `update_multi`), the message withdrawn or gone; no retry changes them.
PATCH_GONE_CODES = {230001, 230011, 230026, 230031, 230099, 230110}
RATE_LIMIT_CODES = {99991400, 230020}
# Document comment replies (drive v1, docs file-comment-reply/create): codes that no retry
# will change — param error (also reported for a reply to a whole-document comment, which
# takes none), no permission, document deleted / not there, content refused, limit reached,
# comment not there. 1069301 "fail", 1069399 "internal error", rate limits and 5xx retry.
COMMENT_GONE_CODES = {1069302, 1069303, 1069304, 1069305, 1069306, 1069307, 1069308}
COMMENT_TEXT_LIMIT = 10_000  # characters of one text_run (docs); longer replies are split
DOC_TYPES = ("doc", "docx", "sheet", "bitable", "slides", "file")
# `conversation`: off (messages become tickets), topic, singleton (conversations/).
CONVERSATION_MODES = ("off", "topic", "singleton")
COMMENT_EVENT = "drive.notice.comment_add_v1"
# The bot was removed from a chat (Lark's word that the chat is disconnected), or added.
BOT_DELETED, BOT_ADDED = "im.chat.member.bot.deleted_v1", "im.chat.member.bot.added_v1"
# A newly watched document's first poll takes the comments of the week before, at most the
# latest 50 (later ones come through its committed cursor): bounded, never "from now".
CATCHUP_SECONDS, CATCHUP_COMMENTS = 7 * 24 * 3600, 50
BOT_INFO = "/open-apis/bot/v3/info"


def encrypt(key: str, plaintext: str) -> str:
    """Encrypt as Lark does (used by tests and the "send test event" action)."""
    iv = os.urandom(16)
    padder = padding.PKCS7(128).padder()
    data = padder.update(plaintext.encode()) + padder.finalize()
    enc = Cipher(algorithms.AES(hashlib.sha256(key.encode()).digest()), modes.CBC(iv)).encryptor()
    return base64.b64encode(iv + enc.update(data) + enc.finalize()).decode()


def decrypt(key: str, encrypted: str) -> str:
    raw = base64.b64decode(encrypted, validate=True)
    if len(raw) < 32 or len(raw) % 16:
        raise ValueError("ciphertext length")
    dec = Cipher(
        algorithms.AES(hashlib.sha256(key.encode()).digest()), modes.CBC(raw[:16])
    ).decryptor()
    data = dec.update(raw[16:]) + dec.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return (unpadder.update(data) + unpadder.finalize()).decode("utf-8")


def signature(timestamp: str, nonce: str, key: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + key).encode() + body).hexdigest()


class Lark(SourceKind, DocumentPolling, ChatPolling, ReadsRepliesBack, SendsCards,
           RepliesInChat):
    kind = "lark"
    label = "Lark / Feishu"
    expected_interval = 86400  # a webhook chat source quiet for a day shows stale
    scopes = SCOPES["lark"]  # the policy's rows for this kind (policy/gate.py)
    fields = (
        Field("domain", "Domain", "url", default="https://open.feishu.cn",
              help="https://open.larksuite.com for Lark, or any other base URL"),
        Field("app_id", "App id", required=True, pattern=r"[A-Za-z0-9_-]+"),
        Field("bot_open_id", "Bot open_id", default="",
              help="Mentions are matched by this id, not by the bot's name"),
        Field("groups", "Configured groups", "list", default=[], pattern=r"[A-Za-z0-9_-]+",
              help="chat ids (oc_…), one per line"),
        Field("receive_all", "Groups that receive all messages", "list", default=[],
              pattern=r"[A-Za-z0-9_-]+",
              help="chat ids whose unaddressed messages become candidates"),
        Field("doc_comments", "Document comments", "bool", default=False),
        Field("comment_receipt", "Receipt reply on a taken comment", default="",
              help="posted on each document comment amux takes as work, and read back "
                   "before the comment is acknowledged (empty: no reply)"),
        # No default: a source without it keeps its config as it was.
        Field("repo", "Default repository", pattern=r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+",
              help="owner/name of a repository a GitHub source serves: tickets from here "
                   "work in a clone of it (empty: an empty directory)"),
        Field("documents", "Watched documents", "list", default=[],
              pattern=rf"({'|'.join(DOC_TYPES)}):[A-Za-z0-9_-]+",
              help="type:token (e.g. docx:doxcnAbc…), one per line; their comments are "
                   "also caught up by polling"),
        Field("freshness_seconds", "Signature freshness window (s)", "int", default=300),
        Field("receiver", "Receiver", default="webhook", pattern=r"webhook|long_connection",
              help="webhook, or long_connection (lark-oapi's client in its own process)"),
        Field("expected_interval", "Expected event interval (s)", "int",
              help="a webhook source with no event for this long shows stale (default "
                   "86400; 0: never); a long connection is judged by its heartbeat"),
        Field("conversation", "Conversation mode", default="off", choices=CONVERSATION_MODES,
              help="off: messages become tickets; topic: each topic (or direct chat) talks "
                   "to its own agent session; singleton: one agent session for the whole bot"),
        # No defaults: a source without them keeps its config as it was.
        Field("bot_profile", "Bot profile", pattern=r"[-a-zA-Z0-9_]+",
              help="slug of the Bot Profile whose launch preset starts conversation "
                   "sessions (empty: the first Bot Profile; none: the worker settings)"),
        Field("language", "Card language", choices=("en", "zh-CN"),
              help="language of the cards amux posts (empty: zh-CN on open.feishu.cn, "
                   "else en)"),
    )
    secret_fields = (
        Field("app_secret", "App secret", secret=True),
        Field("verification_token", "Verification token", required=True, secret=True),
        Field("encrypt_key", "Encrypt key", secret=True),
    )
    health_items = SourceKind.health_items + (
        HealthItem("cursor", "Catch-up cursors (document comments, chats)"),)

    @classmethod
    def check_secrets(cls, config, secrets):
        missing = super().check_secrets(config, secrets)
        polls = (config.get("doc_comments") and config.get("documents")) or config.get("groups")
        talks = (config.get("conversation") or "off") != "off"
        if not secrets.get("app_secret") and (config.get("receiver") == "long_connection"
                                              or polls or talks):
            missing["app_secret"] = ("the long connection, document and chat catch-up and "
                                     "conversation mode need it")
        return missing

    # -- intake ------------------------------------------------------------------------
    def verify(self, incoming: Incoming, now: float | None = None) -> Envelope:
        token = self.secrets.get("verification_token") or ""
        key = self.secrets.get("encrypt_key") or ""
        if not token:
            raise Unauthorized("no_token", "this source has no verification token set")
        # the signature covers the raw body: checked before anything parses it
        signed = bool(key) and self._signature_checked(incoming, key, now)
        body = _opened(_json(incoming.body), key)
        if body.get("type") == "url_verification":
            return _challenge(body, token)
        if key and not signed:
            raise Unauthorized("missing_signature", "X-Lark-Signature is missing")
        return self._event_envelope(body, token)

    def _signature_checked(self, incoming: Incoming, key: str, now: float | None) -> bool:
        """True when the request is signed (and the signature is good and fresh); False
        when it carries no signature at all."""
        sig = incoming.header("x-lark-signature")
        ts = incoming.header("x-lark-request-timestamp")
        nonce = incoming.header("x-lark-request-nonce")
        if not (sig or ts or nonce):
            return False
        expected = signature(ts, nonce, key, incoming.body)
        if not hmac.compare_digest(expected.encode(), sig.encode()):
            raise Unauthorized("bad_signature", "X-Lark-Signature does not match")
        window = int(self.config.get("freshness_seconds") or 300)
        if not ts.isdigit() or abs((now or time.time()) - int(ts)) > window:
            raise Unauthorized("stale_signature", "X-Lark-Request-Timestamp is stale")
        return True

    def _event_envelope(self, body: dict, token: str) -> Envelope:
        if body.get("schema") != "2.0":
            raise Malformed("unsupported_schema", "only schema 2.0 events are accepted")
        header = body.get("header")
        if not isinstance(header, dict):
            raise Malformed("no_header", "header is missing")
        if not _same(header.get("token"), token):
            raise Unauthorized("bad_token", "the verification token does not match")
        event_id = header.get("event_id")
        if not isinstance(event_id, str) or not event_id or len(event_id) > 200:
            raise Malformed("no_event_id", "header.event_id is missing")
        event_type = header.get("event_type")
        if not isinstance(event_type, str) or not event_type:
            raise Malformed("no_event_type", "header.event_type is missing")
        event = body.get("event")
        if not isinstance(event, dict):
            raise Malformed("no_event", "event is missing")
        return self.envelope(event_id, event_type, body)

    def envelope(self, event_id: str, event_type: str, body: dict) -> Envelope:
        return Envelope("event", event_id, event_type, self.thread_of(event_type, body), body)

    def conversation_mode(self) -> str:
        mode = self.config.get("conversation") or "off"
        return mode if mode in CONVERSATION_MODES else "off"

    def thread_of(self, event_type: str, body: dict) -> str:
        event = _d(body.get("event"))
        if event_type == "im.message.receive_v1":
            msg = _d(event.get("message"))
            chat = _s(msg.get("chat_id"))
            if self.conversation_mode() != "off":
                # A topic is its thread id: the message that starts it has one and no root
                # id, its replies carry both; one mailbox keeps the topic in order.
                root = _s(msg.get("thread_id") or msg.get("root_id"))
            else:
                root = _s(msg.get("root_id") or msg.get("thread_id"))
            return f"{chat}:{root}" if root else chat
        if event_type == COMMENT_EVENT:
            meta = _d(event.get("notice_meta"))
            return f"doc:{_s(meta.get('file_token'))}:{_s(event.get('comment_id'))}"
        if event_type in (BOT_DELETED, BOT_ADDED):
            return _s(event.get("chat_id"))
        return ""

    def translate(self, env: Envelope) -> TriggerFacts | Ignored:
        event = _d(env.payload.get("event"))
        if env.event == "im.message.receive_v1":
            return self._message(env, event)
        if env.event == COMMENT_EVENT:
            return self._doc_comment(env, event)
        if env.event in (BOT_DELETED, BOT_ADDED):
            return self._bot_membership(env, event)
        return Ignored("event_not_handled", env.thread)

    def _bot_membership(self, env: Envelope, event: dict) -> Ignored:
        if _s(_d(env.payload.get("header")).get("app_id")) != _s(self.config.get("app_id")):
            return Ignored("foreign_app", env.thread)
        chat = _s(event.get("chat_id"))
        if not chat:
            return Ignored("no_chat_id", env.thread)
        removed = env.event == BOT_DELETED
        return Ignored("bot_removed_from_chat" if removed else "bot_added_to_chat", env.thread,
                       source_facts={"chat": {"chat": chat, "removed": removed}})

    def _message(self, env: Envelope, event: dict) -> TriggerFacts | Ignored:
        # Addressed to this bot = this app's event (header.app_id) mentioning this bot's
        # open id; an event of another app is nobody's business here.
        app = _s(_d(env.payload.get("header")).get("app_id"))
        if app != _s(self.config.get("app_id")):
            return Ignored("foreign_app", env.thread)
        sender = _d(event.get("sender"))
        msg = _d(event.get("message"))
        open_id = _s(_d(sender.get("sender_id")).get("open_id"))
        configured = self.config.get("bot_open_id") or ""
        binding = self.bot_binding()
        if open_id and open_id in (configured, binding.verified):
            return Ignored("own_message", env.thread)
        message_id = _s(msg.get("message_id"))
        if not message_id:
            return Ignored("no_message_id", env.thread)
        chat = _s(msg.get("chat_id"))
        mentions = [m for m in msg.get("mentions") or [] if isinstance(m, dict)]
        mentioned = {_s(_d(m.get("id")).get("open_id")) for m in mentions} - {""}
        bot = binding.bot
        addressed = bool(bot) and bot in mentioned
        # A mention of the bot by an id Lark has not confirmed (configured and verified
        # ids differ, or none is verified yet) is refused, not guessed: it is kept as an
        # ignored trigger naming why, until the operator fixes the configuration.
        refusal = binding.refusal if mentioned & ({configured, binding.verified} - {""}) else ""
        if msg.get("chat_type") == "p2p":  # addressed by being sent to the bot at all
            scope, addressed, receives_all, refusal = "direct", True, True, ""
        elif chat in (self.config.get("groups") or []):
            scope = "group_configured"
            receives_all = chat in (self.config.get("receive_all") or [])
        elif addressed or refusal:
            scope, receives_all = "group_other", False
        else:
            return Ignored("not_addressed", env.thread)
        is_bot = _s(sender.get("sender_type")) not in ("user", "")
        # In a conversation the bot's own mention is how it was called, not what was said
        # ("@amux goal ship it" is the command "goal ship it").
        drop = (bot or configured) if self.conversation_mode() != "off" else ""
        return TriggerFacts(
            external_id=f"message:{message_id}", thread=env.thread, scope=scope,
            actor=open_id, is_human=not is_bot, is_bot=is_bot, addressed=addressed,
            receives_all=receives_all, text=_text(msg, mentions, drop=drop),
            thread_title=_text(msg, mentions)[:120],
            meta={"scope": scope, "chat_id": chat, "chat_type": _s(msg.get("chat_type")),
                  "message_id": message_id, "root_id": _s(msg.get("root_id")),
                  "thread_id": _s(msg.get("thread_id"))},
            refusal=refusal,
        )

    def _doc_comment(self, env: Envelope, event: dict) -> TriggerFacts | Ignored:
        if not self.config.get("doc_comments"):
            return Ignored("doc_comments_off", env.thread)
        if _s(_d(env.payload.get("header")).get("app_id")) != _s(self.config.get("app_id")):
            return Ignored("foreign_app", env.thread)  # is_mentioned names another app's bot
        meta = _d(event.get("notice_meta"))
        actor = _s(_d(meta.get("from_user_id")).get("open_id"))
        bot = self.config.get("bot_open_id") or ""
        if bot and actor == bot:
            return Ignored("own_message", env.thread)
        comment, reply = _s(event.get("comment_id")), _s(event.get("reply_id"))
        if not comment:
            return Ignored("no_comment_id", env.thread)
        text = _s(event.get("text"))  # only a polled comment carries its text
        token = _s(meta.get("file_token"))
        if "text" not in event and token in {t for _, t in self.documents()}:
            # The webhook copy names the comment but not its text: the polled copy of this
            # watched document, which has the text (even when empty: an image only), makes
            # the one trigger.
            return Ignored("awaiting_text", env.thread, poll=True)
        return TriggerFacts(
            external_id=comment_trigger_id(comment, reply, _s(meta.get("notice_type"))),
            thread=env.thread, scope="doc_comment",
            actor=actor, is_human=_s(meta.get("from_user_type")) in ("user", ""),
            is_bot=_s(meta.get("from_user_type")) not in ("user", ""),
            addressed=bool(event.get("is_mentioned")), receives_all=False,
            text=text, thread_title=text[:120],
            meta={"scope": "doc_comment", "file_token": _s(meta.get("file_token")),
                  "file_type": _s(meta.get("file_type")), "comment_id": comment,
                  "reply_id": reply},
            # The thread key names no file type, which replies need: kept on the thread.
            facts={"file_type": _s(meta.get("file_type"))} if meta.get("file_type") else {},
        )

    def scope(self, meta):
        scope = meta.get("scope")
        if scope == "group_configured" and meta.get("chat_id") not in (
            self.config.get("groups") or []
        ):
            return "group_other"
        if scope == "doc_comment" and not self.config.get("doc_comments"):
            return None
        return scope if scope in self.scopes else None

    def environment(self):
        return {"AMUX_LARK_DOMAIN": self.config.get("domain", ""),
                "AMUX_LARK_APP_ID": self.config.get("app_id", "")}

    # -- client ------------------------------------------------------------------------
    def client(self):
        import lark_oapi as lark

        return (
            lark.Client.builder()
            .app_id(self.config.get("app_id", ""))
            .app_secret(self.secrets.get("app_secret", ""))
            .domain(self.config.get("domain") or lark.FEISHU_DOMAIN)
            .log_level(lark.LogLevel.WARNING)
            .timeout(15)
            .build()
        )

    def send(self, message: Message, ctx: Context) -> SendResult:
        """Reply into the thread once per message id: Lark's `uuid` request field is the
        idempotency key, so a replay after a crash creates no second message. A document
        comment thread (`doc:…`) is answered by a reply on that comment."""
        if message.thread.startswith("doc:"):
            return self._send_comment_reply(message)
        from lark_oapi.api.im.v1 import (
            CreateMessageRequest,
            CreateMessageRequestBody,
            ReplyMessageRequest,
            ReplyMessageRequestBody,
        )

        uuid = hashlib.sha256(message.id.encode()).hexdigest()[:50]
        content = json.dumps({"text": message.text}, ensure_ascii=False)
        chat, _, root = message.thread.partition(":")
        target = message.reply_to or root
        try:
            client = self.client()
            if target:
                req = (
                    ReplyMessageRequest.builder().message_id(target)
                    .request_body(ReplyMessageRequestBody.builder().msg_type("text")
                                  .content(content).reply_in_thread(bool(root)).uuid(uuid)
                                  .build())
                    .build()
                )
                resp = client.im.v1.message.reply(req)
            else:
                req = (
                    CreateMessageRequest.builder().receive_id_type("chat_id")
                    .request_body(CreateMessageRequestBody.builder().receive_id(chat)
                                  .msg_type("text").content(content).uuid(uuid).build())
                    .build()
                )
                resp = client.im.v1.message.create(req)
        except Exception:
            log.warning("lark send %s failed", message.id, exc_info=True)
            return SendResult.RETRY
        if resp.success():
            return SendResult.SENT
        if resp.code in GONE_CODES:
            return SendResult.GONE
        log.warning("lark send %s: code %s", message.id, resp.code)
        return SendResult.RETRY

    def send_card(self, *, key: str, card: dict, reply_to: str = "", chat_id: str = "",
                  in_thread: bool = False) -> CardSent:
        """Post an interactive card once per `key` (Lark's `uuid`: a retry after a crash
        answers the message sent the first time): a reply to `reply_to` (in its topic
        with `in_thread`), else a new message in `chat_id`."""
        from lark_oapi.api.im.v1 import (
            CreateMessageRequest,
            CreateMessageRequestBody,
            ReplyMessageRequest,
            ReplyMessageRequestBody,
        )

        uuid = hashlib.sha256(key.encode()).hexdigest()[:50]
        content = json.dumps(card, ensure_ascii=False)
        try:
            client = self.client()
            if reply_to:
                req = (ReplyMessageRequest.builder().message_id(reply_to)
                       .request_body(ReplyMessageRequestBody.builder().msg_type("interactive")
                                     .content(content).reply_in_thread(in_thread).uuid(uuid)
                                     .build()).build())
                resp = client.im.v1.message.reply(req)
            else:
                req = (CreateMessageRequest.builder().receive_id_type("chat_id")
                       .request_body(CreateMessageRequestBody.builder().receive_id(chat_id)
                                     .msg_type("interactive").content(content).uuid(uuid)
                                     .build()).build())
                resp = client.im.v1.message.create(req)
        except Exception:
            log.warning("lark card %s failed", key, exc_info=True)
            return CardSent(SendResult.RETRY)
        if resp.success():
            return CardSent(SendResult.SENT, (resp.data.message_id if resp.data else "") or "")
        log.warning("lark card %s: code %s", key, resp.code)
        gone = resp.code in GONE_CODES
        return CardSent(SendResult.GONE if gone else SendResult.RETRY, code=resp.code)

    def send_text(self, *, key: str, text: str, reply_to: str,
                  in_thread: bool = False) -> CardSent:
        """Reply to `reply_to` with a text message once per `key` (Lark's `uuid`: a retry
        answers the message sent the first time, with its id); `in_thread` opens (or stays
        in) the message's topic."""
        from lark_oapi.api.im.v1 import ReplyMessageRequest, ReplyMessageRequestBody

        uuid = hashlib.sha256(key.encode()).hexdigest()[:50]
        content = json.dumps({"text": text}, ensure_ascii=False)
        try:
            req = (ReplyMessageRequest.builder().message_id(reply_to)
                   .request_body(ReplyMessageRequestBody.builder().msg_type("text")
                                 .content(content).reply_in_thread(in_thread).uuid(uuid)
                                 .build()).build())
            resp = self.client().im.v1.message.reply(req)
        except Exception:
            log.warning("lark text reply %s failed", key, exc_info=True)
            return CardSent(SendResult.RETRY)
        if resp.success():
            return CardSent(SendResult.SENT, (resp.data.message_id if resp.data else "") or "")
        log.warning("lark text reply %s: code %s", key, resp.code)
        return CardSent(SendResult.GONE if resp.code in GONE_CODES else SendResult.RETRY,
                        code=resp.code)

    def post_text(self, *, key: str, text: str, chat_id: str) -> CardSent:
        """A new text message in `chat_id` once per `key` (Lark's `uuid`: a retry answers
        the message sent the first time, with its id). A chat the bot is not in answers
        GONE."""
        from lark_oapi.api.im.v1 import CreateMessageRequest, CreateMessageRequestBody

        uuid = hashlib.sha256(key.encode()).hexdigest()[:50]
        content = json.dumps({"text": text}, ensure_ascii=False)
        try:
            req = (CreateMessageRequest.builder().receive_id_type("chat_id")
                   .request_body(CreateMessageRequestBody.builder().receive_id(chat_id)
                                 .msg_type("text").content(content).uuid(uuid).build())
                   .build())
            resp = self.client().im.v1.message.create(req)
        except Exception:
            log.warning("lark text post %s failed", key, exc_info=True)
            return CardSent(SendResult.RETRY)
        if resp.success():
            return CardSent(SendResult.SENT, (resp.data.message_id if resp.data else "") or "")
        log.warning("lark text post %s: code %s", key, resp.code)
        return CardSent(SendResult.GONE if resp.code in GONE_CODES else SendResult.RETRY,
                        code=resp.code)

    def shown_message(self, message_id: str) -> dict | None:
        """One message as Lark shows it now (`GET /im/v1/messages/:id`): `{"message_id",
        "chat_id", "parent_id", "root_id", "thread_id", "text"}`, or None when Lark does
        not show it (withdrawn, deleted, never there). Raises when Lark cannot answer."""
        from lark_oapi.api.im.v1 import GetMessageRequest

        resp = self.client().im.v1.message.get(
            GetMessageRequest.builder().message_id(message_id).build())
        if not resp.success():
            if resp.code in GONE_CODES:
                return None
            raise LarkApiError("message get", resp)
        items = (resp.data.items if resp.data else None) or []
        item = next((m for m in items if m.message_id == message_id), None)
        if item is None or item.deleted:
            return None
        try:
            text = bounded_json.loads((item.body.content if item.body else "") or "{}").get("text")
        except (ValueError, AttributeError):
            text = None
        return {"message_id": message_id, "chat_id": item.chat_id or "",
                "parent_id": item.parent_id or "", "root_id": item.root_id or "",
                "thread_id": item.thread_id or "",
                "text": text if isinstance(text, str) else ""}

    def patch_card(self, message_id: str, card: dict) -> SendResult:
        """Replace a sent card's content in place (`PATCH /im/v1/messages/:id`); the card
        must have been sent with `config.update_multi` (JSON 2.0 cards are shared)."""
        from lark_oapi.api.im.v1 import PatchMessageRequest, PatchMessageRequestBody

        try:
            req = (PatchMessageRequest.builder().message_id(message_id)
                   .request_body(PatchMessageRequestBody.builder()
                                 .content(json.dumps(card, ensure_ascii=False)).build())
                   .build())
            resp = self.client().im.v1.message.patch(req)
        except Exception:
            log.warning("lark card patch %s failed", message_id, exc_info=True)
            return SendResult.RETRY
        if resp.success():
            return SendResult.SENT
        log.warning("lark card patch %s: code %s", message_id, resp.code)
        return SendResult.GONE if resp.code in PATCH_GONE_CODES else SendResult.RETRY

    def _send_comment_reply(self, message: Message) -> SendResult:
        """Reply on the document comment, once per message id. The comment reply API has no
        idempotency key, so every reply ends with a marker derived from the message id and
        a send first reads the comment's replies: one by the bot carrying the marker means
        a previous attempt got through (a crash between send and commit) and nothing is
        posted again. A text longer than one reply allows goes out in parts, each with its
        own marker, so a replay posts only the parts still missing."""
        from lark_oapi.api.drive.v1 import (
            CreateFileCommentReplyRequest,
            CreateFileCommentReplyRequestBody,
            ReplyContent,
            ReplyElement,
            TextRun,
        )

        try:
            _, token, comment = message.thread.split(":", 2)
        except ValueError:
            return SendResult.GONE
        if not token or not comment:
            return SendResult.GONE
        file_type = self._doc_file_type(token, message.meta)
        parts = comment_parts(message.text)
        markers = [comment_marker(message.id, i, len(parts)) for i in range(len(parts))]
        bot = self.config.get("bot_open_id") or ""
        try:
            client = self.client()
            posted = {m for r in self._comment_replies(client, file_type, token, comment)
                      if not bot or r["user_id"] == bot for m in markers if m in r["text"]}
            for part, marker in zip(parts, markers, strict=True):
                if marker in posted:
                    continue
                text = f"{part}\n{marker}" if part else marker
                element = (ReplyElement.builder().type("text_run")
                           .text_run(TextRun.builder().text(text).build()).build())
                req = (CreateFileCommentReplyRequest.builder().file_token(token)
                       .comment_id(comment).file_type(file_type).user_id_type("open_id")
                       .request_body(CreateFileCommentReplyRequestBody.builder().content(
                           ReplyContent.builder().elements([element]).build()).build())
                       .build())
                resp = client.drive.v1.file_comment_reply.create(req)
                if not resp.success():
                    raise LarkApiError("file comment reply create", resp)
        except LarkApiError as exc:
            log.warning("lark comment reply %s: code %s (HTTP %s)", message.id, exc.code,
                        exc.status)
            return SendResult.GONE if exc.code in COMMENT_GONE_CODES else SendResult.RETRY
        except Exception:
            log.warning("lark comment reply %s failed", message.id, exc_info=True)
            return SendResult.RETRY
        return SendResult.SENT

    def _doc_file_type(self, token: str, meta: dict) -> str:
        """The document's type, which every comment API needs: the thread's (taken from its
        events), else the watched document's, else docx (the common case)."""
        if (meta or {}).get("file_type") in DOC_TYPES:
            return meta["file_type"]
        for file_type, watched in self.documents():
            if watched == token:
                return file_type
        return "docx"

    def thread_context(self, thread, meta, ctx, limit=20):
        """The latest messages of the topic thread (or the chat), oldest first; for a
        document comment, its replies. Reading never moves a cursor."""
        if thread.startswith("doc:"):
            _, token, comment = thread.split(":", 2)
            file_type = meta.get("file_type") or "docx"
            replies = self._comment_replies(self.client(), file_type, token, comment)
            return [{"author": r["user_id"], "text": r["text"], "at": _iso(r["create_time"])}
                    for r in replies[-limit:]]
        from lark_oapi.api.im.v1 import ListMessageRequest

        chat = thread.partition(":")[0]
        container = ("thread", meta["thread_id"]) if meta.get("thread_id") else ("chat", chat)
        req = (ListMessageRequest.builder().container_id_type(container[0])
               .container_id(container[1]).sort_type("ByCreateTimeDesc").page_size(limit)
               .build())
        resp = self.client().im.v1.message.list(req)
        if not resp.success():
            raise RuntimeError(f"lark message list: code {resp.code}")
        out = []
        for item in reversed((resp.data.items if resp.data else None) or []):
            mentions = [{"key": m.key, "name": m.name} for m in item.mentions or []]
            body = {"content": item.body.content if item.body else ""}
            out.append({"author": item.sender.id if item.sender else "",
                        "text": _text(body, mentions), "at": item.create_time or ""})
        return out

    # -- chat history: catch-up polling -----------------------------------------------------
    def catches_up(self) -> bool:
        # its chats always; document comments not in a conversation mode, which takes chat
        # messages only (conversations/)
        return bool(self.chats()) or (bool(self.config.get("doc_comments"))
                                      and bool(self.documents())
                                      and self.conversation_mode() == "off")

    def chats(self, followed=()) -> list[str]:
        """The chats whose history is caught up after downtime: the configured groups and
        `followed`; none without the app secret, which reading them needs (check_secrets
        shows it missing)."""
        if not self.secrets.get("app_secret"):
            return []
        groups = [g for g in self.config.get("groups") or [] if isinstance(g, str)]
        return sorted({g for g in [*groups, *followed] if g})

    def poll_chat(self, chat: str, cursor: DocCursor, now: int,
                  topics: tuple[str, ...] = ()) -> list[tuple[Envelope, DocCursor]]:
        """Messages of `chat` and of its `topics` after `cursor`, oldest first and bounded,
        each as the webhook's envelope of it with the cursor that stands for having stored
        it (intake/sources/lark_history.py). Reading never moves a cursor."""
        return lark_history.catch_up(self, chat, cursor, now, topics)

    # -- document comments: catch-up polling ------------------------------------------------
    def documents(self) -> list[tuple[str, str]]:
        """The watched documents as (file_type, file_token)."""
        out = []
        for item in self.config.get("documents") or []:
            file_type, _, token = item.partition(":")
            if file_type in DOC_TYPES and token:
                out.append((file_type, token))
        return out

    def document_replies(self, file_type: str, token: str) -> list[dict]:
        """Every reply of every comment on one document (a comment's own text is its first
        reply), through lark-oapi's drive v1 file comment list; raises if any page fails."""
        from lark_oapi.api.drive.v1 import ListFileCommentRequest

        client = self.client()
        out: list[dict] = []
        page_token = ""
        while True:
            builder = (ListFileCommentRequest.builder().file_token(token).file_type(file_type)
                       .user_id_type("open_id").page_size(100))
            if page_token:
                builder = builder.page_token(page_token)
            resp = client.drive.v1.file_comment.list(builder.build())
            if not resp.success():
                raise RuntimeError(f"lark file comment list: code {resp.code}")
            data = resp.data
            for comment in (data.items if data else None) or []:
                if not comment.comment_id:
                    continue
                replies = (comment.reply_list.replies if comment.reply_list else None) or []
                if comment.has_more:  # the list shows the first replies only
                    out += self._comment_replies(client, file_type, token, comment.comment_id)
                else:
                    out += [_reply(comment.comment_id, r, i == 0)
                            for i, r in enumerate(replies) if r.reply_id]
            page_token = (data.page_token if data else "") or ""
            if not (data and data.has_more and page_token):
                return out

    def _comment_replies(self, client, file_type: str, token: str, comment: str) -> list[dict]:
        from lark_oapi.api.drive.v1 import ListFileCommentReplyRequest

        out: list[dict] = []
        page_token = ""
        while True:
            builder = (ListFileCommentReplyRequest.builder().file_token(token)
                       .comment_id(comment).file_type(file_type).user_id_type("open_id")
                       .page_size(100))
            if page_token:
                builder = builder.page_token(page_token)
            resp = client.drive.v1.file_comment_reply.list(builder.build())
            if not resp.success():
                raise LarkApiError("file comment reply list", resp)
            data = resp.data
            out += [_reply(comment, r, not out and i == 0)
                    for i, r in enumerate((data.items if data else None) or []) if r.reply_id]
            page_token = (data.page_token if data else "") or ""
            if not (data and data.has_more and page_token):
                return out

    def document_body(self, token: str) -> dict:
        """A docx document's body as authority material — `{"revision", "title", "text"}`
        (docx v1 document and raw_content). Separate from its comment stream on purpose:
        reading the body never captures, acknowledges or passes a comment."""
        from lark_oapi.api.docx.v1 import GetDocumentRequest, RawContentDocumentRequest

        client = self.client()
        doc = client.docx.v1.document.get(
            GetDocumentRequest.builder().document_id(token).build())
        if not doc.success():
            raise LarkApiError("docx document get", doc)
        raw = client.docx.v1.document.raw_content(
            RawContentDocumentRequest.builder().document_id(token).lang(0).build())
        if not raw.success():
            raise LarkApiError("docx raw content", raw)
        document = doc.data.document if doc.data else None
        return {"revision": (document.revision_id if document else None) or 0,
                "title": (document.title if document else "") or "",
                "text": (raw.data.content if raw.data else "") or ""}

    def catch_up_start(self, file_type: str, token: str, now: int) -> DocCursor:
        """Where a newly watched document's comments are taken from: the cursor just before
        the replies of the last CATCHUP_SECONDS, at most the latest CATCHUP_COMMENTS."""
        return DocCursor.catching_up(self.document_replies(file_type, token), now)

    def poll_document(self, file_type: str, token: str,
                      cursor: DocCursor) -> list[tuple[Envelope, DocCursor]]:
        """Replies on one document newer than its cursor, oldest first, each as a
        webhook-shaped envelope with the cursor that stands for having acknowledged it
        (the caller moves the cursor only then). The trigger id is the one the webhook
        path gives the same comment or reply. Reading never moves a cursor."""
        bot = self.config.get("bot_open_id") or ""
        steps = []
        for reply, after in cursor.newer(self.document_replies(file_type, token)):
            delivery = f"poll:doc_comment:{token}:{reply['comment_id']}:{reply['reply_id']}"
            event = {
                "comment_id": reply["comment_id"], "reply_id": reply["reply_id"],
                "is_mentioned": bool(bot) and bot in reply["mentions"],
                "text": reply["text"],
                "notice_meta": {"file_token": token, "file_type": file_type,
                                "from_user_id": {"open_id": reply["user_id"]},
                                "from_user_type": "user",
                                "notice_type": "add_comment" if reply["first"] else "add_reply"},
            }
            body = {"schema": "2.0",
                    "header": {"event_id": delivery, "event_type": COMMENT_EVENT,
                               "create_time": str(reply["create_time"] * 1000),
                               "app_id": _s(self.config.get("app_id"))},
                    "event": event}
            steps.append((self.envelope(delivery, COMMENT_EVENT, body), after))
        return steps


    def read_back(self, message: Message) -> str:
        """The sent `message` as Lark shows it: on a document comment, the id of the bot's
        reply carrying its (last) marker among the comment's replies. "" when Lark does
        not show it (never posted, or lost) — and for a chat message, whose events have no
        cursor to hold back (its sends are idempotent by `uuid`)."""
        if not message.thread.startswith("doc:"):
            return ""
        _, token, comment = message.thread.split(":", 2)
        file_type = self._doc_file_type(token, message.meta)
        parts = comment_parts(message.text)
        marker = comment_marker(message.id, len(parts) - 1, len(parts))
        bot = self.config.get("bot_open_id") or ""
        for r in self._comment_replies(self.client(), file_type, token, comment):
            if marker in r["text"] and (not bot or r["user_id"] == bot):
                return r["reply_id"]
        return ""

    def bot_binding(self) -> lark_identity.Binding:
        """Which bot this source admits mentions of (the verified one, or none and why)."""
        return lark_identity.binding(configured=self.config.get("bot_open_id") or "",
                                     app_id=_s(self.config.get("app_id")),
                                     profile=self.profile)

    def bot_profile(self) -> dict:
        """The bot's identity as Lark states it (`GET /open-apis/bot/v3/info`, tenant
        token): `{"open_id", "app_name"}`; raises LarkApiError when Lark refuses."""
        import lark_oapi as lark

        req = lark.BaseRequest()
        req.http_method = lark.HttpMethod.GET
        req.uri = BOT_INFO
        req.token_types = {lark.AccessTokenType.TENANT}
        resp = self.client().request(req)
        try:
            body = bounded_json.loads(resp.raw.content or b"{}")
        except (ValueError, AttributeError):
            body = {}
        if not isinstance(body, dict) or body.get("code") != 0:
            resp.code = body.get("code") if isinstance(body, dict) else None
            raise LarkApiError("bot info", resp)
        bot = _d(body.get("bot"))
        return {"open_id": _s(bot.get("open_id")), "app_name": _s(bot.get("app_name"))}


def comment_marker(message_id: str, part: int = 0, parts: int = 1) -> str:
    """The tag that ends each reply amux posts on a document comment, e.g. `[amux:3f9a1c2b7e]`
    (`[amux:3f9a1c2b7e 2/3]` for a part): how a replay recognises its own earlier reply,
    since the reply API has no idempotency key. A hash of the message id, not the id itself
    (effect ids mean nothing to readers), short and trailing so it reads as a signature.
    Plain ASCII text on purpose: GitHub's hidden HTML comment is not possible (reply text
    may not carry `<` or `>`), and invisible zero-width characters might be stripped by
    Lark, which would silently break exactly-once; brackets, letters and digits are kept
    as typed and never become a link, a mention or markup."""
    tag = hashlib.sha256(message_id.encode()).hexdigest()[:10]
    return f"[amux:{tag}]" if parts == 1 else f"[amux:{tag} {part + 1}/{parts}]"


def comment_parts(text: str, limit: int = COMMENT_TEXT_LIMIT - 40) -> list[str]:
    """The reply text as it is sent: `<` and `>` escaped (Lark rejects them raw in comment
    text), cut into parts of at most `limit` characters (room is left for the marker),
    preferably after a line break and never inside an escape."""
    rest = text.strip().replace("<", "&lt;").replace(">", "&gt;")
    parts = []
    while len(rest) > limit:
        cut = rest.rfind("\n", limit // 2, limit) + 1 or limit
        amp = rest.rfind("&", cut - 3, cut)
        if amp != -1 and rest[amp:amp + 4] in ("&lt;", "&gt;"):
            cut = amp
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip("\n")
    return parts + [rest]


def comment_trigger_id(comment: str, reply: str, notice_type: str = "") -> str:
    """A new comment is keyed by the comment (its event may or may not name its first
    reply), a reply by comment and reply: webhook and poll make the same id."""
    if notice_type == "add_comment" or not reply or reply == comment:
        return f"doc_comment:{comment}"
    return f"doc_comment:{comment}:{reply}"


@dataclass(frozen=True)
class DocCursor:
    """How far one document's comments (or one chat's messages) were taken: the create time
    (seconds) of the newest reply (message) stored, and those stored at that very second (a
    later one of the same second is still new). Moves only with the triggers it stands
    for."""

    time: int
    seen: tuple[str, ...] = ()

    @classmethod
    def load(cls, stored: dict) -> DocCursor:
        value = stored.get("value") or ""
        when = int(datetime.fromisoformat(value).timestamp()) if value else 0
        return cls(when, tuple(str(s) for s in stored.get("seen") or ()))

    def value(self) -> str:
        return datetime.fromtimestamp(self.time, UTC).isoformat()

    @classmethod
    def catching_up(cls, replies: list[dict], now: int, seconds: int = CATCHUP_SECONDS,
                    limit: int = CATCHUP_COMMENTS) -> DocCursor:
        """The cursor from which `newer` yields the replies of the `seconds` before `now`,
        at most the latest `limit` of them: the bounded catch-up of a new document."""
        recent = sorted((r for r in replies if now - seconds <= r["create_time"] <= now),
                        key=_order)[-limit:]
        if not recent:
            return cls(now)
        first = recent[0]
        # Everything ordered before the first taken reply, within its second, counts as seen.
        same = tuple(r["reply_id"] for r in sorted(replies, key=_order)
                     if r["create_time"] == first["create_time"]
                     and _order(r) < _order(first))
        return cls(first["create_time"], same)

    def passing(self, steps: list[tuple[str, int]]) -> DocCursor:
        """The cursor after the (reply id, create time) `steps`, taken in order."""
        cur = self
        for reply_id, at in steps:
            cur = DocCursor(at, cur.seen + (reply_id,) if at == cur.time else (reply_id,))
        return cur

    def newer(self, replies: list[dict]) -> list[tuple[dict, DocCursor]]:
        new = sorted(
            (r for r in replies if r["create_time"] > self.time
             or (r["create_time"] == self.time and r["reply_id"] not in self.seen)),
            key=_order,
        )
        out, cur = [], self
        for r in new:
            seen = cur.seen + (r["reply_id"],) if r["create_time"] == cur.time else (
                r["reply_id"],)
            cur = DocCursor(r["create_time"], seen)
            out.append((r, cur))
        return out


def _order(r: dict) -> tuple:
    return (r["create_time"], r["comment_id"], r["reply_id"])


def _reply(comment: str, reply, first: bool) -> dict:
    parts, mentions = [], []
    elements = (reply.content.elements if reply.content else None) or []
    for el in elements:
        if el.type == "text_run" and el.text_run:
            parts.append(el.text_run.text or "")
        elif el.type == "docs_link" and el.docs_link:
            parts.append(el.docs_link.url or "")
        elif el.type == "person" and el.person:
            mentions.append(el.person.user_id or "")
            parts.append(f"@{el.person.user_id or ''}")
    return {"comment_id": comment, "reply_id": reply.reply_id, "first": first,
            "user_id": reply.user_id or "", "create_time": int(reply.create_time or 0),
            "text": "".join(parts).strip(), "mentions": mentions}


def _iso(seconds) -> str:
    return datetime.fromtimestamp(int(seconds), UTC).isoformat() if seconds else ""


def _opened(body: dict, key: str) -> dict:
    """The body as sent: decrypted when the source has an encrypt key (then it must be)."""
    if key:
        if not isinstance(body.get("encrypt"), str):
            raise Unauthorized("not_encrypted", "the source expects an encrypted body")
        try:
            return _json(decrypt(key, body["encrypt"]).encode())
        except (ValueError, UnicodeDecodeError):
            raise Malformed("cannot_decrypt", "the body cannot be decrypted") from None
    if "encrypt" in body:
        raise Malformed("encrypted", "the body is encrypted but no encrypt key is set")
    return body


def _challenge(body: dict, token: str) -> Envelope:
    """Lark's check of a new event address: it is answered with its challenge."""
    if not _same(body.get("token"), token):
        raise Unauthorized("bad_token", "the verification token does not match")
    challenge = body.get("challenge")
    if not isinstance(challenge, str):
        raise Malformed("no_challenge", "challenge is missing")
    return Envelope("challenge", challenge=challenge)


def _json(body: bytes) -> dict:
    try:
        value = bounded_json.loads(body)
    except bounded_json.TooDeep as exc:
        raise Malformed("bad_json", str(exc)) from None
    except (ValueError, UnicodeDecodeError):
        raise Malformed("bad_json", "the body is not JSON") from None
    if not isinstance(value, dict):
        raise Malformed("bad_json", "the body must be a JSON object")
    return value


def _same(given, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode(), expected.encode())


def _text(msg: dict, mentions: list[dict], drop: str = "") -> str:
    """The message's text, mentions as @name (the mentions of `drop`, an open_id, left
    out)."""
    try:
        content = bounded_json.loads(_s(msg.get("content")) or "{}")
    except ValueError:
        return ""
    if not isinstance(content, dict):
        return ""
    if isinstance(content.get("text"), str):
        text = content["text"]
    else:  # post: {"title", "content": [[{"tag": "text", "text": …}, …], …]}
        parts = [_s(content.get("title"))]
        for line in content.get("content") or []:
            if isinstance(line, list):
                parts.append("".join(_s(el.get("text")) for el in line if isinstance(el, dict)))
        text = "\n".join(p for p in parts if p)
    for m in mentions:
        if m.get("key"):
            left_out = drop and _s(_d(m.get("id")).get("open_id")) == drop
            text = text.replace(_s(m["key"]), "" if left_out else "@" + _s(m.get("name")))
    return re.sub(r"\s+\n", "\n", text).strip()


def _d(value) -> dict:
    return value if isinstance(value, dict) else {}


def _s(value) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))
