"""REST: ``providers/``, ``runtimes/``, ``sessions/`` (CONTRACT.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.api import error_response
from amux_common.bounds import json_bounds, not_blank, one_line
from amux_common.fields import JsonTyped, no_body
from amux_common.schema import page_of
from amux_common.secrets import set_keys
from runtimes import catalog, registered
from runtimes import watchdog as watchdogs
from sessions import (
    capabilities,
    capacity,
    content,
    limits,
    model_catalog,
    native_goal_commands,
    native_goals,
    ownership,
    provider_actions,
    provider_templates,
    services,
    timeline,
    workdirs,
)
from sessions.models import ProviderProbe, ProviderProfile, Session
from sessions.new_session import Launch, Prompting, SessionSpec


def _refused(exc: services.CommandError) -> Response:
    fields = exc.fields
    return error_response(exc.status, exc.code, str(exc), fields)


# ------------------------------------------------------------------------- providers
@extend_schema_field({"type": "string", "format": "uri", "pattern": "^https?://[a-z0-9]",
                      "maxLength": limits.BASE_URL})
class BaseUrl(serializers.URLField):
    """An explicit http(s) URL (a host name is at most 253 characters, so a longer URL
    cannot be valid)."""


# a name says something (runtimes.catalog strips it, then refuses an empty one)
_MODEL_NAME = {"type": "string", "minLength": 1, "maxLength": catalog.MAX_NAME,
               **not_blank.openapi}


@extend_schema_field({"type": "array", "items": {"oneOf": [
    _MODEL_NAME,
    {"type": "object", "required": ["name"], "additionalProperties": False, "properties": {
        "name": _MODEL_NAME,
        "display_name": {"type": ["string", "null"], "maxLength": catalog.MAX_NAME},
        "efforts": {"type": ["array", "null"], "maxItems": catalog.MAX_EFFORTS, "items": {
            "type": "string", "minLength": 1, "maxLength": catalog.MAX_EFFORT,
            **not_blank.openapi}}}}]}, "maxItems": catalog.MAX_MODELS})
class ProviderModels(serializers.JSONField):
    """The provider's model list: names, or ``{"name", "display_name"?, "efforts"?}``."""

    def to_internal_value(self, data):
        clean, problem = catalog.check_provider_models(data)
        if problem:
            raise ValidationError(problem)
        return clean


@extend_schema_field({"type": "object", "additionalProperties": False, "properties": {
    name: {"type": ["integer", "null"], "maximum": maximum, "minimum": watchdogs.MIN_LIMIT}
    for name, (_default, maximum) in watchdogs.LIMITS.items()}})
class WatchdogLimits(serializers.JSONField):
    """Watchdog limits (0 disables, negative means the default, null or absent: the next
    layer decides)."""

    def to_internal_value(self, data):
        clean, problems = watchdogs.check_limits(data)
        if problems:
            raise ValidationError(problems)
        return {k: v for k, v in clean.items() if v is not None}


class ProviderSerializer(JsonTyped, serializers.ModelSerializer):
    api_key = serializers.CharField(write_only=True, required=False, allow_blank=True,
                                    trim_whitespace=False, max_length=limits.API_KEY)
    models = ProviderModels(source="model_names", required=False)
    watchdog = WatchdogLimits(required=False)
    secrets = serializers.SerializerMethodField()
    base_url = BaseUrl(max_length=limits.BASE_URL)

    class Meta:
        model = ProviderProfile
        fields = ["slug", "platform", "base_url", "api_key", "models", "watchdog", "secrets",
                  "template", "capabilities", "created_at"]
        read_only_fields = ["created_at"]
        # the slug's freedom is the writer's to say, with every other fault at once, as the
        # panel says it (sessions/provider_actions.py)
        extra_kwargs = {"slug": {"validators": []}}

    template = serializers.SerializerMethodField(
        help_text="the template whose route this is (provider-templates/), or null")

    capabilities = serializers.SerializerMethodField(
        help_text="the latest probe (providers/<slug>/probe): {revision, probed_at, ok, "
                  "models}, or null if never probed")

    @extend_schema_field({"type": ["object", "null"], "properties": {
        "revision": {"type": "integer"}, "probed_at": {"type": "string", "format": "date-time"},
        "ok": {"type": "boolean"}, "models": {"type": "array", "items": {"type": "string"}}}})
    def get_capabilities(self, obj: ProviderProfile) -> dict[str, Any] | None:
        return capabilities.summary(capabilities.latest(obj))

    def get_secrets(self, obj: ProviderProfile) -> dict[str, bool]:
        return set_keys(obj.secrets)

    def get_template(self, obj: ProviderProfile) -> str | None:
        found = provider_templates.of(obj.platform, obj.base_url)
        return found.id if found else None

    def validate_api_key(self, value: str) -> str:
        return value.strip()

    def validate_base_url(self, value: str) -> str:
        return value.rstrip("/")

    def create(self, validated: dict[str, Any]) -> ProviderProfile:
        return _provider_saved(None, validated)

    def update(self, instance: ProviderProfile, validated: dict[str, Any]) -> ProviderProfile:
        return _provider_saved(instance, validated)


def _provider_saved(provider: ProviderProfile | None, validated: dict) -> ProviderProfile:
    """The serializer checked the shapes; sessions.provider_actions checks and writes the
    rest (the slug's freedom, the route's key, every fault at once, as the panel says
    them)."""
    if "model_names" in validated:
        validated["models"] = validated.pop("model_names")
    if validated.get("api_key") == "":  # an empty key removes the stored one
        validated["clear_key"] = True
    try:
        return provider_actions.save(provider, **validated)
    except provider_actions.ProviderRefused as refused:
        raise ValidationError(
            {field: [message] for field, message in refused.fields.items()}) from None


class ProviderTemplateSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    platform = serializers.CharField()
    base_url = serializers.CharField()
    key_field = serializers.CharField()
    own_models = serializers.BooleanField()
    models = serializers.ListField(child=serializers.CharField())
    note = serializers.CharField()


class ProviderTemplateList(generics.ListAPIView):
    """Presets a provider profile starts from: POST its ``platform`` and ``base_url`` (with
    your ``slug``, ``api_key`` and the plan's ``models``) to ``providers/``."""

    serializer_class = ProviderTemplateSerializer

    def get_queryset(self):
        return [t.preset() for t in provider_templates.TEMPLATES.values()]


class ProviderList(generics.ListCreateAPIView):
    queryset = ProviderProfile.objects.all()
    serializer_class = ProviderSerializer


class ProviderDetail(generics.RetrieveUpdateDestroyAPIView):
    queryset = ProviderProfile.objects.all()
    serializer_class = ProviderSerializer
    lookup_field = "slug"

    @no_body
    def destroy(self, request, *args, **kwargs):
        try:
            provider_actions.delete(self.get_object())
        except provider_actions.ProviderInUse as exc:
            return error_response(409, "in_use", str(exc))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProbeSnapshot(serializers.Serializer):
    provider = serializers.CharField()
    revision = serializers.IntegerField()
    probed_at = serializers.DateTimeField()
    platform = serializers.CharField()
    base_url = serializers.CharField()
    ok = serializers.BooleanField()
    outcome = serializers.ChoiceField(choices=[c for c, _ in ProviderProbe.OUTCOMES])
    status_code = serializers.IntegerField(allow_null=True)
    models = serializers.ListField(child=serializers.DictField(), help_text=(
        "[{id, context_window?, max_output_tokens?, input_modalities?, output_modalities?, "
        "tool_calls?, conflicts?}]: a field is present only when the route advertises it"))
    digest = serializers.CharField()
    detail = serializers.CharField(help_text="redacted health detail")


class ProviderProbeView(APIView):
    """Probe the provider's route now (``GET …/models`` from provider_routes, with its key,
    every page of an Anthropic list) and store the answer as its next capability revision.
    A failed probe is a snapshot too (``ok`` false, ``outcome`` says why). Discovery never
    changes the provider's ``models``."""

    @extend_schema(request=None, responses={201: ProbeSnapshot})
    @no_body
    def post(self, request, slug: str):
        provider = get_object_or_404(ProviderProfile, slug=slug)
        row = capabilities.probe(provider)
        return Response(capabilities.snapshot(row, provider), status=status.HTTP_201_CREATED)


class ProviderCapabilitiesView(APIView):
    """The provider's latest capability snapshot (404 ``not_probed`` if never probed)."""

    @extend_schema(responses={200: ProbeSnapshot})
    def get(self, request, slug: str):
        provider = get_object_or_404(ProviderProfile, slug=slug)
        row = capabilities.latest(provider)
        if row is None:
            return error_response(404, "not_probed",
                                  f"provider {slug!r} has not been probed yet: POST "
                                  f"providers/{slug}/probe")
        return Response(capabilities.snapshot(row, provider))


# ------------------------------------------------------------------------- runtimes
def runtime_info(name: str, cls: Any) -> dict[str, Any]:
    probe = cls.probe(Path(settings.AMUX_RUNTIMES_DIR))
    return {"name": name, "installed": probe.installed, "version": probe.version,
            "error": probe.error, "platforms": sorted(cls.platforms),
            "capabilities": {**cls.static_capabilities().as_dict(),
                             **cls.launch_capabilities()}}


class RuntimeSerializer(serializers.Serializer):
    name = serializers.CharField()
    installed = serializers.BooleanField()
    version = serializers.CharField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    platforms = serializers.ListField(child=serializers.CharField())
    capabilities = serializers.DictField()


class RuntimeList(APIView):
    @extend_schema(operation_id="runtimes_list", responses=page_of("RuntimePage",
                                                                   RuntimeSerializer(many=True)))
    def get(self, request):
        items = [runtime_info(n, c) for n, c in sorted(registered().items())]
        return Response({"count": len(items), "next": None, "previous": None,
                         "results": items})


class RuntimeDetail(APIView):
    @extend_schema(responses=RuntimeSerializer)
    def get(self, request, name: str):
        cls = registered().get(name)
        if cls is None:
            raise NotFound(f"unknown runtime {name!r}")
        return Response(runtime_info(name, cls))


# ------------------------------------------------------------------------- sessions
class SessionSerializer(serializers.ModelSerializer):
    provider = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pending = serializers.SerializerMethodField()
    turns = serializers.SerializerMethodField()
    goal = serializers.SerializerMethodField()
    waiting_for_capacity = serializers.SerializerMethodField(
        help_text="input waits and every runtime slot is held by another awake session; "
                  "it starts when one frees")
    model_display_name = serializers.CharField(
        read_only=True,
        help_text="the model's display name in its provider's catalog (the ref otherwise)")

    class Meta:
        model = Session
        fields = ["id", "name", "runtime", "provider", "model", "lifecycle", "sleep_reason",
                  "workdir", "usage", "native_ref", "idle_timeout_s", "snapshot",
                  "runtime_facts", "turns", "goal",
                  "pending", "waiting_for_capacity", "lease_host", "lease_expires_at",
                  "created_at", "updated_at", "model_display_name"]

    def get_goal(self, obj: Session) -> dict[str, Any] | None:
        """The native goal (None: none, or the runtime has no goals)."""
        return native_goals.state(obj.pk) if native_goals.supported(obj) else None

    def get_waiting_for_capacity(self, obj: Session) -> bool:
        return obj.pk in capacity.waiting_for_capacity([obj.pk])

    def get_pending(self, obj: Session) -> list[dict[str, Any]]:
        if self.context.get("list"):
            return []
        return [{"request_id": rid, **v} for rid, v in
                timeline.pending_requests(obj.pk).items()]

    def get_turns(self, obj: Session) -> dict[str, int]:
        counts: dict[str, int] = {}
        for state in obj.turns.values_list("state", flat=True):
            counts[state] = counts.get(state, 0) + 1
        return counts


@extend_schema_field({"type": "string", "enum": sorted(registered())})
class RuntimeName(serializers.CharField):
    """A registered runtime; an unknown one is refused by the service (`unknown_runtime`)."""


class CreateSession(JsonTyped, serializers.Serializer):
    # a runtime and a model, given or named by a preset
    openapi_request_rules = {"allOf": [
        {"anyOf": [{"required": [name]}, {"required": ["preset"]}]}
        for name in ("runtime", "model")]}

    runtime = RuntimeName(required=False, help_text="required unless a preset names it")
    provider = serializers.CharField(required=False, max_length=limits.SLUG,
                                     help_text="default: the preset's binding, or the only "
                                               "provider the runtime can use")
    model = serializers.CharField(required=False, max_length=limits.MODEL,
                                  help_text="required unless a preset names it")
    workdir = serializers.CharField(
        required=False, max_length=limits.WORKDIR,
        help_text="a directory under the data directory's work/ (default: a new one)")
    name = serializers.CharField(required=False, allow_blank=True, default="",
                                 max_length=limits.SESSION_NAME)
    permission_mode = serializers.ChoiceField(
        ["bypass", "ask"], required=False, allow_null=True, default=None,
        help_text="omitted: the preset's, else the runtime's native bypass")
    preset = serializers.CharField(required=False, max_length=limits.SLUG,
                                   help_text="a launch preset (shortcut)")
    profile = serializers.CharField(required=False, max_length=limits.SLUG,
                                    help_text="the expert (Agent Profile)")
    extra_args = serializers.ListField(
        child=serializers.CharField(trim_whitespace=False, max_length=limits.ARG,
                                    validators=[one_line]),
        required=False, max_length=limits.ARGS, help_text="native arguments")
    effort = serializers.CharField(required=False, allow_null=True, default=None,
                                   max_length=catalog.MAX_EFFORT)
    idle_timeout_s = serializers.IntegerField(required=False, min_value=60,
                                              max_value=limits.IDLE_TIMEOUT_MAX_S, default=300)
    # its limits by name, each bounded (an unknown one is refused): the provider's shape
    watchdog = WatchdogLimits(required=False, default=dict)

    def validate_workdir(self, value):
        # here too (the service checks again), so one 400 lists it with the other fields
        problem = workdirs.problem(value)
        if problem is not None:
            raise ValidationError(problem)
        return value


class SessionList(generics.ListAPIView):
    queryset = Session.objects.select_related("provider")
    serializer_class = SessionSerializer

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "list": True}

    @extend_schema(request=CreateSession, responses={201: SessionSerializer})
    def post(self, request):
        data = CreateSession(data=request.data)
        data.is_valid(raise_exception=True)
        given = data.validated_data
        try:
            session = services.create_session(
                Launch.direct(preset=given.get("preset"), runtime=given.get("runtime"),
                              provider=given.get("provider"), model=given.get("model"),
                              effort=given["effort"], permission_mode=given["permission_mode"],
                              extra_args=given.get("extra_args")),
                Prompting(profile=given.get("profile")),
                SessionSpec(name=given["name"], workdir=given.get("workdir"),
                            idle_timeout_s=given["idle_timeout_s"], watchdog=given["watchdog"],
                            scope=ownership.of_caller("direct", request.user)))
        except services.CommandError as exc:
            return _refused(exc)
        return Response(SessionSerializer(session).data, status=status.HTTP_201_CREATED)


class SessionDetail(generics.RetrieveAPIView):
    queryset = Session.objects.select_related("provider")
    serializer_class = SessionSerializer


def _session(pk: int) -> Session:
    return get_object_or_404(Session, pk=pk)


@extend_schema_field({
    "type": "array", "minItems": 1, "maxItems": limits.CONTENT_PARTS,
    "items": {"type": "object", "maxProperties": limits.CONTENT_PART_KEYS,
              "x-max-json-bytes": limits.CONTENT_PART_BYTES, "oneOf": [
                  {"required": ["type", "text"], "properties": {
                      "type": {"type": "string", "enum": ["text"]},
                      "text": {"type": "string", "minLength": 1,
                               "maxLength": content.MAX_TEXT, "pattern": r"\S"}}},
                  {"required": ["type", "mime", "data"], "properties": {
                      "type": {"type": "string", "enum": ["image"]},
                      "mime": {"type": "string", "enum": list(content.MIME_FORMATS)},
                      "data": {"type": "string", "minLength": 1,
                               "maxLength": limits.CONTENT_PART_BYTES,
                               "description": "base64 of an image in the declared format"}}}]},
})
class ContentParts(serializers.ListField):
    """A message's ordered parts, as sessions.content checks them (an image's data must
    decode as the declared format, which only the code can tell)."""


class PostMessage(JsonTyped, serializers.Serializer):
    openapi_request_rules = {"oneOf": [{"required": ["text"]}, {"required": ["content"]}]}

    text = serializers.CharField(max_length=limits.MESSAGE_TEXT, trim_whitespace=False,
                                 required=False, validators=[not_blank])
    content = ContentParts(
        child=serializers.DictField(validators=json_bounds(limits.CONTENT_PART_KEYS,
                                                           limits.CONTENT_PART_BYTES)),
        required=False, min_length=1, max_length=limits.CONTENT_PARTS,
        help_text="ordered parts instead of text: {type: text, text} or "
                  "{type: image, mime, data}")
    key = serializers.CharField(max_length=limits.KEY, required=False, allow_null=True,
                                help_text="idempotency key: the same key posts once")

    def validate(self, attrs):
        if ("text" in attrs) == ("content" in attrs):
            raise ValidationError({"text": ["give either text or content"]})
        return attrs


class MessageAccepted(serializers.Serializer):
    turn = serializers.IntegerField()
    state = serializers.CharField()
    key = serializers.CharField()


class PermissionAnswer(JsonTyped, serializers.Serializer):
    option = serializers.CharField(max_length=limits.PERMISSION_OPTION,
                                   help_text="one of the request's option ids")


class QuestionAnswer(JsonTyped, serializers.Serializer):
    openapi_request_rules = {"oneOf": [
        {"required": ["answers"], "properties": {"cancel": {"enum": [False]}}},
        {"required": ["cancel"], "properties": {"cancel": {"enum": [True]}},
         "not": {"required": ["answers"]}}]}

    answers = serializers.DictField(help_text="question id → answer", required=False,
                                    validators=json_bounds(limits.ANSWERS, limits.ANSWERS_BYTES))
    cancel = serializers.BooleanField(
        required=False, default=False,
        help_text="cancel the question (a Claude AskUserQuestion call: all its questions)")

    def validate(self, data):
        if data.get("cancel") == ("answers" in data):
            raise serializers.ValidationError(
                {"answers": "give either answers or cancel: true"})
        return data


def _accepted(name: str, field: str):
    return {202: inline_serializer(name, {field: serializers.CharField()})}


def _valid(serializer_class, request) -> dict:
    body = serializer_class(data=request.data)
    body.is_valid(raise_exception=True)
    return body.validated_data


GOAL_OUTCOME = inline_serializer("GoalOutcome", {"goal": serializers.DictField(
    help_text="the goal command's outcome: goal, goal_key, command, location, refused?")})


class SessionMessages(APIView):
    @extend_schema(request=PostMessage, responses={202: MessageAccepted, 200: GOAL_OUTCOME})
    def post(self, request, pk: int):
        _session(pk)
        data = _valid(PostMessage, request)
        try:
            turn = services.post_message(pk, data.get("text"), key=data.get("key"),
                                         content=data.get("content"),
                                         origin={"via": "api",
                                                 "actor": request.user.get_username()})
        except services.CommandError as exc:
            return _refused(exc)
        if isinstance(turn, dict):  # a goal command: its outcome, no turn
            return Response({"goal": turn}, status=status.HTTP_200_OK)
        return Response({"turn": turn.seq, "state": turn.state, "key": turn.key},
                        status=status.HTTP_202_ACCEPTED)


class GoalCommandBody(JsonTyped, serializers.Serializer):
    command = serializers.CharField(
        max_length=limits.MESSAGE_TEXT, trim_whitespace=False,
        help_text="a goal command as in chat: `goal <text>`, `goal`, `goal pause`, "
                  "`goal resume`, `goal clear`, `goal set <text>`, `goal budget <tokens>` "
                  "(the leading `goal` may be left out; `status` asks for the status)")


class SessionGoalView(APIView):
    @extend_schema(request=GoalCommandBody, responses={200: GOAL_OUTCOME})
    def post(self, request, pk: int):
        session = _session(pk)
        text = _valid(GoalCommandBody, request)["command"]
        if not native_goals.supported(session):
            return error_response(409, "goal_unsupported",
                                  "this session's runtime has declared no native goals",
                                  {})
        if text.strip() == "status":
            text = native_goal_commands.KEYWORD
        elif not text.startswith(native_goal_commands.KEYWORD):
            text = f"{native_goal_commands.KEYWORD} {text}"
        command = native_goal_commands.parse(text)
        if command is None:
            return error_response(400, "invalid", "not a goal command",
                                  {"command": ["not a goal command"]})
        try:
            outcome = native_goals.run(pk, command, {"via": "api", "actor": request.user.username})
        except native_goals.GoalRefused as exc:
            fields = {"command": [str(exc)]} if exc.status == 400 else {}
            return error_response(exc.status, exc.code, str(exc), fields)
        return Response({"goal": outcome}, status=status.HTTP_200_OK)


class SessionInterrupt(APIView):
    @extend_schema(request=None, responses=_accepted("InterruptRequested", "interrupt"))
    @no_body
    def post(self, request, pk: int):
        _session(pk)
        try:
            services.interrupt(pk)
        except services.CommandError as exc:
            return _refused(exc)
        return Response({"interrupt": "requested"}, status=status.HTTP_202_ACCEPTED)


class SessionPermission(APIView):
    @extend_schema(request=PermissionAnswer,
                   responses=_accepted("PermissionAnswered", "answered"))
    def post(self, request, pk: int, request_id: str):
        _session(pk)
        option = _valid(PermissionAnswer, request)["option"]
        try:
            services.answer_permission(pk, request_id, option)
        except services.CommandError as exc:
            return _refused(exc)
        return Response({"answered": request_id}, status=status.HTTP_202_ACCEPTED)


class SessionQuestion(APIView):
    @extend_schema(request=QuestionAnswer, responses=_accepted("QuestionAnswered", "answered"))
    def post(self, request, pk: int, request_id: str):
        _session(pk)
        answers = _valid(QuestionAnswer, request).get("answers")  # None: cancel
        try:
            services.answer_question(pk, request_id, answers)
        except services.CommandError as exc:
            return _refused(exc)
        return Response({"answered": request_id}, status=status.HTTP_202_ACCEPTED)


class SessionSleep(APIView):
    @extend_schema(request=None, responses=_accepted("SleepRequested", "sleep"))
    @no_body
    def post(self, request, pk: int):
        _session(pk)
        try:
            services.sleep(pk)
        except services.CommandError as exc:
            return _refused(exc)
        return Response({"sleep": "requested"}, status=status.HTTP_202_ACCEPTED)


class SessionArchive(APIView):
    @extend_schema(request=None, responses={200: inline_serializer(
        "Archived", {"lifecycle": serializers.CharField()})})
    @no_body
    def post(self, request, pk: int):
        _session(pk)
        try:
            services.archive(pk)
        except services.CommandError as exc:
            return _refused(exc)
        return Response({"lifecycle": "archived"})


class TimelineEventSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    turn = serializers.IntegerField(allow_null=True)
    type = serializers.CharField(help_text="dotted, e.g. turn.started, message.delta")
    payload = serializers.DictField()
    at = serializers.DateTimeField()


class TimelineQuery(serializers.Serializer):
    after = serializers.IntegerField(min_value=0, max_value=limits.SEQ_MAX, default=0,
                                     help_text="the last sequence number already seen")
    limit = serializers.IntegerField(min_value=1, max_value=limits.TIMELINE_PAGE, default=1000)


class SessionTimeline(APIView):
    @extend_schema(parameters=[TimelineQuery], responses=TimelineEventSerializer(many=True))
    def get(self, request, pk: int):
        _session(pk)
        query = TimelineQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(timeline.events_after(pk, query.validated_data["after"],
                                              query.validated_data["limit"]))


# ------------------------------------------------------------------------- model catalog
class CatalogModel(serializers.Serializer):
    ref = serializers.CharField(help_text="what a session's `model` takes (opaque for "
                                          "@native-variant: references)")
    display_name = serializers.CharField(help_text="the ref when the catalog gives none")
    efforts = serializers.ListField(child=serializers.CharField(),
                                    help_text="reasoning efforts the catalog declares")
    default_effort = serializers.CharField(allow_null=True)
    is_default = serializers.BooleanField()
    description = serializers.CharField(allow_blank=True)


class RuntimeCatalog(serializers.Serializer):
    runtime = serializers.CharField()
    provider = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField([catalog.OK, catalog.NOT_LOGGED_IN, catalog.UNREACHABLE,
                                      catalog.FAILED, catalog.UNSUPPORTED])
    source = serializers.ChoiceField(["native", "provider"])
    message = serializers.CharField(allow_null=True)
    models = CatalogModel(many=True)


class CatalogQuery(serializers.Serializer):
    provider = serializers.SlugField(required=False, max_length=limits.SLUG,
                                     help_text="list this provider's models")


class RuntimeModels(APIView):
    """The models a session of this runtime can pick: the provider's list with
    ``?provider=``, otherwise the runtime's own live list (Codex), or why there is none."""

    @extend_schema(parameters=[CatalogQuery], responses=RuntimeCatalog)
    def get(self, request, name: str):
        # a plain dict: from a query dict DRF reads `?provider=` as not given at all
        params = CatalogQuery(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        try:
            return Response(model_catalog.for_runtime(
                name, params.validated_data.get("provider")))
        except services.CommandError as exc:
            return _refused(exc)
# ------------------------------------------------------------------------- runtime controls
class ModelSwitch(JsonTyped, serializers.Serializer):
    model = serializers.CharField(max_length=limits.MODEL)
    effort = serializers.CharField(max_length=catalog.MAX_EFFORT, required=False, allow_null=True,
                                   help_text="omitted: the session's effort stays; null: "
                                             "the runtime's default")


class SessionModel(APIView):
    @extend_schema(request=ModelSwitch, responses={202: inline_serializer(
        "ModelRequested", {"model": serializers.CharField(),
                           "effort": serializers.CharField(allow_null=True),
                           "request_id": serializers.CharField()})})
    def post(self, request, pk: int):
        _session(pk)
        data = _valid(ModelSwitch, request)
        try:
            request_id = services.set_model(pk, data["model"],
                                            data.get("effort", services.KEEP_EFFORT))
        except services.CommandError as exc:
            return _refused(exc)
        return Response({"model": data["model"].strip(),
                         "effort": Session.objects.get(pk=pk).snapshot.get("effort")
                         if "effort" not in data else data["effort"],
                         "request_id": request_id}, status=status.HTTP_202_ACCEPTED)


class SessionClear(APIView):
    @extend_schema(request=None, responses=_accepted("ClearRequested", "request_id"))
    @no_body
    def post(self, request, pk: int):
        _session(pk)
        try:
            request_id = services.clear(pk)
        except services.CommandError as exc:
            return _refused(exc)
        return Response({"request_id": request_id}, status=status.HTTP_202_ACCEPTED)


class SessionCompact(APIView):
    @extend_schema(request=None, responses={202: MessageAccepted})
    @no_body
    def post(self, request, pk: int):
        _session(pk)
        try:
            turn = services.compact(pk)
        except services.CommandError as exc:
            return _refused(exc)
        return Response({"turn": turn.seq, "state": turn.state, "key": turn.key},
                        status=status.HTTP_202_ACCEPTED)
