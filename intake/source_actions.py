"""The one writer of `Source` rows. The panel's form and the REST API both save, switch and
delete sources here, so a source is checked the same way whichever door it came in by: the
slug (its form, free, fixed once events arrived), the name, the kind's config and secrets
(its plugin), each fault named by its field, all at once. A write locks the row and is one
transaction; nothing half-checked is stored.

What a source's events, polls and receivers report about it is written here too (below,
"health"): `Source.health` — refusals by content-free reason, the last error, catch-up
cursors, the provider's view of the source — and a GitHub App installation's id;
intake/health_view.py reads it."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction

from amux_common.checked_rows import FieldsRefused, saved
from amux_common.clock import now as clock
from intake import rules as intake_core
from intake.models import Source
from intake.source_rules import slug_change_refused
from intake.sources import KINDS
from intake.sources.base import ConfigError

KEEP = object()  # a member the caller leaves as it is


class SourceRefused(FieldsRefused):
    """Bad input, every faulty field named: ``fields`` maps a field to its message."""


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
        return saved(target, errors, SourceRefused)


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


# ------------------------------------------------------------------ health
def note_rejection(source_id: int, reason: str, *, error: bool = False, n: int = 1,
                   message: str = "") -> None:
    """Keep one content-free reason in the source's health (in the caller's transaction,
    if any); an error of amux's own keeps what failed (``message``)."""
    with transaction.atomic():
        source = Source.objects.select_for_update(no_key=True).filter(pk=source_id).first()
        if source is None:
            return
        source.health = intake_core.note_rejection(source.health, reason, clock(), error, n,
                                                   message)
        source.save(update_fields=["health"])


def source_event_rejected(*, source_id: int, reason: str, error: bool = False,
                          message: str = "") -> None:
    """Fact: a request for this source was refused before anything was stored (or its
    processing failed); kept as one content-free reason in the source's health, and, for
    a failure of amux's own (a poll), what failed."""
    with transaction.atomic(durable=True):
        note_rejection(source_id, reason, error=error, message=message)


def source_rejections_counted(*, source_id: int, created_us: int,
                              counts: dict[str, int]) -> bool:
    """Fact: refusals counted outside the database (intake.rejections) are kept in the
    source's health, in one write. Counts of a source deleted since are dropped (False)."""
    with transaction.atomic(durable=True):
        source = Source.objects.select_for_update(no_key=True).filter(pk=source_id).first()
        if source is None or int(source.created_at.timestamp() * 1_000_000) != created_us:
            return False
        health, now = source.health, clock()
        for reason, n in sorted(counts.items()):
            health = intake_core.note_rejection(health, reason, now, False, n)
        source.health = health
        source.save(update_fields=["health"])
        return True


def source_cursor_moved(*, source_id: int, name: str, cursor: str | None,
                        extra: dict | None = None) -> None:
    """Fact: a catch-up poll stored its triggers; its cursor moves now, never before."""
    with transaction.atomic(durable=True):
        move_cursor(source_id, name, cursor, extra)


def move_cursor(source_id: int, name: str, cursor: str | None, extra: dict | None) -> None:
    source = Source.objects.select_for_update(no_key=True).filter(pk=source_id).first()
    if source is None:
        return
    source.health = intake_core.note_cursor(source.health, name, cursor, clock(), extra)
    source.save(update_fields=["health"])


def source_profile_checked(*, source_id: int, profile: dict) -> None:
    """Fact: the source's provider profile was checked against the provider (the bot's
    identity as Lark states it); kept in the source's health. Not durable: a source's
    events may ask for it from inside their own transaction."""
    with transaction.atomic():
        source = Source.objects.select_for_update(no_key=True).filter(pk=source_id).first()
        if source is None:
            return
        source.health = {**(source.health or {}), "profile": {**profile,
                                                              "at": clock().isoformat()}}
        source.save(update_fields=["health"])


def source_state_reported(source_id: int, facts: dict) -> None:
    """What an event said about the source itself, in the caller's transaction. A GitHub
    App's installation: its id becomes the source's `installation_id` (tokens are minted
    for it from now on, no lookup by repository), removed or suspended it is cleared; the
    installation as GitHub described it is kept in the health the panel shows."""
    source = Source.objects.select_for_update(no_key=True).filter(pk=source_id).first()
    if source is None:
        return
    installation = facts.get("installation")
    if isinstance(installation, dict):
        secrets = dict(source.secrets or {})
        if installation.get("state") == "installed":
            secrets["installation_id"] = str(installation["id"])
        elif secrets.get("installation_id") == str(installation.get("id")):
            secrets.pop("installation_id")
        source.secrets = secrets
        source.health = {**(source.health or {}),
                         "installation": {**installation, "at": clock().isoformat()}}
        source.save(update_fields=["secrets", "health", "updated_at"])


def chat_membership_reported(source_id: int, chat: str, *, removed: bool) -> None:
    """The provider said the bot was removed from `chat` (or added back): kept in the
    source's health (`removed_chats`, chat → since when), in the caller's transaction.
    A connector on that chat shows disconnected while it is there."""
    with transaction.atomic():
        source = Source.objects.select_for_update(no_key=True).filter(pk=source_id).first()
        if source is None:
            return
        chats = dict((source.health or {}).get("removed_chats") or {})
        if removed:
            chats.setdefault(chat, clock().isoformat())
        else:
            chats.pop(chat, None)
        source.health = {**(source.health or {}), "removed_chats": chats}
        source.save(update_fields=["health"])


def provider_state_reported(source_id: int, *, disconnected: bool, reason: str = "") -> None:
    """The provider said whether it still takes the source (Lark refusing the app's
    credentials, GitHub deleting or suspending the installation): `provider` in the
    source's health, kept since the first time it said so, cleared when it takes it again."""
    with transaction.atomic():
        source = Source.objects.select_for_update(no_key=True).filter(pk=source_id).first()
        if source is None:
            return
        stored = dict(source.health or {})
        before = stored.get("provider") or {}
        if disconnected:
            if before.get("state") == "disconnected" and before.get("reason") == reason:
                return
            stored["provider"] = {"state": "disconnected", "reason": reason,
                                  "at": clock().isoformat()}
        elif before:
            stored.pop("provider")
        else:
            return
        source.health = stored
        source.save(update_fields=["health"])
