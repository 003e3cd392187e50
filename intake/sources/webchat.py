"""Web chat as a source: messages posted from the panel or the REST API.

An operator can work with amux with no external account. There is no webhook: the API
view hands a posted message to intake like any other delivery. Replies are kept by amux
itself (the app lends `ctx.store_outgoing`), once per message id.
"""

from __future__ import annotations

from intake.sources.base import (
    Context,
    Envelope,
    Field,
    Ignored,
    Message,
    SendResult,
    SourceKind,
    TriggerFacts,
)
from policy.gate import SCOPES


class WebChat(SourceKind):
    kind = "webchat"
    label = "Web chat"
    # Every web chat message is written to the agent, like a direct message.
    scopes = SCOPES["webchat"]  # the policy's rows for this kind (policy/gate.py)
    has_webhook = False
    fields = (
        Field("title", "Title shown above the chat", default="amux"),
        # No default: a source without it keeps its config as it was.
        Field("repo", "Default repository", pattern=r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+",
              help="owner/name of a repository a GitHub source serves: tickets from here "
                   "work in a clone of it (empty: an empty directory)"),
    )
    secret_fields = ()

    @staticmethod
    def envelope(message_id: str, thread: str, author: str, text: str) -> Envelope:
        payload = {"id": message_id, "thread": thread, "author": author, "text": text}
        return Envelope("event", message_id, "message", thread, payload)

    def translate(self, env: Envelope) -> TriggerFacts | Ignored:
        p = env.payload
        text = p.get("text") if isinstance(p.get("text"), str) else ""
        if not text.strip():
            return Ignored("empty_message", env.thread)
        return TriggerFacts(
            external_id=f"message:{env.delivery_id}", thread=env.thread, scope="direct",
            actor=str(p.get("author") or ""), is_human=True, is_bot=False, addressed=True,
            receives_all=True, text=text, thread_title=text.strip().splitlines()[0][:120],
            meta={"scope": "direct"},
        )

    def send(self, message: Message, ctx: Context) -> SendResult:
        if ctx.store_outgoing is None:
            return SendResult.RETRY
        ctx.store_outgoing(message.thread, message.id, message.text)
        return SendResult.SENT
