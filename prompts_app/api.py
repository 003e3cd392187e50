"""REST: `prompts/` (fragments) and `prompts/versions/` (CONTRACT.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.api import error_response
from amux_common.fields import UNKNOWN, bound_errors
from amux_common.pagination import paginate
from amux_common.schema import PageQuery, page_of
from prompts_app import assembly, core, limits, service
from prompts_app.models import PromptVersion


def _invalid(exc: core.Invalid):
    """The API's one shape: each faulty field with a list of messages."""
    return error_response(400, "invalid", str(exc), {
        name: problem if isinstance(problem, list) else [problem]
        for name, problem in exc.fields.items()})


def _stale(exc: service.Stale, key: str | None = None):
    response = error_response(
        409, "conflict",
        f"Revision {exc.latest} was saved after your base revision {exc.base}; nothing was "
        "written. Review what changed and save again with the new base_revision.",
        {"base_revision": f"Stale: the latest revision is {exc.latest}."},
    )
    response.data["revision"] = exc.latest
    response.data["changes"] = [{"key": c.key, "diff": c.diff}
                                for c in service.changes_between(exc.base, exc.latest)]
    if key is not None:
        response.data["fragment"] = service.fragment(key)
    return response


def _body(request, serializer: type[serializers.Serializer], key: str | None = None) -> dict:
    """The JSON object, holding only the fields ``serializer`` documents, each of them
    well formed (and ``key`` editable when the body writes a text): every fault is named
    at once, before the service checks the revision against the stored ones."""
    if not isinstance(request.data, dict):
        raise core.Invalid({"body": "Expected a JSON object."})
    data = request.data
    fields = serializer().fields
    faults: dict = {str(k): UNKNOWN for k in data if k not in fields}
    kind = None
    if key is not None:
        kind = _collect(faults, core.check_editable, key)
    _collect(faults, service.base_of, data.get("base_revision"))
    if "text" in fields:
        if "text" not in data:
            faults["text"] = "The text is required."
        elif kind is not None:
            _collect(faults, core.clean_text, key, kind, data["text"])
    faults.update(bound_errors(serializer, data))
    if faults:
        raise core.Invalid(faults)
    return data


def _collect(faults: dict, check, *args):
    try:
        return check(*args)
    except core.Invalid as exc:
        faults.update(exc.fields)
        return None


def _author(request) -> str:
    return getattr(request.user, "username", "") or ""


class FragmentSerializer(serializers.Serializer):
    key = serializers.CharField()
    kind = serializers.ChoiceField(["builtin", "team", "skill", "fixed"])
    category = serializers.CharField(help_text="builtin, team, skill, or tools/notice/card/"
                                               "contract for texts in code")
    title = serializers.CharField()
    help = serializers.CharField()
    roles = serializers.ListField(child=serializers.CharField())
    required = serializers.BooleanField()
    editable = serializers.BooleanField()
    state = serializers.ChoiceField(["default", "overridden", "default_updated"])
    text = serializers.CharField(help_text="the text in effect")
    default_text = serializers.CharField()
    default_hash = serializers.CharField(allow_null=True)
    base_hash = serializers.CharField(allow_null=True, help_text="the built-in's hash the "
                                      "override was written against")
    base_text = serializers.CharField(allow_null=True, help_text="that built-in's text, when "
                                      "state is default_updated")
    revision = serializers.IntegerField(help_text="the configuration revision read")


class WriteSerializer(serializers.Serializer):
    base_revision = serializers.IntegerField(min_value=0, max_value=limits.REVISION_MAX)
    text = serializers.CharField(max_length=limits.TEXT)


class BaseSerializer(serializers.Serializer):
    base_revision = serializers.IntegerField(min_value=0, max_value=limits.REVISION_MAX)


class FragmentList(APIView):
    """Every fragment: team sections, skills, built-ins (editable) and texts in code."""

    @extend_schema(operation_id="prompts_list", responses=inline_serializer("FragmentPage", {
        "count": serializers.IntegerField(), "next": serializers.CharField(allow_null=True),
        "previous": serializers.CharField(allow_null=True),
        "revision": serializers.IntegerField(), "results": FragmentSerializer(many=True)}))
    def get(self, request):
        results = service.fragments()
        return Response({"count": len(results), "next": None, "previous": None,
                         "revision": service.latest_revision(), "results": results})


class FragmentDetail(APIView):
    """One fragment; `PUT {"base_revision", "text"}` saves a new revision."""

    @extend_schema(responses=FragmentSerializer)
    def get(self, request, key):
        try:
            found = service.fragment(key)
        except core.Invalid as exc:
            return error_response(404, "not_found", str(exc), exc.fields)
        if found["kind"] == "skill" and found["state"] == "default":
            return error_response(404, "not_found", f"There is no skill {key[6:]!r}.")
        return Response(found)

    @extend_schema(request=WriteSerializer, responses=FragmentSerializer)
    def put(self, request, key):
        try:
            body = _body(request, WriteSerializer, key)
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

    @extend_schema(request=BaseSerializer, responses=FragmentSerializer)
    def post(self, request, key):
        do = service.restore if self.action == "restore" else service.keep_mine
        try:
            base = _body(request, BaseSerializer).get("base_revision")
            do(key, base, origin="api", author=_author(request))
        except core.Invalid as exc:
            return _invalid(exc)
        except service.Stale as exc:
            return _stale(exc, key)
        return Response(service.fragment(key))


class PromptVersionSerializer(serializers.ModelSerializer):
    predecessor = serializers.SerializerMethodField()

    class Meta:
        model = PromptVersion
        fields = ["revision", "predecessor", "at", "origin", "author", "summary"]

    def get_predecessor(self, obj) -> int | None:
        return obj.predecessor.revision if obj.predecessor_id else None


class PromptVersionDetailSerializer(PromptVersionSerializer):
    config = serializers.JSONField(help_text="the whole configuration of this revision")

    class Meta(PromptVersionSerializer.Meta):
        fields = [*PromptVersionSerializer.Meta.fields, "config"]


class VersionList(APIView):
    @extend_schema(responses=page_of("PromptVersionPage", PromptVersionSerializer(many=True)),
                   parameters=[PageQuery])
    def get(self, request):
        queryset = PromptVersion.objects.select_related("predecessor").order_by("-revision")
        return paginate(request, self, queryset,
                        lambda page: PromptVersionSerializer(page, many=True).data)


class VersionDetail(APIView):
    @extend_schema(responses=PromptVersionDetailSerializer)
    def get(self, request, revision):
        found = service.version(revision)
        if found is None:
            return error_response(404, "not_found", f"There is no revision {revision}.")
        return Response({**PromptVersionSerializer(found).data, "config": found.config})


class VersionRestore(APIView):
    """A new version holding the configuration of `revision`."""

    @extend_schema(request=BaseSerializer, responses=inline_serializer("Restored", {
        "revision": serializers.IntegerField(), "created": serializers.BooleanField()}))
    def post(self, request, revision):
        try:
            base = _body(request, BaseSerializer).get("base_revision")
            saved = service.restore_version(revision, base, origin="api",
                                            author=_author(request))
        except core.Invalid as exc:
            return _invalid(exc)
        except service.Stale as exc:
            return _stale(exc)
        return Response({"revision": saved.revision, "created": saved.created})


class VersionDiff(APIView):
    @extend_schema(responses=inline_serializer("VersionDiff", {
        "from": serializers.IntegerField(), "to": serializers.IntegerField(),
        "changes": serializers.ListField(child=serializers.DictField())}))
    def get(self, request, a, b):
        try:
            changes = service.changes_between(a, b)
        except core.Invalid as exc:
            return error_response(404, "not_found", str(exc), exc.fields)
        return Response({"from": a, "to": b, "changes": [
            {"key": c.key, "before": c.before, "after": c.after, "diff": c.diff}
            for c in changes]})


class Preview(APIView):
    """The assembled system prompt of a role, each part marked with its layer;
    `?revision=N` shows it as of an older version (what a turn worked under)."""

    @extend_schema(responses=inline_serializer("PromptPreview", {
        "role": serializers.CharField(), "revision": serializers.IntegerField(),
        "text": serializers.CharField(), "prefix_hash": serializers.CharField(),
        "parts": serializers.ListField(child=serializers.DictField())}))
    def get(self, request, role):
        if role not in assembly.ORDER:
            return error_response(404, "not_found", f"Unknown role {role!r}.",
                                  {"role": "main or worker"})
        wanted = request.query_params.get("revision")
        if wanted is not None:
            if not wanted.isdigit() or (int(wanted) and service.version(int(wanted)) is None):
                return error_response(404, "not_found", f"There is no revision {wanted}.",
                                      {"revision": "an existing revision"})
            wanted = int(wanted)
        result, revision = service.preview(role, revision=wanted)
        return Response({"role": role, "revision": revision, "text": result.text,
                         "prefix_hash": result.prefix_hash, "parts": [
                             {"key": p.key, "title": p.title, "layer": p.layer,
                              "layer_name": p.layer_name, "source": p.source, "text": p.text}
                             for p in result.parts]})
