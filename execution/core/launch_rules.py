"""How a launch's execution settings are resolved and frozen (seed 000, 产品身份). Pure.

Three sources, in order: what the caller set explicitly, then the launch preset (amux's own:
a built-in shortcut's, or the distribution default's for a task that names no runtime),
then the runtime's own defaults. An expert (Agent Profile) is never a source: it brings
content only, so nothing here reads one.

Permissions are normalised apart from everything else:
- a direct session with no permission argument runs with the runtime's native bypass; an
  explicit argument (or a shortcut preset's) wins;
- a task's child session follows its ``permission_policy`` (default ``policy-allow``),
  whatever the caller's other settings or the preset say.
The runtime then maps the normalised mode to its native settings, and the isolation backend
decides the final native sandbox; both are frozen so a restart or resume launches the same.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Normalised permission modes. bypass: the runtime's native bypass; ask: every native
# permission request is asked of a person; policy-allow / policy-deny: native approvals are
# on and amux answers each request by policy (allow / refuse) without asking anyone.
BYPASS = "bypass"
ASK = "ask"
POLICY_ALLOW = "policy-allow"
POLICY_DENY = "policy-deny"
DIRECT_PERMISSIONS = (BYPASS, ASK)
# a task's permission_policy: policy-allow (default), policy-deny, or the native bypass
TASK_POLICIES = (POLICY_ALLOW, POLICY_DENY, BYPASS)
DEFAULT_TASK_POLICY = POLICY_ALLOW

DIRECT = "direct"
TASK = "task"

MAX_EXTRA_ARGS = 32
MAX_EXTRA_ARG_LEN = 500


class ExecutionError(ValueError):
    """A setting that cannot be resolved; ``field`` names the caller's input at fault."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Preset:
    """A launch preset as resolution sees it (``sessions.models.LaunchPreset``)."""

    slug: str
    runtime: str
    model: str = ""
    effort: str | None = None
    provider: str | None = None
    permission: str | None = None
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class CallerSettings:
    """What the caller set explicitly (None: not set)."""

    runtime: str | None = None
    model: str | None = None
    effort: str | None = None
    provider: str | None = None
    permission: str | None = None  # direct sessions: bypass | ask
    permission_policy: str | None = None  # tasks
    extra_args: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Permission:
    mode: str  # bypass | ask | policy-allow | policy-deny
    source: str  # native-default | explicit | preset | policy
    policy: str | None = None  # a task's permission_policy
    native: dict[str, str] = field(default_factory=dict)  # the runtime's own settings


@dataclass(frozen=True)
class ExecutionSettings:
    launch: str  # direct | task
    runtime: str
    model: str
    effort: str | None
    provider: str | None
    permission: Permission
    extra_args: tuple[str, ...]
    isolation: str
    sandbox: str  # the final native sandbox
    preset: str | None = None  # the preset that filled what the caller left out

    def as_snapshot(self) -> dict[str, Any]:
        data = asdict(self)
        data["extra_args"] = list(self.extra_args)
        return data


def from_snapshot(data: dict[str, Any]) -> ExecutionSettings:
    data = dict(data)
    data["permission"] = Permission(**data["permission"])
    data["extra_args"] = tuple(data.get("extra_args") or ())
    return ExecutionSettings(**data)


# ----------------------------------------------------------------------- native mapping
def native_permission(runtime: str, mode: str, isolation: str) -> tuple[dict[str, str], str]:
    """The runtime's native permission settings for a normalised mode, and the final native
    sandbox under the isolation backend. ``ask`` and the policy modes turn native approvals
    on (amux answers them); ``bypass`` turns them off."""
    approvals = mode != BYPASS
    # under bwrap the namespace sandbox is the boundary (the frozen ``sandbox`` names it);
    # the runtime keeps the settings it has under linux-dac, so that its approvals mean the
    # same in both: Codex asks before it leaves its workspace sandbox ("on-request"), and a
    # sandbox of its own that cannot nest inside bwrap's costs nothing but that layer
    outer = isolation == "bwrap"
    if runtime in ("codex", "acp"):
        native_sandbox = "workspace-write" if approvals else "danger-full-access"
        native = {"approval_policy": "on-request" if approvals else "never",
                  "sandbox_mode": native_sandbox}
        if runtime == "acp":
            native["mode"] = "auto" if approvals else "full-access"
        return native, "bwrap" if outer else native_sandbox
    if runtime == "claude":
        return ({"permission_mode": "default" if approvals else "bypassPermissions"},
                "bwrap" if outer else "none")
    # Pi (and any other runtime) has no native approvals: tools run as the isolation
    # backend's user, which is all the sandbox there is
    return {}, "bwrap" if outer else "none"


# ----------------------------------------------------------------------- resolution
def check_extra_args(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(a, str) for a in value):
        raise ExecutionError("extra_args must be a list of strings", "extra_args")
    if len(value) > MAX_EXTRA_ARGS:
        raise ExecutionError(f"extra_args takes at most {MAX_EXTRA_ARGS} arguments",
                             "extra_args")
    for arg in value:
        if not arg or len(arg) > MAX_EXTRA_ARG_LEN or "\x00" in arg or "\n" in arg:
            raise ExecutionError(f"each extra argument is 1 to {MAX_EXTRA_ARG_LEN} characters "
                                 "on one line", "extra_args")
    return tuple(value)


def _permission(launch: str, caller: CallerSettings, preset: Preset | None,
                preset_gives_permission: bool) -> tuple[str, str, str | None]:
    if launch == TASK:
        policy = caller.permission_policy or DEFAULT_TASK_POLICY
        if policy not in TASK_POLICIES:
            raise ExecutionError(f"permission_policy is one of {', '.join(TASK_POLICIES)}",
                                 "permission_policy")
        return policy, "policy", policy
    if caller.permission is not None:
        if caller.permission not in DIRECT_PERMISSIONS:
            raise ExecutionError(f"permission_mode is one of {', '.join(DIRECT_PERMISSIONS)}",
                                 "permission_mode")
        return caller.permission, "explicit", None
    if preset_gives_permission and preset is not None and preset.permission:
        return preset.permission, "preset", None
    return BYPASS, "native-default", None


def resolve(*, launch: str, caller: CallerSettings, isolation: str,
            preset: Preset | None = None, default_preset: Preset | None = None,
            runtime_preset: Preset | None = None,
            runtime_takes_extra_args: bool = True) -> ExecutionSettings:
    """The frozen settings of one launch.

    ``preset``: a shortcut the caller chose (it fills runtime, model, effort, provider,
    permission and extra_args the caller left out). ``default_preset``: the distribution
    default, used only by a task that names no runtime and chose no preset — and then only
    for its runtime and model selection (with the provider binding that model needs).
    ``runtime_preset``: the built-in shortcut of the runtime the caller named; when the
    caller names a runtime but no model (``--runtime pi``), its model (and that model's
    provider binding) is the one used — nothing else of it."""
    if launch not in (DIRECT, TASK):
        raise ValueError(launch)
    source: Preset | None = preset
    full = preset is not None
    if source is None and not caller.runtime and launch == TASK:
        source = default_preset
    if preset is not None and caller.runtime and caller.runtime != preset.runtime:
        source, full = None, False  # a different runtime: the shortcut does not apply
    runtime = caller.runtime or (source.runtime if source else None)
    if not runtime:
        raise ExecutionError("runtime is required", "runtime")
    model = caller.model or (source.model if source else "") or ""
    provider = caller.provider or (source.provider if source else None)
    if not model and runtime_preset is not None and runtime_preset.runtime == runtime:
        model = runtime_preset.model
        provider = provider or runtime_preset.provider
    if not model:
        raise ExecutionError("model is required (no preset names one)", "model")
    effort = caller.effort if caller.effort is not None else (
        source.effort if source and full else None)
    extra = check_extra_args(caller.extra_args) if caller.extra_args is not None else (
        source.extra_args if source and full else ())
    if extra and not runtime_takes_extra_args:
        raise ExecutionError(f"the {runtime} runtime takes no extra_args", "extra_args")
    mode, origin, policy = _permission(launch, caller, source, full)
    native, sandbox = native_permission(runtime, mode, isolation)
    return ExecutionSettings(
        launch=launch, runtime=runtime, model=model, effort=effort or None, provider=provider,
        permission=Permission(mode=mode, source=origin, policy=policy, native=native),
        extra_args=extra, isolation=isolation, sandbox=sandbox,
        preset=source.slug if source else None)
