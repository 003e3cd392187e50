"""REST: ``attachable-sessions/`` — the host-local broker of Codex app-servers
(sessions/app_servers.py). ``GET`` lists them, each checked live now, with its threads;
``POST`` starts one (``provider``, ``model``, ``workspace``) or registers a running one
(``url``, ``token``); ``GET``/``DELETE`` ``<id>/`` describes or stops one. Answers never
carry a token, URL, pid or local path."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.api import error_response
from amux_common.fields import JsonTyped, no_body
from sessions import app_servers, limits, services
from sessions.models import AppServer


def _refused(exc: services.CommandError) -> Response:
    fields = exc.fields
    return error_response(exc.status, exc.code, str(exc), fields)


# a name of its own: tickets' Thread is another shape, and one name for both made the
# document describe one with the other's fields
@extend_schema_serializer(component_name="AppServerThread")
class ThreadSerializer(serializers.Serializer):
    id = serializers.CharField()
    workspace = serializers.CharField(help_text="an opaque reference, not a path")
    model = serializers.CharField()
    updated_at = serializers.IntegerField(allow_null=True)
    loaded = serializers.BooleanField()
    attached = serializers.DictField(allow_null=True, child=serializers.CharField())


class DescriptorSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    host_kind = serializers.CharField()
    origin = serializers.ChoiceField(choices=["spawned", "registered"])
    live = serializers.BooleanField()
    state = serializers.ChoiceField(choices=["live", "lost", "stopped"])
    goal = serializers.CharField(allow_null=True)
    agent = serializers.CharField(allow_null=True)
    workspace = serializers.CharField()
    provider = serializers.CharField(allow_null=True)
    model = serializers.CharField()
    capabilities = serializers.ListField(child=serializers.CharField())
    checked_at = serializers.DateTimeField(allow_null=True)
    last_live_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    threads = ThreadSerializer(many=True)


class AppServerWrite(JsonTyped, serializers.Serializer):
    # start one (provider and model) or register one (url), never both
    openapi_request_rules = {"oneOf": [
        {"required": ["provider", "model"], "not": {"required": ["url"]}},
        {"required": ["url"], "not": {"required": ["provider"]}}]}

    provider = serializers.SlugField(required=False, max_length=limits.SLUG,
                                     help_text="start one: its provider")
    model = serializers.CharField(required=False, max_length=limits.MODEL)
    workspace = serializers.CharField(required=False, max_length=limits.APP_SERVER_WORKSPACE,
                                      help_text="absolute work directory (default: new)")
    url = serializers.RegexField(r"^wss?://", required=False,
                                 max_length=limits.APP_SERVER_URL,
                                 error_messages={"invalid": "must be a ws:// or wss:// address"},
                                 help_text="register a running one: ws://host:port")
    token = serializers.CharField(required=False, max_length=limits.APP_SERVER_TOKEN,
                                  write_only=True)
    name = serializers.CharField(required=False, allow_blank=True,
                                 max_length=limits.APP_SERVER_NAME)
    goal = serializers.SlugField(required=False, max_length=limits.SLUG)
    agent = serializers.SlugField(required=False, max_length=limits.SLUG)

    def validate(self, attrs):
        if bool(attrs.get("url")) == bool(attrs.get("provider")):
            raise serializers.ValidationError(
                {"provider": ["give provider and model to start one, or url to register "
                              "a running one (not both)"]})
        if attrs.get("provider") and not attrs.get("model"):
            raise serializers.ValidationError({"model": ["model is required"]})
        return attrs


class AttachableList(generics.ListAPIView):
    queryset = AppServer.objects.select_related("provider").exclude(state="stopped")
    serializer_class = DescriptorSerializer

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response([app_servers.describe(row) for row in page])

    @extend_schema(request=AppServerWrite, responses={201: DescriptorSerializer})
    def post(self, request):
        body = AppServerWrite(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        labels = {k: data.get(k, "") for k in ("name", "goal", "agent", "workspace")}
        try:
            if data.get("url"):
                row = app_servers.register(url=data["url"], token=data.get("token", ""),
                                           **labels)
            else:
                row = app_servers.spawn(provider=data["provider"], model=data["model"],
                                        **labels)
        except services.CommandError as exc:
            return _refused(exc)
        return Response(app_servers.describe(row), status=status.HTTP_201_CREATED)


def _row(ref: str) -> AppServer:
    row = app_servers.get(ref)
    if row is None:
        raise NotFound(f"unknown attachable session {ref!r}")
    return row


class AttachableDetail(APIView):
    @extend_schema(responses=DescriptorSerializer)
    def get(self, request, ref: str):
        return Response(app_servers.describe(_row(ref)))

    @extend_schema(responses={200: DescriptorSerializer})
    @no_body
    def delete(self, request, ref: str):
        """Stop one amux started (its process ends) or forget a registered one; refused
        while an agent is attached to it."""
        try:
            row = app_servers.stop(_row(ref))
        except services.CommandError as exc:
            return _refused(exc)
        return Response(app_servers.descriptor(row, None))
