"""The one writer of model provider profiles (`ProviderProfile`). The panel's form, the admin
and the REST API create, change and delete providers here, so a profile is checked the same
way whichever door it came in by — its slug (free, fixed once made), its route, its key
(sendable in a header, required from the start on a template's route), its suggested
models and its watchdog limits — each fault named by its field, all at once. A change
locks the row and is one transaction; nothing half-checked is stored. Not durable: the
admin saves inside a transaction of its own."""

from __future__ import annotations

import copy
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError

from amux_common.checked_rows import FieldsRefused, saved
from runtimes import catalog
from runtimes import watchdog as watchdogs
from sessions import provider_templates
from sessions.keys import api_key_problem, with_key
from sessions.models import ProviderProfile

KEEP = object()  # a member the caller leaves as it is
_SLUG = ProviderProfile._meta.get_field("slug")
PLATFORMS = tuple(value for value, _label in ProviderProfile.PLATFORMS)


class ProviderRefused(FieldsRefused):
    """Bad input, every faulty field named: ``fields`` maps a field to its message."""


class ProviderInUse(ValueError):
    """Something still uses the provider: it cannot be deleted."""


def save(provider: ProviderProfile | None, *, slug: Any = KEEP, platform: Any = KEEP,
         base_url: Any = KEEP, api_key: str = "", clear_key: bool = False,
         models: Any = KEEP, watchdog: Any = KEEP) -> ProviderProfile:
    """Create (``provider`` None or unsaved) or change a provider. ``api_key`` replaces the
    stored key when given, ``clear_key`` removes it; ``models`` is the suggested model list
    as a client writes it (runtimes.catalog), ``watchdog`` the limits
    (runtimes.watchdog.LIMITS; None members dropped). Raises ProviderRefused naming every
    fault."""
    with transaction.atomic():
        if provider is not None and provider.pk is not None:
            provider = ProviderProfile.objects.select_for_update().get(pk=provider.pk)
        target, errors = _changed(provider, slug=slug, platform=platform, base_url=base_url,
                                  api_key=api_key, clear_key=clear_key, models=models,
                                  watchdog=watchdog)
        return saved(target, errors, ProviderRefused)


def refusals(provider: ProviderProfile | None, **given) -> dict[str, str]:
    """What ``save`` would refuse, each fault by its field, without writing (a form shows
    them beside its fields; ``save`` checks again under the row's lock)."""
    given = {name: given.get(name, KEEP) for name in _MEMBERS} | {
        "api_key": given.get("api_key") or "", "clear_key": bool(given.get("clear_key"))}
    return _changed(copy.copy(provider) if provider is not None else None, **given)[1]


_MEMBERS = ("slug", "platform", "base_url", "models", "watchdog")


def delete(provider: ProviderProfile) -> None:
    """Delete a provider nothing refers to any more (a session, a goal's agent: they would
    lose their route); raises ProviderInUse naming what still does."""
    with transaction.atomic():
        row = ProviderProfile.objects.select_for_update().filter(pk=provider.pk).first()
        if row is None:
            return
        if row.sessions.exists():
            raise ProviderInUse("sessions still use this provider")
        try:
            with transaction.atomic():
                row.delete()
        except ProtectedError as exc:
            users = sorted({str(type(obj)._meta.verbose_name_plural)
                            for obj in exc.protected_objects})
            raise ProviderInUse(f"still used by {', '.join(users)}") from exc


def _changed(provider: ProviderProfile | None, **given) -> tuple[ProviderProfile,
                                                              dict[str, str]]:
    target = provider if provider is not None else ProviderProfile()
    creating = target.pk is None
    errors: dict[str, str] = {}
    slug = given["slug"]
    if creating:
        problem = _slug_problem(slug)
        if problem:
            errors["slug"] = problem
        else:
            target.slug = slug
    elif slug is not KEEP and slug != target.slug:
        errors["slug"] = "is fixed once made: sessions, tasks and settings refer to it"
    if given["platform"] is not KEEP:
        if given["platform"] not in PLATFORMS:
            errors["platform"] = f"must be one of {', '.join(PLATFORMS)}"
        else:
            target.platform = given["platform"]
    elif creating:
        errors["platform"] = "is required"
    if given["base_url"] is not KEEP:
        url = given["base_url"] if isinstance(given["base_url"], str) else ""
        if not url.startswith(("http://", "https://")):
            errors["base_url"] = "an explicit http(s) base URL is required"
        else:
            target.base_url = url.rstrip("/")
    elif creating:
        errors["base_url"] = "is required"
    key = given["api_key"] or ""
    if key and (problem := api_key_problem(key)):
        errors["api_key"] = problem
    if given["models"] is not KEEP:
        stored, problem = catalog.check_provider_models(given["models"])
        if problem:
            errors["models"] = problem
        else:
            target.model_names = stored
    if given["watchdog"] is not KEEP:
        clean, problems = watchdogs.check_limits(given["watchdog"])
        if problems:
            errors["watchdog"] = "; ".join(f"{k}: {v}" for k, v in problems.items())
        else:
            target.watchdog = {k: v for k, v in clean.items() if v is not None}
    target.secrets = with_key(target.secrets, key, given["clear_key"])
    if "platform" not in errors and "base_url" not in errors:
        missing = provider_templates.key_missing(
            target.platform, target.base_url, has_key=bool(target.secrets.get("api_key")))
        if missing:
            errors["api_key"] = missing
    return target, errors


def _slug_problem(slug: Any) -> str | None:
    if slug is KEEP or not slug:
        return "is required"
    try:
        _SLUG.run_validators(slug)
    except ValidationError as exc:
        return " ".join(exc.messages)
    if ProviderProfile.objects.filter(slug=slug).exists():
        return "is taken"
    return None
