"""The host-local broker of attachable Codex app-servers (seed 003, Mode A).

An app-server is either started by amux on the operator's request — ``codex app-server
--listen ws://127.0.0.1:<free port>`` with a capability token file, in a private
``CODEX_HOME`` whose ``config.toml`` is the managed Codex's (``codex.render_config``: the
configured provider, its key in the child's environment only) — and left running in its
own process group, detached from the request that started it; or registered by the
operator with its URL and token. Its threads are the attachable sessions.

Liveness is checked by connecting and completing the handshake (``describe``); a public
descriptor names the app-server by its ``ref`` and says nothing of its token, URL or
local paths (a workspace is shown as a digest).

Attaching (goals.actions.attach) creates an amux session of runtime ``codex-attached``
whose host drives the app-server's thread over the websocket (``endpoint``); closing,
sleeping or archiving that session closes only its connection.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from amux_common import aio
from runtimes import codex_attached, codex_shared, errors, loopback_fence
from runtimes.base import PROVIDER_KEY_ENV, SYSTEM_PATH
from runtimes.codex import codex_binary, render_config
from runtimes.isolation import BWRAP, LINUX_DAC, Launch
from sessions import (
    actions,
    identities,
    isolation,
    model_credentials,
    refusals,
    workdirs,
)
from sessions.models import AppServer, ProviderProfile, Session

ATTACHED_RUNTIME = codex_attached.CodexAttachedAdapter.name
HOST_KIND = "codex_app_server"
CAPABILITIES = ("message", "stream", "interrupt", "resume")
READY_SECONDS = 30.0
TAG_ENV = "AMUX_APP_SERVER_TAG"
# where an attached agent's own commands find amux and the token of its binding (written on
# attach, emptied on detach: the app-server outlives every binding, so the file is read on
# every call, never the environment)
API_URL_ENV, AGENT_TOKEN_ENV = "AMUX_API_URL", "AMUX_AGENT_TOKEN_FILE"
AGENT_TOKEN_FILE = "agent-token"

# the processes this process started, so an exit is reaped (no zombie keeps its pid)
_children: dict[int, subprocess.Popen] = {}


def refused(message: str, *, field: str | None = None, code: str = "invalid",
            status: int = 400) -> refusals.CommandError:
    return refusals.CommandError(message, code=code, status=status, field=field)


def redact(path: str) -> str:
    """A workspace as an opaque reference: equal paths give equal references."""
    if not path:
        return ""
    return "ws-" + hashlib.sha256(os.path.normpath(path).encode()).hexdigest()[:12]


def _run(coro: Any) -> Any:
    return aio.run(coro, name="amux-app-server")


# ---------------------------------------------------------------------- liveness
def check(app_server: AppServer) -> dict[str, Any] | None:
    """Connect, handshake, list threads; the stored state follows. None: not live."""
    now = timezone.now()
    info: dict[str, Any] | None = None
    if app_server.state != "stopped":
        try:
            info = _run(codex_attached.describe(app_server.url,
                                                (app_server.secrets or {}).get("token")))
        except errors.RuntimeAdapterError:
            info = None
    state = "stopped" if app_server.state == "stopped" else ("live" if info else "lost")
    fields = {"state": state, "checked_at": now}
    if info is not None:
        fields["last_live_at"] = now
    AppServer.objects.filter(pk=app_server.pk).update(**fields)
    for key, value in fields.items():
        setattr(app_server, key, value)
    return info


def _bindings(app_server: AppServer) -> dict[str, dict[str, str]]:
    """thread id → the goal and agent bound to it now (through the attached sessions)."""
    out = {}
    sessions = Session.objects.filter(runtime=ATTACHED_RUNTIME,
                                      snapshot__attached__app_server=app_server.ref,
                                      goal_bindings__active=True).prefetch_related(
        "goal_bindings__agent__goal")
    for session in sessions:
        for binding in session.goal_bindings.all():
            if binding.active:
                out[session.native_ref] = {"goal": binding.agent.goal.slug,
                                           "agent": binding.agent.slug}
    return out


def descriptor(app_server: AppServer, info: dict[str, Any] | None) -> dict[str, Any]:
    """The bounded public descriptor (no token, URL, pid or local path)."""
    bound = _bindings(app_server) if info else {}
    return {
        "id": app_server.ref, "name": app_server.name, "host_kind": HOST_KIND,
        "origin": app_server.origin, "live": info is not None, "state": app_server.state,
        "goal": app_server.goal or None, "agent": app_server.agent or None,
        "workspace": redact(app_server.workspace),
        "provider": app_server.provider.slug if app_server.provider else None,
        "model": app_server.model,
        "capabilities": list(CAPABILITIES) if info else [],
        "checked_at": app_server.checked_at, "last_live_at": app_server.last_live_at,
        "created_at": app_server.created_at,
        "threads": [{"id": t["id"], "workspace": redact(t["cwd"]), "model": t["model"],
                     "updated_at": t["updated_at"], "loaded": t["loaded"],
                     "attached": bound.get(t["id"])}
                    for t in (info or {}).get("threads", [])],
    }


def describe(app_server: AppServer) -> dict[str, Any]:
    return descriptor(app_server, check(app_server))


def get(ref: str) -> AppServer | None:
    return AppServer.objects.select_related("provider").filter(ref=ref).first()


# ---------------------------------------------------------------------- start one
def spawn(*, provider: str, model: str, workspace: str = "", name: str = "",
          goal: str = "", agent: str = "") -> AppServer:
    """Start an app-server configured like the managed Codex and leave it running."""
    provider_row = ProviderProfile.objects.filter(slug=provider).first()
    if provider_row is None:
        raise refused(f"unknown provider {provider!r}", field="provider",
                      code="unknown_provider")
    if provider_row.platform != "openai-compat":
        raise refused(f"Codex cannot use a {provider_row.platform!r} provider",
                      field="provider", code="provider_unsupported")
    if not model:
        raise refused("model is required", field="model")
    # the spawned app-server works there as amux: the same rule as a session's workdir
    if workspace and (reason := workdirs.problem(workspace, "workspace")) is not None:
        raise refused(reason, field="workspace")
    binary = codex_binary(Path(settings.AMUX_RUNTIMES_DIR))
    if not binary.exists():
        raise refused(f"{binary.name} is not installed (run `make runtimes`)",
                      field="runtime", code="not_installed", status=409)
    ref = uuid.uuid4().hex[:12]
    state = Path(settings.DATA_DIR) / "app-servers" / ref
    codex_home = state / "home" / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (state / "tmp").mkdir(exist_ok=True)
    work = (Path(workspace).resolve() if workspace
            else Path(settings.WORK_DIR) / f"app-server-{ref}")
    work.mkdir(parents=True, exist_ok=True)
    # the managed Codex's configuration: same provider table, policies of a bypass launch;
    # its provider is amux's model gateway and its key a credential of its own (the
    # provider's key never enters the process its agent's commands run under)
    model_token, model_token_hash = model_credentials.new_token()
    (codex_home / "config.toml").write_text(render_config(
        model, model_credentials.gateway_url(provider_row.platform), "never",
        "danger-full-access"))
    token = secrets.token_urlsafe(32)
    token_file = state / "ws-token"
    token_file.touch(mode=0o600)
    token_file.write_text(token)
    # its agent runs commands in the workspace: as the runtime user under the selected
    # backend, like a session's runtime (its state directory becomes that user's)
    launch = _launch(state, work)
    env = {"HOME": str(state / "home"), "CODEX_HOME": str(codex_home), "PATH": SYSTEM_PATH,
           "TMPDIR": str(state / "tmp"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "TERM": "dumb", "NO_COLOR": "1", TAG_ENV: ref,
           API_URL_ENV: f"{settings.AMUX_URL.rstrip('/')}/api/v1",
           AGENT_TOKEN_ENV: str(state / AGENT_TOKEN_FILE),
           PROVIDER_KEY_ENV: model_token}
    for _attempt in range(3):  # a free port may be taken between the probe and the bind
        port = codex_shared.free_port()
        with open(state / "app-server.log", "ab") as log:
            proc = subprocess.Popen(  # noqa: S603 - our pinned binary, argv only
                launch.command([str(binary), "app-server", "--listen",
                                f"ws://127.0.0.1:{port}", "--ws-auth", "capability-token",
                                "--ws-token-file", str(token_file)]),
                cwd=str(work), env=launch.environment(env, work), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True, close_fds=True,
                **launch.spawn_kwargs())
        _children[proc.pid] = proc
        try:
            launch.verify(proc.pid)
        except errors.RuntimeAdapterError as exc:
            _kill(proc.pid, ref)
            raise refused(str(exc), code="start_failed", status=409,
                          field="runtime") from exc
        if codex_shared.ready(port, proc, READY_SECONDS):
            break
        _kill(proc.pid, ref)
    else:
        raise refused("the app-server did not start (see its log)", code="start_failed",
                      status=409, field="runtime")
    now = timezone.now()
    return AppServer.objects.create(
        ref=ref, name=name or f"app-server {ref}", origin="spawned",
        url=f"ws://127.0.0.1:{port}", secrets={"token": token}, provider=provider_row,
        model=model, workspace=str(work), goal=goal, agent=agent, pid=proc.pid,
        state_dir=str(state), state="live", checked_at=now, last_live_at=now,
        model_token_hash=model_token_hash)


def register(*, url: str, token: str = "", name: str = "", workspace: str = "",
             goal: str = "", agent: str = "") -> AppServer:
    """An app-server someone else started: kept only if it answers now."""
    if not url.startswith(("ws://", "wss://")):
        raise refused("url must be a ws:// or wss:// address", field="url")
    if workspace and not Path(workspace).is_absolute():
        raise refused("workspace must be an absolute path", field="workspace")
    try:
        _run(codex_attached.describe(url, token or None))
    except errors.RuntimeAdapterError as exc:
        raise refused(f"the app-server does not answer: {exc}", field="url",
                      code="app_server_unreachable") from exc
    now = timezone.now()
    ref = uuid.uuid4().hex[:12]
    return AppServer.objects.create(
        ref=ref, name=name or f"app-server {ref}", origin="registered", url=url,
        secrets={"token": token} if token else {}, workspace=workspace, goal=goal,
        agent=agent, state="live", checked_at=now, last_live_at=now)


def _ours(pid: int, ref: str) -> bool:
    """The pid is still the app-server amux started under this ref (not a reused pid)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return f"{TAG_ENV}={ref}".encode() in fh.read().split(b"\0")
    except OSError:
        return False


def _kill(pid: int, ref: str) -> None:
    if _ours(pid, ref):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while _ours(pid, ref) and time.monotonic() < deadline:
            reap()
            time.sleep(0.05)
        if _ours(pid, ref):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    reap()


def reap() -> None:
    for pid, proc in list(_children.items()):
        if proc.poll() is not None:
            _children.pop(pid, None)


def stop(app_server: AppServer) -> AppServer:
    """The operator's explicit stop: a spawned app-server's process group ends; a
    registered one is only forgotten. Refused while an agent is attached to it."""
    if _bindings(app_server):
        raise refused("an agent is attached to this app-server: detach it first",
                      code="attached", status=409, field="id")
    if app_server.origin == "spawned" and app_server.pid:
        _kill(app_server.pid, app_server.ref)
    app_server.state = "stopped"
    app_server.checked_at = timezone.now()
    app_server.model_token_hash = None  # its model credential stops working
    app_server.save(update_fields=["state", "checked_at", "model_token_hash"])
    return app_server


# ---------------------------------------------------------------------- agent token
def _launch(state: Path, work: Path) -> Launch:
    """The selected isolation backend prepared for a spawned app-server (refused with 409
    naming the backend's reason when it cannot run here). An app-server listens on the
    host's loopback for amux and calls its provider itself (attached mode is the gateways'
    documented exception), which bwrap's private network forbids: under bwrap it runs as
    linux-dac's runtime user, without the namespace sandbox."""
    isolation.open_paths(Path(settings.DATA_DIR), state.parent, Path(settings.WORK_DIR))
    backend = isolation.selected_backend()
    if backend == BWRAP:
        backend = LINUX_DAC
    try:
        return Launch.prepare(backend, identities.app_server_user(), state,
                              work, Path(settings.AMUX_RUNTIMES_DIR), workdirs.roots(),
                              shared_group=identities.shared_group(),
                              # it calls its provider itself, wherever that is
                              loopback_fence=loopback_fence.OFF)
    except errors.RuntimeAdapterError as exc:
        raise refused(str(exc), code="start_failed", status=409, field="runtime") from exc


def write_agent_token(app_server: AppServer, token: str) -> bool:
    """Hand an attached agent its binding's token (an empty token takes it back). Only an
    app-server amux started has the file in its environment; a registered one: False."""
    if app_server.origin != "spawned" or not app_server.state_dir:
        return False
    path = Path(app_server.state_dir) / AGENT_TOKEN_FILE
    partial = path.with_suffix(".partial")
    partial.touch(mode=0o600)
    partial.write_text(token)
    owner = path.parent.stat()  # the app-server's identity (linux-dac: the runtime user)
    if os.geteuid() == 0:
        os.chown(partial, owner.st_uid, owner.st_gid)
    os.replace(partial, path)
    return True


# ---------------------------------------------------------------------- sessions
def attached_session(app_server: AppServer, thread: dict[str, Any], *, name: str) -> Session:
    """The amux session that drives ``thread`` of ``app_server`` (runtime codex-attached):
    its native id is the thread's from the start, so every host resumes it."""
    snapshot = {"runtime": ATTACHED_RUNTIME, "model": thread.get("model") or app_server.model,
                "effort": None, "provider": app_server.provider.slug
                if app_server.provider else None, "permission_mode": "bypass",
                "attached": {"app_server": app_server.ref, "thread": thread["id"]},
                "execution": {"role": "session"}}
    return actions.create(Session(
        name=name, runtime=ATTACHED_RUNTIME, provider=app_server.provider,
        model=snapshot["model"], snapshot=snapshot, native_ref=thread["id"],
        workdir=thread.get("cwd") or app_server.workspace,
        idle_timeout_s=refusals.MIN_IDLE_TIMEOUT), attached=app_server.ref)


def app_server_of(session: Session) -> AppServer | None:
    ref = ((session.snapshot or {}).get("attached") or {}).get("app_server")
    return get(ref) if ref else None


def endpoint(session: Session) -> dict[str, Any] | None:
    """What the attached adapter connects to (None: not an attached session)."""
    if session.runtime != ATTACHED_RUNTIME:
        return None
    app_server = app_server_of(session)
    thread = ((session.snapshot or {}).get("attached") or {}).get("thread")
    if app_server is None or app_server.state == "stopped":
        return {"url": "ws://127.0.0.1:9/gone", "token": None, "thread": thread}
    return {"url": app_server.url, "token": (app_server.secrets or {}).get("token"),
            "thread": thread}


def thread_live(session: Session) -> bool:
    """The attached session's app-server answers and still has its thread."""
    app_server = app_server_of(session)
    if app_server is None:
        return False
    info = check(app_server)
    return bool(info) and any(t["id"] == session.native_ref for t in info["threads"])
