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

from prompts_app import service as prompts
from runtimes import (
    RuntimeConfig,
    WatchdogConfig,
    catalog,
    errors,
    get_adapter,
)
from runtimes.answers import AnswerRefused, as_input_text, check_payload_answers
from runtimes.base import McpServer
from runtimes.isolation import PRIVATE_HOME
from sessions import (
    actions,
    app_servers,
    control,
    gateway_rules,
    hooks,
    identities,
    isolation,
    locks,
    model_credentials,
    native_goals,
    new_session,
    timeline,
    workdirs,
)
from sessions import content as rules
from sessions.actions import archive, sleep  # noqa: F401 - the commands' names here too
from sessions.app_servers import ATTACHED_RUNTIME
from sessions.hosting import lease_alive, lease_seconds, wake  # noqa: F401
from sessions.models import (
    Lifecycle,
    Session,
    TimelineEvent,
    TurnState,
)
from sessions.new_session import AMUX_MCP, Launch, Prompting, SessionSpec
from sessions.refusals import CommandError, Conflict
from sessions.workdirs import runtime_root, state_dir


# ------------------------------------------------------------------------ creation
def create_session(launch: Launch, prompting: Prompting | None = None,
                   spec: SessionSpec | None = None) -> Session:
    """Create a session from its parts (sessions.new_session); nothing starts until its
    first input."""
    return actions.create(new_session.row(launch, prompting or Prompting(),
                                          spec or SessionSpec()))


def runtime_config(session: Session, *, launch: bool = True,
                   **overrides: Any) -> RuntimeConfig:
    """How the session's runtime starts. ``launch``: a runtime starts with it, so a fresh
    model credential is issued (replacing the running one's); False for a command run in
    the session beside its runtime (a goal's check), which must leave that credential be."""
    snap = session.snapshot or {}
    execution = snap.get("execution") or {}
    isolation.open_paths(Path(settings.DATA_DIR), runtime_root(), Path(settings.WORK_DIR))
    backend = execution.get("isolation") or isolation.selected_backend()
    if isolation.uses_principal(backend):  # one identity per session
        runtime_user, runtime_group = identities.for_session(session), \
            identities.shared_group()
        snap = session.snapshot or {}
    else:
        runtime_user, runtime_group = isolation.runtime_user(), None
    token = (session.runtime_env or {}).get("AMUX_ASSIGNMENT_TOKEN_FILE")
    provider = session.provider
    env, path = dict(session.runtime_env or {}), list(snap.get("extra_path") or [])

    attach = app_servers.endpoint(session)
    if provider is None and attach is None:
        raise errors.ProviderUnsupported("the session has no provider")
    # the runtime reaches its provider only through amux's model gateway, with a
    # credential of its own; an attached app-server keeps its own identity
    reached = (model_credentials.gateway_spec(session, issue=launch) if attach is None
                      else app_servers.codex_attached.ATTACHED_PROVIDER)
    credential = reached.api_key if attach is None and launch else None
    takes_mcp = get_adapter(session.runtime).takes_mcp
    if credential and snap.get("amux_mcp") and not takes_mcp:
        env, path = _amux_command(env, path, credential)
    return RuntimeConfig(
        workdir=Path(session.workdir), state_dir=state_dir(session),
        provider=reached, attach=attach,
        model=catalog.launch_model(snap.get("model") or session.model),
        effort=snap.get("effort"), permission_mode=snap.get("permission_mode", "bypass"),
        native_permission=dict((snap.get("execution") or {}).get("permission", {})
                               .get("native") or {}),
        extra_args=tuple((snap.get("execution") or {}).get("extra_args") or ()),
        watchdog=WatchdogConfig.from_settings(snap.get("watchdog")),
        mcp_servers=_mcp_servers(snap, credential if takes_mcp else None),
        ask_user=snap.get("ask_user", True),
        background_shell_after=snap.get("background_shell_after"),
        extra_env=env, extra_path=path,
        runtimes_dir=Path(settings.AMUX_RUNTIMES_DIR), workdir_roots=workdirs.roots(),
        isolation=backend,
        sandbox_read_only=isolation.sandbox_read_only(Path(session.workdir), env, path),
        amux_url=settings.AMUX_URL,
        role=execution.get("role") or (
            "worker" if snap.get("prompt_role") == "worker" else "session"),
        memory=bool((execution.get("memory") or {}).get("enabled")),
        runtime_user=runtime_user, runtime_group=runtime_group,
        private_files=(Path(token),) if token else (),
        loopback_fence=settings.AMUX_LOOPBACK_FENCE,
        # the gateway applies the current prompt to every request: a changed prompt never
        # needs a runtime restart
        prompt_per_request=attach is None, **_shared_app_server(session, backend),
        **overrides)


def _shared_app_server(session: Session, backend: str) -> dict[str, Any]:
    """Codex under private-home: a thread of a shared app-server (runtimes/codex_shared.py);
    never where each session has an identity of its own."""
    threads = settings.AMUX_CODEX_THREADS_PER_APP_SERVER
    if session.runtime != "codex" or backend != PRIVATE_HOME or not threads:
        return {}
    return {"shared_app_server": threads,
            "shared_app_server_root": runtime_root() / "codex-shared"}


def _mcp_servers(snap: dict[str, Any], credential: str | None) -> list[McpServer]:
    """The session's MCP servers, and amux's own with the session credential issued for
    this launch (the same credential its model requests carry: one per launch, scoped to
    this session, revoked when it is archived)."""
    servers = [McpServer(e["name"], e["url"], e.get("bearer_token_file"))
               for e in snap.get("mcp_servers") or []]
    if snap.get("amux_mcp") and credential:
        servers.append(McpServer(AMUX_MCP, f"{settings.AMUX_URL.rstrip('/')}/mcp",
                                 bearer_token=credential))
    return servers


def _amux_command(env: dict[str, str], path: list[str], credential: str
                  ) -> tuple[dict[str, str], list[str]]:
    """For a runtime that takes no MCP (Pi): the `amux` command first on its PATH, with
    the session credential of this launch (``amux memory search|read``)."""
    if not hooks.session_cli.provided:
        return env, path
    directory = hooks.session_cli()
    return ({**env, "AMUX_API_URL": f"{settings.AMUX_URL.rstrip('/')}/api/v1",
             "AMUX_ASSIGNMENT_TOKEN": credential}, [directory, *path])


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
    role_text, revisions = None, []
    if role:
        role_text, revisions = prompts.for_turn(role)
    recorded = snap.get("profile")
    return composed_prompt(snap, gateway_routed(session), role_text, revisions,
                           hooks.expert_text(recorded))


def composed_prompt(snap: dict[str, Any], routed: bool, role_text: str | None,
                    revisions: list[int], expert: str | None) -> TurnPrompt:
    """The turn's prompt from its parts: the role's prompt, the fixed instructions, the
    expert's text (also what the model gateway makes each request's prompt with)."""
    static = (snap.get("developer_instructions") or "").strip()
    parts = [p for p in ((role_text or "").strip(), static, expert) if p]
    role = snap.get("prompt_role")
    if not parts:
        return TurnPrompt(None, role, revisions)
    text = "\n\n".join(parts) + "\n"
    if routed:
        # marked, so amux's model gateway can put the prompt current at each request in
        # its place (sessions/request_prompts.py)
        text = gateway_rules.mark(text)
    return TurnPrompt(text, role, revisions)


def gateway_routed(session: Session) -> bool:
    """Whether the session's model requests pass amux's model gateway (all but an attached
    app-server's, which runs on its own identity)."""
    return session.runtime != ATTACHED_RUNTIME


def inline_prompt_seen(session_id: int) -> str | None:
    """The hash of the last prompt a turn of this session ran with (what a resumed ACP
    conversation already holds)."""
    cleared = (TimelineEvent.objects.filter(session_id=session_id, type="session.cleared")
               .order_by("-seq").values_list("seq", flat=True).first()) or 0
    # a cleared conversation starts without the prompt the earlier one held
    last = (TimelineEvent.objects.filter(session_id=session_id, type="turn.started",
                                         seq__gt=cleared, payload__has_key="prompt_hash")
            .order_by("-seq").values_list("payload", flat=True).first())
    return (last or {}).get("prompt_hash")


# ------------------------------------------------------------------------ commands
def post_message(session_id: int, text: str | None = None, *, key: str | None = None,
                 images: list[dict[str, str]] | None = None,
                 content: list[dict[str, Any]] | None = None,
                 origin: dict[str, Any] | None = None):
    """Queue one input: ``text``, or ``content`` — ordered text and image parts, checked
    (sessions.content) and kept with the input in the database. ``origin``: where it came
    from, ``{"via": "web" | "lark" | "api" | …, "actor": …}`` (plus, from Lark, the place:
    source, conversation, chat_id, message_id, thread_key, generation); every surface
    enters through here, so one session's inputs have one order whatever their origin.
    A goal command (where the runtime has native goals) is carried out instead: its
    outcome (a dict) is returned."""
    if origin is not None and (not isinstance(origin, dict)
                               or not isinstance(origin.get("via"), str)):
        raise CommandError('origin must be an object with a "via" string', field="origin")
    parts = None
    if content is not None:
        parts = _content_parts(session_id, content)
        text = text_of_parts(parts)
    if not isinstance(text, str) or not text.strip() and not parts:
        raise CommandError("text must be a non-empty string", field="text")

    if (outcome := native_goals.intercept(session_id, text, origin)) is not None:
        return outcome
    try:
        # the host is woken (after commit) by the input's own transaction: on PostgreSQL
        # two round trips, BEGIN with the lock and COMMIT with the rows (fast_writes.atomic)
        turn, _ = timeline.enqueue_input(session_id, text, key=key, images=images,
                                         parts=parts, origin=origin,
                                         queued_with=lambda locked: wake(session_id, locked))
    except timeline.SessionArchived as exc:
        raise Conflict(str(exc), code="session_archived") from exc
    return turn


def set_mirrored(session_id: int, mirrored: bool = True) -> None:
    """Mark a session as shown elsewhere (a Lark conversation): from the next event on, its
    timeline tells ``sessions.hooks.timeline_mirrored``."""
    Session.objects.filter(pk=session_id).exclude(mirrored=mirrored).update(
        mirrored=mirrored, updated_at=timezone.now())


def interrupt(session_id: int, *, turn_id: int | None = None) -> None:
    """Interrupt the turn in flight; 409 ``no_turn_in_flight`` when none runs (a queued
    input is not a turn yet) or, with ``turn_id``, when the turn in flight is another one.
    The host interrupts only the turn named here: if that turn ended before the host read
    the request, the timeline says so (``control.refused``). The request is also kept on
    the turn (``input.interrupt_requested``): a host that dies before it lands does not
    continue the turn afterwards (timeline.reconcile_running ends it cancelled)."""
    if Session.objects.filter(pk=session_id, lifecycle=Lifecycle.ARCHIVED).exists():
        raise Conflict("the session is archived: there is nothing to interrupt",
                       code="session_archived")
    turn = timeline.turn_in_flight(session_id)
    if turn is None or (turn_id is not None and turn.pk != turn_id):
        raise Conflict("no turn is in flight" if turn is None
                       else "that turn is not the one in flight", code="no_turn_in_flight")
    timeline.note_interrupt_requested(turn.pk)
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
    """Answer an open question (``answers``: {question id: label, text or list of labels};
    ``None`` cancels it and its native batch). A native request gets the answer through the
    session's host; an async question (``delivery: "async"``, no native request waits) gets
    it as an ordinary input of the same session. Late, duplicate and invalid answers are
    refused (409 / 400) and change nothing; a sensitive answer is never repeated."""
    pending = timeline.pending_requests(session_id).get(request_id)
    if pending is None or pending["type"] != "question.asked":
        raise Conflict(f"no open question {request_id!r} (already answered?)",
                       code="not_pending")
    questions = pending["payload"].get("questions") or []
    if answers is not None:  # None cancels the question (and its native batch)
        if not isinstance(answers, dict):
            raise CommandError("answers must be an object of question id → answer",
                               field="answers")
        try:
            check_payload_answers(questions, answers)
        except AnswerRefused as exc:
            raise CommandError(str(exc), field="answers") from exc
    if not control.claim_answer(session_id, request_id):
        raise Conflict(f"question {request_id!r} was already answered",
                       code="already_answered")
    if pending["payload"].get("delivery") == timeline.ASYNC:
        _answer_async(session_id, request_id, questions, answers)
        return
    control.send(session_id, "answer", request_id=request_id, answers=answers)


def _answer_async(session_id: int, request_id: str, questions: list[dict[str, Any]],
                  answers: dict[str, Any] | None) -> None:
    """The answer queued as the session's next ordinary input (idempotent on the request)
    and the question closed, in one transaction; a cancel only closes it."""
    outcome: dict[str, Any] = {"request_id": request_id}
    try:
        with transaction.atomic():
            if answers is None:
                outcome["cancelled"] = True
            else:
                turn, created = timeline.enqueue_input(
                    session_id, as_input_text(questions, answers),
                    key=f"answer:{request_id}")
                if not created:
                    raise Conflict(f"question {request_id!r} was already answered",
                                   code="already_answered")
                outcome["input_turn"] = turn.seq
                wake(session_id, turn.session)
            timeline.note(session_id, "question.answered", outcome)
    except timeline.SessionArchived as exc:
        raise Conflict(str(exc), code="session_archived") from exc


# ------------------------------------------------------------------------ content
def text_of_parts(parts: list[dict[str, Any]]) -> str:
    return "\n\n".join(p["text"] for p in parts if p.get("type") == "text")


def _content_parts(session_id: int, content: Any) -> list[dict[str, Any]]:
    """Checked parts, or a 400 naming the part; images only where the runtime takes them."""
    try:
        parsed = rules.parse_parts(content)
    except rules.ContentError as exc:
        field = "content" if exc.index is None else f"content.{exc.index}"
        raise CommandError(str(exc), field=field) from exc
    first_image = next((i for i, p in enumerate(parsed) if isinstance(p, rules.Image)), None)
    if first_image is not None:
        session = Session.objects.filter(pk=session_id).first()
        why = images_refused(session) if session is not None else None
        if why:
            raise CommandError(why, code="images_unsupported",
                               field=f"content.{first_image}")
    return rules.stored(parsed)


def images_refused(session: Session) -> str | None:
    """Why this session's runtime takes no image, when that is known now (None: it does, or
    it is not known before the agent starts — then the text goes alone, with an error on
    the timeline)."""
    try:
        caps = get_adapter(session.runtime).static_capabilities()
    except errors.UnknownRuntime:
        return f"unknown runtime {session.runtime!r}"
    facts = session.runtime_facts or {}
    if "image_input" in facts:
        if facts["image_input"] is not True:
            return ("the agent did not declare promptCapabilities.image: it takes no "
                    "images")
        return None
    if caps.images or session.runtime in ("acp", "claude"):
        return None  # ACP: known once the agent has answered initialize
    return f"the {session.runtime} runtime takes no images"


# ------------------------------------------------------------------------ runtime controls
def _idle_session(session_id: int) -> Session:
    """The session, locked; 409 when archived or a turn is in flight."""
    session = locks.session(session_id)
    if session.lifecycle == Lifecycle.ARCHIVED:
        raise Conflict("the session is archived", code="session_archived")
    if session.turns.filter(state=TurnState.RUNNING).exists():
        raise Conflict("a turn is in flight; interrupt it or wait until it ends",
                       code="busy")
    return session


KEEP_EFFORT = object()  # set_model without an effort: the session's effort stays


def set_model(session_id: int, model: str, effort: Any = KEEP_EFFORT) -> str:
    """Switch the model (and effort) between turns; returns how: ``requested`` (the
    session's host applies it — in place where the runtime can, else a handoff restart —
    and records ``session.model_changed`` or an ``error`` with this request's id) or
    ``recorded`` (no host runs: the next start uses it, resuming the conversation)."""
    import uuid

    if not isinstance(model, str) or not model.strip():
        raise CommandError("model is required", field="model")
    if effort is not KEEP_EFFORT and effort is not None and (
            not isinstance(effort, str) or not effort.strip()):
        raise CommandError("effort must be a non-empty string or null", field="effort")
    model = model.strip()
    request_id = uuid.uuid4().hex[:12]
    with transaction.atomic():
        session = _idle_session(session_id)
        if session.provider is not None:
            new_session.check_template(session.provider, model)  # a plan's own models only
        if effort is KEEP_EFFORT:
            effort = (session.snapshot or {}).get("effort")
        if lease_alive(session):
            control.send(session_id, "model", model=model, effort=effort,
                         request_id=request_id)
            return request_id
        snap = dict(session.snapshot or {})
        previous = {"model": snap.get("model") or session.model, "effort": snap.get("effort")}
        snap.update(model=model, effort=effort)
        session.snapshot, session.model = snap, model
        session.save(update_fields=["snapshot", "model", "updated_at"])
        timeline.note(session_id, "session.model_changed", {
            "model": model, "effort": effort, "previous": previous, "how": "next_start",
            "request_id": request_id})
    return request_id


def clear(session_id: int) -> str:
    """A new native conversation in the same work directory with the same settings; the amux
    session (identity, timeline, queue) stays. Returns the request id the host's
    ``session.cleared`` carries."""
    import uuid

    request_id = uuid.uuid4().hex[:12]
    with transaction.atomic():
        session = _idle_session(session_id)
        if lease_alive(session):
            control.send(session_id, "clear", request_id=request_id)
            return request_id
        session.native_ref = ""
        session.save(update_fields=["native_ref", "updated_at"])
        timeline.note(session_id, "session.cleared", {"how": "next_start",
                                                      "request_id": request_id})
    return request_id


def compact_refused(session: Session) -> str | None:
    """Why the session cannot compact now (None: it can)."""
    if session.runtime in ("codex", "pi"):
        return None  # the app-server's thread/compact/start; Pi's RPC compact command
    if session.runtime in ("acp", "claude"):
        commands = (session.runtime_facts or {}).get("commands")
        if commands is None:
            return ("the agent has not advertised its commands yet (they arrive once it "
                    "runs): send a message first")
        if "compact" not in commands:
            return "the agent does not advertise a compact command"
        return None
    return f"the {session.runtime} runtime has no compaction amux can run as a turn"


def compact(session_id: int):
    """Compact the native conversation as a turn of its own (queued like an input, with
    the normal terminal rules); 409 ``compact_unsupported`` naming why when it cannot."""
    with transaction.atomic():
        session = _idle_session(session_id)
        why = compact_refused(session)
        if why:
            raise Conflict(why, code="compact_unsupported")
        turn, created = timeline.enqueue_input(session_id, "/compact", command="compact")
        if created:
            wake(session_id, turn.session)
    return turn
