"""The execution settings of one launch, resolved against what the database holds: the
presets (execution/profiles.py), the registered runtimes and the provider profiles. The
rules themselves are pure (execution/core/launch_rules.py); this module only looks things up and
turns a refusal into a ``CommandError`` naming the caller's field."""

from __future__ import annotations

import dataclasses

from execution import profiles
from execution.core import launch_rules as execution
from execution.core.launch_rules import CallerSettings, ExecutionSettings
from runtimes import errors, get_adapter
from sessions import isolation
from sessions.models import ProviderProfile
from sessions.refusals import CommandError


def _provider_for(runtime: str, platforms: frozenset[str]) -> str:
    """The runtime's provider when nothing names one: the only provider it can talk to."""
    candidates = list(ProviderProfile.objects.filter(platform__in=platforms)
                      .values_list("slug", flat=True)[:2])
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise CommandError(f"no provider can serve the {runtime} runtime "
                           f"({', '.join(sorted(platforms))}): add one", field="provider")
    raise CommandError("provider is required: several providers can serve the "
                       f"{runtime} runtime and no preset binds one", field="provider")


def _runtime_shortcut(caller: CallerSettings) -> execution.Preset | None:
    """The built-in shortcut named like the caller's runtime, when the caller names a
    runtime without a model."""
    if not caller.runtime or caller.model:
        return None
    try:
        found = profiles.get_preset(caller.runtime)
    except CommandError:  # no shortcut of that name
        return None
    return found if found is not None and found.runtime == caller.runtime else None


def resolve(launch: str, caller: CallerSettings, preset: str | None = None
            ) -> ExecutionSettings:
    shortcut = profiles.get_preset(preset)
    fallback = profiles.default_preset() if launch == execution.TASK else None
    runtime = caller.runtime or (shortcut or fallback or execution.Preset("", "")).runtime
    adapter = None
    if runtime:
        try:
            adapter = get_adapter(runtime)
        except errors.UnknownRuntime as exc:
            raise CommandError(str(exc), code="unknown_runtime", field="runtime") from exc
    try:
        settings = execution.resolve(
            launch=launch, caller=caller, isolation=isolation.selected_backend(),
            preset=shortcut, default_preset=fallback,
            runtime_preset=_runtime_shortcut(caller) if shortcut is None else None,
            runtime_takes_extra_args=getattr(adapter, "accepts_extra_args", True))
    except execution.ExecutionError as exc:
        raise CommandError(str(exc), field=exc.field) from exc
    if adapter is None:  # resolution found the runtime in the default preset
        adapter = get_adapter(settings.runtime)
    if not settings.provider:
        settings = dataclasses.replace(
            settings, provider=_provider_for(settings.runtime, adapter.platforms))
    return settings
