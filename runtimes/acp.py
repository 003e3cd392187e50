"""Any ACP v1 agent through the ``agent-client-protocol`` SDK (tested with codex-acp).

* Images go to the agent only when ``initialize`` says
  ``agentCapabilities.promptCapabilities.image`` is exactly ``true``; otherwise text only.
* Model/effort map onto advertised ``configOptions`` (select); every requested value must be
  among the options and be confirmed by the read-back, otherwise ``ConfigRejected`` and the
  previous value is restored (the process is retired if the restore fails too).
* ``interrupt`` sends ``session/cancel`` only while the ``session/prompt`` RPC is active and
  records that as the cancel intent: the prompt's answer then ends the turn cancelled even
  if the stop reason is ``end_turn``. Every pending and late permission request is answered
  ``cancelled``.
* Usage: the prompt's final ``usage`` (snake_case, no cumulative inferred) and the latest
  ``usage_update`` (context used/size, cost); missing values stay missing.
* Watchdogs: idle time pauses while a tool runs or a permission is pending; a repeated call
  counts only completed calls with distinct ids and equal kind, title and accumulated input.
  A watchdog stop cancels, waits the grace period and always retires the process.
* Resume: ``session/load`` (history replay is dropped, it is not part of any turn); a
  subclass may refuse a session it knows cannot be loaded before spawning anything.
* System prompt: ACP has no channel for one, so a turn's prompt is prepended to its content
  as a delimited block on the first turn of a native conversation and whenever it changed
  (subclasses with a native channel override ``system_prompt_channel``/``session_meta``).
* MCP: ``config.mcp_servers`` go into ``session/new``/``session/load`` as HTTP servers with
  the bearer read at start, only if the agent declares ``mcpCapabilities.http``.
* Questions: when the session lets the runtime ask (``ask_user``) amux advertises form
  elicitation (unstable in ACP v1). An ``elicitation/create`` of the running turn becomes
  one ``question.asked`` per schema property (``elicitation``), all answered together; the
  agent gets ``accept`` with the content, ``decline`` when a person cancels one question
  (the whole form), ``cancel`` when an interrupt, the turn's end or close releases it. URL
  elicitations (not advertised) are declined; ``elicitation/complete`` concerns only those.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from . import elicitation, errors
from .answers import AnswerRefused
from .base import (
    INLINE,
    PROVIDER_KEY_ENV,
    Capabilities,
    Probe,
    RuntimeAdapter,
    RuntimeConfig,
    binary_version,
    default_runtimes_dir,
    minimal_env,
    prompt_hash,
)
from .codex import native_policies, render_config
from .events import (
    ErrorObserved,
    Event,
    MessageCompleted,
    MessageDelta,
    PermissionOption,
    PermissionRequested,
    QuestionAnswered,
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
from .watchdog import call_signature

PROTOCOL_VERSION = 1
PROMPT_BLOCK = ("<amux-system-prompt>\n"
                "amux's system prompt for this session. It replaces any earlier "
                "<amux-system-prompt> block and stays in force until a new one arrives.\n\n"
                "{text}\n</amux-system-prompt>")


def http_mcp_supported(init_response: Any) -> bool:
    """Whether the agent declared ``agentCapabilities.mcpCapabilities.http`` (exactly true)."""
    caps = getattr(init_response, "agent_capabilities", None)
    mcp = getattr(caps, "mcp_capabilities", None) if caps is not None else None
    return getattr(mcp, "http", None) is True


def codex_acp_binary(runtimes_dir: Path) -> Path:
    # the native binary: the npm wrapper does not forward SIGTERM
    return runtimes_dir / "@zed-industries" / "codex-acp-linux-x64" / "bin" / "codex-acp"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    text = getattr(content, "text", None)
    if isinstance(text, str):
        return text
    return ""


def _dump(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(obj, list):
        return [_dump(o) for o in obj]
    return obj


# keys an agent adds to a call's raw input that identify the call rather than define it
VOLATILE_INPUT_KEYS = frozenset({"call_id", "callId", "tool_call_id", "toolCallId", "id",
                                 "process_id", "processId", "turn_id", "turnId",
                                 "started_at_ms", "completed_at_ms", "timestamp", "source"})


def explicit_input(raw: Any) -> Any:
    """The call-defining part of a tool call's raw input (identifiers and clocks dropped)."""
    if isinstance(raw, dict):
        return {k: explicit_input(v) for k, v in raw.items() if k not in VOLATILE_INPUT_KEYS}
    return raw


def accepts_images(init_response: Any) -> bool:
    """Seed 000: images only when ``agentCapabilities.promptCapabilities.image`` is exactly
    ``true``; missing, false or malformed keeps text-only input."""
    caps = getattr(init_response, "agent_capabilities", None)
    prompt_caps = getattr(caps, "prompt_capabilities", None) if caps is not None else None
    return getattr(prompt_caps, "image", None) is True


def _usage_fields(usage: Any) -> dict[str, int] | None:
    if usage is None:
        return None
    fields = {"input_tokens": "input_tokens", "output_tokens": "output_tokens",
              "total_tokens": "total_tokens", "thought_tokens": "reasoning_output_tokens",
              "cached_read_tokens": "cached_input_tokens",
              "cached_write_tokens": "cache_creation_input_tokens"}
    out = {new: getattr(usage, old) for old, new in fields.items()
           if isinstance(getattr(usage, old, None), int)}
    return out or None


class _Client:
    """The ACP client side: routes agent callbacks into the adapter."""

    def __init__(self, adapter: AcpAdapter):
        self.adapter = adapter

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.adapter._on_update(session_id, update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> Any:
        return await self.adapter._on_permission(session_id, tool_call, options)

    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise _method_not_found("fs/read_text_file")

    async def write_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise _method_not_found("fs/write_text_file")

    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise _method_not_found("terminal/create")

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        return await self.adapter._on_elicitation(message, mode)

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None  # URL elicitations only, which amux does not advertise

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise _method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        pass


def _method_not_found(name: str) -> Exception:
    from acp.exceptions import RequestError

    return RequestError.method_not_found(name)


class AcpAdapter(RuntimeAdapter):
    """ACP v1 agent. The default command is codex-acp's native binary; subclasses (Claude)
    override ``command()`` and ``agent_env()``."""

    name = "acp"
    platforms = frozenset({"openai-compat"})
    system_prompt_channel = INLINE
    takes_mcp = True
    pause_idle_during_tools = True
    retire_after_watchdog = True

    def __init__(self, config: RuntimeConfig):
        super().__init__(config)
        self.conn: Any = None
        self.init_response: Any = None
        self.image_input = False
        self.load_session_supported = False
        self.config_options: list[Any] = []
        self.modes: Any = None
        self._session_id: str | None = None
        self._prompt_task: asyncio.Task[Any] | None = None
        self._cancel_intent = False
        self._tools: dict[str, dict[str, Any]] = {}
        self._message_id: str | None = None
        self._message_text: list[str] = []
        self._permission_seq = 0
        # open elicitations: request id → (the form's fields, its request ids); and the
        # forms a person cancelled (declined) rather than released
        self._forms: dict[str, tuple[list[elicitation.Field], list[str]]] = {}
        self._declined: set[str] = set()
        # INLINE: the hash of the prompt block the native conversation last received
        self._inline_seen: str | None = None
        # the agent's latest ``available_commands_update`` (names), None until one arrives
        self.available_commands: list[str] | None = None
        self.facts_changed = False

    # ------------------------------------------------------------------ class API
    @classmethod
    def probe(cls, runtimes_dir: Path | None = None) -> Probe:
        binary = codex_acp_binary(runtimes_dir or default_runtimes_dir())
        if not binary.exists():
            return Probe(cls.name, False, error=f"{binary} not found (run `make runtimes`)")
        version, _error = binary_version(binary)
        if version is None:
            import json

            pkg = binary.parent.parent / "package.json"
            with contextlib.suppress(OSError, ValueError):
                version = json.loads(pkg.read_text()).get("version")
        return Probe(cls.name, True, version, str(binary))

    @classmethod
    def static_capabilities(cls) -> Capabilities:
        return Capabilities(resume=True, interrupt=True, images=False, permissions=True,
                            questions=True, set_model=True, native_cumulative_usage=False)

    @property
    def capabilities(self) -> Capabilities:
        base = self.static_capabilities()
        return Capabilities(resume=self.load_session_supported or base.resume,
                            interrupt=True, images=self.image_input,
                            permissions=True, questions=self.config.ask_user,
                            set_model=bool(self._option("model")),
                            native_cumulative_usage=False)

    # ------------------------------------------------------------------ process
    def command(self) -> list[str]:
        binary = codex_acp_binary(self.config.runtimes_dir)
        if not binary.exists():
            raise errors.RuntimeNotInstalled(f"{binary} not found (run `make runtimes`)")
        return [str(binary), *self.config.extra_args]

    def agent_env(self) -> dict[str, str]:
        cfg = self.config
        env = minimal_env(cfg, self.tag)
        codex_home = cfg.state_dir / "home" / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        approval, sandbox = native_policies(cfg)
        (codex_home / "config.toml").write_text(
            render_config(cfg.model, cfg.provider.base_url, approval, sandbox))
        env["CODEX_HOME"] = str(codex_home)
        env[PROVIDER_KEY_ENV] = cfg.provider.api_key or "amux-no-key"
        return env

    def preferred_mode(self) -> str | None:
        native = self.config.native_permission.get("mode")
        if native:
            return native
        return "full-access" if self.config.permission_mode == "bypass" else "auto"

    async def start(self, resume: str | None = None) -> str:
        from acp import connect_to_agent
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        cfg = self.config
        if resume:
            self._check_resumable(resume)
        argv = self.command()
        env = self.agent_env()
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = await self._spawn(argv, env)
        self._start_stderr_pump()
        # elicitation is part of ACP v1's unstable surface: routed only when enabled
        self.conn = connect_to_agent(_Client(self), self.proc.stdin, self.proc.stdout,
                                     use_unstable_protocol=cfg.ask_user)
        self._tasks.append(asyncio.create_task(self._watch_exit()))
        try:
            self.init_response = await asyncio.wait_for(self.conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                    terminal=False, elicitation=self._elicitation_capabilities()),
                client_info=Implementation(name="amux", version="0.1.0")), 60)
            caps = self.init_response.agent_capabilities
            self.image_input = accepts_images(self.init_response)
            self.load_session_supported = bool(caps and caps.load_session)
            mcp_servers = self._mcp_servers()
            meta = self.session_meta()
            if resume:
                resp = await self._load_session(resume, mcp_servers, meta)
                self._session_id = resume
                self._inline_seen = cfg.inline_prompt_seen
            else:
                resp = await asyncio.wait_for(self.conn.new_session(
                    cwd=str(cfg.workdir), mcp_servers=mcp_servers, **meta), 120)
                self._session_id = resp.session_id
                self._inline_seen = None
            self.config_options = list(getattr(resp, "config_options", None) or [])
            self.modes = getattr(resp, "modes", None)
            await self._apply_settings()
            self.facts_changed = True
        except errors.RuntimeAdapterError:
            await self.close()
            raise
        except BaseException as exc:
            await self.close()
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
                raise
            raise errors.RuntimeStartFailed(f"{type(exc).__name__}: {exc}") from exc
        self.native_session_id = self._session_id
        return self._session_id

    async def _load_session(self, resume: str, mcp_servers: list[Any],
                            meta: dict[str, Any]) -> Any:
        """The agent's answer to session/load of ``resume``; NativeSessionNotFound when
        the agent cannot load sessions or no longer has that one."""
        if not self.load_session_supported:
            raise errors.NativeSessionNotFound("the agent cannot load sessions")
        try:
            return await asyncio.wait_for(self.conn.load_session(
                cwd=str(self.config.workdir), session_id=resume, mcp_servers=mcp_servers,
                **meta), 120)
        except errors.RuntimeAdapterError:
            raise
        except Exception as exc:  # acp.RequestError
            text = f"{exc} {getattr(exc, 'data', '')}".lower()
            if "not found" in text or "no such" in text or "-32002" in text:
                raise errors.NativeSessionNotFound(str(exc)) from exc
            raise errors.RuntimeStartFailed(f"session/load: {exc}") from exc

    def _elicitation_capabilities(self) -> Any:
        from acp.schema import ElicitationCapabilities, ElicitationFormCapabilities

        if not self.config.ask_user:
            return None
        return ElicitationCapabilities(form=ElicitationFormCapabilities())

    def _mcp_servers(self) -> list[Any]:
        """``mcpServers`` for session/new and session/load: streamable HTTP entries with the
        bearer read from each token file now — only if the agent declared
        ``mcpCapabilities.http``; amux serves MCP over HTTP only, so an agent without it gets
        none (listed in ``mcp_skipped``; the worker still has the `amux` command)."""
        from acp.schema import HttpHeader, HttpMcpServer

        tokens = self.mcp_tokens()
        if not self.config.mcp_servers:
            return []
        if not http_mcp_supported(self.init_response):
            self.mcp_skipped = [s.name for s in self.config.mcp_servers]
            self._mcp_in_use = False
            return []
        return [HttpMcpServer(type="http", name=server.name, url=server.url,
                              headers=[HttpHeader(name="Authorization",
                                                  value=f"Bearer {token}")] if token else [])
                for server, token in zip(self.config.mcp_servers, tokens, strict=True)]

    def session_meta(self) -> dict[str, Any]:
        """``_meta`` of session/new and session/load (none for a generic ACP agent)."""
        return {}

    def prompt_plan(self, system_prompt: str | None) -> dict[str, Any]:
        plan = super().prompt_plan(system_prompt)
        if self.system_prompt_channel == INLINE:
            plan["prompt_inline"] = bool(system_prompt) and \
                prompt_hash(system_prompt) != self._inline_seen
        return plan

    def _check_resumable(self, session_id: str) -> None:
        """Before any process starts: raise ``NativeSessionNotFound`` when the runtime's own
        files show that ``session_id`` cannot be loaded (the agent decides otherwise)."""

    async def _watch_exit(self) -> None:
        assert self.proc is not None
        await self.proc.wait()
        await asyncio.sleep(0.05)
        self._queue.put_nowait(self._exited())

    async def _close_native(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.close(), 2)

    # ------------------------------------------------------------------ settings
    def _option(self, category_or_id: str) -> Any:
        for opt in self.config_options:
            if getattr(opt, "category", None) == category_or_id or opt.id == category_or_id:
                return opt
        return None

    @staticmethod
    def _values(opt: Any) -> list[str]:
        values: list[str] = []
        for o in getattr(opt, "options", None) or []:
            if hasattr(o, "value"):
                values.append(o.value)
            for g in getattr(o, "options", None) or []:  # grouped options
                if hasattr(g, "value"):
                    values.append(g.value)
        return values

    async def _apply_settings(self) -> None:
        mode = self.preferred_mode()
        mode_opt = self._option("mode")
        if mode and mode_opt is not None:
            if mode in self._values(mode_opt) and mode_opt.current_value != mode:
                await self.set_config("mode", mode, option=mode_opt)
        elif mode and self.modes is not None:
            ids = [m.id for m in self.modes.available_modes]
            if mode in ids and self.modes.current_mode_id != mode:
                await self.conn.set_session_mode(session_id=self._session_id, mode_id=mode)
        model_opt = self._option("model")
        if model_opt is not None and self.config.model:
            wanted = self._pick_model_value(model_opt, self.config.model, self.config.effort)
            if wanted is not None:
                await self.set_config("model", wanted, option=model_opt)
            effort_opt = self._option("thought_level")
            effort = self.config.effort
            if effort and effort_opt is not None and "/" not in str(wanted or "") \
                    and effort_opt.current_value != effort:
                if effort not in self._values(effort_opt):
                    raise errors.ConfigRejected(f"effort {effort!r} is not among the agent's "
                                                "reasoning levels")
                await self.set_config(effort_opt.id, effort, option=effort_opt)

    def _pick_model_value(self, opt: Any, model: str, effort: str | None) -> str | None:
        values = self._values(opt)
        candidates = [f"{model}/{effort}"] if effort else []
        candidates += [model]
        for c in candidates:
            if c in values:
                return c
        if opt.current_value in candidates or str(opt.current_value).split("/")[0] == model:
            return None  # already selected
        # the agent runs the provider's own model name; nothing to map
        return None

    async def set_config(self, config_id: str, value: str, option: Any = None) -> None:
        """Set a select config option and confirm it; roll back on failure (seed 000)."""
        opt = option or self._option(config_id)
        if opt is None:
            raise errors.ConfigRejected(f"the agent advertises no {config_id!r} option")
        if value not in self._values(opt):
            raise errors.ConfigRejected(f"{value!r} is not among the advertised "
                                        f"{config_id!r} options")
        previous = opt.current_value
        try:
            resp = await asyncio.wait_for(self.conn.set_config_option(
                config_id=opt.id, session_id=self._session_id, value=value), 30)
            self.config_options = list(resp.config_options or self.config_options)
            confirmed = self._option(opt.id)
            if confirmed is None or confirmed.current_value != value:
                raise errors.ConfigRejected(f"{config_id} read back "
                                            f"{getattr(confirmed, 'current_value', None)!r}")
        except Exception as exc:
            try:
                resp = await asyncio.wait_for(self.conn.set_config_option(
                    config_id=opt.id, session_id=self._session_id, value=previous), 30)
                self.config_options = list(resp.config_options or self.config_options)
            except Exception:
                await self.close()  # unconfirmed native write: retire the process
            if isinstance(exc, errors.RuntimeAdapterError):
                raise
            raise errors.ConfigRejected(f"{config_id}={value!r}: {exc}") from exc

    @property
    def hot_model_switch(self) -> bool:
        """An idle model switch maps onto the agent's ``model`` config option; an agent
        without one keeps its launch configuration (a switch restarts it)."""
        return self._option("model") is not None

    def _model_plan(self, model: str, effort: str | None) -> list[tuple[Any, str]]:
        """(option, value) writes for ``model``/``effort``, every value among the advertised
        ones; ``ConfigRejected`` before anything is written otherwise."""
        model_opt = self._option("model")
        if model_opt is None:
            raise errors.ConfigRejected("the agent advertises no model option")
        values = self._values(model_opt)
        if effort and f"{model}/{effort}" in values:
            return [(model_opt, f"{model}/{effort}")]
        if model not in values:
            raise errors.ConfigRejected(f"model {model!r} is not among the agent's models "
                                        f"({', '.join(values)})")
        plan = [(model_opt, model)]
        if effort:
            effort_opt = self._option("thought_level")
            if effort_opt is None or effort not in self._values(effort_opt):
                offered = ", ".join(self._values(effort_opt)) if effort_opt else "none"
                raise errors.ConfigRejected(f"effort {effort!r} is not among the agent's "
                                            f"reasoning levels ({offered})")
            plan.append((effort_opt, effort))
        return plan

    async def set_model(self, model: str, effort: str | None = None) -> None:
        plan = self._model_plan(model, effort)
        done: list[tuple[Any, Any]] = []
        try:
            for opt, value in plan:
                previous = (self._option(opt.id) or opt).current_value
                if previous != value:
                    await self.set_config(opt.id, value)
                    done.append((opt, previous))
        except errors.RuntimeAdapterError:
            # the write that failed was rolled back by set_config; undo the earlier ones
            for opt, previous in reversed(done):
                try:
                    await self.set_config(opt.id, previous)
                except errors.RuntimeAdapterError:
                    await self.close()  # the previous value cannot be restored: retire
                    break
            raise
        self.config.model = model
        self.config.effort = effort

    async def clear(self) -> str:
        """A new native session in the same process and work directory, with the session's
        settings applied again (``session/new``)."""
        resp = await asyncio.wait_for(self.conn.new_session(
            cwd=str(self.config.workdir), mcp_servers=self._mcp_servers(),
            **self.session_meta()), 120)
        self._session_id = resp.session_id
        self.native_session_id = resp.session_id
        self._inline_seen = None
        self.available_commands = None
        self.config_options = list(getattr(resp, "config_options", None) or [])
        self.modes = getattr(resp, "modes", None)
        await self._apply_settings()
        self.facts_changed = True
        return resp.session_id

    def facts(self) -> dict[str, Any]:
        """What the agent declared that callers check before asking (kept by the host)."""
        return {"image_input": self.image_input, "commands": self.available_commands,
                "model_option": self.hot_model_switch}

    # ------------------------------------------------------------------ turns
    async def _begin_turn(self, turn_input: TurnInput) -> None:
        from acp import image_block, text_block

        self._cancel_intent = False
        self._tools.clear()
        self._message_id = None
        self._message_text = []
        if turn_input.command == "compact":
            if "compact" not in (self.available_commands or []):
                raise errors.RuntimeAdapterError(
                    "the agent does not advertise a compact command", code="compact_unsupported")
            blocks: list[Any] = [text_block("/compact")]
            self.emit(TurnStarted())
            self._prompt_task = asyncio.create_task(self._prompt(blocks))
            self._tasks.append(self._prompt_task)
            return
        ordered = turn_input.ordered()
        if any(p[0] == "image" for p in ordered) and not self.image_input:
            # seed 000: no image blocks unless the agent declared it takes them
            ordered = [p for p in ordered if p[0] == "text"]
            self.emit(ErrorObserved(code="images_unsupported", message=(
                "the agent did not declare promptCapabilities.image: only the text was sent")))
        blocks = [text_block(p[1]) if p[0] == "text" else image_block(p[2], p[1])
                  for p in ordered]
        digest = prompt_hash(turn_input.system_prompt)
        if self.system_prompt_channel == INLINE and digest and digest != self._inline_seen:
            # no system-prompt channel in ACP: the conversation gets the prompt as a
            # delimited block before the user's words, on the first turn and when it changed
            blocks.insert(0, text_block(PROMPT_BLOCK.format(text=turn_input.system_prompt)))
            self._inline_seen = digest
        self.emit(TurnStarted())
        self._prompt_task = asyncio.create_task(self._prompt(blocks))
        self._tasks.append(self._prompt_task)

    async def _prompt(self, blocks: list[Any]) -> None:
        try:
            resp = await self.conn.prompt(session_id=self._session_id, prompt=blocks)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._flush_message()
            if self._cancel_intent:
                self.emit(TurnCancelled(reason="interrupted"))
            else:
                self.emit(TurnFailed(code="prompt_failed", message=str(exc)))
            return
        self._flush_message()
        last = _usage_fields(getattr(resp, "usage", None))
        if last:
            self.emit(UsageObserved(last=last))
        stop = str(getattr(resp.stop_reason, "value", resp.stop_reason))
        if stop == "cancelled" or self._cancel_intent:
            self.emit(TurnCancelled(reason="interrupted"))
        elif stop == "refusal":
            self.emit(TurnFailed(code="refusal", message="the agent refused"))
        else:
            self.emit(TurnCompleted(stop_reason=stop))

    async def _cancel_native(self) -> None:
        # only a cancel sent while the prompt RPC is active counts as the cancel intent
        if self._prompt_task is not None and not self._prompt_task.done() and self.alive:
            self._cancel_intent = True
            with contextlib.suppress(Exception):
                await self.conn.cancel(session_id=self._session_id)

    def _after_turn(self) -> None:
        self._prompt_task = None

    def _flush_message(self) -> None:
        if self._message_text:
            self.emit(MessageCompleted(text="".join(self._message_text),
                                       item_id=self._message_id))
        self._message_text = []

    def _repeat_signature(self, event: Event) -> tuple[str, str] | None:
        if isinstance(event, ToolCompleted) and event.status == "completed":
            state = self._tools.get(event.call_id) or {}
            return event.call_id, call_signature(state.get("kind"), state.get("title"),
                                                 explicit_input(state.get("input")))
        return None

    # ------------------------------------------------------------------ inbound
    def _on_update(self, session_id: str, update: Any) -> None:
        if session_id == self._session_id and \
                getattr(update, "session_update", None) == "available_commands_update":
            # a snapshot of what the agent offers now, whenever it comes (often right after
            # session/new, outside any turn)
            names = [c.name for c in getattr(update, "available_commands", None) or []]
            if names != self.available_commands:
                self.available_commands = names
                self.facts_changed = True
            return
        if session_id != self._session_id or not self._turn_active \
                or self._prompt_task is None:
            return  # history replay from session/load, or a late frame
        kind = getattr(update, "session_update", None)
        if kind == "agent_message_chunk":
            mid = getattr(update, "message_id", None)
            if mid is not None and self._message_id is not None and mid != self._message_id:
                self._flush_message()
            self._message_id = mid or self._message_id
            text = _content_text(update.content)
            if text:
                self._message_text.append(text)
                self.emit(MessageDelta(text=text, item_id=self._message_id))
        elif kind == "agent_thought_chunk":
            text = _content_text(update.content)
            if text:
                self.emit(Reasoning(text=text, item_id=getattr(update, "message_id", None)))
        elif kind == "tool_call" and update.tool_call_id in self._tools:
            self._tool_progress(update)  # a repeated announcement of a known call
        elif kind == "tool_call":
            self._flush_message()
            state = {"kind": _val(update.kind), "title": update.title,
                     "input": _dump(update.raw_input), "done": False}
            self._tools[update.tool_call_id] = state
            self.emit(ToolStarted(call_id=update.tool_call_id, kind=state["kind"],
                                  title=update.title, input=state["input"]))
            if _val(update.status) in ("completed", "failed"):
                self._tool_done(update.tool_call_id, update)
        elif kind == "tool_call_update":
            self._tool_progress(update)
        elif kind == "usage_update":
            cost = getattr(update, "cost", None)
            self.emit(UsageObserved(context_used=getattr(update, "used", None),
                                    context_window=getattr(update, "size", None),
                                    cost=_dump(cost) if cost is not None else None))

    def _tool_progress(self, update: Any) -> None:
        state = self._tools.setdefault(update.tool_call_id, {"done": False})
        if update.kind is not None:
            state["kind"] = _val(update.kind)
        if update.title is not None:
            state["title"] = update.title
        if update.raw_input is not None:
            state["input"] = _dump(update.raw_input)
        status = _val(update.status)
        if status in ("completed", "failed"):
            self._tool_done(update.tool_call_id, update)
        elif not state["done"]:
            self.emit(ToolUpdated(call_id=update.tool_call_id, status=status,
                                  output=_dump(update.raw_output)))

    def _tool_done(self, call_id: str, update: Any) -> None:
        state = self._tools[call_id]
        if state["done"]:
            return
        state["done"] = True
        output = _dump(update.raw_output)
        if output is None and update.content:
            output = _dump(update.content)
        self.emit(ToolCompleted(call_id=call_id, status=_val(update.status) or "completed",
                                output=output))

    async def _on_elicitation(self, message: str, mode: Any) -> Any:
        return await _elicit(self, message, mode)

    async def answer_question(self, request_id: str, answers: dict[str, Any] | None) -> None:
        """One question of a form; ``None`` declines the whole form. A late, duplicate or
        invalid answer is refused and changes nothing."""
        await _answer_elicitation(self, request_id, answers)

    async def _on_permission(self, session_id: str, tool_call: Any, options: list[Any]) -> Any:
        from acp import RequestPermissionResponse
        from acp.schema import AllowedOutcome, DeniedOutcome

        cancelled = RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if (session_id != self._session_id or not self._turn_active or self._cancel_requested
                or self._watchdog_code or self._closed):
            return cancelled  # late requests after an interrupt are answered cancelled
        ids = {o.option_id: o for o in options}
        answer = self.policy_answer()
        if answer is not None:
            want = "allow" if answer == "allow" else "reject"
            pick = next((o for o in options if _val(o.kind) == f"{want}_once"), None) or \
                next((o for o in options if str(_val(o.kind)).startswith(want)), None)
            if pick is not None:
                return RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id=pick.option_id))
            if answer == "deny":
                return cancelled
        self._permission_seq += 1
        request_id = f"acp-{self.tag[:8]}-{self._permission_seq}"
        fut = self._new_pending(request_id)
        self.emit(PermissionRequested(
            request_id=request_id, call_id=tool_call.tool_call_id, title=tool_call.title,
            detail=_dump(tool_call.raw_input),
            options=tuple(PermissionOption(id=o.option_id, label=o.name, kind=_val(o.kind))
                          for o in options)))
        answer = await fut
        if answer is None or answer not in ids:
            return cancelled
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected",
                                                                option_id=answer))


def _val(v: Any) -> Any:
    return getattr(v, "value", v)


# ---------------------------------------------------------------------- elicitation
async def _elicit(adapter: AcpAdapter, message: str, mode: Any) -> Any:
    from acp.schema import (
        AcceptElicitationResponse,
        CancelElicitationResponse,
        DeclineElicitationResponse,
        ElicitationFormRequestMode,
        ElicitationFormSessionMode,
    )

    cancel = CancelElicitationResponse(action="cancel")
    if not isinstance(mode, ElicitationFormSessionMode | ElicitationFormRequestMode):
        return DeclineElicitationResponse(action="decline")  # a URL form: not advertised
    if isinstance(mode, ElicitationFormSessionMode) and mode.session_id != adapter._session_id:
        return cancel
    if (not adapter.config.ask_user or not adapter._turn_active or adapter._cancel_requested
            or adapter._watchdog_code or adapter._closed):
        return cancel  # nobody may be asked now (a late request after an interrupt)
    schema = mode.requested_schema.model_dump(by_alias=True, exclude_none=True, mode="json")
    form = elicitation.fields(message, schema)
    if not form:
        return AcceptElicitationResponse(action="accept", content={})
    loop = asyncio.get_running_loop()
    ids = []
    for _ in form:
        adapter._permission_seq += 1
        ids.append(f"acp-{adapter.tag[:8]}-q{adapter._permission_seq}")
    futures = {rid: loop.create_future() for rid in ids}
    for rid in ids:
        adapter._pending_questions[rid] = futures[rid]
        adapter._forms[rid] = (form, ids)
    for rid, f in zip(ids, form, strict=True):
        adapter.emit(QuestionAsked(request_id=rid, questions=(f.question,), blocking=True))
    content: dict[str, Any] = {}
    try:
        for rid, f in zip(ids, form, strict=True):
            value = await futures[rid]
            if value is None:
                declined = any(r in adapter._declined for r in ids)
                return DeclineElicitationResponse(action="decline") if declined else cancel
            content[f.key] = value
    finally:
        for rid in ids:
            adapter._forms.pop(rid, None)
            adapter._declined.discard(rid)
            fut = adapter._pending_questions.pop(rid, None)
            if fut is not None and not fut.done():
                fut.set_result(None)
    return AcceptElicitationResponse(action="accept", content=content)


async def _answer_elicitation(adapter: AcpAdapter, request_id: str,
                              answers: dict[str, Any] | None) -> None:
    fut = adapter._pending_questions.get(request_id)
    entry = adapter._forms.get(request_id)
    if fut is None or fut.done() or entry is None:
        raise errors.UnknownRequest(f"no pending question {request_id!r}")
    form, ids = entry
    if answers is None:  # a person cancelled one question: the form is declined
        adapter._declined.add(request_id)
        for rid in ids:
            other = adapter._pending_questions.pop(rid, None)
            if other is not None and not other.done():
                other.set_result(None)
                if rid != request_id:  # the caller records the one it answered
                    adapter.emit(QuestionAnswered(request_id=rid))
        return
    try:
        value = elicitation.content_value(form[ids.index(request_id)], answers)
    except AnswerRefused as exc:
        raise errors.RuntimeAdapterError(str(exc), code="invalid_answer") from exc
    adapter._pending_questions.pop(request_id, None)
    fut.set_result(value)
