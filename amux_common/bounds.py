"""Validators for the bounds a column or field type does not carry by itself.

A free-form object (a source's config, a profile's manifest, a watchdog) is bounded twice:
in keys (``MaxKeys``, which the OpenAPI document shows as ``maxProperties``) and in the
bytes of its JSON encoding (``JsonBytes``, shown as ``x-max-json-bytes``), since a handful
of keys can still hold megabytes. Both work as Django model validators (``full_clean``,
forms, the admin) and as DRF field validators (DRF runs Django validators and answers 400
naming the field). Each says in ``openapi`` what the document should show
(amux_common.schema reads it).
"""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator
from django.utils.deconstruct import deconstructible


@deconstructible
class MaxKeys(MaxLengthValidator):
    # A MaxLengthValidator, so drf-spectacular already shows it as maxProperties.
    message = "Ensure this object has no more than %(limit_value)d keys (it has %(show_value)d)."
    code = "max_keys"


@deconstructible
class JsonBytes:
    code = "max_json_bytes"

    def __init__(self, limit: int):
        self.limit = limit

    @property
    def openapi(self) -> dict:
        return {"x-max-json-bytes": self.limit}

    def __call__(self, value) -> None:
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
        if size > self.limit:
            raise ValidationError(
                f"Ensure this value is at most {self.limit:,} bytes as JSON (it is {size:,}).",
                code=self.code, params={"limit_value": self.limit, "show_value": size})

    def __eq__(self, other) -> bool:
        return isinstance(other, JsonBytes) and other.limit == self.limit


def json_bounds(keys: int, size: int) -> list:
    """The validators of a free-form object of at most ``keys`` keys and ``size`` bytes."""
    return [MaxKeys(keys), JsonBytes(size)]


@deconstructible
class NotBlank:
    """A text that must say something: white space alone is refused. The document shows it
    as a pattern that finds a character other than white space."""

    code = "blank"
    openapi = {"pattern": r"\S"}

    def __call__(self, value) -> None:
        if isinstance(value, str) and not value.strip():
            raise ValidationError("must not be blank", code=self.code)

    def __eq__(self, other) -> bool:
        return isinstance(other, NotBlank)


not_blank = NotBlank()


@deconstructible
class OneLine:
    """A value on one line (a command-line argument): a line break is refused. The document
    shows it as a pattern of characters other than a line break."""

    code = "line_break"
    openapi = {"pattern": r"^[^\n]*$"}

    def __call__(self, value) -> None:
        if isinstance(value, str) and "\n" in value:
            raise ValidationError("must be on one line (no line break)", code=self.code)

    def __eq__(self, other) -> bool:
        return isinstance(other, OneLine)


one_line = OneLine()
