"""The OpenAPI document says what the API really answers, errors included.

Every operation lists the errors it can give, all in the one error shape (`Error`,
`{"error": {"code", "message", "fields"}}`), derived from what the operation takes: any
operation can refuse a caller (401 no or bad token, 403 not allowed, 429 throttled); one
that takes query parameters or a body can refuse them (400) and the body's media type
(415); one addressed by a path parameter can name something that does not exist (404); one
that changes state can conflict with it (409). The schemathesis run in the test suite holds
the document to it.
"""

from __future__ import annotations

import re

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from amux_common import limits
from amux_common.fields import SlugRef
from amux_common.pagination import MAX_LIMIT, MAX_OFFSET


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="machine-readable, e.g. invalid, not_found")
    message = serializers.CharField(help_text="what was wrong, in words")
    fields = serializers.DictField(
        help_text="per field (or parameter) what was wrong with it; empty when none")


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


_DESCRIPTIONS = {
    "400": "Bad input: the fields (or parameters) named in `error.fields`.",
    "401": "No credentials, or credentials that are not valid.",
    "403": "The caller may not do this.",
    "404": "Nothing is found under this path.",
    "409": "The request contradicts the current state; nothing was written.",
    "413": "The body is over the upload limit (DATA_UPLOAD_MAX_MEMORY_SIZE).",
    "415": "The body is not JSON.",
    "429": "Too many requests; try again later.",
}


_RULES = "x-amux-request-rules"


class AmuxAutoSchema(AutoSchema):
    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        parameters = operation.get("parameters") or []
        codes = ["401", "403", "429"]
        if any(p["in"] == "query" for p in parameters) or "requestBody" in operation:
            codes.append("400")
        if "requestBody" in operation:
            codes += ["413", "415"]
        if any(p["in"] == "path" for p in parameters):
            codes.append("404")
        if self.method not in ("GET", "HEAD", "OPTIONS"):
            codes.append("409")
        # a rule across the body's fields applies to a body: one must be sent
        if "requestBody" in operation and getattr(self.get_request_serializer(),
                                                  "openapi_request_rules", None):
            operation["requestBody"]["required"] = True
        responses = operation["responses"]
        for code in sorted(codes):
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorSerializer, code)
                responses[code]["description"] = _DESCRIPTIONS[code]
        return operation

    def _map_serializer(self, serializer, direction, bypass_extensions=False):
        # A rule across fields that the code enforces (exactly one of two fields, say) is
        # stated in the request shape, so a client (and the fuzz) can know it: a request
        # serializer's ``openapi_request_rules`` (JSON Schema keywords such as ``oneOf``).
        # Placed by `cross_field_rules`, after drf-spectacular's enum hook (which would make
        # an enum in a rule a shared component).
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        rules = getattr(serializer, "openapi_request_rules", None)
        if rules and direction == "request":
            schema[_RULES] = rules
        return schema

    def _insert_field_validators(self, field, schema):
        # A validator of ours (amux_common.bounds) says what the document should show.
        super()._insert_field_validators(field, schema)
        if isinstance(field, SlugRef) and schema.get("type") == "string":
            schema.setdefault("maxLength", field.max_length)
        for validator in getattr(field, "validators", ()):
            schema.update(getattr(validator, "openapi", {}))


def page_of(name: str, child: serializers.BaseSerializer) -> serializers.Serializer:
    """The documented shape of one page of a list (for views that paginate by hand)."""
    from drf_spectacular.utils import inline_serializer

    return inline_serializer(name, {
        "count": serializers.IntegerField(),
        "next": serializers.URLField(allow_null=True),
        "previous": serializers.URLField(allow_null=True),
        "results": child,
    })


class PageQuery(serializers.Serializer):
    """The `limit`/`offset` parameters of a hand-paginated list, as the pagination bounds
    them (amux_common.pagination)."""

    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT,
                                     help_text="Number of results to return per page.")
    offset = serializers.IntegerField(required=False, min_value=0, max_value=MAX_OFFSET,
                                      help_text="The initial index from which to return "
                                                "the results.")


def bounded_path_parameters(result, generator, request, public):
    """A path parameter names a row: an id is at most a BigAutoField's largest, a name at
    most its column's length (amux_common.limits). A longer one names nothing (404)."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", ()) if isinstance(operation, dict) else ():
                if parameter.get("in") != "path":
                    continue
                schema = parameter.setdefault("schema", {})
                if schema.get("type") == "integer":
                    schema.setdefault("minimum", 0)
                    schema.setdefault("maximum", limits.ID_MAX)
                elif schema.get("type") == "string" and "enum" not in schema \
                        and parameter["name"] in limits.PATH_MAX_LENGTH:
                    schema.setdefault("maxLength", limits.PATH_MAX_LENGTH[parameter["name"]])
    return result


def cross_field_rules(result, generator, request, public):
    """A request serializer's ``openapi_request_rules`` (AmuxAutoSchema) joined to its
    shape: the JSON Schema keywords (``oneOf``, ``not``) of a rule across its fields."""
    for schema in result.get("components", {}).get("schemas", {}).values():
        schema.update(schema.pop(_RULES, {}))
    return result


def closed_request_bodies(result, generator, request, public):
    """Every object the API reads is closed (``additionalProperties: false``): a field it
    does not document is refused with 400 naming it (amux_common.fields.JsonTyped)."""
    for name, schema in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and schema.get("type") == "object":
            schema["additionalProperties"] = False
    return result


_LINK_NAMES = {"get": "Read", "put": "Replace", "patch": "Update", "delete": "Delete"}


def resource_links(result, generator, request, public):
    """OpenAPI links from each create (a POST answering 201) to the read, update and delete
    of what it made: the detail path is the collection's path plus one parameter, filled
    from the field of the same name in the created body (`{slug}` from `slug`), else from
    its key (`{agent}` from `slug`, `{ref}` from `id`). A client
    generator (and the stateful fuzz) follows them create → read → update → delete."""
    schemas = result.get("components", {}).get("schemas", {})
    paths = result.get("paths", {})
    for path, operations in paths.items():
        created = (operations.get("post") or {}).get("responses", {}).get("201")
        if not created:
            continue
        ref = (created.get("content", {}).get("application/json", {})
               .get("schema", {}).get("$ref", ""))
        fields = set(schemas.get(ref.rsplit("/", 1)[-1], {}).get("properties") or {})
        for detail, detail_operations in paths.items():
            rest = detail[len(path):] if detail.startswith(path) else ""
            if not (rest.startswith("{") and rest.endswith("}/") and rest.count("{") == 1):
                continue
            name = rest[1:-2]
            # a parameter named for what it names ({agent}, {ref}) takes the row's key
            field = next((f for f in (name, "slug", "id") if f in fields), None)
            if field is None:
                continue
            # the collection's own parameters ({slug} of goals/{slug}/agents/) name the
            # same parent in the detail path: taken from the create's request
            parameters = {parent: f"$request.path.{parent}"
                          for parent in re.findall(r"\{(\w+)\}", path)}
            parameters[name] = f"$response.body#/{field}"
            links = created.setdefault("links", {})
            for method, label in _LINK_NAMES.items():
                if method in detail_operations:
                    links[label] = {
                        "operationId": detail_operations[method]["operationId"],
                        "parameters": dict(parameters)}
    return result
