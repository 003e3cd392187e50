"""The public built-in pack and the launch presets of its shortcuts. Pure data.

Exactly three native Agent Profiles, v2 manifests like any other: the native agents as they
come, with no endpoints, credentials, outside skills or model bindings. How each shortcut
launches (runtime, model, permission) is amux's preset, kept apart from the profile, and an
operator may change it; `codex` is the distribution default for tasks that name no runtime.
"""

from __future__ import annotations

from execution.core.launch_rules import BYPASS, Preset

PROFILES = {
    "codex": {"version": 2, "name": "Codex",
              "description": "OpenAI Codex, the native coding agent, as it comes.",
              "instructions": "", "skills": []},
    "claude": {"version": 2, "name": "Claude",
               "description": "Claude Code, the native coding agent, as it comes.",
               "instructions": "", "skills": []},
    "pi": {"version": 2, "name": "Pi",
           "description": "Pi, the native coding agent, as it comes.",
           "instructions": "", "skills": []},
}

PRESETS = (
    Preset(slug="codex", runtime="codex", model="gpt-5.5", permission=BYPASS),
    Preset(slug="claude", runtime="claude", model="claude-sonnet-4-5", permission=BYPASS),
    Preset(slug="pi", runtime="pi", model="gpt-5.5", permission=BYPASS),
)
DEFAULT_PRESET = "codex"
