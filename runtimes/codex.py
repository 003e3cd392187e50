"""Codex through ``codex app-server`` (JSON-RPC over stdio, v2 API).

A private ``CODEX_HOME`` per session holds a generated ``config.toml`` that points Codex at
the session's provider (Responses API) with the key in ``AMUX_PROVIDER_KEY`` only.
``thread/start`` / ``thread/resume`` give the native session; ``turn/start`` runs a turn;
``turn/interrupt`` stops it (the terminal is the ``turn/completed`` that follows).
``thread/tokenUsage/updated`` becomes ``UsageObserved`` with ``last`` and, when present, the
native ``total`` as the cumulative snapshot — never summed, never derived.

A turn's system prompt goes with its ``turn/start`` as the collaboration mode's developer
instructions (experimental API): Codex uses it for every model request of the turn and adds
it to the conversation when it differs from the previous turn's. MCP servers are
``[mcp_servers.<name>]`` tables in ``config.toml`` with the bearer in a variable the adapter
fills from the token file at start (``restart_reason`` says when the file changed).

Thread goals (``thread/goal/*``), as observed with the pinned 0.171.0 and the scripted
model: the capability is probed with ``thread/goal/get`` after every thread start, resume
and clear (an error, or an answer without a ``goal`` that is null or a goal object, means
no goal feature). ``thread/goal/set {objective}`` answers the goal (status ``active``) and
the app-server starts a turn by itself right away (``turn/started`` with no ``turn/start``
from us); its input is a user message ``<codex_internal_context source="goal">Continue
working toward the active thread goal...`` and the model gets the tools ``get_goal``,
``create_goal`` and ``update_goal``. After every ``turn/completed`` (status completed)
while the goal is still active the app-server starts the next continuation within ~10 ms,
without end (136 turns in 12 s with a model that only answers text). Each goal turn ends
with ``thread/goal/updated {turnId, goal}`` (cumulative ``tokensUsed``,
``timeUsedSeconds``) just before its ``turn/completed``. ``status: paused`` stops new
continuations but lets the running turn finish; ``status: active`` (resume) starts one at
once; an interrupted turn (``turn/interrupt``) leaves the goal ``active`` but starts no
next continuation. A new ``objective`` on an existing goal replaces the text and keeps the
native counters; on a ``complete`` goal it stays ``complete`` unless ``status: active`` is
sent too, and resuming with ``tokensUsed`` past ``tokenBudget`` answers ``budgetLimited``.
``update_goal {status: complete}`` from the model ends the goal; ``thread/goal/clear``
answers ``{cleared: true}`` and notifies ``thread/goal/cleared``.

The adapter never runs those turns on its own: frames of a turn it did not start are kept
aside (``native_turns``) until the host adopts the turn as a canonical goal turn
(``TurnInput.command == "goal"``: the frames kept so far are replayed, the rest flow as for
any turn) or refuses it (``refuse_native_turn``: interrupted, its frames dropped).

Native user questions (``codex_features``): ``request_user_input`` is turned on for a
thread only when the binary's features list declares it (or an explicit native flag says
so); its requests become ``question.asked`` (a native non-blocking one keeps
``blocking: false`` and is answerable only while its turn runs). An ``agentMessage`` with
``delivery: "async"`` and ``questions`` (``request_user_input_async``) asks without any
pending RPC: each question becomes a non-blocking ``question.asked`` with
``delivery: "async"`` whose answer comes back as an ordinary input of the session
(``sessions.services.answer_question``); the message itself is the questions' text and is
not repeated as a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from . import catalog, codex_features, errors
from .base import (
    PROVIDER_KEY_ENV,
    Capabilities,
    McpServer,
    Probe,
    ProviderSpec,
    RuntimeAdapter,
    RuntimeConfig,
    binary_version,
    default_runtimes_dir,
    minimal_env,
)
from .events import (
    ErrorObserved,
    MessageCompleted,
    MessageDelta,
    PermissionOption,
    PermissionRequested,
    Question,
    QuestionAsked,
    Reasoning,
    ToolCompleted,
    ToolStarted,
    ToolUpdated,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnInput,
    TurnStarted,
    UsageObserved,
)
from .jsonl import JsonLines

# Thread items that are tool calls: each shows as a tool call in the timeline.
_TOOL_ITEMS = ("commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall", "webSearch")
CLIENT_INFO = {"name": "amux", "title": "amux", "version": "0.1.0"}
USAGE_FIELDS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "totalTokens": "total_tokens",
    "cachedInputTokens": "cached_input_tokens",
    "cacheWriteInputTokens": "cache_creation_input_tokens",
    "reasoningOutputTokens": "reasoning_output_tokens",
}
DECISION_KIND = {"accept": "allow_once", "acceptForSession": "allow_always",
                 "decline": "reject_once", "cancel": "cancel"}


def codex_binary(runtimes_dir: Path) -> Path:
    return (runtimes_dir / "@openai" / "codex-linux-x64" / "vendor"
            / "x86_64-unknown-linux-musl" / "bin" / "codex")


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def mcp_token_env(index: int) -> str:
    """The variable that carries the bearer token of the ``index``-th MCP server (set by the
    adapter from the server's token file; Codex reads it when it connects at start)."""
    return f"AMUX_RUNTIME_MCP_TOKEN_{index}"


def render_mcp_servers(servers: list[McpServer]) -> str:
    """``[mcp_servers.<name>]`` tables: streamable HTTP with the bearer from a variable."""
    out = []
    for index, server in enumerate(servers):
        out.append(f"\n[mcp_servers.{_toml_str(server.name)}]\nurl = {_toml_str(server.url)}\n")
        if server.bearer_token_file or server.bearer_token:
            out.append(f"bearer_token_env_var = {_toml_str(mcp_token_env(index))}\n")
    return "".join(out)


def native_policies(cfg: RuntimeConfig) -> tuple[str, str]:
    """Codex's (approval policy, sandbox mode) for a launch: the native settings frozen in
    its execution snapshot; a config without them (an older session) maps its mode."""
    native = cfg.native_permission
    if native.get("approval_policy") and native.get("sandbox_mode"):
        return native["approval_policy"], native["sandbox_mode"]
    if cfg.permission_mode == "bypass":
        return "never", "danger-full-access"
    return "on-request", "workspace-write"


def render_settings(approval_policy: str, sandbox: str) -> str:
    """amux's fixed Codex settings (no model, no provider): a session's own app-server
    and a shared one (``codex_shared``) start from the same."""
    return f"""approval_policy = {_toml_str(approval_policy)}
sandbox_mode = {_toml_str(sandbox)}
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[history]
persistence = "none"

# amux keeps memory itself (seed 000): Codex neither reads nor writes native memories
[memories]
generate_memories = false
use_memories = false

[features]
plugins = false
apps = false
remote_plugin = false
"""


def render_config(model: str, base_url: str, approval_policy: str, sandbox: str,
                  mcp_servers: list[McpServer] | None = None) -> str:
    return f"""# generated by amux for one session; do not edit
model = {_toml_str(model)}
model_provider = "amux"
{render_settings(approval_policy, sandbox)}
[model_providers.amux]
name = "amux"
base_url = {_toml_str(base_url)}
env_key = "{PROVIDER_KEY_ENV}"
wire_api = "responses"
# Codex's own retries ride out a provider's 5xx and amux's gateway while it restarts
# (~13 s of backoff); a turn that fails is one a person sees fail
request_max_retries = 6
stream_max_retries = 6
{render_mcp_servers(mcp_servers or [])}"""


GOAL_STATUSES = frozenset({"active", "paused", "blocked", "usageLimited", "budgetLimited",
                           "complete"})


def valid_goal(goal: Any) -> bool:
    """A ``ThreadGoal`` as the pinned schema has it (the fields amux reads)."""
    return (isinstance(goal, dict) and isinstance(goal.get("objective"), str)
            and goal.get("status") in GOAL_STATUSES
            and isinstance(goal.get("tokensUsed"), int)
            and isinstance(goal.get("timeUsedSeconds"), int)
            and (goal.get("tokenBudget") is None or isinstance(goal.get("tokenBudget"), int)))


def map_token_usage(params: dict[str, Any]) -> UsageObserved:
    usage = params.get("tokenUsage") or {}

    def convert(block: dict[str, Any] | None, prefix: str = "") -> dict[str, int] | None:
        if not isinstance(block, dict):
            return None
        out = {prefix + USAGE_FIELDS[k]: int(v) for k, v in block.items()
               if k in USAGE_FIELDS and isinstance(v, int | float)}
        return out or None

    last = convert(usage.get("last"))
    return UsageObserved(
        last=last,
        cumulative=convert(usage.get("total"), "cumulative_"),
        context_window=usage.get("modelContextWindow"),
        context_used=(last or {}).get("input_tokens"),
    )


class CodexAdapter(RuntimeAdapter):
    name = "codex"
    platforms = frozenset({"openai-compat"})
    takes_mcp = True
    reports_tool_progress = True
    # the adapter of a session that is a thread of a shared app-server: codex_shared
    # declares it when imported (the registry imports it; it imports this module)
    shared_variant: ClassVar[type[CodexAdapter] | None] = None

    def __new__(cls, config: RuntimeConfig | None = None, *args: Any, **kwargs: Any
                ) -> CodexAdapter:
        """A session whose launch allows it is a thread of a shared app-server
        (``codex_shared``; private-home only, ``RuntimeConfig.shared_app_server``)."""
        if cls is CodexAdapter and config is not None and config.shared_app_server:
            if CodexAdapter.shared_variant is None:
                raise errors.RuntimeStartFailed("shared app-servers are not loaded")
            cls = CodexAdapter.shared_variant
        return super().__new__(cls)

    def __init__(self, config):
        super().__init__(config)
        self._rpc: JsonLines | None = None
        self._turn_id: str | None = None
        self._thread_id: str | None = None
        self.init_result: dict[str, Any] | None = None
        self._early: list[dict[str, Any]] = []
        self._open_tools: dict[str, None] = {}  # tool items started and not completed
        self._model_switched = False  # set_model: the next turn/start names the model
        self._compacting = False  # thread/compact/start sent; its turn not yet seen
        # thread goals: the probe's answer, the native goal as last seen, and the turns the
        # app-server started by itself (id → the goal when it started, whether one of our
        # turns ran then, its frames so far)
        self.goals_supported: bool | None = None
        self.goal: dict[str, Any] | None = None
        self.goal_updates: list[dict[str, Any] | None] = []  # None: the goal was cleared
        self.native_turns: dict[str, dict[str, Any]] = {}
        self.native_turn_started = asyncio.Event()
        self._done_turns: set[str] = set()
        self._refused_turns: set[str] = set()
        # the features probe beside initialize, and what was decided from it (per adapter:
        # never shared across sessions or identities)
        self._features_probe: asyncio.Task[codex_features.ProbeResult] | None = None
        self.features_probe_timeout = codex_features.PROBE_TIMEOUT
        self.probe_tag: str | None = None
        self.probe_pid: int | None = None
        self.user_input: codex_features.Decision | None = None

    # -------------------------------------------------------------- class API
    @classmethod
    def probe(cls, runtimes_dir: Path | None = None) -> Probe:
        binary = codex_binary(runtimes_dir or default_runtimes_dir())
        if not binary.exists():
            return Probe(cls.name, False, error=f"{binary} not found (run `make runtimes`)")
        version, error = binary_version(binary)
        return Probe(cls.name, version is not None, version, str(binary), error or None)

    @classmethod
    def static_capabilities(cls) -> Capabilities:
        return Capabilities(resume=True, interrupt=True, images=True, permissions=True,
                            questions=True, set_model=True, native_cumulative_usage=True)

    # -------------------------------------------------------------- lifecycle
    @property
    def codex_home(self) -> Path:
        return self.config.state_dir / "home" / ".codex"

    def _policies(self) -> tuple[str, str]:
        """(approval policy, sandbox): the frozen native settings, else from the mode."""
        return native_policies(self.config)

    def _prepare_home(self, env: dict[str, str]) -> None:
        """The session's generated config.toml (its provider, policies and MCP servers) and
        the variables it names."""
        cfg = self.config
        approval, sandbox = self._policies()
        (self.codex_home / "config.toml").write_text(
            render_config(cfg.model, cfg.provider.base_url, approval, sandbox,
                          mcp_servers=cfg.mcp_servers))
        for index, token in enumerate(self.mcp_tokens()):
            if token:
                env[mcp_token_env(index)] = token
        env[PROVIDER_KEY_ENV] = cfg.provider.api_key or "amux-no-key"

    async def _launch(self) -> None:
        """Start ``codex app-server`` in the private HOME and complete the handshake."""
        cfg = self.config
        binary = codex_binary(cfg.runtimes_dir)
        if not binary.exists():
            raise errors.RuntimeNotInstalled(f"{binary} not found (run `make runtimes`)")
        env = minimal_env(cfg, self.tag)
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self._prepare_home(env)
        env["CODEX_HOME"] = str(self.codex_home)
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = await self._spawn([str(binary), "app-server", *cfg.extra_args], env)
        self._start_stderr_pump()
        self._rpc = JsonLines(self.proc, self._on_message, self._on_closed,
                              observer=self._observe_wire)
        if self._probe_wanted():  # beside initialize; thread/start waits for it
            self._features_probe = asyncio.create_task(self._probe_features(binary, env))
            self._tasks.append(self._features_probe)
        try:
            init = await self._call("initialize", {
                "clientInfo": CLIENT_INFO, "capabilities": {"experimentalApi": True}},
                timeout=60)
        except BaseException:
            await self._cancel_probe()  # a failed handshake stops and reaps the probe
            raise
        self.init_result = init
        await self._rpc.send({"method": "initialized"})

    # -------------------------------------------------------------- user questions
    def _probe_wanted(self) -> bool:
        return self.config.ask_user and \
            codex_features.explicit_flag(self.config.extra_args) is None

    async def _probe_features(self, binary: Path, env: dict[str, str]
                              ) -> codex_features.ProbeResult:
        """``codex features list`` as the agent runs (its identity, isolation, environment
        and work directory) under a launch tag of its own."""
        import uuid

        cfg = self.config
        self.probe_tag = uuid.uuid4().hex
        probe_env = {**env, "AMUX_RUNTIME_TAG": self.probe_tag}
        launch = self.launch
        if launch is not None:
            probe_env = launch.environment(probe_env, cfg.workdir)

        def started(proc: asyncio.subprocess.Process) -> None:
            self.probe_pid = proc.pid
            if launch is not None:
                launch.verify(proc.pid)

        try:
            argv = [str(binary), "features", "list"]
            return await codex_features.run_probe(
                launch.command(argv) if launch is not None else argv, probe_env,
                cfg.workdir, self.probe_tag,
                launch.spawn_kwargs() if launch is not None else {},
                timeout=self.features_probe_timeout, started=started)
        except errors.RuntimeAdapterError as exc:
            return codex_features.ProbeResult(error=str(exc))

    async def _cancel_probe(self) -> None:
        task = self._features_probe
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _thread_config(self) -> dict[str, Any]:
        """The per-thread config for new, resumed and cleared threads: the user-question
        feature when the probe declared it (decided once per adapter)."""
        if self.user_input is None:
            result = None
            task = self._features_probe
            if task is not None and not task.cancelled():
                result = await task  # bounded by the probe's own timeout
            self.user_input = codex_features.decide(
                ask_user=self.config.ask_user,
                flag=codex_features.explicit_flag(self.config.extra_args), probe=result,
                user_agent=(self.init_result or {}).get("userAgent"))
            self.facts_changed = True
        if self.user_input.enabled and self.user_input.by == codex_features.BY_PROBE:
            return {codex_features.THREAD_CONFIG_KEY: True}
        return {}  # an explicit flag is Codex's own; otherwise native behaviour

    async def start(self, resume: str | None = None) -> str:
        cfg = self.config
        approval, sandbox = self._policies()
        try:
            await self._launch()
            params: dict[str, Any] = {"cwd": str(cfg.workdir), "approvalPolicy": approval,
                                      "sandbox": sandbox, "model": cfg.model,
                                      "modelProvider": "amux"}
            launch_text = self.launch_instructions()
            if launch_text:  # the thread's own developer instructions (new and resumed)
                params["developerInstructions"] = launch_text
            thread_config = await self._thread_config()
            if thread_config:
                params["config"] = thread_config
            if resume:
                try:
                    result = await self._call("thread/resume", {**params, "threadId": resume},
                                              timeout=60)
                except errors.ProtocolError as exc:
                    text = str(exc).lower()
                    if any(s in text for s in ("not found", "no rollout", "does not exist",
                                               "unknown thread", "no thread")):
                        raise errors.NativeSessionNotFound(str(exc)) from exc
                    raise
            else:
                result = await self._call("thread/start", params, timeout=60)
        except BaseException:
            await self.close()
            raise
        self._thread_id = result["thread"]["id"]
        self.native_session_id = self._thread_id
        if cfg.memory:
            # amux's memory replaces Codex's: the thread's native memory mode is off for good
            # (a Codex without this contract fails here, before the first turn)
            try:
                await self._call("thread/memoryMode/set",
                                 {"threadId": self._thread_id, "mode": "disabled"})
            except BaseException:
                await self.close()
                raise
        await self._probe_goals()
        return self._thread_id

    # -------------------------------------------------------------- thread goals
    async def _probe_goals(self) -> None:
        """The goal capability of the running app-server, for this thread."""
        try:
            result = await self._call("thread/goal/get", {"threadId": self._thread_id},
                                      timeout=20)
        except errors.RuntimeAdapterError:
            supported, goal = False, None
        else:
            goal = result.get("goal", False)
            supported = goal is None or valid_goal(goal)
        self.goals_supported = supported
        self.goal = goal if supported else None
        self.facts_changed = True

    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"goals": bool(self.goals_supported)}
        if self.user_input:
            facts["request_user_input"] = self.user_input.as_fact()
        return facts

    async def goal_get(self) -> dict[str, Any] | None:
        result = await self._call("thread/goal/get", {"threadId": self._thread_id}, timeout=20)
        return self._take_goal(result.get("goal"))

    async def goal_set(self, **fields: Any) -> dict[str, Any] | None:
        """``thread/goal/set`` with the given fields (``objective``, ``status``,
        ``tokenBudget``, ``origin``); answers the native goal."""
        result = await self._call("thread/goal/set", {"threadId": self._thread_id, **fields},
                                  timeout=20)
        return self._take_goal(result.get("goal"))

    async def goal_clear(self) -> None:
        await self._call("thread/goal/clear", {"threadId": self._thread_id}, timeout=20)
        self.goal = None

    def _take_goal(self, goal: Any) -> dict[str, Any] | None:
        if goal is not None and not valid_goal(goal):
            raise errors.ProtocolError(f"thread/goal: not a goal: {str(goal)[:200]}")
        self.goal = goal
        return goal

    def waiting_native_turn(self, *, during_turn: bool = False
                            ) -> tuple[str, dict[str, Any] | None] | None:
        """The oldest turn the app-server started by itself and nobody adopted or refused:
        (its id, the native goal as it was when the turn started). ``during_turn``: only
        one that started while a turn of ours ran."""
        for turn_id, entry in self.native_turns.items():
            if entry["during_turn"] or not during_turn:
                return turn_id, entry["goal"] or self.goal
        if not self.native_turns:
            self.native_turn_started.clear()
        return None

    async def refuse_native_turn(self, turn_id: str) -> None:
        """Interrupt a turn the app-server started without amux's authorization; its
        frames are dropped, never shown as anyone's turn."""
        entry = self.native_turns.pop(turn_id, None)
        if entry and any(m.get("method") == "turn/completed" for m in entry["frames"]):
            self._done_turns.add(turn_id)  # it ended before anyone looked: nothing to stop
            return
        self._refused_turns.add(turn_id)
        if self._rpc is not None and self.alive:
            with contextlib.suppress(errors.RuntimeAdapterError):
                await self._call("turn/interrupt", {"threadId": self._thread_id,
                                                    "turnId": turn_id}, timeout=10)

    def _native_frame(self, msg: dict[str, Any], params: dict[str, Any]) -> bool:
        """Keep a frame of a turn we did not start; True when it was one."""
        turn_id = params.get("turnId") or (params.get("turn") or {}).get("id")
        if not turn_id or params.get("threadId") not in (None, self._thread_id):
            return False
        if turn_id in self._refused_turns or turn_id in self._done_turns:
            return True  # a refused turn's or an ended turn's late frames: dropped
        if turn_id not in self.native_turns:
            if msg.get("method") != "turn/started":
                return False  # a frame of no turn we know (idle chatter)
            self.native_turns[turn_id] = {"goal": dict(self.goal) if self.goal else None,
                                          "during_turn": self._turn_active, "frames": []}
            self.native_turn_started.set()
        self.native_turns[turn_id]["frames"].append(msg)
        return True

    def _goal_notification(self, method: str, params: dict[str, Any]) -> bool:
        if params.get("threadId") not in (None, self._thread_id):
            return False
        if method == "thread/goal/updated" and valid_goal(params.get("goal")):
            self.goal = params["goal"]
            self.goal_updates.append(dict(params["goal"]))
            return True
        if method == "thread/goal/cleared":
            self.goal = None
            self.goal_updates.append(None)
            return True
        return False

    async def _call(self, method: str, params: dict[str, Any], timeout: float = 60
                    ) -> dict[str, Any]:
        assert self._rpc is not None
        msg = await self._rpc.request({"method": method, "params": params}, timeout=timeout)
        if "error" in msg:
            err = msg["error"] or {}
            raise errors.ProtocolError(f"{method}: {err.get('message', err)}")
        return msg.get("result") or {}

    def _on_closed(self) -> None:
        self._queue.put_nowait(self._exited())

    # -------------------------------------------------------------- turns
    async def _begin_turn(self, turn_input: TurnInput) -> None:
        if turn_input.command == "compact":
            await self._begin_compact()
            return
        if turn_input.command == "goal":
            await self._adopt_native_turn()
            return
        items: list[dict[str, Any]] = [
            {"type": "text", "text": part[1]} if part[0] == "text" else
            {"type": "image", "url": f"data:{part[1]};base64,{part[2]}"}
            for part in turn_input.ordered()]
        params: dict[str, Any] = {"threadId": self._thread_id, "input": items}
        if self._model_switched:
            # turn/start's model override holds for this turn and the ones after it
            params["model"] = self.config.model
        if self.config.effort:
            params["effort"] = self.config.effort
        if turn_input.system_prompt:
            # The turn's developer instructions: Codex adds them to the conversation as a
            # developer message whenever they differ from the previous turn's and uses them
            # for every model request of the turn (experimental API, opted in at initialize).
            params["collaborationMode"] = {"mode": "default", "settings": {
                "model": self.config.model, "reasoning_effort": self.config.effort,
                "developer_instructions": turn_input.system_prompt}}
        self._early = []
        self._open_tools = {}
        result = await self._call("turn/start", params)
        self._turn_id = result["turn"]["id"]
        early, self._early = self._early, []
        for msg in early:  # notifications that raced ahead of the turn/start answer
            await self._on_message(msg)
        await self._cancel_if_asked()

    async def _cancel_if_asked(self) -> None:
        """An interrupt (or watchdog) that came while the turn had no id yet could not name
        it; now that it has one, ``turn/interrupt`` goes out, so the app-server ends the
        turn itself instead of amux's cancel grace running out."""
        if self._cancel_requested or self._watchdog_code:
            await self._cancel_native()

    async def _begin_compact(self) -> None:
        """``thread/compact/start`` (the pinned schema's native compaction): Codex runs it as
        a turn of the thread, whose ``turn/started`` names it and ``turn/completed`` ends
        it; the answer itself carries no turn id."""
        self._early = []
        self._open_tools = {}
        self._compacting = True
        try:
            await self._call("thread/compact/start", {"threadId": self._thread_id})
        except BaseException:
            self._compacting = False
            raise

    async def _adopt_native_turn(self) -> None:
        """Run the oldest turn the app-server started by itself as this turn: its frames
        so far are replayed, the rest arrive as for a turn we started."""
        waiting = self.waiting_native_turn()
        if waiting is None:
            raise errors.RuntimeAdapterError("no native goal turn is waiting to be adopted",
                                             code="no_goal_turn")
        turn_id = waiting[0]
        frames = self.native_turns.pop(turn_id)["frames"]
        self._early = []
        self._open_tools = {}
        self._turn_id = turn_id
        for msg in frames:
            await self._on_message(msg)

    async def clear(self) -> str:
        """A new thread in the same process, work directory and settings (``thread/start``)."""
        approval, sandbox = self._policies()
        params: dict[str, Any] = {
            "cwd": str(self.config.workdir), "approvalPolicy": approval, "sandbox": sandbox,
            "model": self.config.model, "modelProvider": "amux"}
        thread_config = await self._thread_config()
        if thread_config:
            params["config"] = thread_config
        result = await self._call("thread/start", params, timeout=60)
        self._thread_id = result["thread"]["id"]
        self.native_session_id = self._thread_id
        self._model_switched = False  # the new thread starts with the configured model
        self.native_turns.clear()
        await self._probe_goals()
        return self._thread_id

    async def _cancel_native(self) -> None:
        if self._turn_id and self._rpc is not None and self.alive:
            with contextlib.suppress(errors.RuntimeAdapterError):
                await self._call("turn/interrupt", {"threadId": self._thread_id,
                                                    "turnId": self._turn_id}, timeout=10)

    def _after_turn(self) -> None:
        if self._turn_id:
            self._done_turns.add(self._turn_id)
        self._turn_id = None
        self._compacting = False

    hot_model_switch = True

    async def set_model(self, model: str, effort: str | None = None) -> None:
        """Idle model switch without a restart: the next ``turn/start`` names the model (and
        effort), which Codex keeps for the thread's later turns."""
        self.config.model = model
        self.config.effort = effort
        self._model_switched = True

    # -------------------------------------------------------------- inbound
    def _ours(self, params: dict[str, Any]) -> bool:
        turn_id = params.get("turnId") or (params.get("turn") or {}).get("id")
        return bool(self._turn_active and self._turn_id and turn_id == self._turn_id)

    async def _on_message(self, msg: dict[str, Any]) -> None:
        method = msg.get("method", "")
        params = msg.get("params") or {}
        if "id" in msg:
            await self._on_server_request(msg["id"], method, params)
            return
        if method.startswith("thread/goal/") and self._goal_notification(method, params):
            return
        if not self._of_this_turn(msg, method, params):
            return
        handler = self._TURN_FRAMES.get(method)
        if handler is not None:
            handler(self, params)

    def _of_this_turn(self, msg: dict[str, Any], method: str, params: dict[str, Any]) -> bool:
        """Whether a notification is a frame of the turn in hand; one that is not is held
        until the turn has an id, kept for a turn the app-server started, or dropped."""
        if self._compacting and method == "turn/started":
            # the compaction's turn: from here on its frames are this turn's
            self._compacting = False
            self._turn_id = (params.get("turn") or {}).get("id")
            # not awaited here: the answer to turn/interrupt is read by this same pump
            self._tasks.append(asyncio.create_task(self._cancel_if_asked()))
        elif self._turn_active and self._turn_id is None:
            if not self._compacting:
                self._early.append(msg)
            return False
        if self._ours(params):
            return True
        if method == "turn/completed":
            turn_id = (params.get("turn") or {}).get("id")
            if turn_id in self._refused_turns:
                self._refused_turns.discard(turn_id)
                self._done_turns.add(turn_id)
                return False
        # a turn the app-server started by itself (a goal continuation) waits for the
        # host; other threads, idle chatter and late frames of ended turns are dropped
        self._native_frame(msg, params)
        return False

    def _turn_started(self, params: dict[str, Any]) -> None:
        self.emit(TurnStarted(native_turn_id=params["turn"]["id"]))

    def _message_delta(self, params: dict[str, Any]) -> None:
        self.emit(MessageDelta(text=params.get("delta", ""), item_id=params.get("itemId")))

    def _item_started(self, params: dict[str, Any]) -> None:
        item = params.get("item") or {}
        if item.get("type") in _TOOL_ITEMS:
            self._open_tools[item.get("id", "")] = None
            self.emit(self._tool_started(item))

    def _tool_progress(self, params: dict[str, Any]) -> None:
        self.emit(ToolUpdated(call_id=params.get("itemId", ""), status="in_progress",
                              output=params.get("delta") or params.get("message")))

    def _item_completed(self, params: dict[str, Any]) -> None:
        item = params.get("item") or {}
        itype = item.get("type")
        if itype == "agentMessage" and item.get("delivery") == "async" \
                and isinstance(item.get("questions"), list):
            for event in self._async_questions(item):
                self.emit(event)
        elif itype == "agentMessage":
            self.emit(MessageCompleted(text=item.get("text", ""), item_id=item.get("id")))
        elif itype == "reasoning":
            text = "\n".join([*(item.get("summary") or []), *(item.get("content") or [])])
            if text:
                self.emit(Reasoning(text=text, item_id=item.get("id")))
        elif itype in _TOOL_ITEMS:
            status = item.get("status") or "completed"
            self._open_tools.pop(item.get("id", ""), None)
            self.emit(ToolCompleted(
                call_id=item.get("id", ""),
                status={"completed": "completed", "failed": "failed",
                        "declined": "declined"}.get(status, status),
                output=item.get("aggregatedOutput"), exit_code=item.get("exitCode")))

    def _token_usage(self, params: dict[str, Any]) -> None:
        self.emit(map_token_usage(params))

    def _error(self, params: dict[str, Any]) -> None:
        err = params.get("error") or {}
        self.emit(ErrorObserved(code="provider_error", message=str(err.get("message", err)),
                                will_retry=bool(params.get("willRetry"))))

    def _turn_completed(self, params: dict[str, Any]) -> None:
        turn = params.get("turn") or {}
        status = turn.get("status")
        if status == "completed":
            # A command exec_command left running (it yielded to the model) completes
            # only when it exits, usually after the turn: say so rather than leave it
            # looking stuck in the timeline.
            for call_id in self._open_tools:
                self.emit(ToolUpdated(call_id=call_id, status="background",
                                      output="still running in the background"))
            self._open_tools.clear()
            self.emit(TurnCompleted(stop_reason="end_turn"))
        elif status == "interrupted":
            self.emit(TurnCancelled(reason="interrupted"))
        else:
            err = turn.get("error") or {}
            info = err.get("codexErrorInfo")
            code = info if isinstance(info, str) else (
                next(iter(info)) if isinstance(info, dict) and info else "turn_failed")
            self.emit(TurnFailed(code=str(code), message=str(err.get("message", ""))))

    # What each notification of the turn in hand becomes; one lookup per frame on the hot
    # path (the others of a turn are ignored).
    _TURN_FRAMES: ClassVar[dict[str, Callable[[CodexAdapter, dict[str, Any]], None]]] = {
        "turn/started": _turn_started,
        "item/agentMessage/delta": _message_delta,
        "item/started": _item_started,
        # a running tool's progress
        "item/commandExecution/outputDelta": _tool_progress,
        "item/fileChange/outputDelta": _tool_progress,
        "item/mcpToolCall/progress": _tool_progress,
        "item/completed": _item_completed,
        "thread/tokenUsage/updated": _token_usage,
        "error": _error,
        "turn/completed": _turn_completed,
    }

    @staticmethod
    def _tool_started(item: dict[str, Any]) -> ToolStarted:
        itype = item.get("type")
        if itype == "commandExecution":
            actions = item.get("commandActions") or []
            shown = actions[0].get("command") if len(actions) == 1 else None
            return ToolStarted(call_id=item["id"], kind="execute",
                               title=shown or item.get("command"),
                               input={"command": item.get("command"), "cwd": item.get("cwd")})
        if itype == "fileChange":
            changes = item.get("changes") or []
            return ToolStarted(call_id=item["id"], kind="edit",
                               title=", ".join(c.get("path", "") for c in changes) or "edit",
                               input={"changes": changes})
        return ToolStarted(call_id=item["id"], kind=str(itype),
                           title=item.get("tool") or item.get("query") or itype,
                           input=item.get("arguments"))

    async def _on_server_request(self, rid: Any, method: str, params: dict[str, Any]) -> None:
        assert self._rpc is not None
        if method in ("item/commandExecution/requestApproval", "item/fileChange/requestApproval",
                      "execCommandApproval", "applyPatchApproval"):
            self._tasks.append(asyncio.create_task(self._approval(rid, method, params)))
        elif method == "item/tool/requestUserInput":
            self._tasks.append(asyncio.create_task(self._user_input(rid, params)))
        else:
            await self._rpc.send({"id": rid, "error": {
                "code": -32601, "message": f"amux does not handle {method}"}})

    async def _approval(self, rid: Any, method: str, params: dict[str, Any]) -> None:
        assert self._rpc is not None
        legacy = method in ("execCommandApproval", "applyPatchApproval")
        answer = self.policy_answer()
        if answer is not None or not self._turn_active:
            decision = {"allow": "accept", "deny": "decline"}.get(answer or "", "cancel")
            if legacy:
                decision = {"accept": "approved", "decline": "denied",
                            "cancel": "abort"}[decision]
            await self._rpc.send({"id": rid, "result": {"decision": decision}})
            return
        offered = [d for d in (params.get("availableDecisions")
                               or ["accept", "acceptForSession", "decline", "cancel"])
                   if isinstance(d, str)]
        request_id = f"codex-{self.tag[:8]}-{rid}"
        fut = self._new_pending(request_id)
        command = params.get("command")
        self.emit(PermissionRequested(
            request_id=request_id, call_id=params.get("itemId"),
            title=command if isinstance(command, str) else (
                params.get("reason") or method.split("/")[1]),
            detail={k: params.get(k) for k in ("reason", "cwd", "command", "grantRoot")
                    if params.get(k) is not None},
            options=tuple(PermissionOption(id=d, label=d, kind=DECISION_KIND.get(d, d))
                          for d in offered)))
        answer = await fut
        decision = answer if answer in offered else "cancel"
        if legacy:
            decision = {"accept": "approved", "acceptForSession": "approved_for_session",
                        "decline": "denied"}.get(decision, "abort")
        with contextlib.suppress(errors.RuntimeAdapterError):
            await self._rpc.send({"id": rid, "result": {"decision": decision}})

    def _async_questions(self, item: dict[str, Any]) -> list[QuestionAsked]:
        """An async ``agentMessage``'s questions, one non-blocking request each: text and
        options kept, a custom answer always allowed (the tool says the UI takes free
        text), no native request pending."""
        out = []
        for index, q in enumerate(item.get("questions") or []):
            if not isinstance(q, dict) or not str(q.get("title") or "").strip():
                continue
            options = tuple(str(o) for o in q.get("options") or [] if isinstance(o, str))
            out.append(QuestionAsked(
                request_id=f"codex-{self.tag[:8]}-async-{item.get('id')}-{index}",
                questions=(Question(text=str(q["title"]), id=f"q{index}", options=options,
                                    allow_custom=True),),
                blocking=False, delivery="async"))
        return out

    async def _user_input(self, rid: Any, params: dict[str, Any]) -> None:
        assert self._rpc is not None
        request_id = f"codex-{self.tag[:8]}-{rid}"
        fut: asyncio.Future[dict[str, Any] | None] = (
            asyncio.get_running_loop().create_future())
        self._pending_questions[request_id] = fut
        questions = tuple(
            Question(text=q.get("question", ""), header=q.get("header"), id=q.get("id"),
                     options=tuple(o.get("label", "") for o in (q.get("options") or [])),
                     descriptions={o["label"]: o["description"]
                                   for o in q.get("options") or []
                                   if o.get("label") and o.get("description")} or None,
                     allow_custom=bool(q.get("isOther", True)) or not q.get("options"),
                     sensitive=bool(q.get("isSecret")))
            for q in params.get("questions") or [])
        self.emit(QuestionAsked(request_id=request_id, questions=questions,
                                blocking=bool(params.get("isBlocking", True))))
        answers = await fut
        result = {"answers": {qid: {"answers": list(v if isinstance(v, list) else [v])}
                              for qid, v in (answers or {}).items()}}
        with contextlib.suppress(errors.RuntimeAdapterError):
            await self._rpc.send({"id": rid, "result": result})


# ---------------------------------------------------------------------- model discovery
MODEL_PAGE_SIZE = 100
MAX_MODEL_PAGES = 50
# Discovery runs on the runtime's own identity (its login and its own config.toml), not on
# an amux provider: this spec only fills the config's slot and reaches no process.
NATIVE_IDENTITY = ProviderSpec(platform="native", base_url="", slug="")


class CodexIdentity(CodexAdapter):
    """``codex app-server`` in the runtime's own HOME, launched exactly as for a session
    but with the identity's own config and login left as they are; it lists models and
    never starts a thread."""

    @classmethod
    def check_provider(cls, provider: ProviderSpec) -> None:
        if provider is not NATIVE_IDENTITY:
            super().check_provider(provider)

    def _prepare_home(self, env: dict[str, str]) -> None:
        pass  # the identity's config.toml and auth are the operator's, never rewritten

    def _probe_wanted(self) -> bool:
        return False  # it never starts a thread: nobody to ask

    async def read_catalog(self, timeout: float = 30) -> catalog.Catalog:
        account = await self._call("account/read", {}, timeout=timeout)
        if not catalog.logged_in(account):
            return catalog.Catalog.unavailable(
                catalog.NOT_LOGGED_IN,
                f"Codex is not logged in under its own identity ({self.codex_home}); "
                "log in there, or bind a provider")
        entries: list[catalog.ModelEntry] = []
        cursor: str | None = None
        for _page in range(MAX_MODEL_PAGES):
            params: dict[str, Any] = {"limit": MODEL_PAGE_SIZE}
            if cursor:
                params["cursor"] = cursor
            page = await self._call("model/list", params, timeout=timeout)
            data = page.get("data")
            if not isinstance(data, list) or not all(
                    isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
                return catalog.Catalog.unavailable(
                    catalog.FAILED, "model/list answered without a list of models")
            entries.extend(catalog.codex_entry(m) for m in data if not m.get("hidden"))
            cursor = page.get("nextCursor")
            if not cursor:
                return catalog.Catalog(status=catalog.OK, source="native",
                                       models=tuple(entries), account=account)
        return catalog.Catalog.unavailable(
            catalog.FAILED, f"model/list did not end after {MAX_MODEL_PAGES} pages")


async def discover_models(state_dir: Path, runtimes_dir: Path | None = None, *,
                          timeout: float = 30, wire_observer: Any = None) -> catalog.Catalog:
    """Codex's live model catalog under the identity kept in ``state_dir`` (its HOME is
    ``state_dir/home``, as a session's is). Unreachable or failing: says so, lists nothing."""
    config = RuntimeConfig(workdir=state_dir / "work", state_dir=state_dir,
                           provider=NATIVE_IDENTITY, model="", runtimes_dir=runtimes_dir,
                           wire_observer=wire_observer)
    client = CodexIdentity(config)
    try:
        await asyncio.wait_for(client._launch(), timeout)
        return await asyncio.wait_for(client.read_catalog(timeout), timeout)
    except errors.RuntimeNotInstalled as exc:
        return catalog.Catalog.unavailable(catalog.UNREACHABLE, str(exc))
    except (errors.RuntimeStartFailed, errors.RuntimeExited, errors.RuntimeTimeout,
            TimeoutError) as exc:
        tail = " | ".join("".join(client._stderr_tail).strip().splitlines()[-2:])
        return catalog.Catalog.unavailable(
            catalog.UNREACHABLE, f"the Codex app-server did not answer: {exc or 'timeout'}"
            + (f" ({tail})" if tail else ""))
    except errors.RuntimeAdapterError as exc:
        return catalog.Catalog.unavailable(catalog.FAILED, str(exc))
    finally:
        await client.close()
