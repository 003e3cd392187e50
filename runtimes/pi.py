"""Pi (``@mariozechner/pi-coding-agent``) through ``pi --mode rpc`` (JSON lines).

A private ``PI_CODING_AGENT_DIR`` holds ``models.json`` with one provider, ``amux``, that
points at the session's OpenAI-compatible base URL (Chat Completions) and reads its key from
``AMUX_PROVIDER_KEY``. The native session is Pi's session file (``--session-dir`` for a new
one, ``--session <file>`` to resume). A ``prompt`` answer only means accepted; the turn ends
at ``agent_end``. ``abort`` stops it. Usage: each assistant message's ``usage`` is ``last``;
``get_session_stats`` (Pi's own running totals) is the cumulative snapshot. With
``background_shell_after`` (ticket workers) amux's extension ``pi_extensions/background_bash.ts``
replaces the ``bash`` tool: a command still running after that many seconds is left running
in its own process group, logging to a file, and the tool answers at once. amux's
extension ``pi_extensions/system_prompt.ts`` appends each turn's system prompt, written to a
file just before the turn's ``prompt``, to Pi's own at agent start. Pi takes no MCP server:
its worker reaches amux through the `amux` command.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from . import errors
from .base import (
    PROVIDER_KEY_ENV,
    Capabilities,
    Probe,
    RuntimeAdapter,
    default_runtimes_dir,
    minimal_env,
    which_node,
)
from .events import (
    ErrorObserved,
    MessageCompleted,
    MessageDelta,
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

# amux's replacement of the `bash` tool that moves slow commands to the background
BACKGROUND_BASH = Path(__file__).resolve().parent / "pi_extensions" / "background_bash.ts"
# amux's extension that appends the turn's system prompt (a file rewritten before each turn)
SYSTEM_PROMPT = Path(__file__).resolve().parent / "pi_extensions" / "system_prompt.ts"
PI_FLAGS = ["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes",
            "--no-context-files"]


def pi_cli(runtimes_dir: Path) -> Path:
    return runtimes_dir / "@mariozechner" / "pi-coding-agent" / "dist" / "cli.js"


def _last_usage(usage: dict[str, Any]) -> dict[str, int]:
    fields = {"input": "input_tokens", "output": "output_tokens",
              "cacheRead": "cached_input_tokens", "cacheWrite": "cache_creation_input_tokens",
              "totalTokens": "total_tokens"}
    return {new: int(usage[old]) for old, new in fields.items()
            if isinstance(usage.get(old), int | float)}


class PiAdapter(RuntimeAdapter):
    name = "pi"
    sandbox_paths = (SYSTEM_PROMPT.parent,)  # amux's extensions
    platforms = frozenset({"openai-compat"})
    warm_start = True  # its key can come from a file (models.json: "!cat <file>")

    def __init__(self, config):
        super().__init__(config)
        self._rpc: JsonLines | None = None
        self._last_assistant: dict[str, Any] | None = None
        self._retrying = False  # Pi announced an automatic retry of the last failed attempt
        self._text_item = 0

    @classmethod
    def probe(cls, runtimes_dir: Path | None = None) -> Probe:
        cli = pi_cli(runtimes_dir or default_runtimes_dir())
        node = which_node()
        if not cli.exists() or node is None:
            return Probe(cls.name, False, error=f"{cli} or node not found (run `make runtimes`)")
        pkg = cli.parent.parent / "package.json"
        try:
            version = json.loads(pkg.read_text()).get("version")
        except (OSError, ValueError) as exc:
            return Probe(cls.name, False, path=str(cli), error=str(exc))
        try:
            out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10,
                                 stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Probe(cls.name, False, path=str(cli), error=str(exc))
        return Probe(cls.name, out.returncode == 0, version, str(cli))

    @classmethod
    def static_capabilities(cls) -> Capabilities:
        return Capabilities(resume=True, interrupt=True, images=True, permissions=False,
                            questions=False, set_model=False, native_cumulative_usage=True)

    @property
    def agent_dir(self) -> Path:
        return self.config.state_dir / "home" / ".pi" / "agent"

    @property
    def system_prompt_file(self) -> Path:
        return self.config.state_dir / "system-prompt.md"

    def _write_system_prompt(self, text: str | None) -> None:
        """Atomically, before the prompt is sent: the extension reads it at agent start."""
        path = self.system_prompt_file
        partial = path.with_suffix(".partial")
        partial.write_text(self.startup_prompt(text) or "")
        self.hand_over(partial)
        partial.replace(path)

    async def start(self, resume: str | None = None) -> str:
        cfg = self.config
        cli = pi_cli(cfg.runtimes_dir)
        node = which_node()
        if not cli.exists() or node is None:
            raise errors.RuntimeNotInstalled(f"{cli} or node not found (run `make runtimes`)")
        if resume and not Path(resume).exists():
            raise errors.NativeSessionNotFound(f"Pi session file {resume} does not exist")
        env = minimal_env(cfg, self.tag, extra_path=[str(Path(node).parent)])
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        (self.agent_dir / "models.json").write_text(json.dumps({"providers": {"amux": {
            "baseUrl": cfg.provider.base_url, "api": "openai-completions",
            # Pi resolves the key at each request: a command's output (a pre-started
            # runtime, whose key is written when a session takes it), else the variable
            "apiKey": (f"!cat {shlex.quote(str(cfg.provider_key_file))}"
                       if cfg.provider_key_file else PROVIDER_KEY_ENV),
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": cfg.model, "contextWindow": 128000, "maxTokens": 16384,
                        "input": ["text", "image"]}]}}},
            indent=1))
        env.update({"PI_CODING_AGENT_DIR": str(self.agent_dir), "PI_OFFLINE": "1",
                    "PI_TELEMETRY": "0",
                    PROVIDER_KEY_ENV: "" if cfg.provider_key_file
                    else cfg.provider.api_key or "amux-no-key"})
        sessions_dir = cfg.state_dir / "pi-sessions"
        sessions_dir.mkdir(parents=True, exist_ok=True)
        argv = [node, str(cli), "--mode", "rpc", "--provider", "amux", "--model", cfg.model,
                *PI_FLAGS, "--session-dir", str(sessions_dir)]
        if resume:
            argv += ["--session", resume]
        argv += [*cfg.extra_args, "-e", str(SYSTEM_PROMPT)]
        env["AMUX_RUNTIME_SYSTEM_PROMPT_FILE"] = str(self.system_prompt_file)
        if cfg.effort:
            argv += ["--thinking", cfg.effort]
        if cfg.background_shell_after:
            argv += ["-e", str(BACKGROUND_BASH)]
            env["AMUX_RUNTIME_BACKGROUND_AFTER"] = f"{cfg.background_shell_after:g}"
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = await self._spawn(argv, env)
        self._start_stderr_pump()
        self._rpc = JsonLines(self.proc, self._on_message, self._on_closed,
                              observer=self._observe_wire, string_ids=True)
        try:
            state = await self._command({"type": "get_state"}, timeout=60)
        except BaseException:
            await self.close()
            raise
        self.native_session_id = state.get("sessionFile") or state.get("sessionId")
        if not self.native_session_id:
            await self.close()
            raise errors.RuntimeStartFailed("Pi reported no session file")
        return self.native_session_id

    async def _command(self, cmd: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        assert self._rpc is not None
        msg = await self._rpc.request(cmd, timeout=timeout)
        if not msg.get("success"):
            raise errors.ProtocolError(f"{cmd['type']}: {msg.get('error')}")
        return msg.get("data") or {}

    def _on_closed(self) -> None:
        self._queue.put_nowait(self._exited())

    async def _begin_turn(self, turn_input: TurnInput) -> None:
        self._last_assistant = None
        self._retrying = False
        if turn_input.command == "compact":
            self.emit(TurnStarted())
            self._tasks.append(asyncio.create_task(self._compact()))
            return
        self._write_system_prompt(turn_input.system_prompt)
        cmd: dict[str, Any] = {"type": "prompt", "message": turn_input.text}
        ordered = turn_input.ordered()
        if turn_input.parts:
            # Pi's prompt takes one message and its images apart: the text parts, then the
            # images in their order
            cmd["message"] = "\n\n".join(p[1] for p in ordered if p[0] == "text")
        images = [p for p in ordered if p[0] == "image"]
        if images:
            cmd["images"] = [{"type": "image", "data": p[2], "mimeType": p[1]}
                             for p in images]
        await self._command(cmd)

    async def _compact(self) -> None:
        """Pi's ``compact`` command: its answer comes once the summary is written (no
        agent_start/agent_end), so it is this turn's end."""
        try:
            await self._command({"type": "compact"}, timeout=600)
        except errors.RuntimeAdapterError as exc:
            if self._cancel_requested:
                self.emit(TurnCancelled(reason="interrupted"))
            else:
                self.emit(TurnFailed(code="compact_failed", message=str(exc)))
            return
        self.emit(TurnCancelled(reason="interrupted") if self._cancel_requested
                  else TurnCompleted(stop_reason="compacted"))

    async def _cancel_native(self) -> None:
        if self._rpc is not None and self.alive:
            with contextlib.suppress(errors.RuntimeAdapterError):
                await self._command({"type": "abort"}, timeout=10)

    async def clear(self) -> str:
        """Pi's ``new_session``: a new session file in the same process and directory."""
        await self._command({"type": "new_session"}, timeout=60)
        state = await self._command({"type": "get_state"}, timeout=60)
        native = state.get("sessionFile") or state.get("sessionId")
        if not native:
            raise errors.ProtocolError("Pi reported no session file after new_session")
        self.native_session_id = native
        return native

    def _on_message(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        if kind == "extension_ui_request":
            self._cancel_dialog(msg)
            return
        if not self._turn_active:
            return
        handler = self._TURN_EVENTS.get(kind)
        if handler is not None:
            handler(self, msg)

    def _cancel_dialog(self, msg: dict[str, Any]) -> None:
        # amux's only extension asks nothing; never leave a dialog hanging
        if self._rpc is not None and msg.get("method") in ("select", "confirm", "input",
                                                           "editor"):
            self._tasks.append(asyncio.create_task(self._rpc.send(
                {"type": "extension_ui_response", "id": msg.get("id"), "cancelled": True})))

    def _agent_start(self, msg: dict[str, Any]) -> None:
        self.emit(TurnStarted())

    def _message_update(self, msg: dict[str, Any]) -> None:
        ev = msg.get("assistantMessageEvent") or {}
        if ev.get("type") == "text_delta":
            self.emit(MessageDelta(text=ev.get("delta", ""), item_id=f"pi-{self._text_item}"))

    def _message_end(self, msg: dict[str, Any]) -> None:
        message = msg.get("message") or {}
        if message.get("role") != "assistant":
            return
        self._last_assistant = message
        texts = [c.get("text", "") for c in message.get("content") or []
                 if c.get("type") == "text"]
        thoughts = [c.get("thinking", "") for c in message.get("content") or []
                    if c.get("type") == "thinking"]
        if thoughts and any(thoughts):
            self.emit(Reasoning(text="\n".join(thoughts)))
        if texts and any(texts):
            self.emit(MessageCompleted(text="".join(texts), item_id=f"pi-{self._text_item}"))
        self._text_item += 1
        usage = message.get("usage")
        if isinstance(usage, dict) and message.get("stopReason") not in ("aborted",):
            self.emit(UsageObserved(last=_last_usage(usage) or None))
        if message.get("stopReason") == "error":
            self.emit(ErrorObserved(code="provider_error",
                                    message=str(message.get("errorMessage", ""))))

    def _tool_start(self, msg: dict[str, Any]) -> None:
        args = msg.get("args")
        title = args.get("command") if isinstance(args, dict) else None
        self.emit(ToolStarted(call_id=msg.get("toolCallId", ""), kind=msg.get("toolName"),
                              title=title or msg.get("toolName"), input=args))

    def _tool_update(self, msg: dict[str, Any]) -> None:
        self.emit(ToolUpdated(call_id=msg.get("toolCallId", ""), status="in_progress",
                              output=_text_of(msg.get("partialResult"))))

    def _tool_end(self, msg: dict[str, Any]) -> None:
        self.emit(ToolCompleted(call_id=msg.get("toolCallId", ""),
                                status="failed" if msg.get("isError") else "completed",
                                output=_text_of(msg.get("result"))))

    def _retry_start(self, msg: dict[str, Any]) -> None:
        self._retrying = True
        self.emit(ErrorObserved(code="provider_error", will_retry=True,
                                message=str(msg.get("errorMessage", ""))))

    def _retry_end(self, msg: dict[str, Any]) -> None:
        if not self._retrying or msg.get("success"):
            return
        # the retry was called off while it waited (an abort): no agent_end follows
        self._retrying = False
        if self._cancel_requested:
            self.emit(TurnCancelled(reason="interrupted"))
        else:
            self.emit(TurnFailed(code="provider_error", message=str(msg.get("finalError", ""))))

    def _agent_end(self, msg: dict[str, Any]) -> None:
        self._retrying = False
        self._tasks.append(asyncio.create_task(self._finish()))

    # What each event of the turn in hand becomes; one lookup per event on the hot path
    # (the others are ignored).
    _TURN_EVENTS: ClassVar[dict[str, Callable[[PiAdapter, dict[str, Any]], None]]] = {
        "agent_start": _agent_start,
        "message_update": _message_update,
        "message_end": _message_end,
        "tool_execution_start": _tool_start,
        "tool_execution_update": _tool_update,
        "tool_execution_end": _tool_end,
        "auto_retry_start": _retry_start,
        "auto_retry_end": _retry_end,
        "agent_end": _agent_end,
    }

    async def _finish(self) -> None:
        """After ``agent_end``: the native cumulative snapshot, then the one terminal.

        Pi announces an automatic retry of a failed model request (``auto_retry_start``)
        right after the failed attempt's ``agent_end``, before it reads its next command:
        once the snapshot's answer is in, ``_retrying`` says whether the turn goes on. A
        retried turn ends with the retry's own ``agent_end``; a provider (or amux's gateway,
        restarting) that is back within Pi's retries costs the turn nothing."""
        last = self._last_assistant or {}
        stop = last.get("stopReason")
        with contextlib.suppress(errors.RuntimeAdapterError):
            stats = await self._command({"type": "get_session_stats"}, timeout=15)
            tokens = stats.get("tokens") or {}
            cumulative = {f"cumulative_{k}": v for k, v in _last_usage(
                {"input": tokens.get("input"), "output": tokens.get("output"),
                 "cacheRead": tokens.get("cacheRead"), "cacheWrite": tokens.get("cacheWrite"),
                 "totalTokens": tokens.get("total")}).items()}
            ctx = stats.get("contextUsage") or {}
            if cumulative or ctx:
                self.emit(UsageObserved(cumulative=cumulative or None,
                                        context_window=ctx.get("contextWindow"),
                                        context_used=ctx.get("tokens")))
        if self._retrying and not self._cancel_requested:
            return
        if self._cancel_requested or stop == "aborted":
            self.emit(TurnCancelled(reason="interrupted"))
        elif stop == "error":
            self.emit(TurnFailed(code="provider_error",
                                 message=str(last.get("errorMessage", ""))))
        else:
            self.emit(TurnCompleted(stop_reason=stop or "stop"))


def _text_of(result: Any) -> str | None:
    if not isinstance(result, dict):
        return None
    parts = [c.get("text", "") for c in result.get("content") or []
             if isinstance(c, dict) and c.get("type") == "text"]
    return "".join(parts) if parts else None
