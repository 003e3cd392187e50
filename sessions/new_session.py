"""What a new session is made of, in three frozen parts, and the one place they are checked.

- `Launch`: how its runtime starts. ``execution`` is the launch the execution model resolved
  (execution/core/launch_rules.py: runtime, provider, model, effort, permission, native
  arguments, and the preset that filled them); `Launch.direct` resolves a direct session's
  from what its caller chose. Beside it, what the runtime is given: ``env`` (stored
  encrypted) and ``path`` extend its minimal environment (a worker's scoped tool token, the
  directory of the `amux` shim); ``mcp_servers`` are offered to the model where the runtime
  takes MCP; ``ask_user`` false keeps its native questions from reaching a person;
  ``background_shell_after`` (seconds) moves slow foreground shell commands to the
  background where the runtime allows it.
- `Prompting`: what every turn's system prompt is made of: the current prompt version of
  ``prompt_role`` (prompts_app, e.g. "worker"), then ``developer_instructions`` (fixed
  text), then the expert ``profile`` (its slug) as its profile reads at that turn.
- `SessionSpec`: the session's own settings: its ``name``, ``workdir`` (default: a new
  directory), ``idle_timeout_s``, ``watchdog`` limits, ``role`` (``session``, ``task``,
  ``worker``: the session-schedule entry its agent is launched with, a task's child gets the
  restricted one; default ``worker`` for the worker prompt role, else ``session``) and
  ``scope`` (sessions.ownership: whom it acts for and whose memory it reads).

`row` checks all three and answers the session they describe, unsaved, or refuses with a
CommandError naming the caller's field before any row or process exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompts_app.assembly import ORDER
from runtimes import ProviderSpec, catalog, errors, get_adapter, registered
from runtimes import watchdog as watchdogs
from runtimes.launch_context import ROLES
from sessions import (
    capabilities,
    hooks,
    isolation,
    memory,
    ownership,
    provider_templates,
    workdirs,
)
from sessions.models import ProviderProfile, Session, WatchdogSettings
from sessions.refusals import CommandError, settled_or_at_least

if TYPE_CHECKING:  # resolved by the execution model above (sessions.hooks.launch_settings)
    from execution.core.launch_rules import ExecutionSettings

AMUX_MCP = "amux"  # the name amux's own MCP server has in every session


@dataclass(frozen=True)
class Launch:
    execution: ExecutionSettings
    env: Mapping[str, str] = field(default_factory=dict)
    path: Sequence[str] = ()
    mcp_servers: Sequence[Mapping[str, Any]] = ()  # {"name", "url", "bearer_token_file"?}
    ask_user: bool = True
    background_shell_after: float | None = None

    @classmethod
    def direct(cls, *, preset: str | None = None, runtime: str | None = None,
               provider: str | None = None, model: str | None = None,
               effort: str | None = None, permission_mode: str | None = None,
               extra_args: Sequence[str] | None = None, **given: Any) -> Launch:
        """A direct session's launch: what the caller chose, then ``preset`` (a shortcut)
        for what it left out, then the runtime's defaults; ``given``: the rest of the
        launch."""
        return cls(hooks.launch_settings(
            preset, runtime=runtime, model=model, effort=effort, provider=provider,
            permission=permission_mode,
            extra_args=tuple(extra_args) if extra_args is not None else None), **given)


@dataclass(frozen=True)
class Prompting:
    prompt_role: str | None = None
    developer_instructions: str | None = None
    profile: str | None = None


@dataclass(frozen=True)
class SessionSpec:
    name: str = ""
    workdir: str | None = None
    idle_timeout_s: int = 300
    watchdog: Mapping[str, Any] | None = None
    role: str | None = None
    scope: ownership.Scope = ownership.Scope()


def row(launch: Launch, prompting: Prompting, spec: SessionSpec) -> Session:
    """The session the three parts describe, unsaved, with the snapshot every launch of it
    reads (a restart or resume runs the same way). Every session is offered amux's MCP
    server under the name ``amux`` (reached with its own session credential) unless the
    launch names an ``amux`` server of its own (a ticket's worker: its assignment's tools)."""
    execution, scope = launch.execution, spec.scope
    provider_row = _launchable(execution)
    expert = hooks.expert_snapshot(prompting.profile)
    workdir, role = _checked(spec.workdir, prompting.prompt_role, spec.role,
                             launch.background_shell_after)
    mcp = _mcp_entries(launch.mcp_servers)
    _check_model_choice(provider_row, execution.model, execution.effort)
    limits, limit_sources = effective_watchdog(spec.watchdog, provider_row)
    snapshot = {
        "runtime": execution.runtime, "model": execution.model, "effort": execution.effort,
        "provider": provider_row.slug, "platform": provider_row.platform,
        "base_url": provider_row.base_url,
        "permission_mode": execution.permission.mode,
        # the backend is frozen with the session: a restart or resume runs the same way
        "execution": {**execution.as_snapshot(),
                      "isolation": isolation.selected_backend(),
                      "isolation_reason": isolation.selection_reason(), "role": role,
                      "memory": memory.binding(execution.runtime, scope.memory_owner)},
        "scope": scope.snapshot(),
        # amux's MCP server with the session's own credential (added at each launch)
        "amux_mcp": not any(e["name"] == AMUX_MCP for e in mcp),
        "profile": expert,
        "watchdog": limits, "watchdog_sources": limit_sources,
        "developer_instructions": prompting.developer_instructions,
        "prompt_role": prompting.prompt_role,
        "mcp_servers": mcp,
        "extra_path": list(launch.path),
        "ask_user": bool(launch.ask_user),
        "background_shell_after": (float(launch.background_shell_after)
                                   if launch.background_shell_after is not None else None),
    }
    return Session(
        owner_id=scope.owner,
        name=spec.name, runtime=execution.runtime, provider=provider_row,
        model=execution.model, snapshot=snapshot, workdir=workdir or "",
        idle_timeout_s=settled_or_at_least(spec.idle_timeout_s),
        runtime_env={str(k): str(v) for k, v in launch.env.items()})


def provider_spec(provider: ProviderProfile) -> ProviderSpec:
    return ProviderSpec(platform=provider.platform,
                        base_url=provider.base_url,
                        api_key=(provider.secrets or {}).get("api_key", ""),
                        slug=provider.slug)


def _launchable(execution: ExecutionSettings) -> ProviderProfile:
    """The provider the resolved settings name, once their runtime and provider are known
    to start together; refused (naming the field) before any row or process exists."""
    runtime = execution.runtime
    try:
        adapter_cls = get_adapter(runtime)
    except errors.UnknownRuntime as exc:
        raise CommandError(str(exc), code="unknown_runtime", field="runtime") from exc
    if runtime not in registered():  # an attached session is made by attaching only
        raise CommandError(f"runtime {runtime!r} is reached by attaching an agent to a "
                           "running app-server, not started", code="unknown_runtime",
                           field="runtime")
    provider_row = ProviderProfile.objects.filter(slug=execution.provider).first()
    if provider_row is None:
        raise CommandError(f"unknown provider {execution.provider!r}", code="unknown_provider",
                           field="provider")
    try:  # an unsupported platform/wire mode fails before any process starts
        adapter_cls.check_provider(provider_spec(provider_row))
    except errors.ProviderUnsupported as exc:
        raise CommandError(str(exc), code="provider_unsupported", field="provider") from exc
    return provider_row


def _checked(workdir: str | None, prompt_role: str | None, role: str | None,
             background_shell_after: float | None) -> tuple[str | None, str]:
    """The caller's workdir (resolved) and the session-schedule role, or a refusal naming
    the field at fault."""
    if background_shell_after is not None and not background_shell_after > 0:
        raise CommandError("background_shell_after must be a positive number of seconds",
                           field="background_shell_after")
    if workdir is not None:  # only under work/: linux-dac shares it with the runtime user
        reason = workdirs.problem(workdir)
        if reason is not None:
            raise CommandError(reason, field="workdir")
        workdir = str(Path(workdir).resolve())
    if prompt_role is not None and prompt_role not in ORDER:
        raise CommandError(f"prompt_role must be one of {', '.join(ORDER)}",
                           field="prompt_role")
    role = role or ("worker" if prompt_role == "worker" else "session")
    if role not in ROLES:
        raise CommandError(f"role must be one of {', '.join(ROLES)}", field="role")
    return workdir, role


def _mcp_entries(entries: Any) -> list[dict[str, str]]:
    """Validated MCP server entries: ``{"name", "url", "bearer_token_file"?}``. The token
    stays in its file (read when the runtime starts), never in the snapshot."""
    if not isinstance(entries, list | tuple):
        raise CommandError("mcp_servers must be a list", field="mcp_servers")
    out, names = [], set()
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str) \
                or not isinstance(entry.get("url"), str):
            raise CommandError("each MCP server needs a name and a url", field="mcp_servers")
        name, url = entry["name"].strip(), entry["url"].strip()
        if not name.replace("_", "").replace("-", "").isalnum() or name in names:
            raise CommandError(f"MCP server name {name!r} must be unique and made of letters, "
                               "digits, '-' and '_'", field="mcp_servers")
        if not url.startswith(("http://", "https://")):
            raise CommandError(f"MCP server {name!r} needs an http(s) url",
                               field="mcp_servers")
        token_file = entry.get("bearer_token_file")
        if token_file is not None and not (isinstance(token_file, str)
                                           and Path(token_file).is_absolute()):
            raise CommandError("bearer_token_file must be an absolute path",
                               field="mcp_servers")
        names.add(name)
        out.append({"name": name, "url": url, "bearer_token_file": token_file})
    return out


def _check_model_choice(profile: ProviderProfile, model: str, effort: str | None) -> None:
    """A ``@native-variant:`` reference must be one amux issued; an effort must be one the
    provider's catalog declares for the model, when it declares any (otherwise the runtime
    checks it when it runs). A profile on a template's route keeps that template's
    boundary (sessions.provider_templates)."""
    check_template(profile, model)
    if catalog.is_native_variant(model):
        try:
            catalog.parse_native_variant(model)
        except ValueError as exc:
            raise CommandError(str(exc), code="invalid_model", field="model") from exc
    if effort is not None:
        entry = catalog.provider_catalog(profile.model_names).find(model)
        if entry is not None and entry.efforts and effort not in entry.efforts:
            raise CommandError(f"model {model!r} of provider {profile.slug!r} supports the "
                               f"efforts {', '.join(entry.efforts)}", code="invalid_effort",
                               field="effort")


def check_template(profile: ProviderProfile, model: str) -> None:
    """Refused (naming ``model`` or the key field) when the profile's template forbids it."""
    template = provider_templates.of(profile.platform, profile.base_url)
    discovered = None
    if template is not None:
        evidence = capabilities.latest_ok(profile)
        if evidence is not None:
            discovered = provider_templates.Discovery(evidence.revision,
                                                      tuple(evidence.model_ids))
    refusal = provider_templates.check_use(
        template, slug=profile.slug,
        models=profile.model_list, has_key=bool((profile.secrets or {}).get("api_key")),
        model=model, discovered=discovered)
    if refusal is not None:
        raise CommandError(refusal.message, code=refusal.code, field=refusal.field)


def effective_watchdog(session_limits: Any, profile: ProviderProfile | None
                       ) -> tuple[dict[str, int], dict[str, str]]:
    """The watchdog limits a new session freezes: session > provider > global > default.
    A session limit out of range is refused, naming it."""
    clean, problems = watchdogs.check_limits(session_limits)
    if problems:
        name, problem = next(iter(problems.items()))
        field_name = name if name == "watchdog" else f"watchdog.{name}"
        raise CommandError(f"{field_name}: {problem}", field=field_name)
    return watchdogs.resolve([
        ("session", clean),
        ("provider", watchdogs.check_limits(profile.watchdog if profile else None)[0]),
        ("global", watchdogs.check_limits(WatchdogSettings.current().limits)[0]),
    ])
