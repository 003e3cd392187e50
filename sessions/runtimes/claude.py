"""Claude Code through ``claude-code-acp`` (the Claude Agent SDK behind an ACP agent).

Everything ACP-related is the ACP adapter's; this only says how to start the agent: Node
with the package's ``dist/index.js``, a private HOME (its default ``.claude/`` layout, no
inherited ``CLAUDE_CONFIG_DIR``), the Anthropic-compatible base URL and the key in
``ANTHROPIC_API_KEY`` only, non-essential traffic and auto memory off. With
``background_shell_after`` the Bash tool's default timeout is that long, and Claude Code
moves a command that reaches it to the background instead of killing it.

Resume (``session/load``) reads the transcript the Claude Code CLI keeps in
``HOME/.claude/projects/<cwd slug>/<session id>.jsonl``. The CLI queues transcript writes
and drains them every 100 ms or at a clean exit, and records a turn's prompt only once the
model's first answer arrives. So:

* ``CLAUDE_CODE_EAGER_FLUSH=1`` makes the CLI flush the transcript before it reports a turn's
  result: every completed turn is on disk before amux sees it end, whatever kills the
  process afterwards (without it a close right after a turn lost the turn, and
  ``session/load`` answered "Session not found").
* A transcript with no conversation in it (the process died during the first turn, before
  the model answered) cannot be resumed — the CLI says "No conversation found" and the
  agent only "Query closed before response received". ``start(resume=…)`` checks the file
  first and raises ``NativeSessionNotFound`` for that case too, so the host hands off to a
  new conversation instead of failing to start again and again.
* The CLI is a grandchild of ours (claude-code-acp spawns it): it is started through
  ``setpriv --pdeathsig KILL`` so it dies with claude-code-acp instead of finishing an
  orphaned turn — and writing to the transcript — after its worker was killed.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

from . import errors
from .acp import AcpAdapter
from .base import SESSION_START, Probe, minimal_env, register, which_node

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
CONVERSATION_ENTRIES = frozenset({"user", "assistant"})


def claude_acp_entry(runtimes_dir: Path) -> Path:
    return runtimes_dir / "@zed-industries" / "claude-code-acp" / "dist" / "index.js"


def claude_cli_entry(runtimes_dir: Path) -> Path | None:
    """The Claude Code CLI that claude-code-acp's agent SDK runs (hoisted or nested)."""
    for base in (runtimes_dir, runtimes_dir / "@zed-industries" / "claude-code-acp"
                 / "node_modules"):
        cli = base / "@anthropic-ai" / "claude-agent-sdk" / "cli.js"
        if cli.exists():
            return cli
    return None


def transcript_has_conversation(claude_dir: Path, session_id: str) -> bool:
    """Whether ``claude_dir/projects/*/<session_id>.jsonl`` holds a user or assistant
    entry — what the CLI needs to resume it (looked up in every project, as claude-code-acp
    does)."""
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


@register
class ClaudeAdapter(AcpAdapter):
    name = "claude"
    accepts_extra_args = False  # claude-code-acp takes no command-line settings
    platforms = frozenset({"anthropic-compat"})
    # claude-code-acp hands ``_meta.systemPrompt`` to the Agent SDK when it creates (or
    # loads) the session's query, and has no way to change it later: the host restarts the
    # process between turns when the prompt changed, resuming the same conversation.
    system_prompt_channel = SESSION_START

    def session_meta(self) -> dict[str, Any]:
        text = self.startup_prompt(self.config.system_prompt)
        # appended to Claude Code's own preset prompt, which keeps its tool instructions
        return {"systemPrompt": {"append": text}} if text else {}

    @classmethod
    def probe(cls, runtimes_dir: Path | None = None) -> Probe:
        from .base import default_runtimes_dir

        entry = claude_acp_entry(runtimes_dir or default_runtimes_dir())
        if not entry.exists() or which_node() is None:
            return Probe(cls.name, False, error=f"{entry} or node not found "
                                                "(run `make runtimes`)")
        try:
            version = json.loads((entry.parent.parent / "package.json").read_text())["version"]
        except (OSError, ValueError, KeyError) as exc:
            return Probe(cls.name, False, path=str(entry), error=str(exc))
        return Probe(cls.name, True, version, str(entry))

    @property
    def claude_dir(self) -> Path:
        return self.config.state_dir / "home" / ".claude"

    def command(self) -> list[str]:
        entry = claude_acp_entry(self.config.runtimes_dir)
        node = which_node()
        if not entry.exists() or node is None:
            raise errors.RuntimeNotInstalled(f"{entry} or node not found (run `make runtimes`)")
        return [node, str(entry)]

    def agent_env(self) -> dict[str, str]:
        cfg = self.config
        node = which_node()
        env = minimal_env(cfg, self.tag, extra_path=[str(Path(node).parent)] if node else None)
        env.update({
            "ANTHROPIC_BASE_URL": cfg.provider.base_url.rstrip("/"),
            "ANTHROPIC_API_KEY": cfg.provider.api_key or "amux-no-key",
            "ANTHROPIC_MODEL": cfg.model,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
            # the transcript of a turn is on disk before the turn's result is reported
            "CLAUDE_CODE_EAGER_FLUSH": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
        })
        if cfg.background_shell_after:
            # Claude Code moves a Bash command that reaches its default timeout to the
            # background instead of killing it (unless the model asks for its own timeout)
            env["BASH_DEFAULT_TIMEOUT_MS"] = str(int(cfg.background_shell_after * 1000))
        launcher = self._cli_launcher(node)
        if launcher is not None:
            env["CLAUDE_CODE_EXECUTABLE"] = str(launcher)
        # IS_SANDBOX (bypassPermissions refuses root without it) is the isolation
        # backend's to set: only under linux-dac, after checking a separate non-root UID
        return env

    def _cli_launcher(self, node: str | None) -> Path | None:
        """A script that starts the CLI so that it dies with claude-code-acp (its parent).
        None (the SDK's own launch) without ``setpriv`` or a CLI to point at."""
        setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
        cli = claude_cli_entry(self.config.runtimes_dir)
        if setpriv is None or cli is None or node is None:
            return None
        launcher = self.config.state_dir / "bin" / "claude-cli"
        launcher.parent.mkdir(parents=True, exist_ok=True)
        text = ("#!/bin/sh\n# amux: the Claude Code CLI dies with the claude-code-acp that "
                "started it\n"
                f"exec {shlex.quote(setpriv)} --pdeathsig KILL -- {shlex.quote(node)} "
                f"{shlex.quote(str(cli))} \"$@\"\n")
        if not launcher.exists() or launcher.read_text() != text:
            launcher.write_text(text)
        launcher.chmod(0o700)
        return launcher

    def _check_resumable(self, session_id: str) -> None:
        if not transcript_has_conversation(self.claude_dir, session_id):
            raise errors.NativeSessionNotFound(
                f"no Claude Code conversation {session_id!r} under {self.claude_dir}/projects "
                "(none was recorded before the process ended)")

    def preferred_mode(self) -> str | None:
        native = self.config.native_permission.get("permission_mode")
        if native:
            return native
        return "bypassPermissions" if self.config.permission_mode == "bypass" else "default"
