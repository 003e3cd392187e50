"""REST: `prompts/` (fragments) and `prompts/versions/` (CONTRACT.md)."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.api import error_response
from prompts_app import assembly, core, service
from prompts_app.models import PromptVersion


def _invalid(exc: core.Invalid):
    return error_response(400, "invalid", str(exc), exc.fields)


def _stale(exc: service.Stale, key: str | None = None):
    response = error_response(
        409, "conflict",
        f"Revision {exc.latest} was saved after your base revision {exc.base}; nothing was "
        "written. Review what changed and save again with the new base_revision.",
        {"base_revision": f"Stale: the latest revision is {exc.latest}."},
    )
    response.data["revision"] = exc.latest
    if key is not None:
        response.data["fragment"] = service.fragment(key)
    return response


def _body(request) -> dict:
    if not isinstance(request.data, dict):
        raise core.Invalid({"body": "Expected a JSON object."})
    return request.data


def _author(request) -> str:
    return getattr(request.user, "username", "") or ""


class FragmentList(APIView):
    """Every fragment: team sections, skills, built-ins (editable) and texts in code."""

    def get(self, request):
        results = service.fragments()
        return Response({"count": len(results), "next": None, "previous": None,
                         "revision": service.latest_revision(), "results": results})


class FragmentDetail(APIView):
    """One fragment; `PUT {"base_revision", "text"}` saves a new revision."""

    def get(self, request, key):
        try:
            return Response(service.fragment(key))
        except core.Invalid as exc:
            return error_response(404, "not_found", str(exc), exc.fields)

    def put(self, request, key):
        try:
            core.check_editable(key)
            body = _body(request)
            if "text" not in body:
                raise core.Invalid({"text": "The text is required."})
            service.save(key, body.get("text"), body.get("base_revision"), origin="api",
                         author=_author(request))
        except core.Invalid as exc:
            return _invalid(exc)
        except service.Stale as exc:
            return _stale(exc, key)
        return Response(service.fragment(key))


class FragmentAction(APIView):
    """`restore` (back to the default; "take the new default") and `keep` ("keep mine")."""

    action = "restore"

    def post(self, request, key):
        do = service.restore if self.action == "restore" else service.keep_mine
        try:
            do(key, _body(request).get("base_revision"), origin="api", author=_author(request))
        except core.Invalid as exc:
            return _invalid(exc)
        except service.Stale as exc:
            return _stale(exc, key)
        return Response(service.fragment(key))


class VersionSerializer(serializers.ModelSerializer):
    predecessor = serializers.SerializerMethodField()

    class Meta:
        model = PromptVersion
        fields = ["revision", "predecessor", "at", "origin", "author", "summary"]

    def get_predecessor(self, obj):
        return obj.predecessor.revision if obj.predecessor_id else None


class VersionList(APIView):
    def get(self, request):
        paginator = LimitOffsetPagination()
        queryset = PromptVersion.objects.select_related("predecessor").order_by("-revision")
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(VersionSerializer(page, many=True).data)


class VersionDetail(APIView):
    def get(self, request, revision):
        found = service.version(revision)
        if found is None:
            return error_response(404, "not_found", f"There is no revision {revision}.")
        return Response({**VersionSerializer(found).data, "config": found.config})


class VersionRestore(APIView):
    """A new version holding the configuration of `revision`."""

    def post(self, request, revision):
        try:
            saved = service.restore_version(revision, _body(request).get("base_revision"),
                                            origin="api", author=_author(request))
        except core.Invalid as exc:
            return _invalid(exc)
        except service.Stale as exc:
            return _stale(exc)
        return Response({"revision": saved.revision, "created": saved.created})


class VersionDiff(APIView):
    def get(self, request, a, b):
        try:
            changes = service.changes_between(a, b)
        except core.Invalid as exc:
            return error_response(404, "not_found", str(exc), exc.fields)
        return Response({"from": a, "to": b, "changes": [
            {"key": c.key, "before": c.before, "after": c.after, "diff": c.diff}
            for c in changes]})


class Preview(APIView):
    """The assembled system prompt of a role, each part marked with its layer."""

    def get(self, request, role):
        if role not in assembly.ORDER:
            return error_response(404, "not_found", f"Unknown role {role!r}.",
                                  {"role": "main or worker"})
        result, revision = service.preview(role)
        return Response({"role": role, "revision": revision, "text": result.text,
                         "prefix_hash": result.prefix_hash, "parts": [
                             {"key": p.key, "title": p.title, "layer": p.layer,
                              "layer_name": p.layer_name, "source": p.source, "text": p.text}
                             for p in result.parts]})
