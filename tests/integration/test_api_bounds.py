"""Every input the API takes is bounded, and the OpenAPI document says so (issue 33, item 5).

A string without ``maxLength``, a list without ``maxItems``, a number without ``minimum``
and ``maximum`` or a free-form object without ``maxProperties`` is a request body that can
grow until it hits DATA_UPLOAD_MAX_MEMORY_SIZE and then lands in a column, a prompt or a
payload sent on. The walk reads the published document (what clients are promised), every
request body and every query or path parameter of every operation, and names every
unbounded place at once.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

# Formats whose grammar bounds the string by itself.
_BOUNDED_FORMATS = {"date-time", "date", "time", "uuid", "duration", "binary"}


@pytest.fixture
def document(api):
    response = api.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def _constraint(part: dict) -> bool:
    """A combinator part that declares no value of its own: ``required``, ``not`` and
    properties restated by type or enum (amux_common.schema's ``openapi_request_rules``)."""
    return not ({"type", "$ref", "items", "additionalProperties", "allOf", "oneOf", "anyOf"}
                & part.keys())


def _unbounded(document, schema, where, seen, sized=False) -> list[str]:
    components = document["components"]["schemas"]
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return []
        return _unbounded(document, components[name], f"{where}<{name}>", seen | {name}, sized)
    found = []
    # An object bounded in bytes (amux_common.bounds.JsonBytes) bounds whatever it holds.
    sized = sized or "x-max-json-bytes" in schema
    for key in ("allOf", "oneOf", "anyOf"):
        for index, part in enumerate(schema.get(key, [])):
            at = f"{where}/{key}[{index}]"
            if _constraint(part):
                # a rule across the object's own fields (which must be given, which not):
                # what it restates of a field is bounded where the field is declared
                declared = schema.get("properties", {})
                for name, prop in part.get("properties", {}).items():
                    if name not in declared:
                        found += _unbounded(document, prop, f"{at}.{name}", seen, sized)
                continue
            found += _unbounded(document, part, at, seen, sized)
    kind = schema.get("type")
    if isinstance(kind, list):  # ["integer", "null"]: the bound is the integer's
        kind = next((k for k in kind if k != "null"), None)
    if schema.get("readOnly"):
        return found
    if "enum" in schema or "const" in schema:
        return found
    if kind == "string":
        if "maxLength" not in schema and schema.get("format") not in _BOUNDED_FORMATS:
            found.append(f"{where}: string without maxLength")
    elif kind in ("integer", "number"):
        for bound in ("minimum", "maximum"):
            if bound not in schema:
                found.append(f"{where}: {kind} without {bound}")
    elif kind == "array":
        if "maxItems" not in schema:
            found.append(f"{where}: array without maxItems")
        found += _unbounded(document, schema.get("items", {}), f"{where}[]", seen, sized)
    elif kind == "object" or "properties" in schema or "additionalProperties" in schema:
        for name, prop in schema.get("properties", {}).items():
            found += _unbounded(document, prop, f"{where}.{name}", seen, sized)
        extra = schema.get("additionalProperties")
        if extra not in (None, False):
            if "maxProperties" not in schema:
                found.append(f"{where}: map without maxProperties")
            if isinstance(extra, dict):
                found += _unbounded(document, extra, f"{where}{{}}", seen, sized)
        elif not schema.get("properties") and "maxProperties" not in schema:
            found.append(f"{where}: free-form object without maxProperties")
    elif kind is None and not sized and not any(k in schema for k in ("allOf", "oneOf", "anyOf")):
        # Any JSON value: only a bound on the bytes of its encoding can hold it.
        found.append(f"{where}: any JSON value without a bound")
    return found


def unbounded_inputs(document) -> list[str]:
    found = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if not isinstance(operation, dict):
                continue
            where = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", []):
                if parameter["in"] in ("query", "path"):
                    found += _unbounded(document, parameter.get("schema", {}),
                                        f"{where} ?{parameter['name']}", frozenset())
            body = operation.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                found += _unbounded(document, content.get("schema", {}),
                                    f"{where} body({media})", frozenset())
    return found


def test_every_request_input_is_bounded(document):
    found = unbounded_inputs(document)
    assert not found, f"{len(found)} unbounded inputs:\n" + "\n".join(found)
