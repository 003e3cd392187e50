"""Claude Code through ``claude-code-acp`` (the Claude Agent SDK behind an ACP agent).

Everything ACP-related is the ACP adapter's; this only says how to start the agent: Node
with the package's ``dist/index.js``, a private HOME (its default ``.claude/`` layout, no
inherited ``CLAUDE_CONFIG_DIR``), the Anthropic-compatible base URL and the key in
``ANTHROPIC_API_KEY`` only, non-essential traffic and auto memory off. With
``background_shell_after`` the Bash tool's default timeout is that long, and Claude Code
moves a command that reaches it to the background instead of killing it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import errors
from .acp import AcpAdapter
from .base import Probe, minimal_env, register, which_node


def claude_acp_entry(runtimes_dir: Path) -> Path:
    return runtimes_dir / "@zed-industries" / "claude-code-acp" / "dist" / "index.js"


@register
class ClaudeAdapter(AcpAdapter):
    name = "claude"
    platforms = frozenset({"anthropic-compat"})

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
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
        })
        if cfg.background_shell_after:
            # Claude Code moves a Bash command that reaches its default timeout to the
            # background instead of killing it (unless the model asks for its own timeout)
            env["BASH_DEFAULT_TIMEOUT_MS"] = str(int(cfg.background_shell_after * 1000))
        if os.geteuid() == 0 and cfg.permission_mode != "ask":
            env["IS_SANDBOX"] = "1"  # bypassPermissions refuses to run as root otherwise
        return env

    def preferred_mode(self) -> str | None:
        return "bypassPermissions" if self.config.permission_mode != "ask" else "default"
