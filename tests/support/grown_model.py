"""A model grown by fields for one test, in the model and in its table, and put back after:
how a test shows that SQL made from a model's metadata still holds once a field is added."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from django.db import connection, models
from django.utils.functional import cached_property


def _expire(model: type[models.Model]) -> None:
    """Every property the model's metadata cached, not only those ``_expire_cache`` knows:
    ``db_returning_fields`` outlives it, and a later INSERT elsewhere in the same worker
    would ask for a column already dropped."""
    meta = model._meta
    meta._expire_cache()
    for name, attribute in vars(type(meta)).items():
        if isinstance(attribute, cached_property):
            meta.__dict__.pop(name, None)


@contextlib.contextmanager
def grown(model: type[models.Model], fields: dict[str, models.Field],
          forget: Callable[[], None]) -> Iterator[dict[str, models.Field]]:
    """``forget``: clears what was made from the model before (cached statements), at the
    start and at the end."""
    for name, field in fields.items():
        model.add_to_class(name, field)
        with connection.schema_editor() as editor:
            editor.add_field(model, field)
    _expire(model)
    forget()
    try:
        yield fields
    finally:
        for name, field in fields.items():
            with connection.schema_editor() as editor:
                editor.remove_field(model, field)
            model._meta.local_fields.remove(field)
            delattr(model, name)
        _expire(model)
        forget()
