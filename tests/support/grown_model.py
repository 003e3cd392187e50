"""A model grown by fields for one test, in the model and in its table, and put back after:
how a test shows that SQL made from a model's metadata still holds once a field is added."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from django.db import connection, models


@contextlib.contextmanager
def grown(model: type[models.Model], fields: dict[str, models.Field],
          forget: Callable[[], None]) -> Iterator[dict[str, models.Field]]:
    """``forget``: clears what was made from the model before (cached statements), at the
    start and at the end."""
    for name, field in fields.items():
        model.add_to_class(name, field)
        with connection.schema_editor() as editor:
            editor.add_field(model, field)
    forget()
    try:
        yield fields
    finally:
        for name, field in fields.items():
            with connection.schema_editor() as editor:
                editor.remove_field(model, field)
            model._meta.local_fields.remove(field)
            delattr(model, name)
        model._meta._expire_cache()
        forget()
