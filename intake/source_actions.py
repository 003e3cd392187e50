"""The one writer of `Source` rows. The panel's form and the REST API both save, switch and
delete sources here, so a source is checked the same way whichever door it came in by: the
slug (its form, free, fixed once events arrived), the name, the kind's config and secrets
(its plugin), each fault named by its field, all at once. A write locks the row and is one
transaction; nothing half-checked is stored."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction

from intake.models import Source
from intake.source_rules import slug_change_refused
from intake.sources import KINDS
from intake.sources.base import ConfigError

KEEP = object()  # a member the caller leaves as it is


class SourceRefused(ValueError):
    """Bad input, every faulty field named: ``fields`` maps a field to its message."""

    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


class SourceInUse(ValueError):
    """The source has received events: it cannot be deleted (disable it instead)."""


def has_events(source: Source) -> bool:
    """Whether the source has received anything (a delivery, or a thread from a poll)."""
    return source.deliveries.exists() or source.threads.exists()


def save(source: Source | None, *, kind: Any = KEEP, slug: Any = KEEP, name: Any = KEEP,
         enabled: Any = KEEP, config: Any = KEEP, merge_config: bool = False,
         secrets: Any = KEEP) -> Source:
    """Create (``source`` None: ``kind`` required) or change a source. ``config`` replaces
    the stored one (``merge_config``: its members over the stored ones) and is checked by
    the kind's plugin with its defaults filled in; ``secrets`` sets the members it gives
    and removes those given as None or "". Raises SourceRefused naming every fault. Not
    durable: a connector watching a document and a GitHub App's setup save their source in
    their own transaction."""
    with transaction.atomic():
        if source is not None:
            source = Source.objects.select_for_update().get(pk=source.pk)
        target, errors = _changed(source, kind, slug, name, enabled, config, merge_config,
                                  secrets)
        if errors:
            raise SourceRefused(errors)
        try:
            with transaction.atomic():
                target.save()
        except IntegrityError as exc:  # two creates of one slug at once: the loser
            raise SourceRefused({"slug": "is taken"}) from exc
        return target


def _changed(source, kind, slug, name, enabled, config, merge_config, secrets
             ) -> tuple[Source, dict[str, str]]:
    errors: dict[str, str] = {}
    if source is None:
        if kind is KEEP or kind not in KINDS:
            errors["kind"] = f"must be one of {', '.join(KINDS)}"
            return Source(), errors
        target = Source(kind=kind)
    else:
        target = source
        if kind is not KEEP and kind != source.kind:
            errors["kind"] = "cannot change; add a new source"
    plug = KINDS[target.kind]
    if slug is not KEEP or source is None:
        wanted = "" if slug is KEEP else str(slug or "").strip()
        refused = source and slug_change_refused(source.slug, wanted, has_events(source))
        if refused:
            errors["slug"] = refused
        elif source is None or wanted != source.slug:
            try:
                validate_slug(wanted)
            except ValidationError:
                errors["slug"] = "letters, digits, - and _ only"
            else:
                if Source.objects.filter(slug=wanted).exists():
                    errors["slug"] = "is taken"
        target.slug = wanted
    if name is not KEEP or source is None:
        target.name = "" if name is KEEP else str(name or "").strip()
        if not target.name:
            errors["name"] = "is required"
    if enabled is not KEEP:
        target.enabled = bool(enabled)
    try:
        if config is not KEEP or source is None:
            given = {} if config is KEEP else config
            if source is not None and merge_config and isinstance(given, dict):
                given = {**source.config, **given}
            target.config = plug.validate_config(given)
        if secrets is not KEEP:
            target.secrets = _merged(source, plug.validate_secrets(secrets))
    except ConfigError as exc:
        errors.update(exc.fields)
    return target, errors


def _merged(source: Source | None, given: dict) -> dict:
    merged = dict(source.secrets or {}) if source is not None else {}
    for key, value in given.items():
        if value in (None, ""):
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def switch(source: Source, enabled: bool) -> Source:
    """Turn a source on or off (an operator's command: a transaction of its own)."""
    with transaction.atomic(durable=True):
        row = Source.objects.select_for_update(no_key=True).get(pk=source.pk)
        row.enabled = enabled
        row.save(update_fields=["enabled", "updated_at"])
        return row


def delete(source: Source) -> None:
    """Delete a source that has received nothing; SourceInUse otherwise (an operator's
    command: a transaction of its own)."""
    with transaction.atomic(durable=True):
        row = Source.objects.select_for_update().get(pk=source.pk)
        if has_events(row):
            raise SourceInUse("this source has received events; disable it instead")
        row.delete()
