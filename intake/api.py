"""The `sources/` REST resource: sources, their health, web chat messages, test events."""

from __future__ import annotations

import json
import time
import uuid

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from amux_common.api import Conflict, error_response
from amux_common.bounds import json_bounds, not_blank
from amux_common.fields import BodylessDestroy, JsonTyped, no_body
from intake import limits, source_actions
from intake.health_view import health
from intake.models import OutgoingMessage, Source, SourceKind, Trigger
from intake.outcome import describe
from intake.receive import post_chat_message, receive
from intake.sources import KINDS
from intake.sources.github import sign as github_sign
from intake.sources.lark import encrypt as lark_encrypt
from intake.sources.lark import signature as lark_signature


def webhook_url(request, source: Source) -> str | None:
    if not KINDS[source.kind].has_webhook:
        return None
    return request.build_absolute_uri(f"/hooks/{source.kind}/{source.slug}")


# --- sources/ -------------------------------------------------------------------------------


class SourceSerializer(JsonTyped, serializers.ModelSerializer):
    kind = serializers.ChoiceField(choices=SourceKind.choices)
    config = serializers.DictField(required=False, help_text="the kind's settings",
                                   validators=json_bounds(limits.CONFIG_KEYS,
                                                          limits.CONFIG_BYTES))
    secrets = serializers.DictField(
        required=False, validators=json_bounds(limits.SECRET_KEYS, limits.SECRETS_BYTES),
        help_text="write: values to set (empty or null clears one); "
        "read: which of the kind's secrets are set")
    health = serializers.SerializerMethodField()
    webhook_url = serializers.SerializerMethodField()

    class Meta:
        model = Source
        fields = ["kind", "slug", "name", "enabled", "config", "secrets", "health",
                  "webhook_url", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]
        # the slug's freedom and the name's presence are the writer's to say, with every
        # other fault at once, as the panel says them (intake/source_actions.py)
        extra_kwargs = {"slug": {"validators": []}, "name": {"allow_blank": True}}

    def get_health(self, obj) -> dict:
        return health(obj)

    def get_webhook_url(self, obj) -> str | None:
        request = self.context.get("request")
        return webhook_url(request, obj) if request else None

    def to_representation(self, obj):
        data = super().to_representation(obj)
        declared = [f.name for f in KINDS[obj.kind].secret_fields]
        data["secrets"] = {key: bool((obj.secrets or {}).get(key)) for key in declared}
        return data

    def create(self, validated):
        return _saved(None, validated, partial=False)

    def update(self, instance, validated):
        return _saved(instance, validated, partial=self.partial)


def _saved(source: Source | None, validated: dict, *, partial: bool) -> Source:
    """The serializer checked the shapes; intake.source_actions checks and writes the rest."""
    try:
        return source_actions.save(source, **validated, merge_config=partial)
    except source_actions.SourceRefused as refused:
        raise serializers.ValidationError(
            {field: [message] for field, message in refused.fields.items()}) from None


class ChatMessageSerializer(JsonTyped, serializers.Serializer):
    text = serializers.CharField(max_length=limits.CHAT_TEXT, trim_whitespace=False,
                                 validators=[not_blank])
    thread = serializers.RegexField(rf"^[A-Za-z0-9_.:-]{{1,{limits.CHAT_THREAD}}}$",
                                    max_length=limits.CHAT_THREAD, required=False)
    id = serializers.RegexField(rf"^[A-Za-z0-9_.:-]{{1,{limits.CHAT_ID}}}$",
                                max_length=limits.CHAT_ID, required=False)



class ChatAcceptedSerializer(serializers.Serializer):
    """A posted message taken like a delivery (intake.receive.accept)."""

    delivery = serializers.CharField(help_text="the message id")
    trigger = serializers.IntegerField(allow_null=True,
                                       help_text="null while processing waits for the sweep")
    outcome = serializers.CharField(help_text="admitted, ignored, queued, …")
    reason = serializers.CharField(allow_null=True, help_text="content-free reason")


class ChatDuplicateSerializer(serializers.Serializer):
    duplicate = serializers.BooleanField(help_text="always true: this id was taken before")
    delivery = serializers.CharField()


class ChatOutcomeSerializer(serializers.Serializer):
    admitted = serializers.BooleanField()
    text = serializers.CharField()


class ChatLineSerializer(serializers.Serializer):
    id = serializers.CharField(allow_blank=True)
    thread = serializers.CharField(allow_blank=True)
    author = serializers.CharField(allow_blank=True)
    text = serializers.CharField(allow_blank=True)
    outgoing = serializers.BooleanField()
    at = serializers.DateTimeField()
    outcome = ChatOutcomeSerializer(required=False, allow_null=True,
                                    help_text="incoming only; null while undecided")


class ChatLogSerializer(serializers.Serializer):
    thread = serializers.CharField(allow_blank=True, help_text="empty: every thread")
    results = ChatLineSerializer(many=True)


class TestEventSerializer(serializers.Serializer):
    status = serializers.IntegerField(help_text="what the source's endpoint answered")
    response = serializers.JSONField(help_text="the endpoint's answer body")


class SourceViewSet(
    BodylessDestroy,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Sources of events: GitHub, Lark, web chat. Secrets are write-only."""

    queryset = Source.objects.all()
    serializer_class = SourceSerializer
    lookup_field = "slug"

    def perform_destroy(self, instance):
        try:
            source_actions.delete(instance)
        except source_actions.SourceInUse as exc:
            raise Conflict(str(exc)) from None

    @extend_schema(request=ChatMessageSerializer,
                   responses={202: ChatAcceptedSerializer, 200: ChatDuplicateSerializer})
    @action(detail=True, methods=["post"], serializer_class=ChatMessageSerializer)
    def messages(self, request, slug=None):
        """Post a message to a web chat source; it becomes a trigger like any other."""
        source = self.get_object()
        if source.kind != "webchat":
            return error_response(400, "invalid", "only web chat sources take messages",
                                  {"kind": ["is not webchat"]})
        if not source.enabled:
            return error_response(409, "conflict", "this source is disabled")
        ser = ChatMessageSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        code, body = post_chat_message(
            source, author=request.user.get_username(), text=ser.validated_data["text"],
            thread=ser.validated_data.get("thread", ""),
            message_id=ser.validated_data.get("id", ""),
        )
        return Response(body, status=code)

    @messages.mapping.get
    @extend_schema(parameters=[OpenApiParameter(
        "thread", {"type": "string", "maxLength": limits.CHAT_THREAD}, required=False)],
        responses=ChatLogSerializer)
    def list_messages(self, request, slug=None):
        source = self.get_object()
        thread = request.query_params.get("thread", "")
        if len(thread) > limits.CHAT_THREAD:
            raise serializers.ValidationError({"thread": [
                f"Ensure this field has no more than {limits.CHAT_THREAD} characters."]})
        return Response({"thread": thread, "results": chat_messages(source, thread)})

    @extend_schema(request=None, responses=TestEventSerializer)
    @action(detail=True, methods=["post"], url_path="test")
    @no_body
    def test_event(self, request, slug=None):
        """Send a test event signed with the source's own secrets through its endpoint."""
        source = self.get_object()
        code, body = send_test_event(source)
        return Response({"status": code, "response": body}, status=status.HTTP_200_OK)


def chat_messages(source: Source, thread: str, limit: int = 200) -> list[dict]:
    incoming = Trigger.objects.filter(source=source)
    outgoing = OutgoingMessage.objects.filter(source=source)
    if thread:
        incoming = incoming.filter(thread__key=thread)
        outgoing = outgoing.filter(thread_key=thread)
    rows = [
        {"id": t.external_id, "thread": t.thread.key, "author": t.actor, "text": t.text,
         "outgoing": False, "at": t.created_at.isoformat(),
         "outcome": _outcome(t)}
        for t in incoming.select_related("thread").order_by("-id")[:limit]
    ] + [
        {"id": m.message_id, "thread": m.thread_key, "author": "amux", "text": m.text,
         "outgoing": True, "at": m.created_at.isoformat()}
        for m in outgoing.order_by("-id")[:limit]
    ]
    return sorted(rows, key=lambda r: r["at"])[-limit:]


def _outcome(trigger: Trigger) -> dict | None:
    """Admitted or ignored, in words; None while it waits to be decided."""
    said = describe(trigger.decision, trigger.reason, trigger.disposition)
    return {"admitted": said.admitted, "text": said.text} if said else None


def send_test_event(source: Source) -> tuple[int, dict]:
    """A harmless event signed exactly as the platform would sign it: GitHub `ping`, Lark
    `url_verification`, web chat nothing to verify."""
    secrets = source.secrets or {}
    if source.kind == "github":
        body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 0}).encode()
        headers = {"X-GitHub-Event": "ping", "X-GitHub-Delivery": str(uuid.uuid4()),
                   "Content-Type": "application/json",
                   "X-Hub-Signature-256": github_sign(secrets.get("webhook_secret", ""), body)}
        return receive("github", source.slug, headers, body)
    if source.kind == "lark":
        inner = json.dumps({"challenge": "amux-test", "type": "url_verification",
                            "token": secrets.get("verification_token", "")})
        headers = {"Content-Type": "application/json"}
        key = secrets.get("encrypt_key")
        body = json.dumps({"encrypt": lark_encrypt(key, inner)}).encode() if key else inner.encode()
        if key:
            ts, nonce = str(int(time.time())), uuid.uuid4().hex
            headers.update({"X-Lark-Request-Timestamp": ts, "X-Lark-Request-Nonce": nonce,
                            "X-Lark-Signature": lark_signature(ts, nonce, key, body)})
        return receive("lark", source.slug, headers, body)
    return 200, {"ok": True, "note": "web chat has nothing to verify"}


def source_form_fields(kind: str) -> list[dict]:
    """The generated settings form of a kind: config fields, then secret fields."""
    plug = KINDS[kind]
    return [dict(f.__dict__, secret=False) for f in plug.fields] + [
        dict(f.__dict__, secret=True) for f in plug.secret_fields
    ]



