"""Claude Code through a sidecar on the official Claude Agent SDK (seed 000).

``claude_sidecar/sidecar.mjs`` is a small Node program around the SDK's ``query()`` in
streaming-input mode: one process serves every turn of the session and keeps the
conversation; amux speaks JSON lines with it (start, turn, interrupt, permission answers,
close) and it forwards every SDK message. The SDK runs the Claude Code CLI it bundles
(``@anthropic-ai/claude-agent-sdk-linux-x64``), pinned in ``package.json``.

* Start: ``systemPrompt`` is Claude Code's ``claude_code`` preset with amux's prompt
  appended (not recorded into the transcript: a changed prompt reaches the conversation at
  the restart that follows, resuming it); model; ``permissionMode`` from the frozen
  execution settings (``bypassPermissions`` or ``default``); amux's MCP servers (HTTP,
  bearer read at start); a new session gets an id amux chose, a restart ``resume``s it.
* Environment: the runtime's isolated launch environment (``minimal_env``) plus the
  Anthropic base URL and key; the sidecar drops an empty ``CLAUDE_CONFIG_DIR`` before
  loading the SDK and sets ``CLAUDE_CODE_DISABLE_AUTO_MEMORY=1`` for the CLI on every
  launch, resume included.
* Model service (``AMUX_MODEL_SERVICE`` in the launch environment): the gateway, key and
  model alias go to the SDK's in-memory flag-settings layer (``applyFlagSettings``) before
  any input — never into argv, the environment or a settings file; a failure refuses the
  start.
* ``canUseTool``: a tool call that needs approval becomes ``permission.requested``;
  ``AskUserQuestion`` becomes one ``question.asked`` per question, answered together with
  the original ``questions`` and ``updatedInput.answers`` (a multi-select answer keeps its
  label array). Cancelling one cancels the batch; late, duplicate and invalid answers are
  refused; an interrupt, close or the turn's end releases what is pending.
* A turn ends at the SDK's ``result``: ``is_error`` or a subtype other than ``success``
  fails it with the reported error. Usage: each assistant message's usage is ``last``; the
  result's ``modelUsage`` (the SDK's own running totals) the cumulative snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import platform
import re
import shlex
import shutil
import uuid
from pathlib import Path
from typing import Any

from . import errors
from .base import (
    SESSION_START,
    Capabilities,
    Probe,
    RuntimeAdapter,
    RuntimeConfig,
    default_runtimes_dir,
    minimal_env,
    which_node,
)
from .claude_sdk import (
    ASK_USER_QUESTION,
    AnswerRefused,
    MessageMapper,
    check_answer,
    native_answers,
    result_terminal,
    result_usage,
    split_questions,
)
from .events import (
    ErrorObserved,
    PermissionOption,
    PermissionRequested,
    Question,
    QuestionAnswered,
    QuestionAsked,
    TurnCancelled,
    TurnInput,
    TurnStarted,
)
from .jsonl import JsonLines

SIDECAR = Path(__file__).resolve().parent / "claude_sidecar" / "sidecar.mjs"
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
CONVERSATION_ENTRIES = frozenset({"user", "assistant"})
MODEL_SERVICE_ENV = "AMUX_MODEL_SERVICE"
START_TIMEOUT = 120.0
ALLOW, DENY = "allow", "deny"


def sdk_dir(runtimes_dir: Path) -> Path:
    return runtimes_dir / "@anthropic-ai" / "claude-agent-sdk"


def cli_binary(runtimes_dir: Path) -> Path | None:
    """The Claude Code CLI the SDK bundles for this platform (an optional dependency)."""
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine())
    for suffix in ("", "-musl"):
        binary = runtimes_dir / "@anthropic-ai" / f"claude-agent-sdk-linux-{arch}{suffix}" \
            / "claude"
        if arch and binary.exists():
            return binary
    return None


def transcript_has_conversation(claude_dir: Path, session_id: str) -> bool:
    """Whether ``claude_dir/projects/*/<session_id>.jsonl`` holds a user or assistant
    entry — what the CLI needs to resume it (looked up in every project directory)."""
    if not SESSION_ID.fullmatch(session_id):
        return False
    projects = claude_dir / "projects"
    try:
        candidates = [d / f"{session_id}.jsonl" for d in projects.iterdir() if d.is_dir()]
    except OSError:
        return False
    for path in candidates:
        try:
            with path.open(encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(entry, dict) and entry.get("type") in CONVERSATION_ENTRIES:
                        return True
        except OSError:
            continue
    return False


class _QuestionBatch:
    """One AskUserQuestion call: its questions, each asked as its own request."""

    def __init__(self, tool_input: dict[str, Any], questions: list[Question],
                 request_ids: list[str]):
        self.tool_input = tool_input
        self.questions = questions
        self.request_ids = request_ids
        self.by_request = dict(zip(request_ids, questions, strict=True))


class ClaudeAdapter(RuntimeAdapter):
    name = "claude"
    sandbox_paths = (SIDECAR.parent,)  # amux's sidecar
    accepts_extra_args = False  # the sidecar takes no native command-line settings
    platforms = frozenset({"anthropic-compat"})
    # the SDK takes the appended system prompt when the query starts: the host restarts
    # the process between turns when the prompt changed, resuming the same conversation
    system_prompt_channel = SESSION_START
    takes_mcp = True
    pause_idle_during_tools = True
    retire_after_watchdog = True

    def __init__(self, config: RuntimeConfig):
        super().__init__(config)
        self._rpc: JsonLines | None = None
        self._started: asyncio.Future[dict[str, Any]] | None = None
        self._mapper = MessageMapper()
        self._batches: dict[str, _QuestionBatch] = {}  # by sidecar call id
        self._calls_of: dict[str, str] = {}  # permission request id → sidecar call id
        self._seq = 0

    # ------------------------------------------------------------------ class API
    @classmethod
    def probe(cls, runtimes_dir: Path | None = None) -> Probe:
        sdk = sdk_dir(runtimes_dir or default_runtimes_dir())
        if not (sdk / "sdk.mjs").exists() or which_node() is None:
            return Probe(cls.name, False, error=f"{sdk} or node not found "
                                                "(run `make runtimes`)")
        try:
            version = json.loads((sdk / "package.json").read_text())["version"]
        except (OSError, ValueError, KeyError) as exc:
            return Probe(cls.name, False, path=str(sdk), error=str(exc))
        return Probe(cls.name, True, version, str(sdk))

    @classmethod
    def static_capabilities(cls) -> Capabilities:
        return Capabilities(resume=True, interrupt=True, images=True, permissions=True,
                            questions=True, set_model=True, native_cumulative_usage=True)

    @property
    def claude_dir(self) -> Path:
        return self.config.state_dir / "home" / ".claude"

    @property
    def model_service(self) -> bool:
        return bool(self.config.extra_env.get(MODEL_SERVICE_ENV))

    # ------------------------------------------------------------------ process
    def launch_env(self) -> dict[str, str]:
        cfg = self.config
        node = which_node()
        env = minimal_env(cfg, self.tag, extra_path=[str(Path(node).parent)] if node else None)
        env.update({
            "AMUX_RUNTIME_CLAUDE_SDK": str(sdk_dir(cfg.runtimes_dir) / "sdk.mjs"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            # amux's MCP tools (a handful) are offered to the model directly, not deferred
            # behind the CLI's tool search
            "ENABLE_TOOL_SEARCH": "false",
        })
        if self.model_service:
            env[MODEL_SERVICE_ENV] = str(cfg.extra_env[MODEL_SERVICE_ENV])
        else:
            env["ANTHROPIC_BASE_URL"] = cfg.provider.base_url.rstrip("/")
            env["ANTHROPIC_API_KEY"] = cfg.provider.api_key or "amux-no-key"
        if cfg.background_shell_after:
            # Claude Code 2.1.44 (claude-code-acp's) moved a Bash command that reached its
            # default timeout to the background; the CLI of the pinned SDK (2.1.328) kills it
            # (tests/runtimes/test_background_shell.py marks that as an expected failure)
            env["BASH_DEFAULT_TIMEOUT_MS"] = str(int(cfg.background_shell_after * 1000))
        # IS_SANDBOX (bypassPermissions refuses root without it) is the isolation
        # backend's to set: only under linux-dac, after checking a separate non-root UID
        return env

    def flag_settings(self) -> dict[str, Any] | None:
        """A model-service launch's gateway, key and model alias for the SDK's in-memory
        flag layer (above user, project and local settings)."""
        if not self.model_service:
            return None
        cfg = self.config
        service_env = {"ANTHROPIC_BASE_URL": cfg.provider.base_url.rstrip("/"),
                       "ANTHROPIC_API_KEY": cfg.provider.api_key or "amux-no-key"}
        if cfg.model:
            for alias in ("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
                          "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"):
                service_env[alias] = cfg.model
        limit = cfg.extra_env.get("AMUX_MODEL_SERVICE_MAX_OUTPUT_TOKENS")
        if limit:
            service_env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(limit)
        settings: dict[str, Any] = {"env": service_env}
        if cfg.model:
            settings["model"] = cfg.model
        return settings

    def mcp_config(self) -> dict[str, Any]:
        tokens = self.mcp_tokens()
        return {server.name: {"type": "http", "url": server.url,
                              **({"headers": {"Authorization": f"Bearer {token}"}}
                                 if token else {})}
                for server, token in zip(self.config.mcp_servers, tokens, strict=True)}

    def preferred_mode(self) -> str:
        """The frozen native permission mode (execution.core.launch_rules), else from the mode."""
        native = self.config.native_permission.get("permission_mode")
        if native:
            return native
        return "bypassPermissions" if self.config.permission_mode == "bypass" else "default"

    def start_options(self, resume: str | None) -> dict[str, Any]:
        cfg = self.config
        options: dict[str, Any] = {
            "cwd": str(cfg.workdir), "model": cfg.model or None,
            "permissionMode": self.preferred_mode(),
            "append": self.startup_prompt(cfg.system_prompt),
            "mcpServers": self.mcp_config(),
            "flagSettings": self.flag_settings(),
            "disallowedTools": [] if cfg.ask_user else [ASK_USER_QUESTION],
        }
        if resume:
            options["resume"] = resume
        else:
            options["sessionId"] = str(uuid.uuid4())
        launcher = self._cli_launcher()
        if launcher is not None:
            options["executable"] = str(launcher)
        return options

    def _cli_launcher(self) -> Path | None:
        """A script that starts the bundled CLI so that it dies with the sidecar (its
        parent) instead of finishing an orphaned turn, and writing to the transcript,
        after the sidecar was killed. None (the SDK's own launch) without ``setpriv``."""
        setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
        cli = cli_binary(self.config.runtimes_dir)
        if setpriv is None or cli is None:
            return None
        launcher = self.config.state_dir / "bin" / "claude-cli"
        launcher.parent.mkdir(parents=True, exist_ok=True)
        text = ("#!/bin/sh\n# amux: the Claude Code CLI dies with the sidecar that started it\n"
                f"exec {shlex.quote(setpriv)} --pdeathsig KILL -- {shlex.quote(str(cli))} "
                '"$@"\n')
        if not launcher.exists() or launcher.read_text() != text:
            launcher.write_text(text)
        launcher.chmod(0o700)
        # written after the isolation backend took over the state directory: the runtime
        # user (linux-dac) must own it to run it
        self.hand_over(launcher.parent)
        self.hand_over(launcher)
        return launcher

    async def start(self, resume: str | None = None) -> str:
        cfg = self.config
        node = which_node()
        if node is None or not (sdk_dir(cfg.runtimes_dir) / "sdk.mjs").exists():
            raise errors.RuntimeNotInstalled(f"{sdk_dir(cfg.runtimes_dir)} or node not found "
                                             "(run `make runtimes`)")
        if resume and not transcript_has_conversation(self.claude_dir, resume):
            raise errors.NativeSessionNotFound(
                f"no Claude Code conversation {resume!r} under {self.claude_dir}/projects "
                "(none was recorded before the process ended)")
        env = self.launch_env()
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = await self._spawn([node, str(SIDECAR)], env)
        self._start_stderr_pump()
        loop = asyncio.get_running_loop()
        self._started = loop.create_future()
        self._rpc = JsonLines(self.proc, self._on_message, self._on_closed,
                              observer=self._observe_wire)
        try:
            await self._rpc.send({"type": "start", "options": self.start_options(resume)})
            answer = await asyncio.wait_for(self._started, START_TIMEOUT)
            if answer.get("type") != "started":
                raise errors.RuntimeStartFailed(f"Claude SDK: {answer.get('error')}")
        except TimeoutError:
            await self.close()
            raise errors.RuntimeStartFailed("the Claude SDK did not start in time") from None
        except BaseException:
            await self.close()
            raise
        self.native_session_id = str(answer["session_id"])
        return self.native_session_id

    def _on_closed(self) -> None:
        if self._started is not None and not self._started.done():
            tail = " | ".join("".join(self._stderr_tail).strip().splitlines()[-3:])
            self._started.set_result({"type": "start_failed",
                                      "error": f"the sidecar exited: {tail}"})
        self._queue.put_nowait(self._exited())

    async def _close_native(self) -> None:
        if self._rpc is not None and self.alive:
            with contextlib.suppress(errors.RuntimeAdapterError):
                await self._rpc.send({"type": "close"})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 3)

    # ------------------------------------------------------------------ turns
    async def _begin_turn(self, turn_input: TurnInput) -> None:
        assert self._rpc is not None
        self._mapper = MessageMapper()
        content: list[dict[str, Any]] = [{"type": "text", "text": turn_input.text}]
        content += [{"type": "image", "source": {"type": "base64", "media_type": mime,
                                                 "data": data}}
                    for mime, data in turn_input.images]
        self.emit(TurnStarted())
        await self._rpc.send({"type": "turn", "content": content})

    async def _cancel_native(self) -> None:
        if self._rpc is not None and self.alive:
            with contextlib.suppress(errors.RuntimeAdapterError):
                await self._rpc.send({"type": "interrupt"})

    async def set_model(self, model: str, effort: str | None = None) -> None:
        assert self._rpc is not None
        await self._rpc.send({"type": "set_model", "model": model})
        self.config.model = model

    def _on_message(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        if kind in ("started", "start_failed"):
            if self._started is not None and not self._started.done():
                self._started.set_result(msg)
        elif kind == "can_use_tool":
            self._tasks.append(asyncio.create_task(self._can_use_tool(msg)))
        elif kind == "can_use_tool_cancelled":
            self._release_call(str(msg.get("call")))
        elif kind == "error" and self._turn_active:
            self.emit(ErrorObserved(code="claude_sdk", message=str(msg.get("error"))))
        elif kind == "sdk" and self._turn_active:
            self._on_sdk(msg.get("message") or {})

    def _on_sdk(self, message: dict[str, Any]) -> None:
        if message.get("type") == "result":
            usage = result_usage(message)
            if usage is not None:
                self.emit(usage)
            if self._cancel_requested:
                self.emit(TurnCancelled(reason="interrupted"))
            else:
                self.emit(result_terminal(message))
            return
        for event in self._mapper.events(message):
            self.emit(event)

    # ------------------------------------------------------------------ canUseTool
    def _request_id(self) -> str:
        self._seq += 1
        return f"claude-{self.tag[:8]}-{self._seq}"

    async def _reply(self, call_id: str, result: dict[str, Any]) -> None:
        if self._rpc is not None and self.alive:
            with contextlib.suppress(errors.RuntimeAdapterError):
                await self._rpc.send({"type": "permission", "call": call_id, "result": result})

    async def _can_use_tool(self, msg: dict[str, Any]) -> None:
        call_id = str(msg.get("call"))
        tool = msg.get("tool_name")
        tool_input = msg.get("input") if isinstance(msg.get("input"), dict) else {}
        denied = {"behavior": DENY, "message": "cancelled", "interrupt": True}
        if not self._turn_active or self._cancel_requested or self._watchdog_code \
                or self._closed:
            await self._reply(call_id, denied)
            return
        if tool == ASK_USER_QUESTION:
            await self._reply(call_id, await self._ask(call_id, tool_input))
            return
        answer = self.policy_answer()  # bypass and the policy modes: no person is asked
        if answer == "allow":
            await self._reply(call_id, {"behavior": ALLOW, "updatedInput": tool_input})
            return
        if answer == "deny":
            await self._reply(call_id, {"behavior": DENY, "message": "Refused by policy."})
            return
        request_id = self._request_id()
        fut = self._new_pending(request_id)
        self._calls_of[request_id] = call_id
        self.emit(PermissionRequested(
            request_id=request_id, call_id=msg.get("tool_use_id"),
            title=msg.get("title") or tool,
            detail={"tool": tool, "input": tool_input,
                    **{k: msg[k] for k in ("description", "decision_reason", "blocked_path")
                       if msg.get(k)}},
            options=(PermissionOption(id=ALLOW, label="Allow", kind="allow_once"),
                     PermissionOption(id=DENY, label="Deny", kind="reject_once"))))
        answer = await fut
        self._calls_of.pop(request_id, None)
        if answer == ALLOW:
            await self._reply(call_id, {"behavior": ALLOW, "updatedInput": tool_input})
        elif answer == DENY:
            await self._reply(call_id, {"behavior": DENY, "message": "The user declined."})
        else:
            await self._reply(call_id, denied)

    async def _ask(self, call_id: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        questions = split_questions(tool_input)
        # the user declined to answer: Claude goes on without answers (no answer is made
        # up for it, and the turn is not stopped)
        cancelled = {"behavior": DENY, "message": "The user cancelled the question."}
        if not questions:
            return {"behavior": DENY, "message": "AskUserQuestion without questions"}
        loop = asyncio.get_running_loop()
        ids = [self._request_id() for _ in questions]
        batch = _QuestionBatch(tool_input, questions, ids)
        self._batches[call_id] = batch
        futures = {}
        for rid in ids:
            futures[rid] = loop.create_future()
            self._pending_questions[rid] = futures[rid]
        for rid, question in zip(ids, questions, strict=True):
            self.emit(QuestionAsked(request_id=rid, questions=(question,), blocking=True))
        answers: dict[str, Any] = {}
        try:
            for rid in ids:
                value = await futures[rid]
                if value is None:  # cancelled (or released): the whole batch is cancelled
                    return cancelled
                answers[rid] = value
        finally:
            self._batches.pop(call_id, None)
            for rid in ids:
                fut = self._pending_questions.pop(rid, None)
                if fut is not None and not fut.done():
                    fut.set_result(None)
        return {"behavior": ALLOW,
                "updatedInput": native_answers(tool_input, questions,
                                               [answers[rid] for rid in ids])}

    async def answer_question(self, request_id: str, answers: dict[str, Any] | None) -> None:
        """One question of a batch; ``None`` cancels the batch. A late, duplicate or
        invalid answer is refused and changes nothing."""
        fut = self._pending_questions.get(request_id)
        if fut is None or fut.done():
            raise errors.UnknownRequest(f"no pending question {request_id!r}")
        question = next((b.by_request[request_id] for b in self._batches.values()
                         if request_id in b.by_request), None)
        if answers is None or question is None:
            # cancelling one question cancels its whole batch, at once
            batch = next((b for b in self._batches.values() if request_id in b.by_request),
                         None)
            for rid in batch.request_ids if batch else [request_id]:
                other = self._pending_questions.pop(rid, None)
                if other is not None and not other.done():
                    other.set_result(None)
                    if rid != request_id:  # the caller records the one it answered
                        self.emit(QuestionAnswered(request_id=rid))
            return
        try:
            value = check_answer(question, answers)
        except AnswerRefused as exc:
            raise errors.RuntimeAdapterError(str(exc), code="invalid_answer") from exc
        self._pending_questions.pop(request_id, None)
        fut.set_result(value)

    def _release_call(self, call_id: str) -> None:
        """The CLI stopped waiting for this call (interrupt, turn end)."""
        batch = self._batches.get(call_id)
        for rid in batch.request_ids if batch else []:
            fut = self._pending_questions.pop(rid, None)
            if fut is not None and not fut.done():
                fut.set_result(None)
        for rid, cid in list(self._calls_of.items()):
            if cid == call_id:
                fut = self._pending_permissions.pop(rid, None)
                if fut is not None and not fut.done():
                    fut.set_result(None)
