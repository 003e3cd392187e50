"""What the OpenAPI document promises: errors in one shape, secrets only in requests,
read-only fields only in responses, bounded pages."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def document(api):
    response = api.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def test_every_operation_documents_its_errors_in_the_error_shape(document):
    assert document["components"]["schemas"]["Error"]["properties"]["error"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            for code in ("401", "403", "429"):
                assert code in responses, (method, path, code)
            for code, response in responses.items():
                if code.startswith(("4", "5")):
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    assert ref == "#/components/schemas/Error", (method, path, code)
            if "{" in path:
                assert "404" in responses, (method, path)
            if "requestBody" in operation:
                assert {"400", "415"} <= set(responses), (method, path)
            if method != "get":
                assert "409" in responses, (method, path)


def test_write_only_secrets_only_in_requests_and_read_only_fields_only_in_responses(document):
    schemas = document["components"]["schemas"]
    assert "api_key" in schemas["ProviderRequest"]["properties"]
    assert "api_key" not in schemas["Provider"]["properties"]
    assert "created_at" in schemas["Provider"]["properties"]
    assert "created_at" not in schemas["ProviderRequest"]["properties"]
    assert "updated_at" not in schemas["SourceRequest"]["properties"]
    assert "health" not in schemas["SourceRequest"]["properties"]


def test_list_parameters_carry_their_bounds(document):
    params = {p["name"]: p["schema"] for p in
              document["paths"]["/api/v1/tickets/"]["get"]["parameters"]}
    assert params["limit"] == {"type": "integer", "minimum": 1, "maximum": 200}
    assert params["offset"]["minimum"] == 0


def _api_routes() -> dict[str, object]:
    """Every route of the URLconf under /api/v1/, in the schema's path form
    (``{name}`` for each parameter), with the view it resolves to."""
    import re

    from django.urls import URLPattern, URLResolver, get_resolver

    found: dict[str, object] = {}

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, route)
            elif isinstance(entry, URLPattern):
                found[route] = entry.callback

    walk(get_resolver().url_patterns, "/")
    out = {}
    for route, callback in found.items():
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", route)  # a router's regex
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", path)  # a path converter
        path = path.replace("\\Z", "").replace("^", "").replace("$", "")
        if path.startswith("/api/v1/") and "(?P<format>" not in path:
            out[path] = callback
    return out


def test_every_api_route_is_in_the_published_document(document):
    """The document is the contract: a route the URLconf serves and the schema does not
    list is an operation no integration can know of."""
    undocumented = {"/api/v1/schema/", "/api/v1/docs/"}  # the document and its viewer
    import re

    def shape(path: str) -> str:  # the schema names a router's ``pk`` after its field
        return re.sub(r"\{\w+\}", "{}", path)

    routes = {shape(p) for p in _api_routes() if p not in undocumented}
    missing = sorted(routes - {shape(p) for p in document["paths"]})
    assert not missing, f"served but not in the OpenAPI document: {missing}"


def _served_methods(callback) -> set[str]:
    """The HTTP methods a route's view answers (OPTIONS and HEAD are DRF's own)."""
    actions = getattr(callback, "actions", None)  # a router's viewset route
    if actions:  # (DRF adds head to it once the route has answered a request)
        return {method.lower() for method in actions} - {"options", "head"}
    view = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if view is None:
        return set()
    return {m for m in view.http_method_names
            if m not in ("options", "head") and hasattr(view, m)}


def test_every_method_each_api_route_answers_is_an_operation_of_the_document(document):
    """Not only the paths: each method a route's view answers (a view's ``put = patch``, a
    viewset's extra action) is an operation the document lists."""
    import re

    def shape(path: str) -> str:
        return re.sub(r"\{\w+\}", "{}", path)

    documented = {(shape(path), method) for path, operations in document["paths"].items()
                  for method in operations}
    served = {(shape(path), method) for path, callback in _api_routes().items()
              if path not in {"/api/v1/schema/", "/api/v1/docs/"}
              for method in _served_methods(callback)}
    assert served, "no route found: the URLconf walk is broken"
    missing = sorted(served - documented)
    assert not missing, f"served but not in the OpenAPI document: {missing}"


def _property_allows_null(prop: dict) -> bool:
    if prop.get("nullable"):
        return True
    types = prop.get("type")
    if isinstance(types, list) and "null" in types:
        return True
    return any(part.get("$ref", "").endswith("/NullEnum") or part.get("nullable")
               for part in prop.get("oneOf", []) + prop.get("anyOf", []))


def _property_lists_choices(prop: dict, schemas: dict) -> bool:
    refs = [prop] + prop.get("allOf", []) + prop.get("oneOf", []) + prop.get("anyOf", [])
    for part in refs:
        if "enum" in part:
            return True
        ref = part.get("$ref", "")
        if ref and "enum" in schemas.get(ref.rsplit("/", 1)[-1], {}):
            return True
    return False


def test_every_serializer_field_that_takes_null_is_nullable_and_every_choice_lists_its_values():
    """What the code says of each field is what the document says: a field that takes or
    gives null is nullable, a choice lists its values (drf-spectacular derives both, unless
    a hand-written schema overrides it: this checks those too)."""
    from drf_spectacular.generators import SchemaGenerator
    from rest_framework import serializers

    generator = SchemaGenerator()
    document = generator.get_schema(request=None, public=True)
    schemas = document["components"]["schemas"]
    checked, faults = 0, []
    for component in generator.registry._components.values():
        serializer = component.object
        schema = schemas.get(component.name)
        if not isinstance(serializer, serializers.Serializer) or not schema:
            continue
        for name, field in serializer.fields.items():
            prop = (schema.get("properties") or {}).get(name)
            if prop is None:  # write-only or read-only: in the other direction's shape
                continue
            checked += 1
            if getattr(field, "allow_null", False) and not _property_allows_null(prop):
                faults.append(f"{component.name}.{name}: takes null, not nullable")
            if isinstance(field, serializers.ChoiceField) \
                    and not _property_lists_choices(prop, schemas):
                faults.append(f"{component.name}.{name}: a choice without its values")
    assert checked > 500, checked  # the walk saw the API's serializers
    assert not faults, faults
