"""What the one writer of a row named by a unique slug shares (a source, a model provider):
bad input refused with every faulty field named, and a row checked in full saved so that
the loser of two creates of one slug at once hears "is taken", like any other fault."""

from __future__ import annotations

from typing import TypeVar

from django.db import IntegrityError, models, transaction

M = TypeVar("M", bound=models.Model)


class FieldsRefused(ValueError):
    """Bad input, every faulty field named: ``fields`` maps a field to its message."""

    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


def saved(target: M, errors: dict[str, str], refused: type[FieldsRefused]) -> M:
    """``target`` saved, in the caller's transaction, unless ``errors`` name a fault."""
    if errors:
        raise refused(errors)
    try:
        with transaction.atomic():
            target.save()
    except IntegrityError as exc:  # two creates of one slug at once: the loser
        raise refused({"slug": "is taken"}) from exc
    return target
