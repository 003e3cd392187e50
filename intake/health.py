"""What a source's health keeps (`Source.health`): refusals by content-free reason, the
last error, catch-up cursors. The only writer of it; intake/health_view.py reads it."""

from __future__ import annotations

from django.db import transaction

from amux_common.clock import now as clock
from intake import rules as intake_core
from intake.models import Source


def note_rejection(source_id: int, reason: str, *, error: bool = False, n: int = 1,
                   message: str = "") -> None:
    """Keep one content-free reason in the source's health (in the caller's transaction,
    if any); an error of amux's own keeps what failed (``message``)."""
    with transaction.atomic():
        source = Source.objects.select_for_update().filter(pk=source_id).first()
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
        source = Source.objects.select_for_update().filter(pk=source_id).first()
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
    source = Source.objects.select_for_update().filter(pk=source_id).first()
    if source is None:
        return
    source.health = intake_core.note_cursor(source.health, name, cursor, clock(), extra)
    source.save(update_fields=["health"])


def source_profile_checked(*, source_id: int, profile: dict) -> None:
    """Fact: the source's provider profile was checked against the provider (the bot's
    identity as Lark states it); kept in the source's health. Not durable: a source's
    events may ask for it from inside their own transaction."""
    with transaction.atomic():
        source = Source.objects.select_for_update().filter(pk=source_id).first()
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
    source = Source.objects.select_for_update().filter(pk=source_id).first()
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
        source = Source.objects.select_for_update().filter(pk=source_id).first()
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
        source = Source.objects.select_for_update().filter(pk=source_id).first()
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
