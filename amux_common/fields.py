"""JSON bodies are taken as they are typed.

DRF coerces: a CharField takes the number 0 as "0", an IntegerField takes the string "5",
a BooleanField takes "true" or 1, a nullable relation takes "" as null. The API documents
JSON types, so a value of another type is refused (400 naming the field) rather than
guessed at; null clears a nullable field, "" does not.
"""

from __future__ import annotations

import functools

from rest_framework import serializers

_MESSAGES = {str: "Must be a string.", int: "Must be an integer.", bool: "Must be true or false.",
             dict: "Must be an object.", list: "Must be a list."}


def _expected(field) -> type | None:
    if isinstance(field, serializers.BooleanField):
        return bool
    if isinstance(field, serializers.IntegerField):
        return int
    if isinstance(field, (serializers.CharField, serializers.ChoiceField,
                          serializers.RelatedField)):
        return str
    if isinstance(field, serializers.DictField):
        return dict
    if isinstance(field, serializers.ListField):
        return list
    return None  # JSONField and the like take any JSON


def type_error(field, value) -> str | None:
    """Why `value` (decoded JSON) does not have the JSON type `field` documents."""
    if value is None:
        return None  # DRF answers for null (allowed or not)
    expected = _expected(field)
    if expected is None:
        return None
    if expected is int and isinstance(value, bool):
        return _MESSAGES[int]
    if not isinstance(value, expected):
        return _MESSAGES[expected]
    if isinstance(field, serializers.RelatedField) and value == "":
        return "Must name one (or be null)."
    if expected is list:
        for item in value:
            inner = type_error(field.child, item)
            if inner:
                return f"Each item: {inner[0].lower()}{inner[1:]}"
    return None


UNKNOWN = "unknown field"


# Serializer mixin for request bodies: a field the serializer does not have is refused
# (400 naming it: a typo never becomes a silent default), a value whose JSON type is not
# the documented one too, and every faulty field is named at once, with DRF's own checks.
# (No docstring: the schema would show it as every serializer's description.)
class JsonTyped:

    def to_internal_value(self, data):
        errors = {}
        if isinstance(data, dict):
            errors.update({str(key): [UNKNOWN] for key in data if key not in self.fields})
            for name, field in self.fields.items():
                if field.read_only or field.field_name not in data:
                    continue
                problem = type_error(field, data[field.field_name])
                if problem:
                    errors[name] = [problem]
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not errors:
                raise
            found = exc.detail if isinstance(exc.detail, dict) else {
                "non_field_errors": exc.detail}
            raise serializers.ValidationError({**found, **errors}) from None
        if errors:
            raise serializers.ValidationError(errors)
        return value


def refuse_body(request) -> None:
    """An operation that takes no body refuses one: each field sent is named unknown (400),
    rather than ignored, so a caller who thinks it is passing options learns it is not."""
    data = request.data
    if data is None or (hasattr(data, "keys") and not data):
        return
    if isinstance(data, dict):
        raise serializers.ValidationError({str(key): [UNKNOWN] for key in data})
    raise serializers.ValidationError("This operation takes no body.")


def no_body(handler):
    """Marks a view's handler (post, delete, an action) as taking no body: see refuse_body."""

    @functools.wraps(handler)
    def checked(view, request, *args, **kwargs):
        refuse_body(request)
        return handler(view, request, *args, **kwargs)

    return checked


class BodylessDestroy:
    """A generic view's DELETE takes no body (refuse_body)."""

    @no_body
    def destroy(self, request, *args, **kwargs):
        return super().destroy(request, *args, **kwargs)


class SlugRef(serializers.SlugRelatedField):
    """A row named by its slug, bounded like the slug column: a longer name is refused for
    its length (400) before it is looked up. The OpenAPI document shows ``maxLength``
    (amux_common.schema)."""

    def __init__(self, *, max_length: int, **kwargs):
        self.max_length = max_length
        kwargs.setdefault("slug_field", "slug")
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str) and len(data) > self.max_length:
            raise serializers.ValidationError(
                f"Ensure this field has no more than {self.max_length} characters.",
                code="max_length")
        return super().to_internal_value(data)


_BOUND_CODES = {"max_length", "min_length", "max_value", "min_value", "max_keys",
                "max_json_bytes"}


def bound_errors(body: type[serializers.Serializer], data) -> dict:
    """The fields of ``data`` that are over a bound ``body`` documents, with DRF's words for
    each, for views that validate their bodies by hand: the bounds are the serializer's, the
    rest (what a field means, whether one is missing) stays the view's to say."""
    checked = body(data=data, partial=True)
    if checked.is_valid():
        return {}
    return {name: errors for name, errors in checked.errors.items()
            if name in data and _BOUND_CODES & set(_codes(errors))}


def _codes(errors):
    if isinstance(errors, dict):
        for inner in errors.values():
            yield from _codes(inner)
    elif isinstance(errors, list):
        for inner in errors:
            yield from _codes(inner)
    else:
        yield getattr(errors, "code", None)
