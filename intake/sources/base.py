"""The source plugin interface (seed 002: a Source has four duties).

1. translate events into triggers (`verify`, `route`, `translate`);
2. define what it receives and its part of the policy (`scope`, `policy_part`);
3. provide replies and thread context (`send`, `thread_context`);
4. keep its receive loop healthy (`health_items`, `poll`).

A plugin imports nothing from the engine, the outbox or the app: it receives plain data
(config and secrets dicts, raw headers and body) and answers plain data (the dataclasses
below; a translated event is an `amux_common.trigger_facts.TriggerFacts`). Intake
(intake/receive.py, intake/process.py) stores, deduplicates and processes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from amux_common.trigger_facts import TriggerFacts

MAX_BODY = 25 * 1024 * 1024  # GitHub's own payload cap
# Where a source's notices go: `<source slug>:<chat id or web chat thread>` (the slug is a
# Django slug).
NOTICE_CHANNEL = r"[-a-zA-Z0-9_]+:\S+"


class Rejected(Exception):  # noqa: N818 - a verdict on input, not a program error
    """The request is refused before anything is stored."""

    status = 400

    def __init__(self, reason: str, message: str = ""):
        super().__init__(message or reason)
        self.reason = reason
        self.message = message or reason


class Unauthorized(Rejected):
    status = 401


class Malformed(Rejected):
    status = 400


class TooLarge(Rejected):
    status = 413


@dataclass(frozen=True)
class Incoming:
    """One HTTP request as received: header names lower-cased, the raw body bytes."""

    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")


@dataclass(frozen=True)
class Envelope:
    """What routing a verified request yields, before anything is stored.

    `kind`: "event" (store and process), "ping" (answer 200), "challenge" (answer with
    `challenge`). `thread` is the thread key the event belongs to (its mailbox), "" when
    the event concerns no thread. `payload` is the decoded JSON (after decryption); `raw`,
    when the request's body was that JSON as it is, those bytes (stored as they came
    instead of encoding the payload again).
    """

    kind: str
    delivery_id: str = ""
    event: str = ""
    thread: str = ""
    payload: dict = field(default_factory=dict)
    challenge: str = ""
    raw: bytes = b""


@dataclass(frozen=True)
class Ignored:
    """An event seen but not admitted, with one content-free reason."""

    reason: str
    thread: str = ""
    facts: dict = field(default_factory=dict)
    # The event is completed by the source's own poll (a comment event without its text):
    # intake asks for a poll of the source right after it is recorded.
    poll: bool = False
    # What the event says about the source itself, kept in its health when it is recorded
    # (intake/record.py): "installation" (a GitHub App installed, removed or suspended),
    # "provider" ({"disconnected", "reason"}: the provider takes the source or not) and
    # "chat" ({"chat", "removed"}: the bot removed from one chat, or added back).
    source_facts: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Message:
    """One outgoing message; `id` is its idempotency key (e.g. the effect id)."""

    id: str
    thread: str
    text: str
    reply_to: str = ""
    meta: dict = field(default_factory=dict)


class SendResult(StrEnum):
    SENT = "sent"
    RETRY = "retry"  # not now; try again later
    GONE = "gone"  # delivery is permanently impossible


@dataclass(frozen=True)
class CardSent:
    """What posting a card came to: `result`, and the platform's id of the message when
    it was sent (also when an earlier attempt with the same key had sent it)."""

    result: SendResult
    message_id: str = ""
    code: int | None = None  # the platform's error code, when it refused


@dataclass(frozen=True)
class Field:
    """One config or secret key: validation, default, and how the settings form shows it."""

    name: str
    label: str
    type: str = "string"  # string, url, bool, list, int, text
    default: Any = None
    required: bool = False
    secret: bool = False
    help: str = ""
    pattern: str = ""
    choices: tuple[str, ...] = ()  # the only values it takes (shown as a select)


@dataclass(frozen=True)
class HealthItem:
    key: str
    label: str


@dataclass
class Context:
    """What the app lends a plugin for sending and polling: nothing but plain callables.

    `store_outgoing(thread, message_id, text)` keeps an outgoing message for sources whose
    channel is amux itself (webchat). `now()` is the clock.
    """

    store_outgoing: Callable[[str, str, str], bool] | None = None
    now: Callable[[], Any] | None = None


class ConfigError(ValueError):
    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


def _coerce(f: Field, value: Any) -> Any:
    if f.type == "bool":
        return _boolean(value)
    if f.type == "int":
        return _whole_number(value)
    if f.type == "list":
        return _strings(f, value)
    return _text(f, value)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
        return True
    if isinstance(value, str) and value.lower() in ("false", "0", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


def _whole_number(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("must be a whole number")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError("must be a whole number") from None


def _strings(f: Field, value: Any) -> list[str]:
    """A list of strings, or one string of them split at commas and line breaks."""
    if isinstance(value, str):
        value = [v.strip() for v in re.split(r"[,\n]", value) if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of strings")
    if f.pattern:
        for v in value:
            if not re.fullmatch(f.pattern, v):
                raise ValueError(f"{v!r} is not valid")
    return value


def _text(f: Field, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    value = value.strip()
    if f.choices and value not in f.choices and not (value == "" and not f.required
                                                      and f.default is None):
        raise ValueError(f"must be one of {', '.join(f.choices)}")
    if f.type == "url" and value and not re.match(r"^https?://[^\s/]+", value):
        raise ValueError("must be an http(s) URL")
    if f.type == "url":
        value = value.rstrip("/")
    if f.pattern and value and not re.fullmatch(f.pattern, value):
        raise ValueError("is not valid")
    return value


class SourceKind:
    """Base class of a source plugin. Subclasses set `kind`, `fields`, `secret_fields`."""

    kind: ClassVar[str] = ""
    label: ClassVar[str] = ""
    fields: ClassVar[tuple[Field, ...]] = ()
    secret_fields: ClassVar[tuple[Field, ...]] = ()
    health_items: ClassVar[tuple[HealthItem, ...]] = (
        HealthItem("last_event", "Last event"),
        HealthItem("last_error", "Last error"),
        HealthItem("rejected", "Events not admitted, by reason"),
    )
    # The policy's scope rows for this kind (the gate's only list of them, registered at
    # start-up through intake/sources/__init__.py); rows whose events have no sender (a CI
    # result) get only the "anyone, unaddressed" cell.
    scopes: ClassVar[tuple[str, ...]] = ()
    has_webhook: ClassVar[bool] = True
    # Seconds a webhook source may stay quiet before it shows stale (intake/liveness.py);
    # a source's config `expected_interval` overrides it; 0: never judged by quietness.
    expected_interval: ClassVar[int] = 0

    def __init__(self, config: dict | None = None, secrets: dict | None = None,
                 profile: dict | None = None):
        self.config = self.defaults() | (config or {})
        self.secrets = dict(secrets or {})
        # The provider profile as last read from the provider (Source.health["profile"]):
        # what translation may trust beyond the operator's config (a Lark bot's open id).
        self.profile = dict(profile or {})

    def catches_up(self) -> bool:
        """Does this source poll its platform to catch up on what its receiver missed
        (the periodic source-poll task asks)? None of the base kind's do."""
        return False

    # -- 1. schema -------------------------------------------------------------------
    @classmethod
    def defaults(cls) -> dict:
        return {f.name: f.default for f in cls.fields if f.default is not None}

    @classmethod
    def validate_config(cls, config: Any, *, partial: bool = False) -> dict:
        """Validated config with defaults filled in; raises ConfigError naming each field."""
        if not isinstance(config, dict):
            raise ConfigError({"config": "must be an object"})
        known = {f.name: f for f in cls.fields}
        errors: dict[str, str] = {}
        clean: dict = {}
        for key in config:
            if key not in known:
                errors[f"config.{key}"] = "unknown key"
        for f in cls.fields:
            if f.name in config and config[f.name] is not None:
                try:
                    clean[f.name] = _coerce(f, config[f.name])
                except ValueError as exc:
                    errors[f"config.{f.name}"] = str(exc)
                    continue
                if f.required and clean[f.name] in ("", []):
                    errors[f"config.{f.name}"] = "is required"
            elif f.required and not partial:
                errors[f"config.{f.name}"] = "is required"
            elif f.default is not None and not partial:
                clean[f.name] = f.default
        if not errors:
            try:
                cls.check(clean)
            except ConfigError as exc:
                errors.update(exc.fields)
        if errors:
            raise ConfigError(errors)
        return clean

    @classmethod
    def check(cls, config: dict) -> None:
        """Cross-field rules; raise ConfigError."""

    @classmethod
    def validate_secrets(cls, secrets: Any) -> dict:
        if not isinstance(secrets, dict):
            raise ConfigError({"secrets": "must be an object"})
        known = {f.name for f in cls.secret_fields}
        errors = {}
        for key, value in secrets.items():
            if key not in known:
                errors[f"secrets.{key}"] = "unknown key"
            elif value is not None and not isinstance(value, str):
                errors[f"secrets.{key}"] = "must be a string"
        if errors:
            raise ConfigError(errors)
        return secrets

    @classmethod
    def check_secrets(cls, config: dict, secrets: dict) -> dict[str, str]:
        """Missing secrets that stop the source from working (shown in health), by key."""
        return {
            f.name: "is not set"
            for f in cls.secret_fields
            if f.required and not secrets.get(f.name)
        }

    # -- 2. intake -------------------------------------------------------------------
    def verify(self, incoming: Incoming) -> Envelope:
        """Check authenticity and decode; raise Unauthorized / Malformed."""
        raise NotImplementedError

    def translate(self, envelope: Envelope) -> TriggerFacts | Ignored:
        """Translate a stored event (pure: payload and config only)."""
        raise NotImplementedError

    def scope(self, meta: dict) -> str | None:
        """The receive scope of a trigger from its stored meta and the config only (the
        revalidation before a resume calls it again); None when no longer received."""
        return meta.get("scope")

    def policy_part(self) -> dict:
        """This source's rows of the admission table (the policy's per-source part)."""
        return {"scopes": list(self.scopes)}

    def environment(self) -> dict[str, str]:
        """Variables for workers, `AMUX_<KIND>_…`; never a credential."""
        return {}

    # -- 3. replies and context -----------------------------------------------------
    def send(self, message: Message, ctx: Context) -> SendResult:
        raise NotImplementedError

    def thread_context(self, thread: str, meta: dict, ctx: Context) -> list[dict]:
        """Messages around a trigger for triage: [{"author", "text", "at"}]."""
        return []


def mentions(text: str, handle: str) -> bool:
    """`@handle` (or `@handle[bot]`) mentioned outside quotes and fenced code."""
    if not text or not handle:
        return False
    handle = handle.lstrip("@").removesuffix("[bot]")
    stripped = re.sub(r"```.*?(```|$)", "", text, flags=re.S)
    stripped = "\n".join(
        line for line in stripped.splitlines() if not line.lstrip().startswith(">")
    )
    stripped = re.sub(r"`[^`\n]*`", "", stripped)
    pattern = rf"(?<![\w/@.-])@{re.escape(handle)}(\[bot\])?(?![\w-])"
    return re.search(pattern, stripped, flags=re.I) is not None
