"""REST: `policy/`, `policy/versions/`, `policy/check`, `policy/preview` (CONTRACT.md)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common import roles
from amux_common.api import error_response
from amux_common.fields import bound_errors
from amux_common.pagination import paginate
from amux_common.schema import PageQuery, page_of
from policy import limits, schema, services
from policy.document import PolicyInvalid, diff
from policy.models import PolicyHead, PolicyVersion


def _invalid(exc: PolicyInvalid | services.BadFacts):
    return error_response(400, "invalid", str(exc), exc.fields)


def _stale(exc: services.StaleBase):
    return error_response(409, "conflict", str(exc),
                          {"base_version": f"stale: the current version is {exc.current}"})


def _version_row(entry: PolicyVersion, current_id: int | None) -> dict:
    return {"id": entry.id, "version": entry.version, "base_version": entry.base_version or None,
            "author": entry.author, "origin": entry.origin,
            "created_at": entry.created_at.isoformat(), "current": entry.id == current_id}


class PolicyView(APIView):
    """GET the current policy; PUT a new version with `base_version`."""

    @extend_schema(responses=schema.PolicyDocumentSerializer, operation_id="policy_retrieve")
    def get(self, request):
        return Response(services.current().as_dict())

    @extend_schema(request=schema.PolicyDocumentSerializer,
                   responses=schema.PolicyDocumentSerializer, operation_id="policy_update")
    def put(self, request):
        data = request.data
        if not isinstance(data, dict):
            return error_response(400, "invalid", "the body must be a JSON object",
                                  {"body": "must be a JSON object"})
        faults = {}  # every fault at once: the base's and the document's
        base = data.get("base_version")
        if "base_version" not in data:
            faults["base_version"] = ("required: the version this edit is based on (null for "
                                      "the first save)")
        elif base is not None and (not isinstance(base, str) or not base
                                   or len(base) > limits.VERSION):
            faults["base_version"] = ("must be a version hash or null, at most "
                                      f"{limits.VERSION} characters")
        try:
            services.check_document(data)
        except PolicyInvalid as exc:
            faults.update(exc.fields)
        if faults:
            return _invalid(PolicyInvalid(faults))
        try:
            saved = services.save(data, base, author=request.user.get_username(), origin="api")
        except PolicyInvalid as exc:
            return _invalid(exc)
        except services.StaleBase as exc:
            return _stale(exc)
        return Response(saved.as_dict())


class VersionsView(APIView):
    """History, newest first, paginated; each entry with its hash and base."""

    @extend_schema(responses=page_of("PolicyVersionPage", schema.VersionSerializer(many=True)),
                   parameters=[PageQuery], operation_id="policy_versions_list")
    def get(self, request):
        head = PolicyHead.objects.filter(pk=1).first()
        current_id = head.entry_id if head else None
        return paginate(request, self, PolicyVersion.objects.order_by("-id"),
                        lambda page: [_version_row(e, current_id) for e in page])


class VersionDetailView(APIView):
    @extend_schema(responses=schema.PolicyDocumentSerializer,
                   operation_id="policy_versions_retrieve")
    def get(self, request, version):
        entry = PolicyVersion.objects.filter(version=version).order_by("-id").first()
        if entry is None:
            return error_response(404, "not_found", f"no policy version {version}")
        return Response({"version": entry.version, "base_version": entry.base_version or None,
                         "acceptance": entry.document["acceptance"],
                         "sources": entry.document["sources"],
                         "saved_at": entry.created_at.isoformat(), "author": entry.author,
                         "origin": entry.origin})


class DiffView(APIView):
    """`policy/versions/diff?from=<hash>&to=<hash>` (either may be omitted: none / current)."""

    @extend_schema(parameters=[
        OpenApiParameter(key, {"type": "string", "maxLength": limits.VERSION})
        for key in ("from", "to")],
                   responses=schema.DiffSerializer, operation_id="policy_versions_diff")
    def get(self, request):
        fields = {}
        docs = {}
        for key in ("from", "to"):
            value = request.query_params.get(key) or None
            if value is None and key == "to":
                value = services.current().version
            try:
                docs[key] = services.document_of(value)
            except KeyError:
                fields[key] = "unknown version"
        if fields:
            return error_response(400, "invalid", "unknown version", fields)
        return Response({"from": request.query_params.get("from") or None,
                         "to": request.query_params.get("to") or services.current().version,
                         "changes": diff(docs["from"], docs["to"])})


class CheckView(APIView):
    """POST trigger facts → the gate's decision under the current (or a named) version."""

    permission_classes = [roles.AnyRole]  # writes nothing

    @extend_schema(request=schema.CheckFactsSerializer,
                   responses=schema.CheckResponseSerializer, operation_id="policy_check")
    def post(self, request):
        data = request.data if isinstance(request.data, dict) else None
        faults = {}
        try:
            facts = services.facts_from(data)
        except services.BadFacts as exc:
            faults.update(exc.fields)
        document = None
        if data is not None and data.get("version"):
            try:
                document = services.document_of(data["version"])
            except (KeyError, TypeError):
                faults["version"] = "unknown version"
        if data:  # a value over a bound is named in the bound's words, with the other faults
            faults.update(bound_errors(schema.CheckFactsSerializer, data))
        if faults:
            return _invalid(services.BadFacts(faults))
        verdict, version = services.check(facts, document)
        return Response({**verdict.as_dict(), "version": version})


class PreviewView(APIView):
    """POST a draft document → its version, the changes and the live tickets it would affect
    (nothing is stored)."""

    permission_classes = [roles.AnyRole]  # writes nothing

    @extend_schema(request=schema.PolicyDraftSerializer, responses=schema.PreviewSerializer,
                   operation_id="policy_preview")
    def post(self, request):
        try:
            canonical, version, changes, affected = services.preview(request.data)
        except PolicyInvalid as exc:
            return _invalid(exc)
        return Response({"version": version, "acceptance": canonical["acceptance"],
                         "sources": canonical["sources"], "changes": changes,
                         "affected": [a.as_dict() for a in affected]})
