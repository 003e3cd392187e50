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
from prompts_app.assembly import ORDER
from runtimes import (
    ProviderSpec,
    RuntimeConfig,
    WatchdogConfig,
    catalog,
    errors,
    get_adapter,
    registered,
)
from runtimes import watchdog as watchdogs
from runtimes.answers import AnswerRefused, as_input_text, check_payload_answers
from runtimes.base import McpServer
from runtimes.launch_context import ROLES
from sessions import (
    app_servers,
    capabilities,
    control,
    gateway_rules,
    hooks,
    identities,
    isolation,
    launch,
    locks,
    memory,
    model_credentials,
    native_goals,
    ownership,
    profiles,
    provider_templates,
    timeline,
    workdirs,
)
from sessions import content as rules
from sessions.app_servers import ATTACHED_RUNTIME
from sessions.core import lifecycle
from sessions.execution import DIRECT, CallerSettings, ExecutionSettings
from sessions.hosting import lease_alive, wake
from sessions.manifest import prompt_text
from sessions.models import (
    AgentProfile,
    Lifecycle,
    ProviderProfile,
    Session,
    SleepReason,
    TimelineEvent,
    TurnState,
    WatchdogSettings,
)
from sessions.refusals import CommandError, Conflict, settled_or_at_least
from sessions.workdirs import runtime_root, state_dir

AMUX_MCP = "amux"  # the name amux's own MCP server has in every session


def lease_seconds() -> int:
    """The host lease's time to live (renewed every third of it)."""
    return int(settings.AMUX_SESSION_LEASE_SECONDS)


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


def _check_model_choice(profile: ProviderProfile, model: str, effort: str | None) -> None:
    """A ``@native-variant:`` reference must be one amux issued; an effort must be one the
    provider's catalog declares for the model, when it declares any (otherwise the runtime
    checks it when it runs). A profile on a template's route keeps that template's
    boundary (sessions.provider_templates)."""
    check_template(profile, model)
    if catalog.is_native_variant(model):
        try:
            catalog.parse_native_variant(model)
        except ValueError as exc:
            raise CommandError(str(exc), code="invalid_model", field="model") from exc
    if effort is not None:
        entry = catalog.provider_catalog(profile.model_names).find(model)
        if entry is not None and entry.efforts and effort not in entry.efforts:
            raise CommandError(f"model {model!r} of provider {profile.slug!r} supports the "
                               f"efforts {', '.join(entry.efforts)}", code="invalid_effort",
                               field="effort")


def check_template(profile: ProviderProfile, model: str) -> None:
    """Refused (naming ``model`` or the key field) when the profile's template forbids it."""
    template = provider_templates.of(profile.platform, profile.base_url)
    discovered = None
    if template is not None:
        evidence = capabilities.latest_ok(profile)
        if evidence is not None:
            discovered = provider_templates.Discovery(evidence.revision,
                                                      tuple(evidence.model_ids))
    refusal = provider_templates.check_use(
        template, slug=profile.slug,
        models=profile.model_list, has_key=bool((profile.secrets or {}).get("api_key")),
        model=model, discovered=discovered)
    if refusal is not None:
        raise CommandError(refusal.message, code=refusal.code, field=refusal.field)


def effective_watchdog(session_limits: Any, profile: ProviderProfile | None
                       ) -> tuple[dict[str, int], dict[str, str]]:
    """The watchdog limits a new session freezes: session > provider > global > default.
    A session limit out of range is refused, naming it."""
    clean, problems = watchdogs.check_limits(session_limits)
    if problems:
        name, problem = next(iter(problems.items()))
        field_name = name if name == "watchdog" else f"watchdog.{name}"
        raise CommandError(f"{field_name}: {problem}", field=field_name)
    return watchdogs.resolve([
        ("session", clean),
        ("provider", watchdogs.check_limits(profile.watchdog if profile else None)[0]),
        ("global", watchdogs.check_limits(WatchdogSettings.current().limits)[0]),
    ])


def create_session(*, runtime: str | None = None, provider: str | None = None,
                   model: str | None = None, workdir: str | None = None,
                   name: str = "", permission_mode: str | None = None,
                   effort: str | None = None,
                   idle_timeout_s: int = 300, watchdog: dict[str, Any] | None = None,
                   developer_instructions: str | None = None,
                   prompt_role: str | None = None,
                   mcp_servers: list[dict[str, str]] | None = None,
                   env: dict[str, str] | None = None,
                   path: list[str] | None = None, ask_user: bool = True,
                   background_shell_after: float | None = None,
                   preset: str | None = None, profile: str | None = None,
                   extra_args: list[str] | None = None,
                   execution: ExecutionSettings | None = None,
                   role: str | None = None,
                   scope: ownership.Scope | None = None) -> Session:
    """Create a session; nothing starts until its first input. ``env`` (stored encrypted)
    and ``path`` extend the runtime's minimal environment, e.g. with a worker's scoped tool
    token and the directory of the `amux` shim. ``background_shell_after`` (seconds) moves
    slow foreground shell commands to the background where the runtime allows it.

    ``prompt_role`` (e.g. "worker"): every turn's system prompt is assembled from the
    current prompt version of that role (prompts_app), ``developer_instructions`` (fixed
    text) after it. ``mcp_servers``: MCP servers offered to the model where the runtime
    takes MCP (see ``_mcp_entries``).

    Execution settings (sessions/execution.py): a direct session resolves them here from
    the caller's arguments and ``preset`` (a shortcut); a task passes them resolved
    (``execution``). ``profile``: the expert whose content every turn's prompt carries.

    ``role`` (``session``, ``task``, ``worker``; default ``worker`` for the worker prompt
    role, else ``session``) picks the session-schedule entry the agent is launched with (a
    task's child gets the restricted one).

    ``scope`` (sessions.ownership, the one place that decides it for every kind of
    session): whom the session acts for (``Session.owner``) and whose memory it reads when
    amux's memory is on (sessions.memory). Every session is offered amux's MCP server
    under the name ``amux`` — reached with its own session credential — unless the caller
    gives an ``amux`` entry of its own (a ticket's worker: its assignment's tools)."""
    scope = scope or ownership.Scope()
    if execution is None:
        execution = launch.resolve(DIRECT, CallerSettings(
            runtime=runtime, model=model, effort=effort, provider=provider,
            permission=permission_mode,
            extra_args=tuple(extra_args) if extra_args is not None else None), preset)
    provider_row = _launchable(execution)
    expert = profiles.profile_snapshot(profiles.get_profile(profile))
    workdir, role = _checked(workdir, prompt_role, role, background_shell_after)
    mcp = _mcp_entries(mcp_servers)
    _check_model_choice(provider_row, execution.model, execution.effort)
    limits, limit_sources = effective_watchdog(watchdog, provider_row)
    snapshot = {
        "runtime": execution.runtime, "model": execution.model, "effort": execution.effort,
        "provider": provider_row.slug, "platform": provider_row.platform,
        "base_url": provider_row.base_url,
        "permission_mode": execution.permission.mode,
        # the backend is frozen with the session: a restart or resume runs the same way
        "execution": {**execution.as_snapshot(),
                      "isolation": isolation.selected_backend(),
                      "isolation_reason": isolation.selection_reason(), "role": role,
                      "memory": memory.binding(execution.runtime, scope.memory_owner)},
        "scope": scope.snapshot(),
        # amux's MCP server with the session's own credential (added at each launch)
        "amux_mcp": not any(e["name"] == AMUX_MCP for e in mcp),
        "profile": expert,
        "watchdog": limits, "watchdog_sources": limit_sources,
        "developer_instructions": developer_instructions,
        "prompt_role": prompt_role,
        "mcp_servers": mcp,
        "extra_path": list(path or []),
        "ask_user": bool(ask_user),
        "background_shell_after": (float(background_shell_after)
                                   if background_shell_after is not None else None),
    }
    return _stored(Session(
        owner_id=scope.owner,
        name=name, runtime=execution.runtime, provider=provider_row, model=execution.model,
        snapshot=snapshot, workdir=workdir or "",
        idle_timeout_s=settled_or_at_least(idle_timeout_s),
        runtime_env={str(k): str(v) for k, v in (env or {}).items()}))


def _checked(workdir: str | None, prompt_role: str | None, role: str | None,
             background_shell_after: float | None) -> tuple[str | None, str]:
    """The caller's workdir (resolved) and the session-schedule role, or a refusal naming
    the field at fault."""
    if background_shell_after is not None and not background_shell_after > 0:
        raise CommandError("background_shell_after must be a positive number of seconds",
                           field="background_shell_after")
    if workdir is not None:  # only under work/: linux-dac shares it with the runtime user
        reason = workdirs.problem(workdir)
        if reason is not None:
            raise CommandError(reason, field="workdir")
        workdir = str(Path(workdir).resolve())
    if prompt_role is not None and prompt_role not in ORDER:
        raise CommandError(f"prompt_role must be one of {', '.join(ORDER)}",
                           field="prompt_role")
    role = role or ("worker" if prompt_role == "worker" else "session")
    if role not in ROLES:
        raise CommandError(f"role must be one of {', '.join(ROLES)}", field="role")
    return workdir, role


def _launchable(execution: ExecutionSettings) -> ProviderProfile:
    """The provider the resolved settings name, once their runtime and provider are known
    to start together; refused (naming the field) before any row or process exists."""
    runtime = execution.runtime
    try:
        adapter_cls = get_adapter(runtime)
    except errors.UnknownRuntime as exc:
        raise CommandError(str(exc), code="unknown_runtime", field="runtime") from exc
    if runtime not in registered():  # an attached session is made by attaching only
        raise CommandError(f"runtime {runtime!r} is reached by attaching an agent to a "
                           "running app-server, not started", code="unknown_runtime",
                           field="runtime")
    provider_row = ProviderProfile.objects.filter(slug=execution.provider).first()
    if provider_row is None:
        raise CommandError(f"unknown provider {execution.provider!r}", code="unknown_provider",
                           field="provider")
    try:  # an unsupported platform/wire mode fails before any process starts
        adapter_cls.check_provider(provider_spec(provider_row))
    except errors.ProviderUnsupported as exc:
        raise CommandError(str(exc), code="provider_unsupported", field="provider") from exc
    return provider_row


def _stored(session: Session) -> Session:
    """The new session's row, its work directory and (if its backend runs each session as
    its own user) its runtime identity, and its ``session.created`` event: together."""
    with transaction.atomic():
        session.save(force_insert=True)
        # a new session inherits nothing a former row with its id left queued in Redis (a
        # database reset or restore keeps Redis): an old "archive" would end its first host
        control.clear(session.pk)
        if not session.workdir:
            session.workdir = str(Path(settings.WORK_DIR) / f"session-{session.pk}")
            session.save(update_fields=["workdir"])
        Path(session.workdir).mkdir(parents=True, exist_ok=True)
        if isolation.uses_principal(session.snapshot["execution"]["isolation"]):
            # one identity per session, frozen with the rest of its execution settings
            try:
                identities.for_session(session)
            except errors.RuntimeStartFailed as exc:
                raise CommandError(str(exc), code="no_runtime_identity", status=409) from exc
        timeline.note(session.pk, "session.created", {
            "runtime": session.runtime, "model": session.model,
            "provider": session.provider.slug})
    return session


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
        prompt_per_request=attach is None, **overrides)


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
                           expert_text(recorded, _live_profile(recorded)))


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


def _live_profile(recorded: dict[str, Any] | None) -> dict[str, Any] | None:
    if not recorded:
        return None

    return (AgentProfile.objects.filter(pk=recorded.get("id"), slug=recorded["slug"])
            .values("name", "instructions", "skills").first())


def expert_text(recorded: dict[str, Any] | None, live: dict[str, Any] | None) -> str | None:
    """The expert's instructions and skills, as the profile reads now (``live``: an edit
    reaches the next turn; the execution settings frozen at launch stay as they are). A
    profile deleted since launch leaves the content recorded then."""
    if not recorded:
        return None

    source = live if live is not None else recorded
    if not (source.get("instructions") or "").strip() and not source.get("skills"):
        return None  # a native expert as it comes (the built-in pack): nothing to add
    return prompt_text(source["name"], source.get("instructions") or "",
                       list(source.get("skills") or []))


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
        with transaction.atomic():
            turn, created = timeline.enqueue_input(session_id, text, key=key, images=images,
                                                   parts=parts, origin=origin)
            if created:  # the session row was locked and read with the new turn
                wake(session_id, turn.session)
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


def sleep(session_id: int) -> None:
    """Manual sleep: refused (409 ``busy``) while a turn is in flight or inputs are queued.
    An input that arrives after this check is served first: the host sleeps once the queue
    is empty, it never drops the request."""
    with transaction.atomic(durable=True):
        session = locks.session(session_id)
        if session.lifecycle == Lifecycle.ARCHIVED:
            raise Conflict("the session is archived", code="session_archived")
        if session.turns.filter(state__in=[TurnState.QUEUED, TurnState.RUNNING]).exists():
            raise Conflict("the session has work in flight", code="busy")
        if lease_alive(session):
            control.send(session_id, "sleep")
        else:
            lifecycle.apply(session, lifecycle.RETIRED, SleepReason.MANUAL)
            session.save(update_fields=["lifecycle", "sleep_reason", "updated_at"])


def archive(session_id: int) -> None:
    """Refused (409 ``busy``) while a turn is in flight or inputs are queued; the host
    retires the runtime as soon as the turn it serves (if any) has ended."""
    with transaction.atomic(durable=True):
        session = locks.session(session_id)
        if session.lifecycle == Lifecycle.ARCHIVED:
            return
        if session.turns.filter(state__in=[TurnState.QUEUED, TurnState.RUNNING]).exists():
            raise Conflict("the session has work in flight; interrupt it first", code="busy")
        lifecycle.apply(session, lifecycle.ARCHIVE)
        session.save(update_fields=["lifecycle", "updated_at"])
        model_credentials.revoke(session_id)
        timeline.note(session_id, "session.archived", {})
        hosted = lease_alive(session)
    control.send(session_id, "archive")
    if not hosted:  # else the host retires the runtime, then hands its identity back
        identities.release(session_id)



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
            check_template(session.provider, model)  # a plan's own models only
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
