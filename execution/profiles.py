"""Agent Profiles (experts), launch presets and Bot Profiles: the only writers of them, each
command one durable transaction that locks what it changes (execution/locks.py).

Profiles are created and edited only from v2 manifests (execution/core/manifest.py); the built-in
pack (execution/core/builtin_pack.py) is put in place on first use and is read-only. Presets are
amux's: an operator may change a preset's runtime, model, effort, provider binding,
permission and extra_args, and which one is the default.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils.text import slugify

from execution import locks
from execution.core import builtin_pack, manifest
from execution.core.launch_rules import DIRECT_PERMISSIONS, ExecutionError, Preset, check_extra_args
from execution.models import AgentProfile, BotProfile, LaunchPreset
from runtimes import registered
from sessions.models import ProviderProfile
from sessions.refusals import CommandError, Conflict


def ensure_builtin() -> None:
    """The three built-in profiles and their shortcuts' presets, created when missing
    (idempotent; an operator's later changes to a preset are kept, and a process that made
    them meanwhile is no conflict).

    Readers call it (a launch's settings are resolved inside a session's creation, which
    may be its creator's transaction): it writes in that transaction when there is one,
    in a durable one of its own otherwise."""
    if AgentProfile.objects.filter(builtin=True).count() == len(builtin_pack.PROFILES) and \
            LaunchPreset.objects.filter(builtin=True).count() == len(builtin_pack.PRESETS):
        return
    if connection.in_atomic_block:
        _put_builtin()
        return
    with transaction.atomic(durable=True):
        _put_builtin()


def _put_builtin() -> None:
    content = [AgentProfile(slug=slug, builtin=True, **_content(manifest.parse(data)))
               for slug, data in builtin_pack.PROFILES.items()]
    AgentProfile.objects.bulk_create(
        content, update_conflicts=True, unique_fields=["slug"],
        update_fields=["name", "description", "instructions", "skills", "builtin",
                       "updated_at"])
    has_default = LaunchPreset.objects.filter(is_default=True).exists()
    # a preset there already keeps its operator's changes (and the default stays one)
    LaunchPreset.objects.bulk_create([
        LaunchPreset(slug=preset.slug, runtime=preset.runtime, model=preset.model,
                     permission=preset.permission or "", builtin=True,
                     is_default=not has_default and preset.slug == builtin_pack.DEFAULT_PRESET)
        for preset in builtin_pack.PRESETS], ignore_conflicts=True)


def _content(parsed: manifest.Manifest) -> dict[str, Any]:
    data = parsed.as_dict()
    return {"name": parsed.name, "description": parsed.description,
            "instructions": parsed.instructions, "skills": data["skills"]}


def _parse(data: Any) -> manifest.Manifest:
    try:
        return manifest.parse(data)
    except manifest.ManifestError as exc:
        raise CommandError(str(exc), code="invalid_manifest", fields={
            f"manifest.{path}" if path else "manifest": [message]
            for path, message in exc.faults.items()}) from exc


def manifest_of(profile: AgentProfile) -> dict[str, Any]:
    return {"version": manifest.VERSION, "name": profile.name,
            "description": profile.description, "instructions": profile.instructions,
            "skills": list(profile.skills or [])}


# ------------------------------------------------------------------------ profiles
def create_profile(data: Any, slug: str | None = None) -> AgentProfile:
    ensure_builtin()
    parsed = _parse(data)
    slug = slugify(slug if slug is not None else parsed.name)[:60]
    if not slug:
        raise CommandError("the profile needs a slug (letters, digits, '-')", field="slug")
    try:
        with transaction.atomic(durable=True):
            return AgentProfile.objects.create(slug=slug, builtin=False, **_content(parsed))
    except IntegrityError as exc:
        raise Conflict(f"a profile {slug!r} exists already", code="exists",
                       field="slug") from exc


def _local(slug: str) -> AgentProfile:
    profile = locks.profile(slug)
    if profile is None:
        raise CommandError(f"unknown profile {slug!r}", code="not_found", status=404)
    if profile.builtin:
        raise CommandError(f"{slug!r} is a built-in profile: it cannot be changed",
                           code="builtin", status=403)
    return profile


def update_profile(slug: str, data: Any) -> AgentProfile:
    parsed = _parse(data)
    with transaction.atomic(durable=True):
        profile = _local(slug)
        for key, value in _content(parsed).items():
            setattr(profile, key, value)
        profile.revision += 1
        profile.save()
    return profile


def delete_profile(slug: str) -> None:
    with transaction.atomic(durable=True):
        profile = _local(slug)
        if profile.instances.exists() or profile.bots.exists():
            raise Conflict(f"{slug!r} is the expert of an instance or a bot profile",
                           code="in_use")
        profile.delete()


def get_profile(slug: str | None) -> AgentProfile | None:
    if not slug:
        return None
    ensure_builtin()
    profile = AgentProfile.objects.filter(slug=slug).first()
    if profile is None:
        raise CommandError(f"unknown profile {slug!r}", code="unknown_profile", field="profile")
    return profile


def profile_snapshot(profile: AgentProfile | None) -> dict[str, Any] | None:
    """What a session records of its expert at launch (the content itself is read fresh
    for every turn, so an edit reaches the next turn; the execution settings never change)."""
    if profile is None:
        return None
    return {"id": profile.pk, "slug": profile.slug, "name": profile.name,
            "revision": profile.revision, "builtin": profile.builtin,
            "instructions": profile.instructions,
            "skills": list(profile.skills or [])}


# ------------------------------------------------------------------------ presets
def as_preset(row: LaunchPreset) -> Preset:
    return Preset(slug=row.slug, runtime=row.runtime, model=row.model,
                  effort=row.effort or None,
                  provider=row.provider.slug if row.provider_id else None,
                  permission=row.permission or None, extra_args=tuple(row.extra_args or ()))


def get_preset(slug: str | None) -> Preset | None:
    if not slug:
        return None
    ensure_builtin()
    row = LaunchPreset.objects.select_related("provider").filter(slug=slug).first()
    if row is None:
        raise CommandError(f"unknown preset {slug!r}", code="unknown_preset", field="preset")
    return as_preset(row)


def default_preset() -> Preset | None:
    ensure_builtin()
    row = LaunchPreset.objects.select_related("provider").filter(is_default=True).first()
    return as_preset(row) if row else None


def update_preset(slug: str, changes: dict[str, Any]) -> LaunchPreset:
    """An operator's change; ``is_default: true`` moves the default here."""
    ensure_builtin()
    with transaction.atomic(durable=True):
        locked = locks.presets_for(slug)
        row = next((preset for preset in locked if preset.slug == slug), None)
        if row is None:
            raise CommandError(f"unknown preset {slug!r}", code="not_found", status=404)
        if "runtime" in changes:
            if changes["runtime"] not in registered():
                raise CommandError(f"unknown runtime {changes['runtime']!r}",
                                   code="unknown_runtime", field="runtime")
            row.runtime = changes["runtime"]
        if "model" in changes:
            if not str(changes["model"] or "").strip():
                raise CommandError("model is required", field="model")
            row.model = str(changes["model"]).strip()
        if "effort" in changes:
            row.effort = str(changes["effort"] or "")
        if "permission" in changes:
            value = changes["permission"] or ""
            if value and value not in DIRECT_PERMISSIONS:
                raise CommandError(f"permission is one of {', '.join(DIRECT_PERMISSIONS)} "
                                   "(or empty: the native bypass)", field="permission")
            row.permission = value
        if "provider" in changes:
            slug_ = changes["provider"]
            row.provider = None
            if slug_:
                row.provider = ProviderProfile.objects.filter(slug=slug_).first()
                if row.provider is None:
                    raise CommandError(f"unknown provider {slug_!r}", field="provider")
        if "extra_args" in changes:
            try:
                row.extra_args = list(check_extra_args(changes["extra_args"]))
            except ExecutionError as exc:
                raise CommandError(str(exc), field=exc.field) from exc
        if changes.get("is_default") is True and not row.is_default:
            LaunchPreset.objects.filter(pk__in=[p.pk for p in locked if p.is_default]).update(
                is_default=False)
            row.is_default = True
        elif changes.get("is_default") is False and row.is_default:
            # the request contradicts the stored state (this one is the default), not the
            # shape of a request: 409, like any other conflict
            raise CommandError("one preset stays the default: make another one the default "
                               "instead", code="conflict", status=409, field="is_default")
        row.save()
    return row


# ------------------------------------------------------------------------ bot profiles
def create_bot(fields: dict[str, Any]) -> BotProfile:
    """``fields``: checked by the caller (slug, name, agent_profile, launch_preset)."""
    with transaction.atomic(durable=True):
        return BotProfile.objects.create(**fields)


def update_bot(slug: str, changes: dict[str, Any]) -> BotProfile:
    with transaction.atomic(durable=True):
        bot = locks.bot(slug)
        if bot is None:
            raise CommandError(f"unknown bot profile {slug!r}", code="not_found", status=404)
        for key, value in changes.items():
            setattr(bot, key, value)
        bot.save()
        return bot


def delete_bot(slug: str) -> None:
    with transaction.atomic(durable=True):
        bot = locks.bot(slug)
        if bot is None:
            raise CommandError(f"unknown bot profile {slug!r}", code="not_found", status=404)
        bot.delete()
