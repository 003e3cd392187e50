"""REST resources of the orchestrator: tickets, triggers, evals."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException
from rest_framework.response import Response

from amux_common.fields import JsonTyped, SlugRef, no_body
from intake.models import Thread, Trigger
from intake.text_cap import MAX_TEXT
from sessions.models import ProviderProfile
from tickets import limits
from tickets.actions import commands as ticket_commands
from tickets.core.errors import CommandRefused, NotFound
from tickets.main_config import MAIN_RUNTIMES
from tickets.models import AgentSettings, Eval, Mandate, Ticket
from tickets.read import failures, stages
from tickets.tools.worker_bin import COMMAND_NAME, DISABLED_MAX, check_disabled

WORKER_RUNTIMES = ["codex", "claude", "pi", "acp"]


class Refused(APIException):
    def __init__(self, refusal: CommandRefused):
        self.status_code = refusal.status
        super().__init__(detail=refusal.message, code=refusal.code)


def run_command(fn, **kwargs):
    """One action call; its typed refusal becomes the API's error shape."""
    try:
        return fn(**kwargs)
    except CommandRefused as refusal:
        raise Refused(refusal) from refusal


class ThreadSerializer(serializers.ModelSerializer):
    source = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Thread
        fields = ["id", "source", "key", "title", "url"]


class MandateSerializer(serializers.ModelSerializer):
    class Meta:
        model = Mandate
        fields = ["id", "policy_version", "scope", "strength", "rule", "requester", "basis",
                  "created_at"]


class FailureSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    at = serializers.DateTimeField(allow_null=True)


class TicketSerializer(serializers.ModelSerializer):
    stage = serializers.SerializerMethodField()
    label = serializers.SerializerMethodField()
    failure = serializers.SerializerMethodField()
    thread = ThreadSerializer(read_only=True)
    mandate = MandateSerializer(read_only=True)

    class Meta:
        model = Ticket
        fields = ["id", "short_name", "title", "stage", "label", "thread", "session", "mandate",
                  "pr_url", "pr_state", "created_at", "ended_at", "end_reason", "failure",
                  "routed_by", "routing_note", "stop_note"]

    def _stage(self, obj):
        known = self.context.setdefault("stages", {})
        if obj.pk not in known:
            known.update(stages([obj]))
        return known[obj.pk]

    def get_stage(self, obj) -> str:
        return str(self._stage(obj)[0])

    def get_label(self, obj) -> str:
        return self._stage(obj)[1]

    @extend_schema_field(FailureSerializer(allow_null=True))
    def get_failure(self, obj) -> dict | None:
        """Why the ticket's last run failed, whole; null when it has not failed."""
        known = self.context.setdefault("failures", {})
        if obj.pk not in known:
            known.update(failures([obj]))
        failure = known[obj.pk]
        return failure.as_dict() if failure else None


class InputSerializer(JsonTyped, serializers.Serializer):
    text = serializers.CharField(max_length=MAX_TEXT, trim_whitespace=False)


class InputCreatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    ticket = serializers.IntegerField()
    text = serializers.CharField()
    created_at = serializers.DateTimeField()
    delivered = serializers.BooleanField()


class TicketViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = TicketSerializer

    def get_queryset(self):
        return Ticket.objects.select_related("thread__source", "mandate").order_by("-id")

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if page is not None:
            self._stages = stages(page)
            self._failures = failures(page)
        return page

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["stages"] = getattr(self, "_stages", {})
        context["failures"] = getattr(self, "_failures", {})
        return context

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    @no_body
    def stop(self, request, pk=None):
        ticket = run_command(ticket_commands.stop_ticket, ticket_id=self._id(pk),
                             by=request.user.username)
        return Response(self.get_serializer(ticket).data)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    @no_body
    def retry(self, request, pk=None):
        """Dispatch a failed ticket again (a new run under the same mandate), or let a
        ticket a cap blocked go on (one more cap's worth, held messages sent); 409 when the
        ticket has ended or is neither failed nor blocked by a cap."""
        ticket_id = self._id(pk)
        run_command(ticket_commands.retry_ticket, ticket_id=ticket_id)
        return Response(self.get_serializer(Ticket.objects.get(pk=ticket_id)).data)

    @extend_schema(request=InputSerializer, responses={201: InputCreatedSerializer})
    @action(detail=True, methods=["post"])
    def inputs(self, request, pk=None):
        body = InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        item = run_command(
            ticket_commands.add_input,
            ticket_id=self._id(pk),
            text=body.validated_data["text"],
            author=request.user.username,
        )
        return Response(
            {"id": item.pk, "ticket": item.ticket_id, "text": item.text,
             "created_at": item.created_at, "delivered": item.delivered_at is not None,
             "held": item.held},
            status=status.HTTP_201_CREATED,
        )

    @staticmethod
    def _id(pk) -> int:
        try:
            return int(pk)
        except (TypeError, ValueError):
            raise Refused(NotFound(f"ticket {pk!r} does not exist")) from None


class TriggerSerializer(serializers.ModelSerializer):
    source = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    thread = ThreadSerializer(read_only=True)

    class Meta:
        model = Trigger
        fields = ["id", "source", "thread", "external_id", "scope", "actor", "is_human", "is_bot",
                  "addressed", "decision", "strength", "rule", "reason", "disposition",
                  "policy_version", "created_at"]


class TriggerViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = TriggerSerializer
    queryset = Trigger.objects.select_related("source", "thread__source").order_by("-id")


class EvalSerializer(serializers.ModelSerializer):
    class Meta:
        model = Eval
        fields = ["id", "trigger", "policy_version", "state", "result", "note", "created_at",
                  "finished_at"]


class EvalViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = EvalSerializer
    queryset = Eval.objects.order_by("-id")


class AgentSettingsSerializer(JsonTyped, serializers.ModelSerializer):
    triage_provider = SlugRef(
        max_length=limits.SLUG, queryset=ProviderProfile.objects.all(), allow_null=True,
        required=False
    )
    worker_provider = SlugRef(
        max_length=limits.SLUG, queryset=ProviderProfile.objects.all(), allow_null=True,
        required=False
    )
    worker_runtime = serializers.ChoiceField(choices=WORKER_RUNTIMES, required=False)
    # The team's main session: empty runtime, amux routes explicit requests by code.
    main_runtime = serializers.ChoiceField(
        choices=["", *MAIN_RUNTIMES], required=False, allow_blank=True,
        help_text="A runtime that takes MCP servers (the main session acts only through "
                  "amux's tools); empty: amux routes explicit requests by code.")
    main_provider = SlugRef(
        max_length=limits.SLUG, queryset=ProviderProfile.objects.all(), allow_null=True,
        required=False
    )
    # Guards (0: no cap); bounded so a typo cannot overflow the column.
    ticket_token_cap = serializers.IntegerField(min_value=0, max_value=limits.TOKEN_CAP_MAX,
                                                required=False)
    daily_token_cap = serializers.IntegerField(min_value=0, max_value=limits.TOKEN_CAP_MAX,
                                               required=False)
    messages_per_ticket_hour = serializers.IntegerField(min_value=0,
                                                        max_value=limits.MESSAGES_PER_HOUR_MAX,
                                                        required=False)
    disabled_commands = serializers.ListField(
        child=serializers.RegexField(f"^{COMMAND_NAME.pattern}$", max_length=64),
        max_length=DISABLED_MAX, required=False,
        help_text="Commands a worker may not run (each fails saying so); gh, lark-cli, "
                  "amux and git-credential-amux are amux's own and cannot be disabled.")

    class Meta:
        model = AgentSettings
        fields = ["triage_provider", "triage_model", "worker_runtime", "worker_provider",
                  "worker_model", "main_runtime", "main_provider", "main_model",
                  "ticket_token_cap", "daily_token_cap",
                  "messages_per_ticket_hour", "disabled_commands", "updated_at"]
        read_only_fields = ["updated_at"]

    def validate_disabled_commands(self, value):
        try:
            return check_disabled(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class AgentSettingsView(generics.RetrieveUpdateAPIView):
    """Who does the work: the triage model and the worker sessions' runtime and model."""

    serializer_class = AgentSettingsSerializer

    def get_object(self):
        return AgentSettings.current()

    def perform_update(self, serializer):
        # saved, and failed tickets dispatched again (the new settings may be what they
        # lacked), in one transaction
        ticket_commands.save_agent_settings(serializer.validated_data)
        serializer.instance = AgentSettings.current()
