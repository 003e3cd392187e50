"""The runtime adapter interface and what all adapters share.

An adapter drives one native agent session in one child process: ``start()`` (new or resumed
native session), ``run_turn()`` (an async iterator of typed events ending in exactly one
terminal), ``interrupt()``, ``answer_permission()``, ``answer_question()``, ``close()``.
Each runtime runs in its own process group with a private HOME and config directory, a
minimal environment and the provider key only in its own variable, under the session's
isolation backend (``isolation``: amux's user, or a dedicated unprivileged one);
``close()`` kills the group (and any descendant that moved to another group, found by the
per-process tag).

Pure Python: no Django imports anywhere under ``runtimes/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from amux_common.processes import die_with_parent

from . import errors, launch_context, loopback_fence
from .events import (
    ErrorObserved,
    Event,
    PermissionAnswered,
    PermissionRequested,
    QuestionAsked,
    ToolCompleted,
    ToolStarted,
    TurnCancelled,
    TurnFailed,
    TurnInput,
)
from .isolation import DEFAULT_USER, PRIVATE_HOME, Launch, hand_over
from .watchdog import (
    REPEAT_TOOL_LOOP,
    TOOL_IDLE_TIMEOUT,
    TURN_HARD_CAP,
    TURN_IDLE_TIMEOUT,
    RepeatToolCounter,
    TurnClock,
    WatchdogConfig,
    call_signature,
)

PROVIDER_KEY_ENV = "AMUX_PROVIDER_KEY"
STREAM_LIMIT = 64 * 1024 * 1024
CANCEL_GRACE_SECONDS = 10.0
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

log = logging.getLogger(__name__)
_said_unfenced: set[str] = set()  # each reason logged once per process


def default_runtimes_dir() -> Path:
    """This checkout's node_modules; the configured directory (settings.AMUX_RUNTIMES_DIR)
    is passed in by the caller, as ``RuntimeConfig.runtimes_dir`` or to ``probe()``."""
    return Path(__file__).resolve().parents[1] / "node_modules"


@dataclass(frozen=True)
class ProviderSpec:
    """A model provider as the runtime needs it. ``platform``: ``openai-compat`` (Codex uses
    Responses, Pi Chat Completions) or ``anthropic-compat`` (Claude)."""

    platform: str
    base_url: str
    api_key: str = ""
    slug: str = "amux"

    def __repr__(self) -> str:  # never show the key
        return f"ProviderSpec(platform={self.platform!r}, base_url={self.base_url!r})"


PLATFORMS = frozenset({"openai-compat", "anthropic-compat"})


@dataclass(frozen=True)
class McpServer:
    """An MCP server (streamable HTTP) the runtime offers its model. The bearer token is
    read from ``bearer_token_file`` when the runtime starts: the caller may rewrite the file
    (a re-issued token), and ``RuntimeAdapter.restart_reason`` then says the runtime must be
    restarted between turns to take it."""

    name: str
    url: str
    bearer_token_file: str | None = None
    # a token given as it is (a session's own credential, issued with this launch): it
    # never changes under a running runtime
    bearer_token: str | None = field(default=None, repr=False, compare=False)

    def token(self) -> str | None:
        if self.bearer_token:
            return self.bearer_token
        if not self.bearer_token_file:
            return None
        try:
            return Path(self.bearer_token_file).read_text().strip() or None
        except OSError:
            return None

    def __repr__(self) -> str:  # never show the token
        return f"McpServer(name={self.name!r}, url={self.url!r})"


# How an adapter puts amux's system prompt in front of the model (``system_prompt_channel``):
# PER_TURN: the runtime takes it with every turn and uses it for every model request of
#   that turn (Codex: the turn's collaboration-mode developer instructions; Pi: an
#   extension that sets the system prompt before each agent start from a file amux rewrites);
# SESSION_START: only when the native session is created or loaded (Claude Code's
#   ``_meta.systemPrompt.append``); the host restarts the runtime between turns when the
#   prompt changed, resuming the same conversation;
# INLINE: no system-prompt channel (generic ACP): the prompt is prepended to the turn's
#   content as a delimited block on the first turn and whenever it changed.
PER_TURN = "per_turn"
SESSION_START = "session_start"
INLINE = "inline"


def prompt_hash(text: str | None) -> str | None:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16] if text else None


@dataclass(frozen=True)
class Capabilities:
    resume: bool = False
    interrupt: bool = True
    images: bool = False
    permissions: bool = False
    questions: bool = False
    set_model: bool = False
    native_cumulative_usage: bool = False

    def as_dict(self) -> dict[str, bool]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Probe:
    name: str
    installed: bool
    version: str | None = None
    path: str | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RuntimeConfig:
    workdir: Path
    state_dir: Path  # private HOME (and config dirs beneath it) for this session
    provider: ProviderSpec
    model: str
    effort: str | None = None
    # bypass: native bypass; ask: every request is asked of a person; policy-allow /
    # policy-deny: native approvals on, each request answered by amux's policy
    permission_mode: str = "bypass"
    # the runtime's native permission settings frozen at launch (execution/core/launch_rules.py,
    # ``native_permission``); empty: the adapter derives them from ``permission_mode``
    native_permission: dict[str, str] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()  # native command-line arguments the caller chose
    watchdog: WatchdogConfig = field(default_factory=WatchdogConfig)
    runtimes_dir: Path | None = None
    # the system prompt in effect when the runtime starts (channel SESSION_START applies it
    # then; the others take each turn's ``TurnInput.system_prompt``)
    system_prompt: str | None = None
    # INLINE channel, resuming: the hash of the prompt block the conversation already holds
    inline_prompt_seen: str | None = None
    mcp_servers: list[McpServer] = field(default_factory=list)
    # Whether the runtime's native "ask the user" tool is on (off for ticket workers, who
    # ask people only through amux's structured `ask`).
    ask_user: bool = True
    # Seconds after which a foreground shell command moves to the background (ticket
    # workers: 5), where the runtime allows it; None keeps the runtime's own behaviour.
    background_shell_after: float | None = None
    cancel_grace_seconds: float = CANCEL_GRACE_SECONDS
    # what the caller adds to the runtime's environment (e.g. the worker's scoped tool
    # token); never replaces HOME, PATH, the provider key or the runtime's own config dirs
    extra_env: dict[str, str] = field(default_factory=dict)
    extra_path: list[str] = field(default_factory=list)
    wire_observer: Callable[[str, dict[str, Any]], None] | None = None  # ("out"|"in", msg)
    # the isolation backend (``isolation.BACKENDS``) and, for linux-dac, the runtime user
    isolation: str = PRIVATE_HOME
    runtime_user: str = DEFAULT_USER
    # a pool user's supplementary group (``isolation.Principal``); files amux wrote for
    # this session alone (its assignment token), handed to its own group at launch
    runtime_group: str | None = None
    private_files: tuple[Path, ...] = ()
    # linux-dac: the runtime user's loopback fence (``loopback_fence.MODES``)
    loopback_fence: str = loopback_fence.AUTO
    # where a work directory may be (amux's `work/`): a launch refuses one outside them
    # before it re-permissions anything; empty: anywhere (a runtime driven without amux)
    workdir_roots: tuple[Path, ...] = ()
    # bwrap only: what the sandbox shows read-only besides the system, the runtimes and the
    # session's own directories (a worker's commands, gitconfig, mirror, its token file),
    # and amux's own URL, whose port is relayed into it (``sandbox.relayed_ports``)
    sandbox_read_only: tuple[Path, ...] = ()
    amux_url: str | None = None
    # who the agent is (``launch_context.ROLES``: a task's child session gets the restricted
    # entry and no session/schedule channel) and whether the memory protocol is bound
    role: str = "session"
    memory: bool = False
    # an attached session (runtime codex-attached): the app-server it drives, {"url",
    # "token", "thread"}; never set for a runtime amux launches
    attach: dict[str, Any] | None = None
    # Codex under private-home: at most this many sessions are threads of one shared
    # app-server (runtimes/codex_shared.py), whose state lives under the root; 0: the
    # session's runtime is a process of its own
    shared_app_server: int = 0
    shared_app_server_root: Path | None = None
    # the model requests pass amux's gateway, which puts the current prompt into each of
    # them: a SESSION_START runtime is not restarted when the prompt changes
    prompt_per_request: bool = False
    # the provider key is read from this file at each model request, not given at start
    # (a pre-started runtime: runtimes/warm.py; the file is in its private state directory
    # and written when a session takes the process)
    provider_key_file: Path | None = None

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir).resolve()
        self.state_dir = Path(self.state_dir).resolve()
        if self.runtimes_dir is None:
            self.runtimes_dir = default_runtimes_dir()


class _Exited:
    """Queue sentinel: the runtime's output closed."""

    def __init__(self, returncode: int | None, stderr_tail: str = ""):
        self.returncode = returncode
        self.stderr_tail = stderr_tail


def _wait_for(clock: TurnClock, cancel_deadline: float | None, now: float) -> float | None:
    """Seconds a turn waits for its next event: until the next watchdog check or the end of
    a cancel's grace, whichever comes first (None: no limit)."""
    timeout = clock.next_deadline(now)
    if cancel_deadline is not None:
        left = max(0.0, cancel_deadline - now)
        timeout = left if timeout is None else min(timeout, left)
    return timeout


RESERVED_ENV = frozenset({"HOME", "PATH", "TMPDIR", "CODEX_HOME", "PI_CODING_AGENT_DIR",
                          "CLAUDE_CONFIG_DIR", PROVIDER_KEY_ENV, "LD_PRELOAD",
                          "LD_LIBRARY_PATH", "NODE_OPTIONS"})
RESERVED_PREFIXES = ("ANTHROPIC_", "OPENAI_", "AMUX_RUNTIME_", "PI_", "CLAUDE_CODE_",
                     "AMUX_SESSION_SCHEDULE_", "IS_SANDBOX")


def binary_version(binary: Path) -> tuple[str | None, str]:
    """`binary --version` with a minimal environment: (its last word, or None; an error)."""
    import subprocess

    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                             timeout=20, stdin=subprocess.DEVNULL,
                             env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    if out.returncode != 0:
        return None, out.stderr.strip()[-300:]
    return out.stdout.strip().rsplit(" ", 1)[-1], ""


def minimal_env(config: RuntimeConfig, tag: str, extra_path: list[str] | None = None
                ) -> dict[str, str]:
    home = config.state_dir / "home"
    tmp = config.state_dir / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    path = ":".join([*config.extra_path, *(extra_path or []), SYSTEM_PATH])
    extra = {k: str(v) for k, v in config.extra_env.items()
             if k not in RESERVED_ENV and not k.startswith(RESERVED_PREFIXES)}
    return {
        **extra,
        "HOME": str(home),
        "PATH": path,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": str(tmp),
        "NO_COLOR": "1",
        "AMUX_RUNTIME_TAG": tag,
    }


def tagged_pids(tag: str) -> list[int]:
    """Pids of live processes whose environment carries ``AMUX_RUNTIME_TAG=tag``."""
    needle = f"AMUX_RUNTIME_TAG={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != b"Z" and needle in env.split(b"\0"):
            found.append(int(entry))
    return found


async def spawn(argv: list[str], env: dict[str, str], cwd: Path, **credentials: Any
                ) -> asyncio.subprocess.Process:
    """``credentials``: ``user``/``group``/``extra_groups``/``umask`` for the child (set
    before exec; the parent-death signal is armed after them, so it survives the switch)."""
    try:
        return await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, cwd=str(cwd), start_new_session=True,
            limit=STREAM_LIMIT, preexec_fn=die_with_parent(signal.SIGKILL), **credentials)
    except OSError as exc:
        raise errors.RuntimeStartFailed(f"{argv[0]}: {exc}") from exc


async def kill_process_group(proc: asyncio.subprocess.Process | None, tag: str | None,
                             grace: float = 3.0) -> None:
    """SIGTERM the group, wait ``grace``, then SIGKILL the group and every tagged straggler."""
    if proc is not None and proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)
    if proc is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            if proc.returncode is None:
                proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 5)
    if tag:
        for _ in range(3):
            pids = tagged_pids(tag)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.05)


class RuntimeAdapter(ABC):
    """Base of all adapters. Subclasses implement the native protocol hooks."""

    name: ClassVar[str] = ""
    platforms: ClassVar[frozenset[str]] = frozenset({"openai-compat"})
    system_prompt_channel: ClassVar[str] = PER_TURN
    takes_mcp: ClassVar[bool] = False  # MCP servers of ``config.mcp_servers`` reach the model
    pause_idle_during_tools: ClassVar[bool] = False
    retire_after_watchdog: ClassVar[bool] = False
    accepts_extra_args: ClassVar[bool] = True  # ``config.extra_args`` reach the command line
    # the runtime can be started before its session exists and handed to it
    # (runtimes/warm.py): it reads its provider key from ``config.provider_key_file``
    warm_start: ClassVar[bool] = False
    # amux's own files the runtime loads (a sidecar, extensions): shown read-only in a
    # bwrap sandbox
    sandbox_paths: ClassVar[tuple[Path, ...]] = ()

    def policy_answer(self) -> str | None:
        """How a native permission request is answered without a person: "allow", "deny",
        or None (ask: it is put to a person)."""
        mode = self.config.permission_mode
        if mode == "ask":
            return None
        return "deny" if mode == "policy-deny" else "allow"
    # the runtime streams a running tool's progress, so a tool's silence can be told from
    # the model's (tool idle limit; see watchdog.TurnClock)
    reports_tool_progress: ClassVar[bool] = False

    def __init__(self, config: RuntimeConfig):
        self.check_provider(config.provider)
        self.config = config
        self.tag = uuid.uuid4().hex
        self.proc: asyncio.subprocess.Process | None = None
        self.native_session_id: str | None = None
        self._queue: asyncio.Queue[Event | _Exited] = asyncio.Queue()
        self._turn_active = False
        self._cancel_requested = False
        self._watchdog_code: str | None = None
        self._pending_permissions: dict[str, asyncio.Future[str | None]] = {}
        self._pending_questions: dict[str, asyncio.Future[dict[str, Any] | None]] = {}
        self._stderr_tail: list[str] = []
        self._closed = False
        self._tasks: list[asyncio.Task[Any]] = []
        # what was handed to the runtime at start and cannot change without a restart
        self._started_prompt = config.system_prompt
        self._started_tokens: tuple[str | None, ...] = ()
        self._mcp_in_use = False  # the runtime was given ``config.mcp_servers`` at start
        self.mcp_skipped: list[str] = []  # MCP servers this runtime could not be given
        self.launch: Launch | None = None  # how the process was started (isolation)

    # ---------------------------------------------------------------- class-level API
    @classmethod
    def check_provider(cls, provider: ProviderSpec) -> None:
        if provider.platform not in PLATFORMS:
            raise errors.ProviderUnsupported(f"unknown provider platform {provider.platform!r}")
        if provider.platform not in cls.platforms:
            raise errors.ProviderUnsupported(
                f"runtime {cls.name!r} cannot use a {provider.platform!r} provider "
                f"(supported: {', '.join(sorted(cls.platforms))})")
        if not provider.base_url or not provider.base_url.startswith(("http://", "https://")):
            raise errors.ProviderUnsupported("the provider needs an explicit http(s) base_url")

    @classmethod
    @abstractmethod
    def probe(cls, runtimes_dir: Path | None = None) -> Probe: ...

    @classmethod
    def static_capabilities(cls) -> Capabilities:
        return Capabilities()

    @property
    def capabilities(self) -> Capabilities:
        return self.static_capabilities()

    # ---------------------------------------------------------------- lifecycle
    @abstractmethod
    async def start(self, resume: str | None = None) -> str:
        """Start the process and a new native session, or resume ``resume``. Returns the
        native session id. Raises ``NativeSessionNotFound`` when the runtime says the saved
        conversation does not exist."""

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._release_pending()
        await self._close_native()
        for task in self._tasks:
            task.cancel()
        await kill_process_group(self.proc, self.tag)
        if self.launch is not None:
            self.launch.close()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task

    async def __aenter__(self) -> RuntimeAdapter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _close_native(self) -> None:  # noqa: B027 - optional hook
        """Optional polite shutdown before the group is killed."""

    # ---------------------------------------------------------------- runtime controls
    # Whether ``set_model`` switches an idle session in place (otherwise the host restarts
    # the runtime with the new settings, resuming the native conversation).
    hot_model_switch: ClassVar[bool] = False
    # set when ``facts()`` changed since the host last stored them
    # True until the host has kept the facts once (so every started runtime has said, e.g.,
    # whether it has native goals); an adapter sets it again when what it declared changes
    facts_changed: bool = True

    async def set_model(self, model: str, effort: str | None = None) -> None:
        raise errors.ConfigRejected(f"{self.name} switches models by a restart")

    async def clear(self) -> str:
        """Start a new native conversation in the same process and work directory with the
        same settings; returns its native id."""
        raise errors.RuntimeAdapterError(f"{self.name} cannot clear in place",
                                         code="clear_unsupported")

    def facts(self) -> dict[str, Any]:
        """What the runtime declared at run time that callers check before asking (image
        input, advertised commands); the host keeps it on the session."""
        return {}

    # ---------------------------------------------------------------- start-time inputs
    def mcp_tokens(self) -> tuple[str | None, ...]:
        """Read the MCP bearer tokens now; an adapter that hands them to the runtime at start
        keeps what it read in ``_started_tokens``."""
        tokens = tuple(server.token() for server in self.config.mcp_servers)
        self._started_tokens = tokens
        self._mcp_in_use = bool(tokens)
        return tokens

    def restart_reason(self, system_prompt: str | None) -> str | None:
        """Why the running process cannot serve the next turn as asked (checked between
        turns, never during one): a re-issued MCP token or, for a SESSION_START runtime, a
        changed system prompt. None when it can."""
        if self._mcp_in_use and tuple(
                s.token() for s in self.config.mcp_servers) != self._started_tokens:
            return "mcp_token_changed"
        if self.system_prompt_channel == SESSION_START and \
                not self.config.prompt_per_request and \
                (system_prompt or None) != (self._started_prompt or None):
            return "system_prompt_changed"
        return None

    def prompt_plan(self, system_prompt: str | None) -> dict[str, Any]:
        """How the next turn's system prompt reaches the model (recorded on the turn)."""
        return {"prompt_channel": self.system_prompt_channel,
                "prompt_hash": prompt_hash(system_prompt)}

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and not self._closed

    @property
    def turn_active(self) -> bool:
        return self._turn_active

    @classmethod
    def takes_launch_entries(cls) -> bool:
        """Whether the runtime has a native channel for the launch instructions (the
        session-schedule entry and the memory protocol): generic ACP has none."""
        return cls.system_prompt_channel != INLINE

    @classmethod
    def launch_capabilities(cls) -> dict[str, bool]:
        return {"session_schedule": cls.takes_launch_entries(),
                "memory": cls.takes_launch_entries()}

    @property
    def launch_channel(self) -> str:
        cfg = self.config
        mcp = [s.name for s in cfg.mcp_servers] if self.takes_mcp else []
        return launch_context.channel(cfg.role, mcp, cfg.extra_path)

    def launch_instructions(self) -> str | None:
        """The fixed text configured when the native session is created or resumed."""
        if not self.takes_launch_entries():
            return None
        return launch_context.launch_text(self.config.role, self.launch_channel,
                                          self.config.memory)

    def startup_prompt(self, system_prompt: str | None) -> str | None:
        """The launch instructions followed by amux's system prompt, for runtimes that take
        both through one native channel (Claude's appended system prompt, Pi's extension)."""
        parts = [p for p in (self.launch_instructions(), system_prompt) if p]
        return "\n\n".join(parts) if parts else None

    async def _spawn(self, argv: list[str], env: dict[str, str]
                     ) -> asyncio.subprocess.Process:
        """Start the runtime process under the session's isolation backend: the backend
        prepares the state and work directories, has the last word on the environment (no
        provider code overrides it afterwards) and says as whom the process runs."""
        cfg = self.config
        launch = Launch.prepare(cfg.isolation, cfg.runtime_user, cfg.state_dir, cfg.workdir,
                                cfg.runtimes_dir, cfg.workdir_roots,
                                read_only=(*self.sandbox_paths, *cfg.sandbox_read_only),
                                amux_url=cfg.amux_url, provider_url=cfg.provider.base_url,
                                mcp_urls=tuple(s.url for s in cfg.mcp_servers),
                                shared_group=cfg.runtime_group,
                                private_files=cfg.private_files,
                                loopback_fence=cfg.loopback_fence)
        if self.launch is not None:
            self.launch.close()  # a restart's former relay
        self.launch = launch
        if launch.unfenced and launch.unfenced not in _said_unfenced:
            _said_unfenced.add(launch.unfenced)
            log.warning("linux-dac: runtimes reach every port of this host's loopback: %s",
                        launch.unfenced)
        await launch.start()
        if self.takes_launch_entries():
            env = {**env, launch_context.CONTEXT_ENV: launch_context.context(
                cfg.role, self.launch_channel)}
        if "anthropic-compat" in self.platforms:
            # Claude's own auto memory is off on every managed launch (resumes included),
            # whatever starts it: amux's memory is the only one
            env = {**env, "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}
        proc = await spawn(launch.command(argv), launch.environment(env, cfg.workdir),
                           cfg.workdir, **launch.spawn_kwargs())
        try:
            launch.verify(proc.pid)
        except errors.RuntimeAdapterError:
            await kill_process_group(proc, self.tag, grace=0.5)
            raise
        return proc

    def hand_over(self, path: Path) -> None:
        """A file amux rewrites in the state directory while the runtime runs belongs to
        the runtime user too (linux-dac)."""
        hand_over(path, self.launch.principal if self.launch else None)

    # ---------------------------------------------------------------- native hooks
    @abstractmethod
    async def _begin_turn(self, turn_input: TurnInput) -> None:
        """Send the native request that starts a turn (events then arrive on the queue)."""

    @abstractmethod
    async def _cancel_native(self) -> None:
        """Ask the runtime to stop the current turn (interrupt / session/cancel / abort)."""

    def _repeat_signature(self, event: Event) -> tuple[str, str] | None:
        """(call id, signature) when ``event`` counts toward the repeat limit."""
        if isinstance(event, ToolStarted):
            return event.call_id, call_signature(event.kind, event.title, event.input)
        return None

    def _map_terminal(self, event: Event) -> Event:
        """Adapter hook: adjust the native terminal (e.g. ACP cancel intent)."""
        return event

    def _after_turn(self) -> None:  # noqa: B027 - optional hook
        pass

    # ---------------------------------------------------------------- turn driver
    def emit(self, event: Event) -> None:
        self._queue.put_nowait(event)

    async def run_turn(self, turn_input: TurnInput) -> AsyncIterator[Event]:
        """Run one turn; yields typed events and ends with exactly one terminal event."""
        if self._turn_active:
            raise errors.TurnInProgress()
        if not self.alive:
            raise errors.RuntimeExited("the runtime process is not running")
        self._turn_active = True
        self._cancel_requested = False
        self._watchdog_code = None
        loop = asyncio.get_running_loop()
        clock = self._turn_clock(loop.time())
        counter = RepeatToolCounter(self.config.watchdog.repeat_tool_call_limit)
        cancel_deadline: float | None = None
        self._drop_leftovers()
        try:
            try:
                await self._begin_turn(turn_input)
            except errors.RuntimeAdapterError as exc:
                yield TurnFailed(code=exc.code, message=str(exc))
                return
            while True:
                now = loop.time()
                if (self._cancel_requested or self._watchdog_code) and cancel_deadline is None:
                    cancel_deadline = now + self.config.cancel_grace_seconds
                try:
                    item = await asyncio.wait_for(
                        self._queue.get(), _wait_for(clock, cancel_deadline, now))
                except TimeoutError:
                    if await self._on_wait_timeout(clock, cancel_deadline, loop.time()):
                        yield self._final_abort_event()
                        return
                    continue
                if isinstance(item, _Exited):
                    yield self._exited_event(item)
                    return
                self._clock_sees(clock, item, loop.time())
                if item.terminal:
                    yield await self._terminal_event(item)
                    return
                yield item
                sig = self._repeat_signature(item)
                if sig and not self._watchdog_code and counter.observe(*sig):
                    await self._trip(REPEAT_TOOL_LOOP)
        finally:
            self._turn_active = False
            self._release_pending()
            self._after_turn()

    def _turn_clock(self, now: float) -> TurnClock:
        wd = self.config.watchdog
        return TurnClock(wd.turn_hard_cap_seconds, wd.turn_idle_timeout_seconds, now,
                         tool_idle=wd.tool_idle_timeout_seconds,
                         track_tools=self.reports_tool_progress)

    def _drop_leftovers(self) -> None:
        """Drop what an earlier turn left on the queue (late frames are provenance only);
        the runtime's exit stays for whoever reads next."""
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, _Exited):
                self._queue.put_nowait(item)
                break

    async def _on_wait_timeout(self, clock: TurnClock, cancel_deadline: float | None,
                               now: float) -> bool:
        """No event came before the next deadline: trip a watchdog whose limit has passed.
        True when a cancelled turn outlived its grace, so the runtime was retired."""
        if cancel_deadline is not None and now >= cancel_deadline:
            # the runtime did not finish the cancelled turn: retire it
            await kill_process_group(self.proc, self.tag, grace=1.0)
            return True
        reason = clock.expired(now)
        if reason and not self._watchdog_code:
            await self._trip(reason)
        return False

    def _exited_event(self, exited: _Exited) -> Event:
        self._queue.put_nowait(exited)  # keep it for later callers
        if self._cancel_requested or self._watchdog_code:
            return self._final_abort_event()
        tail = exited.stderr_tail.strip().splitlines()[-3:]
        return TurnFailed(code=errors.RuntimeExited.code,
                          message=f"runtime exited ({exited.returncode}): " + " | ".join(tail))

    def _clock_sees(self, clock: TurnClock, event: Event, now: float) -> None:
        clock.touch(now)
        if isinstance(event, PermissionRequested) or (
                isinstance(event, QuestionAsked) and event.delivery != "async"):
            clock.pause()  # a person is asked and the runtime waits (async: not)
        elif isinstance(event, PermissionAnswered):
            clock.resume(now)
        elif self.pause_idle_during_tools and isinstance(event, ToolStarted):
            clock.pause()
        elif self.pause_idle_during_tools and isinstance(event, ToolCompleted):
            clock.resume(now)
        if isinstance(event, ToolStarted):
            clock.tool_started(event.call_id)
        elif isinstance(event, ToolCompleted):
            clock.tool_ended(event.call_id)

    async def _terminal_event(self, event: Event) -> Event:
        """The turn's one terminal event: a watchdog that tripped outranks the runtime's."""
        if self._watchdog_code:
            if self.retire_after_watchdog:
                await kill_process_group(self.proc, self.tag, grace=1.0)
            return self._final_abort_event()
        return self._map_terminal(event)

    def _final_abort_event(self) -> Event:
        if self._watchdog_code:
            wd = self.config.watchdog
            messages = {
                REPEAT_TOOL_LOOP: "the same tool call repeated "
                                  f"{wd.repeat_tool_call_limit} times",
                TURN_HARD_CAP: f"the turn ran longer than {wd.turn_hard_cap_seconds} s",
                TURN_IDLE_TIMEOUT: f"no event for {wd.turn_idle_timeout_seconds} s",
                TOOL_IDLE_TIMEOUT: "a tool ran without progress for "
                                   f"{wd.tool_idle_timeout_seconds} s",
            }
            return TurnFailed(code=self._watchdog_code,
                              message=messages.get(self._watchdog_code, self._watchdog_code))
        return TurnCancelled(reason="interrupted")

    async def _trip(self, code: str) -> None:
        self._watchdog_code = code
        self.emit(ErrorObserved(code=code, message=f"watchdog: {code}"))
        self._release_pending()
        with contextlib.suppress(errors.RuntimeAdapterError):
            await self._cancel_native()

    async def interrupt(self) -> None:
        """Stop the turn in flight. The terminal event comes through ``run_turn``."""
        if not self._turn_active:
            raise errors.NoTurnInFlight()
        if self._cancel_requested:
            return
        self._cancel_requested = True
        self._release_pending()
        await self._cancel_native()

    # ---------------------------------------------------------------- permissions
    def _new_pending(self, request_id: str) -> asyncio.Future[str | None]:
        fut: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._pending_permissions[request_id] = fut
        return fut

    async def answer_permission(self, request_id: str, option_id: str | None) -> None:
        """Answer a permission request; ``None`` answers it cancelled."""
        fut = self._pending_permissions.pop(request_id, None)
        if fut is None or fut.done():
            raise errors.UnknownRequest(f"no pending permission request {request_id!r}")
        fut.set_result(option_id)
        self.emit(PermissionAnswered(request_id=request_id, option_id=option_id))

    async def answer_question(self, request_id: str, answers: dict[str, Any] | None) -> None:
        fut = self._pending_questions.pop(request_id, None)
        if fut is None or fut.done():
            raise errors.UnknownRequest(f"no pending question {request_id!r}")
        fut.set_result(answers)

    @property
    def pending_requests(self) -> list[str]:
        return [*self._pending_permissions, *self._pending_questions]

    def _release_pending(self) -> None:
        for fut in list(self._pending_permissions.values()):
            if not fut.done():
                fut.set_result(None)
        self._pending_permissions.clear()
        for qfut in list(self._pending_questions.values()):
            if not qfut.done():
                qfut.set_result(None)
        self._pending_questions.clear()

    # ---------------------------------------------------------------- helpers
    def _observe_wire(self, direction: str, msg: dict[str, Any]) -> None:
        if self.config.wire_observer is not None:
            self.config.wire_observer(direction, msg)

    def _start_stderr_pump(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        stderr = self.proc.stderr

        async def pump() -> None:
            while True:
                line = await stderr.readline()
                if not line:
                    return
                self._stderr_tail.append(line.decode(errors="replace"))
                del self._stderr_tail[:-50]

        self._tasks.append(asyncio.create_task(pump()))

    def _exited(self) -> _Exited:
        rc = self.proc.returncode if self.proc else None
        return _Exited(rc, "".join(self._stderr_tail))


def which_node() -> str | None:
    return shutil.which("node") or (
        "/usr/bin/node" if os.path.exists("/usr/bin/node") else None)


def monotonic() -> float:
    return time.monotonic()
