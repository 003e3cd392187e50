"""Session commands used by the API, the panel and other apps (one call each).

Each command validates, writes what must survive (rows, timeline) and then wakes or nudges
the session's host: a live lease means a host serves the session (nudge it through Redis),
otherwise a new host task is enqueued after commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions import control, timeline
from sessions.models import Lifecycle, ProviderProfile, Session, SleepReason, TurnState
from sessions.runtimes import ProviderSpec, RuntimeConfig, WatchdogConfig, errors, get_adapter
from sessions.runtimes.answers import AnswerRefused, check_payload_answers
from sessions.runtimes.base import McpServer
from sessions.runtimes.watchdog import (
    normalize_hard_cap,
    normalize_idle_timeout,
    normalize_repeat_limit,
)

MIN_IDLE_TIMEOUT = 60


class CommandError(Exception):
    """A refused command: ``status`` is the HTTP status the API answers with."""

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 field: str | None = None):
        super().__init__(message)
        if code:
            self.code = code
        if status:
            self.status = status
        self.field = field


class Conflict(CommandError):
    status = 409
    code = "conflict"


def lease_seconds() -> int:
    """The host lease's time to live (renewed every third of it)."""
    return int(settings.AMUX_SESSION_LEASE_SECONDS)


def hostname() -> str:
    """This machine's name in leases and in its own runtime queue (``runtime.<name>``)."""
    return settings.AMUX_HOSTNAME


def runtime_root() -> Path:
    return Path(settings.DATA_DIR) / "runtime"


def state_dir(session: Session) -> Path:
    return runtime_root() / f"session-{session.pk}"


# ------------------------------------------------------------------------ creation
def provider_spec(provider: ProviderProfile) -> ProviderSpec:
    return ProviderSpec(platform=provider.platform,
                        base_url=provider.base_url,
                        api_key=(provider.secrets or {}).get("api_key", ""),
                        slug=provider.slug)


def _mcp_entries(entries: Any) -> list[dict[str, str]]:
    """Validated MCP server entries: ``{"name", "url", "bearer_token_file"?}``. The token
    stays in its file (read when the runtime starts), never in the snapshot."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise CommandError("mcp_servers must be a list", field="mcp_servers")
    out, names = [], set()
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) \
                or not isinstance(entry.get("url"), str):
            raise CommandError("each MCP server needs a name and a url", field="mcp_servers")
        name, url = entry["name"].strip(), entry["url"].strip()
        if not name.replace("_", "").replace("-", "").isalnum() or name in names:
            raise CommandError(f"MCP server name {name!r} must be unique and made of letters, "
                               "digits, '-' and '_'", field="mcp_servers")
        if not url.startswith(("http://", "https://")):
            raise CommandError(f"MCP server {name!r} needs an http(s) url",
                               field="mcp_servers")
        token_file = entry.get("bearer_token_file")
        if token_file is not None and not (isinstance(token_file, str)
                                           and Path(token_file).is_absolute()):
            raise CommandError("bearer_token_file must be an absolute path",
                               field="mcp_servers")
        names.add(name)
        out.append({"name": name, "url": url, "bearer_token_file": token_file})
    return out


def create_session(*, runtime: str, provider: str, model: str, workdir: str | None = None,
                   name: str = "", permission_mode: str = "bypass", effort: str | None = None,
                   idle_timeout_s: int = 300, watchdog: dict[str, Any] | None = None,
                   developer_instructions: str | None = None,
                   prompt_role: str | None = None,
                   mcp_servers: list[dict[str, str]] | None = None,
                   env: dict[str, str] | None = None,
                   path: list[str] | None = None, ask_user: bool = True,
                   background_shell_after: float | None = None) -> Session:
    """Create a session; nothing starts until its first input. ``env`` (stored encrypted)
    and ``path`` extend the runtime's minimal environment, e.g. with a worker's scoped tool
    token and the directory of the `amux` shim. ``background_shell_after`` (seconds) moves
    slow foreground shell commands to the background where the runtime allows it.

    ``prompt_role`` (e.g. "worker"): every turn's system prompt is assembled from the
    current prompt version of that role (prompts_app), ``developer_instructions`` (fixed
    text) after it. ``mcp_servers``: MCP servers offered to the model where the runtime
    takes MCP (see ``_mcp_entries``)."""
    try:
        adapter_cls = get_adapter(runtime)
    except errors.UnknownRuntime as exc:
        raise CommandError(str(exc), code="unknown_runtime", field="runtime") from exc
    profile = ProviderProfile.objects.filter(slug=provider).first()
    if profile is None:
        raise CommandError(f"unknown provider {provider!r}", code="unknown_provider",
                           field="provider")
    try:  # an unsupported platform/wire mode fails before any process starts
        adapter_cls.check_provider(provider_spec(profile))
    except errors.ProviderUnsupported as exc:
        raise CommandError(str(exc), code="provider_unsupported", field="provider") from exc
    if not model:
        raise CommandError("model is required", field="model")
    if permission_mode not in ("bypass", "ask"):
        raise CommandError("permission_mode is 'bypass' or 'ask'", field="permission_mode")
    if background_shell_after is not None and not background_shell_after > 0:
        raise CommandError("background_shell_after must be a positive number of seconds",
                           field="background_shell_after")
    if workdir is not None and not Path(workdir).is_absolute():
        raise CommandError("workdir must be an absolute path", field="workdir")
    if prompt_role is not None:
        from prompts_app.assembly import ORDER

        if prompt_role not in ORDER:
            raise CommandError(f"prompt_role must be one of {', '.join(ORDER)}",
                               field="prompt_role")
    mcp = _mcp_entries(mcp_servers)
    wd = watchdog or {}
    snapshot = {
        "runtime": runtime, "model": model, "effort": effort, "provider": profile.slug,
        "platform": profile.platform, "base_url": profile.base_url,
        "permission_mode": permission_mode,
        "watchdog": {
            "turn_hard_cap_seconds": normalize_hard_cap(wd.get("turn_hard_cap_seconds")),
            "turn_idle_timeout_seconds": normalize_idle_timeout(
                wd.get("turn_idle_timeout_seconds")),
            "repeat_tool_call_limit": normalize_repeat_limit(wd.get("repeat_tool_call_limit")),
        },
        "developer_instructions": developer_instructions,
        "prompt_role": prompt_role,
        "mcp_servers": mcp,
        "extra_path": list(path or []),
        "ask_user": bool(ask_user),
        "background_shell_after": (float(background_shell_after)
                                   if background_shell_after is not None else None),
    }
    with transaction.atomic():
        session = Session.objects.create(
            name=name, runtime=runtime, provider=profile, model=model, snapshot=snapshot,
            workdir=workdir or "", idle_timeout_s=max(MIN_IDLE_TIMEOUT, int(idle_timeout_s)),
            runtime_env={str(k): str(v) for k, v in (env or {}).items()})
        # a new session inherits nothing a former row with its id left queued in Redis (a
        # database reset or restore keeps Redis): an old "archive" would end its first host
        control.clear(session.pk)
        if not workdir:
            session.workdir = str(Path(settings.WORK_DIR) / f"session-{session.pk}")
            session.save(update_fields=["workdir"])
        Path(session.workdir).mkdir(parents=True, exist_ok=True)
        timeline.note(session.pk, "session.created", {"runtime": runtime, "model": model,
                                                      "provider": profile.slug})
    return session


def runtime_config(session: Session, **overrides: Any) -> RuntimeConfig:
    snap = session.snapshot or {}
    provider = session.provider
    if provider is None:
        raise errors.ProviderUnsupported("the session has no provider")
    return RuntimeConfig(
        workdir=Path(session.workdir), state_dir=state_dir(session),
        provider=provider_spec(provider), model=snap.get("model") or session.model,
        effort=snap.get("effort"), permission_mode=snap.get("permission_mode", "bypass"),
        watchdog=WatchdogConfig.from_settings(snap.get("watchdog")),
        mcp_servers=[McpServer(e["name"], e["url"], e.get("bearer_token_file"))
                     for e in snap.get("mcp_servers") or []],
        ask_user=snap.get("ask_user", True),
        background_shell_after=snap.get("background_shell_after"),
        extra_env=dict(session.runtime_env or {}), extra_path=list(snap.get("extra_path") or []),
        runtimes_dir=Path(settings.AMUX_RUNTIMES_DIR), **overrides)


@dataclass(frozen=True)
class TurnPrompt:
    """The system prompt one turn runs with, and where it came from."""

    text: str | None
    role: str | None = None
    revisions: list[int] = field(default_factory=list)


def turn_prompt(session: Session) -> TurnPrompt:
    """Assembled now, from the current prompt version of the session's role (called before
    every turn and at runtime start; never cached across turns)."""
    snap = session.snapshot or {}
    role = snap.get("prompt_role")
    static = (snap.get("developer_instructions") or "").strip()
    parts: list[str] = []
    revisions: list[int] = []
    if role:
        from prompts_app import service as prompts

        text, revisions = prompts.for_turn(role)
        parts.append(text.strip())
    if static:
        parts.append(static)
    return TurnPrompt("\n\n".join(parts) + "\n" if parts else None, role, revisions)


def inline_prompt_seen(session_id: int) -> str | None:
    """The hash of the last prompt a turn of this session ran with (what a resumed ACP
    conversation already holds)."""
    from sessions.models import TimelineEvent

    last = (TimelineEvent.objects.filter(session_id=session_id, type="turn.started",
                                         payload__has_key="prompt_hash")
            .order_by("-seq").values_list("payload", flat=True).first())
    return (last or {}).get("prompt_hash")


# ------------------------------------------------------------------------ commands
def _lease_alive(session: Session) -> bool:
    return bool(session.lease_owner and session.lease_expires_at
                and session.lease_expires_at > timezone.now())


def wake(session_id: int, session: Session | None = None) -> None:
    """Make sure a host serves the session: nudge a live one or enqueue a new one
    (``session``: the row as the caller read it in this transaction)."""
    session = session or Session.objects.get(pk=session_id)
    if session.lifecycle == Lifecycle.ARCHIVED:
        return
    if _lease_alive(session):
        # after commit, or the host could look before the new turn is visible
        transaction.on_commit(lambda: control.send(session_id, "input"))
        return
    from sessions.tasks import enqueue_host

    host = session.lease_host  # the machine that last ran it holds its work directory

    transaction.on_commit(lambda: enqueue_host(session_id, host))


def post_message(session_id: int, text: str, *, key: str | None = None,
                 images: list[dict[str, str]] | None = None):
    if not isinstance(text, str) or not text.strip():
        raise CommandError("text must be a non-empty string", field="text")
    try:
        with transaction.atomic():
            turn, created = timeline.enqueue_input(session_id, text, key=key, images=images)
            if created:  # the session row was locked and read with the new turn
                wake(session_id, turn.session)
    except timeline.SessionArchived as exc:
        raise Conflict(str(exc), code="session_archived") from exc
    return turn


def interrupt(session_id: int) -> None:
    """Interrupt the turn in flight; 409 ``no_turn_in_flight`` when none runs (a queued
    input is not a turn yet). The host interrupts only the turn named here: if that turn
    ended before the host read the request, the timeline says so (``control.refused``)."""
    if Session.objects.filter(pk=session_id, lifecycle=Lifecycle.ARCHIVED).exists():
        raise Conflict("the session is archived: there is nothing to interrupt",
                       code="session_archived")
    turn = timeline.turn_in_flight(session_id)
    if turn is None:
        raise Conflict("no turn is in flight", code="no_turn_in_flight")
    control.send(session_id, "interrupt", turn=turn.seq)


def answer_permission(session_id: int, request_id: str, option_id: str | None) -> None:
    pending = timeline.pending_requests(session_id).get(request_id)
    if pending is None or pending["type"] != "permission.requested":
        raise Conflict(f"no open permission request {request_id!r} (already answered?)",
                       code="not_pending")
    options = [o["id"] for o in pending["payload"].get("options", [])]
    if option_id is not None and option_id not in options:
        raise CommandError(f"option must be one of {options}", field="option")
    if not control.claim_answer(session_id, request_id):
        raise Conflict(f"permission request {request_id!r} was already answered",
                       code="already_answered")
    control.send(session_id, "permission", request_id=request_id, option_id=option_id)


def answer_question(session_id: int, request_id: str, answers: dict[str, Any] | None) -> None:
    pending = timeline.pending_requests(session_id).get(request_id)
    if pending is None or pending["type"] != "question.asked":
        raise Conflict(f"no open question {request_id!r} (already answered?)",
                       code="not_pending")
    if answers is not None:  # None cancels the question (and its native batch)
        if not isinstance(answers, dict):
            raise CommandError("answers must be an object of question id → answer",
                               field="answers")
        try:
            check_payload_answers(pending["payload"].get("questions") or [], answers)
        except AnswerRefused as exc:
            raise CommandError(str(exc), field="answers") from exc
    if not control.claim_answer(session_id, request_id):
        raise Conflict(f"question {request_id!r} was already answered",
                       code="already_answered")
    control.send(session_id, "answer", request_id=request_id, answers=answers)


def sleep(session_id: int) -> None:
    """Manual sleep: refused (409 ``busy``) while a turn is in flight or inputs are queued.
    An input that arrives after this check is served first: the host sleeps once the queue
    is empty, it never drops the request."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        if session.lifecycle == Lifecycle.ARCHIVED:
            raise Conflict("the session is archived", code="session_archived")
        if session.turns.filter(state__in=[TurnState.QUEUED, TurnState.RUNNING]).exists():
            raise Conflict("the session has work in flight", code="busy")
        if _lease_alive(session):
            control.send(session_id, "sleep")
        else:
            session.lifecycle = Lifecycle.SLEEPING
            session.sleep_reason = SleepReason.MANUAL
            session.save(update_fields=["lifecycle", "sleep_reason", "updated_at"])


def archive(session_id: int) -> None:
    """Refused (409 ``busy``) while a turn is in flight or inputs are queued; the host
    retires the runtime as soon as the turn it serves (if any) has ended."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        if session.lifecycle == Lifecycle.ARCHIVED:
            return
        if session.turns.filter(state__in=[TurnState.QUEUED, TurnState.RUNNING]).exists():
            raise Conflict("the session has work in flight; interrupt it first", code="busy")
        session.lifecycle = Lifecycle.ARCHIVED
        session.save(update_fields=["lifecycle", "updated_at"])
        timeline.note(session_id, "session.archived", {})
    control.send(session_id, "archive")

