"""What a source plugin may do beyond the four duties of every source (base.py), each an
optional capability declared by naming it among the plugin's bases:

    class GitHub(SourceKind, Polling, OpensPullRequests): ...

Intake asks `isinstance(plug, Polling)`, never whether a method happens to exist. A plugin
that declares a capability must implement each of its methods; the registry checks that at
start-up (`intake.sources.check_capabilities`), so a plugin that claims one without the
methods stops amux from starting, naming the plugin and the methods.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from intake.sources.base import Envelope


@runtime_checkable
class Polling(Protocol):
    """Catches up through the platform's API on what the receiver missed."""

    def poll(self, cursor: str | None, watching: list[dict] | None = None,
             ) -> tuple[list[Envelope], str | None]:
        """Envelopes for everything after `cursor`, and the new cursor; `watching` are the
        open pull requests someone follows (`{"thread", "head_sha"}`)."""
        ...


@runtime_checkable
class DocumentPolling(Protocol):
    """Watches documents and catches up on their comments, one cursor per document."""

    def documents(self) -> list[tuple[str, str]]:
        """The watched documents as (file_type, file_token)."""
        ...

    def poll_document(self, file_type: str, token: str, cursor) -> list[tuple[Envelope, object]]:
        """Comments newer than `cursor`, each with the cursor that stands for having
        stored it."""
        ...


@runtime_checkable
class ChatPolling(Protocol):
    """Catches up on the history of chats, one cursor per chat."""

    def chats(self, followed=()) -> list[str]:
        """The chats whose history is caught up (their ids): the source's own and
        `followed`, those its consumer listens on; none when it cannot read them."""
        ...

    def poll_chat(self, chat: str, cursor, now: int,
                  topics: tuple[str, ...] = ()) -> list[tuple[Envelope, object]]:
        """Messages of `chat` (and of its `topics`, the threads amux knows there) newer
        than `cursor`, oldest first and bounded, each with the cursor that stands for
        having stored it."""
        ...


@runtime_checkable
class ReadsRepliesBack(Protocol):
    """Reads a sent reply back from the platform: proof it is there, not just that the
    send call answered."""

    def read_back(self, message) -> str:
        """The platform's id of the sent `message` (intake.sources.base.Message), or ""
        when the platform does not show it."""
        ...


@runtime_checkable
class OpensPullRequests(Protocol):
    """Opens pull requests for a worker's pushed branch."""

    def open_pull_request(self, *, repo: str, title: str, body: str, head: str, base: str,
                          closes: int | None = None) -> dict:
        ...


@runtime_checkable
class SendsCards(Protocol):
    """Posts interactive cards and updates them in place (Lark: one card per turn)."""

    def send_card(self, *, key: str, card: dict, reply_to: str = "", chat_id: str = "",
                  in_thread: bool = False):
        """Post `card` once per `key` (the platform's idempotency key): as a reply to
        `reply_to` (in its topic with `in_thread`), else into `chat_id`. Answers a
        `CardSent` (result, message id)."""
        ...

    def patch_card(self, message_id: str, card: dict):
        """Replace the content of a card sent before; answers a SendResult."""
        ...


@runtime_checkable
class RepliesInChat(Protocol):
    """Replies to one chat message with text and reads a message back by its id (Lark:
    a connector's source-thread reply, verified before its event is acknowledged)."""

    def send_text(self, *, key: str, text: str, reply_to: str, in_thread: bool = False):
        """Reply to `reply_to` once per `key`; answers a `CardSent` (result, message id)."""
        ...

    def post_text(self, *, key: str, text: str, chat_id: str):
        """A new message in `chat_id` once per `key` (a configured mirror); answers a
        `CardSent`."""
        ...

    def shown_message(self, message_id: str) -> dict | None:
        """The message as the platform shows it now (its `text`, `parent_id`, `root_id`,
        `chat_id`), or None when it does not show it."""
        ...


CAPABILITIES: tuple[type, ...] = (Polling, DocumentPolling, ChatPolling, ReadsRepliesBack,
                                  OpensPullRequests, SendsCards, RepliesInChat)


def declared(cls: type) -> list[type]:
    """The capabilities a plugin class declares (names among its bases)."""
    return [cap for cap in CAPABILITIES if cap in cls.__mro__]


def unimplemented(cls: type, capability: type) -> list[str]:
    """The methods of `capability` that `cls` declares but does not implement (it
    inherits the protocol's own empty body)."""
    members = [name for name, value in vars(capability).items()
               if callable(value) and not name.startswith("_")]
    return [name for name in members if getattr(cls, name, None) is vars(capability)[name]]
