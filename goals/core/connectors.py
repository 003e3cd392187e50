"""What each connector source kind can really do (one table), and the checks a connector's
settings pass against it. Capture, ingress and reply are chosen independently; each is
refused, naming its field, when the kind cannot support it."""

from __future__ import annotations

from dataclasses import dataclass

from goals.core.lifecycle import Faults, Refused

SOURCE_KINDS = ("lark_group_message", "lark_document_comment", "web_chat")
CAPTURE_SCOPES = ("mentions", "configured_chat_all")
INGRESS_MODES = ("live_steering", "session_queue", "async_inbox")
FALLBACKS = ("none", "session_queue", "async_inbox")
REPLY_MODES = ("none", "source_thread", "topic_reply", "source_comment", "configured_mirror")
STATES = ("connected", "listening", "stale", "disconnected")
# The stored `state` says only whether the operator attached the connector (anything but
# "disconnected") or detached it; what it shows is derived by `live_state`.
LARK_BOT = "lark_group_message"  # the kind that is an agent's "Lark Bot connection"
DOCUMENT_COMMENT = "lark_document_comment"
# Lark's file types whose comments can be listed; a bare document token is a docx.
DOC_TYPES = ("doc", "docx", "sheet", "bitable", "slides", "file")
DEFAULT_DOC_TYPE = "docx"


@dataclass(frozen=True)
class Kind:
    provider_kind: str
    label: str
    surface_role: str
    capabilities: tuple[str, ...]
    ingress: tuple[str, ...]
    replies: tuple[str, ...]
    needs_source: bool
    # (capability, exact scopes) the provider app must hold for that capability
    permissions: tuple[tuple[str, tuple[str, ...]], ...] = ()


KINDS: dict[str, Kind] = {
    "lark_group_message": Kind(
        "lark", "Lark Bot", "conversation_transport",
        ("live_delivery", "history_catch_up", "thread_reply", "topic_reply", "ack",
         "reply_readback"),
        INGRESS_MODES, ("none", "source_thread", "topic_reply", "configured_mirror"), True,
        (("live_delivery", ("im:message.group_at_msg:readonly",)),
         ("live_delivery_all", ("im:message.group_msg",)),
         ("history_catch_up", ("im:message:readonly",)),
         ("thread_reply", ("im:message:send_as_bot",)))),
    "lark_document_comment": Kind(
        "lark", "Lark doc comments", "collaboration_event_source",
        ("incremental_listing", "anchor_readback", "comment_reply", "reply_readback",
         "resolved_state"),
        # a comment normally waits in the inbox; steering a live session is an explicit choice
        ("async_inbox", "live_steering"), ("none", "source_comment"), True,
        (("incremental_listing", ("docs:document.comment:read",)),
         ("comment_reply", ("docs:document.comment:create",)))),
    "web_chat": Kind(
        "web", "Web chat", "conversation_transport", ("live_delivery",),
        ("live_steering", "session_queue"), ("none",), False),
}


def in_conversation_mode(source_config: dict | None) -> bool:
    """A Lark source conversations owns (its `conversation` set and not off): it feeds
    sessions of its own, so no connector may listen on it."""
    return (source_config or {}).get("conversation") not in (None, "", "off")


def label(source_kind: str) -> str:
    kind = KINDS.get(source_kind)
    return kind.label if kind else source_kind


def _one_of(value: str, allowed: tuple[str, ...], field: str, why: str = "") -> None:
    if value not in allowed:
        raise Refused(f"{field} must be one of {', '.join(allowed)}{why}", code="invalid",
                      status=400, field=field)


def check(*, source_kind: str, provider_kind: str | None, capture_scope: str,
          ingress_mode: str, fallback: str, reply_mode: str,
          faults: Faults | None = None) -> Kind | None:
    """Refuse settings the kind cannot support, every faulty one at once (into ``faults``
    when given, to be settled with the command's other checks); answers the kind."""
    own = faults is None
    faults = Faults() if own else faults
    faults.check(_one_of, source_kind, SOURCE_KINDS, "source_kind")
    kind = KINDS.get(source_kind)
    if kind is not None and provider_kind not in (None, "", kind.provider_kind):
        faults.add(f"a {source_kind} connector's provider_kind is {kind.provider_kind}",
                   field="provider_kind")
    faults.check(_one_of, capture_scope, CAPTURE_SCOPES, "capture_scope")
    if ingress_mode not in INGRESS_MODES:
        faults.check(_one_of, ingress_mode, INGRESS_MODES, "ingress_mode")
    elif kind is not None:
        faults.check(_one_of, ingress_mode, kind.ingress, "ingress_mode", f" for {source_kind}")
    if fallback not in FALLBACKS:
        faults.check(_one_of, fallback, FALLBACKS, "fallback")
    elif fallback != "none":
        if ingress_mode != "live_steering":
            faults.add("only a live_steering connector takes a fallback", field="fallback")
        elif kind is not None:
            faults.check(_one_of, fallback, tuple(m for m in kind.ingress if m != ingress_mode),
                         "fallback", f" for {source_kind}")
    if reply_mode not in REPLY_MODES:
        faults.check(_one_of, reply_mode, REPLY_MODES, "reply_mode")
    elif kind is not None:
        faults.check(_one_of, reply_mode, kind.replies, "reply_mode", f" for {source_kind}")
    if own:
        faults.settle()
    return kind


def configured_groups(source_config: dict | None) -> list[str]:
    """The chats a Lark source is configured for (its `groups`)."""
    groups = (source_config or {}).get("groups") or []
    return [g for g in groups if isinstance(g, str)] if isinstance(groups, list) else []


def check_mirror(*, source_kind: str, reply_mode: str, mirror_ref: str,
                 groups: list[str]) -> str:
    """A configured_mirror connector names its mirror place: for a Lark Bot, one of the
    source's configured chats. Any other reply mode takes no mirror. Answers the mirror."""
    if reply_mode != "configured_mirror":
        if mirror_ref:
            raise Refused("mirror_ref is only for reply_mode configured_mirror",
                          code="invalid", status=400, field="mirror_ref")
        return ""
    if not mirror_ref:
        raise Refused("reply_mode configured_mirror needs mirror_ref: the chat replies go to",
                      code="invalid", status=400, field="mirror_ref")
    if source_kind == LARK_BOT and mirror_ref not in groups:
        raise Refused(f"mirror_ref {mirror_ref!r} is not one of the Lark source's configured "
                      "groups", code="invalid", status=400, field="mirror_ref")
    return mirror_ref


def check_channel(*, source_kind: str, source_ref: str, groups: list[str]) -> str:
    """A Lark Bot connection's channel is one of its source's configured chats."""
    if source_kind != LARK_BOT:
        raise Refused(f"a {label(source_kind)} connection has no channel to choose",
                      code="no_channel", status=409, field="source_ref")
    if not isinstance(source_ref, str) or source_ref not in groups:
        raise Refused(f"source_ref {source_ref!r} is not one of the Lark source's configured "
                      "groups", code="invalid", status=400, field="source_ref")
    return source_ref


def permission_requirements(source_kind: str, *, domain: str, app_id: str,
                            capture_scope: str, reply_mode: str) -> list[dict]:
    """Typed guidance: which exact scopes each capability in use needs, and where the
    selected app grants them. Receive, reply and catch-up stay separate entries."""
    kind = KINDS[source_kind]
    used = set(kind.capabilities)
    if capture_scope == "configured_chat_all":
        used.add("live_delivery_all")
    if reply_mode == "none":
        used -= {"thread_reply", "comment_reply"}
    repair = f"{domain.rstrip('/')}/app/{app_id}/auth" if app_id else ""
    return [{"capability": cap, "provider": kind.provider_kind, "scopes": list(scopes),
             "publication_required": True, "repair_url": repair}
            for cap, scopes in kind.permissions if cap in used]


def document_ref(source_ref: str) -> tuple[str, str]:
    """A document-comment connector's ``source_ref``: ``<type>:<token>`` or a bare token
    (a docx), as (file_type, token). Refused naming ``source_ref`` when malformed."""
    file_type, sep, token = (source_ref or "").strip().partition(":")
    if not sep:
        file_type, token = DEFAULT_DOC_TYPE, file_type
    if file_type not in DOC_TYPES or not token or ":" in token or len(token) > 200:
        raise Refused("source_ref must be a document token, optionally <type>:<token> with "
                      f"a type among {', '.join(DOC_TYPES)}", code="invalid", status=400,
                      field="source_ref")
    return file_type, token


def comment_acknowledgement(events: list[tuple[str, str]]) -> str | None:
    """Whether a document comment the inbox took is acknowledged, from the (state,
    outcome) of each inbox event it became (one per agent whose connector names the
    document): None when it became none (the inbox does not hold it: the source's own
    rule acknowledges it), "" while any is not acknowledged (its cursor must wait), else
    the outcome — ``replied`` when any reply was read back, else the first one's."""
    if not events:
        return None
    if any(state != "acked" for state, _ in events):
        return ""
    outcomes = [outcome or "no_response" for _, outcome in events]
    return "replied" if "replied" in outcomes else outcomes[0]


def live_state(*, detached: bool, detached_at, source_kind: str, has_source: bool,
               source_state: tuple[str, str, object] | None,
               removed_chats: dict | None, source_ref: str, created_at):
    """A connector's state as shown, with its reason and since when: `disconnected` when
    the operator detached it, or the provider removed the bot from its chat; a web chat
    (amux's own page, nothing to lose) is `connected`; otherwise its source's liveness
    (`listening`, `stale`, `disconnected`: intake/liveness_rules.py). Answers
    (state, reason, since)."""
    if detached:
        return "disconnected", "detached", detached_at
    if not has_source:
        return "connected", "", created_at
    removed = (removed_chats or {}).get(source_ref) if source_kind == LARK_BOT else None
    if removed:
        return "disconnected", "bot_removed_from_chat", removed
    if source_state is None:
        return "stale", "source_unknown", None
    return source_state
