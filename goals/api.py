"""REST: ``goals/`` with ``todos/``, ``materials/``, ``agents/`` (``start``, ``detach``,
``mode``, ``messages``, ``inbox/urgency``), ``connectors/`` (``PATCH`` of the reply settings,
``rebind``, ``reconnect``, ``channel``) and
``ingress-receipts/`` (read-only, ``?connector=``; ``cancel`` for a queued item). Every
write is one call of goals.actions or goals.ingress; refusals answer the shared error
shape naming the field."""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.api import error_response
from amux_common.fields import JsonTyped, no_body
from goals import actions, connector_state, ingress, limits, read
from goals.agent_auth import AgentOrOperator, agent_of
from goals.core import connectors as ck
from goals.core import lifecycle as lc
from goals.core.lifecycle import Refused
from goals.models import Agent, Connector, Goal, IngressReceipt, Material, Todo


class RefusalsAnswered:
    """A refused command answers ``{"error": {"code", "message", "fields"}}``."""

    def handle_exception(self, exc):
        if isinstance(exc, Refused):
            return error_response(exc.status, exc.code, str(exc), exc.fields)
        return super().handle_exception(exc)


def _valid(serializer_class, request, partial: bool = False) -> dict:
    body = serializer_class(data=request.data, partial=partial)
    body.is_valid(raise_exception=True)
    return body.validated_data


def _goal(slug: str) -> Goal:
    goal = Goal.objects.filter(slug=slug).first()
    if goal is None:
        raise NotFound(f"unknown goal {slug!r}")
    return goal


def _agent(slug: str, agent: str) -> Agent:
    row = Agent.objects.filter(goal__slug=slug, slug=agent).select_related("goal").first()
    if row is None:
        raise NotFound(f"unknown agent {agent!r} of goal {slug!r}")
    return row


# ------------------------------------------------------------------------------ goals
class QuotaField(JsonTyped, serializers.Serializer):
    unit = serializers.ChoiceField(choices=["turns", "tokens"], required=False)
    limit = serializers.IntegerField(min_value=0, max_value=limits.POSITIVE_INT_MAX)
    spent = serializers.IntegerField(read_only=True)


class GoalSerializer(serializers.ModelSerializer):
    quota = serializers.SerializerMethodField()
    agents = serializers.SerializerMethodField()

    class Meta:
        model = Goal
        fields = ["slug", "title", "description", "state", "check_command", "quota",
                  "agents", "created_at", "updated_at"]

    def get_quota(self, obj: Goal) -> dict[str, Any]:
        return {"unit": obj.quota_unit, "limit": obj.quota_limit, "spent": obj.quota_spent}

    def get_agents(self, obj: Goal) -> list[str]:
        return [a.slug for a in obj.agents.all()]


class GoalWrite(JsonTyped, serializers.Serializer):
    slug = serializers.SlugField(max_length=limits.SLUG)
    title = serializers.CharField(max_length=limits.GOAL_TITLE)
    description = serializers.CharField(required=False, allow_blank=True,
                                        max_length=limits.GOAL_DESCRIPTION)
    check_command = serializers.CharField(required=False, allow_blank=True,
                                          max_length=limits.CHECK_COMMAND)
    quota = QuotaField(required=False)


class GoalUpdate(JsonTyped, serializers.Serializer):
    title = serializers.CharField(max_length=limits.GOAL_TITLE, required=False)
    description = serializers.CharField(required=False, allow_blank=True,
                                        max_length=limits.GOAL_DESCRIPTION)
    check_command = serializers.CharField(required=False, allow_blank=True,
                                          max_length=limits.CHECK_COMMAND)
    state = serializers.ChoiceField(choices=lc.GOAL_STATES, required=False)
    quota = QuotaField(required=False)


class GoalList(RefusalsAnswered, generics.ListAPIView):
    queryset = Goal.objects.prefetch_related("agents")
    serializer_class = GoalSerializer

    @extend_schema(request=GoalWrite, responses={201: GoalSerializer})
    def post(self, request):
        data = _valid(GoalWrite, request)
        goal = actions.create_goal(slug=data["slug"], title=data["title"],
                                   description=data.get("description", ""),
                                   check_command=data.get("check_command", ""),
                                   quota_spec=data.get("quota"))
        return Response(GoalSerializer(goal).data, status=status.HTTP_201_CREATED)


class GoalDetail(RefusalsAnswered, APIView):
    @extend_schema(responses=GoalSerializer)
    def get(self, request, slug: str):
        return Response(GoalSerializer(_goal(slug)).data)

    @extend_schema(request=GoalUpdate, responses=GoalSerializer)
    def patch(self, request, slug: str):
        _goal(slug)
        goal = actions.update_goal(slug, _valid(GoalUpdate, request))
        return Response(GoalSerializer(goal).data)


# ------------------------------------------------------------------------------ todos
class WritebackSerializer(serializers.Serializer):
    """An attached agent's last "done" on its way through amux's check."""

    state = serializers.ChoiceField(choices=["validating", "accepted", "refused"])
    reason = serializers.CharField(allow_blank=True, required=False,
                                   help_text="why a refused writeback left the todo claimed")
    exit_code = serializers.IntegerField(allow_null=True, required=False)
    output = serializers.CharField(allow_blank=True, required=False,
                                   help_text="the check's output (its end)")
    spent = serializers.IntegerField(required=False, help_text="quota the writeback spent")
    requested_at = serializers.CharField(required=False)
    checked_at = serializers.CharField(required=False)


class TodoSerializer(serializers.ModelSerializer):
    claimed_by = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    writeback = serializers.SerializerMethodField()

    class Meta:
        model = Todo
        fields = ["id", "title", "state", "evidence", "claimed_by", "writeback", "created_at",
                  "updated_at"]

    @extend_schema_field(WritebackSerializer(allow_null=True))
    def get_writeback(self, obj: Todo) -> dict | None:
        wb = obj.writeback or {}
        if "state" not in wb:
            return None
        return {k: wb[k] for k in ("state", "reason", "exit_code", "output", "spent",
                                   "requested_at", "checked_at") if k in wb}


class TodoWrite(JsonTyped, serializers.Serializer):
    title = serializers.CharField(max_length=limits.TODO_TITLE)


class TodoUpdate(JsonTyped, serializers.Serializer):
    title = serializers.CharField(max_length=limits.TODO_TITLE, required=False)
    state = serializers.ChoiceField(choices=lc.TODO_STATES, required=False)
    evidence = serializers.CharField(required=False, allow_blank=True,
                                     max_length=limits.TODO_EVIDENCE)
    agent = serializers.SlugField(required=False, max_length=limits.SLUG,
                                  help_text="who claims it")


class TodoList(RefusalsAnswered, AgentOrOperator, generics.ListAPIView):
    serializer_class = TodoSerializer

    def get_queryset(self):
        return Todo.objects.filter(goal=_goal(self.kwargs["slug"])).select_related(
            "claimed_by")

    @extend_schema(request=TodoWrite, responses={201: TodoSerializer})
    def post(self, request, slug: str):
        _goal(slug)
        todo = actions.add_todo(slug, _valid(TodoWrite, request)["title"])
        return Response(TodoSerializer(todo).data, status=status.HTTP_201_CREATED)


class TodoDetail(RefusalsAnswered, AgentOrOperator, APIView):
    @extend_schema(responses=TodoSerializer)
    def get(self, request, slug: str, pk: int):
        todo = Todo.objects.filter(goal=_goal(slug), pk=pk).first()
        if todo is None:
            raise NotFound(f"unknown todo {pk}")
        return Response(TodoSerializer(todo).data)

    @extend_schema(request=TodoUpdate, responses=TodoSerializer)
    def patch(self, request, slug: str, pk: int):
        _goal(slug)
        data = _valid(TodoUpdate, request)
        caller = agent_of(request)  # an agent's own loop: its rules, then everyone's
        todo = actions.change_todo(slug, pk, state=data.get("state"),
                                   evidence=data.get("evidence"), title=data.get("title"),
                                   agent=data.get("agent"),
                                   as_agent=caller.agent if caller else None)
        return Response(TodoSerializer(todo).data)


# -------------------------------------------------------------------------- materials
class MaterialSerializer(serializers.ModelSerializer):
    age_s = serializers.SerializerMethodField()
    fresh = serializers.SerializerMethodField()

    class Meta:
        model = Material
        fields = ["key", "title", "body", "revision", "fetched_at", "max_age_s", "age_s",
                  "fresh"]

    def get_age_s(self, obj: Material) -> int:
        return int((timezone.now() - obj.fetched_at).total_seconds())

    def get_fresh(self, obj: Material) -> bool:
        return self.get_age_s(obj) < obj.max_age_s


class MaterialWrite(JsonTyped, serializers.Serializer):
    key = serializers.CharField(max_length=limits.KEY)
    body = serializers.CharField(allow_blank=True, max_length=limits.MATERIAL_BODY)
    title = serializers.CharField(required=False, allow_blank=True,
                                  max_length=limits.MATERIAL_TITLE)
    source_ref = serializers.CharField(required=False, allow_blank=True, max_length=limits.REF,
                                       write_only=True)
    max_age_s = serializers.IntegerField(required=False, min_value=1,
                                         max_value=limits.POSITIVE_INT_MAX)


class MaterialList(RefusalsAnswered, generics.ListAPIView):
    serializer_class = MaterialSerializer

    def get_queryset(self):
        return Material.objects.filter(goal=_goal(self.kwargs["slug"]))

    @extend_schema(request=MaterialWrite, responses={200: MaterialSerializer})
    def post(self, request, slug: str):
        _goal(slug)
        data = _valid(MaterialWrite, request)
        material = actions.register_material(
            slug, key=data["key"], body=data["body"], title=data.get("title", ""),
            source_ref=data.get("source_ref", ""), max_age_s=data.get("max_age_s"))
        return Response(MaterialSerializer(material).data)


# ------------------------------------------------------------------------ receipts
class ReceiptSerializer(serializers.ModelSerializer):
    class Meta:
        model = IngressReceipt
        fields = ["id", "connector", "dedupe_key", "event_kind", "selected_mode",
                  "fallback_used", "outcome", "reason", "session", "turn_key", "origin",
                  "created_at", "updated_at"]


# ----------------------------------------------------------------------------- agents
class AgentSerializer(serializers.ModelSerializer):
    provider = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    lifecycle = serializers.SerializerMethodField()
    session = serializers.SerializerMethodField()
    connectors = serializers.SerializerMethodField()

    class Meta:
        model = Agent
        fields = ["slug", "name", "mode", "lifecycle", "runtime", "provider", "model",
                  "session", "connectors", "autorun", "created_at"]
        read_only_fields = ["autorun"]

    def get_lifecycle(self, obj: Agent) -> str:
        return read.lifecycle(obj)

    def get_session(self, obj: Agent) -> int | None:
        binding = actions.active_binding(obj)
        return binding.session_id if binding else None

    def get_connectors(self, obj: Agent) -> list[dict[str, Any]]:
        states = connector_state.Reader()
        return [{"id": c.pk, "label": ck.label(c.source_kind), **states.of(c)}
                for c in obj.connectors.select_related("source")]


class AgentWrite(JsonTyped, serializers.Serializer):
    slug = serializers.SlugField(max_length=limits.SLUG)
    mode = serializers.ChoiceField(choices=lc.MODES)
    name = serializers.CharField(required=False, allow_blank=True,
                                 max_length=limits.AGENT_NAME)
    runtime = serializers.CharField(required=False, max_length=limits.RUNTIME,
                                    help_text="managed runtime (default pi)")
    provider = serializers.SlugField(required=False, max_length=limits.SLUG)
    model = serializers.CharField(required=False, allow_blank=True,
                                  max_length=limits.MODEL)


class ModeWrite(JsonTyped, serializers.Serializer):
    mode = serializers.ChoiceField(choices=lc.MODES)


class MessageWrite(JsonTyped, serializers.Serializer):
    text = serializers.CharField(max_length=limits.MESSAGE_TEXT)
    key = serializers.CharField(required=False, max_length=limits.KEY,
                                help_text="idempotency key (default: a new one)")


class AgentList(RefusalsAnswered, generics.ListAPIView):
    serializer_class = AgentSerializer

    def get_queryset(self):
        return Agent.objects.filter(goal=_goal(self.kwargs["slug"])).select_related(
            "goal", "provider")

    @extend_schema(request=AgentWrite, responses={201: AgentSerializer})
    def post(self, request, slug: str):
        _goal(slug)
        data = _valid(AgentWrite, request)
        agent = actions.create_agent(slug, slug=data["slug"], mode=data["mode"],
                                     name=data.get("name", ""),
                                     runtime=data.get("runtime", "pi"),
                                     provider=data.get("provider"),
                                     model=data.get("model", ""))
        return Response(AgentSerializer(agent).data, status=status.HTTP_201_CREATED)


class AgentDetail(RefusalsAnswered, APIView):
    @extend_schema(responses=AgentSerializer)
    def get(self, request, slug: str, agent: str):
        return Response(AgentSerializer(_agent(slug, agent)).data)


class AgentStart(RefusalsAnswered, APIView):
    @extend_schema(request=None, responses={201: AgentSerializer})
    @no_body
    def post(self, request, slug: str, agent: str):
        _agent(slug, agent)
        actions.start(slug, agent, by=request.user)
        return Response(AgentSerializer(_agent(slug, agent)).data,
                        status=status.HTTP_201_CREATED)


class AgentDetach(RefusalsAnswered, APIView):
    @extend_schema(request=None, responses=AgentSerializer)
    @no_body
    def post(self, request, slug: str, agent: str):
        _agent(slug, agent)
        actions.detach(slug, agent)
        return Response(AgentSerializer(_agent(slug, agent)).data)


class AgentMode(RefusalsAnswered, APIView):
    @extend_schema(request=ModeWrite, responses=AgentSerializer)
    def post(self, request, slug: str, agent: str):
        _agent(slug, agent)
        actions.change_mode(slug, agent, _valid(ModeWrite, request)["mode"])
        return Response(AgentSerializer(_agent(slug, agent)).data)


class AgentMessages(RefusalsAnswered, APIView):
    """Web chat: a message to the agent enters its web_chat connector (created the first
    time), hence the same ingress, receipts and working session as every other connector."""

    @extend_schema(request=MessageWrite, responses={202: ReceiptSerializer})
    def post(self, request, slug: str, agent: str):
        row = _agent(slug, agent)
        data = _valid(MessageWrite, request)
        connector = actions.ensure_web_chat(row)
        receipt = ingress.accept(connector, ingress.Event(
            dedupe_key=data.get("key") or f"web-{uuid.uuid4().hex}", kind="message",
            text=data["text"], actor=request.user.get_username(), addressed=True,
            at=timezone.now(), origin={"origin": "web"}))
        code = status.HTTP_202_ACCEPTED if receipt.outcome in (
            "delivered", "queued", "inboxed") else status.HTTP_409_CONFLICT
        body = ReceiptSerializer(receipt).data
        if code == status.HTTP_409_CONFLICT:
            return error_response(code, receipt.reason or "refused",
                                  f"the message was not delivered: {receipt.reason}",
                                  {"receipt": [str(receipt.pk)]})
        return Response(body, status=code)


class UrgencySerializer(serializers.Serializer):
    pending = serializers.IntegerField()
    questions = serializers.IntegerField()
    mentions = serializers.IntegerField()
    replies = serializers.IntegerField()
    oldest_age_s = serializers.IntegerField(allow_null=True)
    reply_due = serializers.BooleanField()


class InboxUrgency(RefusalsAnswered, AgentOrOperator, APIView):
    """Content-free: counts, oldest age and reply_due only."""

    @extend_schema(responses={200: UrgencySerializer})
    def get(self, request, slug: str, agent: str):
        return Response(ingress.urgency(_agent(slug, agent)))


# ------------------------------------------------------------------------- connectors
class ConnectorSerializer(serializers.ModelSerializer):
    goal = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    source = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    capabilities = serializers.SerializerMethodField()
    permission_requirements = serializers.SerializerMethodField()
    label = serializers.SerializerMethodField()
    # Derived, never stored (goals/core/connectors.py live_state): listening, stale,
    # disconnected or connected, why (a content-free reason) and since when.
    state = serializers.SerializerMethodField()
    state_reason = serializers.SerializerMethodField()
    state_since = serializers.SerializerMethodField()
    detached = serializers.SerializerMethodField()

    class Meta:
        model = Connector
        fields = ["id", "goal", "agent", "provider_kind", "source_kind", "source",
                  "source_ref", "capture_scope", "ingress_mode", "fallback", "reply_mode",
                  "mirror_ref", "capabilities", "permission_requirements", "state",
                  "state_reason", "state_since", "detached", "label",
                  "created_at", "updated_at"]

    def _live(self, obj: Connector) -> dict[str, Any]:
        cache = self.context.setdefault("connector_states", {})
        if obj.pk not in cache:
            reader = self.context.setdefault("connector_reader", connector_state.Reader())
            cache[obj.pk] = reader.of(obj)
        return cache[obj.pk]

    def get_state(self, obj: Connector) -> str:
        return self._live(obj)["state"]

    def get_state_reason(self, obj: Connector) -> str | None:
        return self._live(obj)["state_reason"]

    def get_state_since(self, obj: Connector) -> str | None:
        return self._live(obj)["state_since"]

    def get_detached(self, obj: Connector) -> bool:
        return self._live(obj)["detached"]

    def get_capabilities(self, obj: Connector) -> list[str]:
        return list(ck.KINDS[obj.source_kind].capabilities)

    def get_permission_requirements(self, obj: Connector) -> list[dict[str, Any]]:
        config = obj.source.config if obj.source else {}
        return ck.permission_requirements(
            obj.source_kind, domain=config.get("domain") or "https://open.feishu.cn",
            app_id=config.get("app_id") or "", capture_scope=obj.capture_scope,
            reply_mode=obj.reply_mode)

    def get_label(self, obj: Connector) -> str:
        return f"{ck.label(obj.source_kind)} · {self._live(obj)['state']}"


class ConnectorWrite(JsonTyped, serializers.Serializer):
    goal = serializers.SlugField(max_length=limits.SLUG)
    agent = serializers.SlugField(required=False, max_length=limits.SLUG)
    provider_kind = serializers.ChoiceField(choices=["lark", "web"], required=False)
    source_kind = serializers.ChoiceField(choices=ck.SOURCE_KINDS)
    source = serializers.SlugField(required=False, max_length=limits.SLUG,
                                   help_text="an intake source (Lark kinds)")
    source_ref = serializers.CharField(required=False, allow_blank=True, max_length=limits.REF,
                                       help_text="owner-local: chat id or document token")
    capture_scope = serializers.ChoiceField(choices=ck.CAPTURE_SCOPES, required=False)
    ingress_mode = serializers.ChoiceField(choices=ck.INGRESS_MODES)
    fallback = serializers.ChoiceField(choices=ck.FALLBACKS, required=False)
    reply_mode = serializers.ChoiceField(choices=ck.REPLY_MODES, required=False)
    mirror_ref = serializers.CharField(
        required=False, allow_blank=True, max_length=limits.REF,
        help_text="configured_mirror: the chat replies go to (one of the source's groups)")


class ReplyUpdate(JsonTyped, serializers.Serializer):
    reply_mode = serializers.ChoiceField(choices=ck.REPLY_MODES, required=False)
    mirror_ref = serializers.CharField(
        required=False, allow_blank=True, max_length=limits.REF,
        help_text="configured_mirror: the chat replies go to (one of the source's groups)")


class ChannelWrite(JsonTyped, serializers.Serializer):
    source_ref = serializers.CharField(
        max_length=limits.REF, help_text="a chat id among the Lark source's configured groups")


class ConnectorList(RefusalsAnswered, generics.ListAPIView):
    serializer_class = ConnectorSerializer

    def get_queryset(self):
        rows = Connector.objects.select_related("goal", "agent", "source")
        goal = self.request.query_params.get("goal")
        return rows.filter(goal__slug=goal) if goal else rows

    @extend_schema(request=ConnectorWrite, responses={201: ConnectorSerializer})
    def post(self, request):
        data = _valid(ConnectorWrite, request)
        connector = actions.create_connector(
            goal=data["goal"], agent=data.get("agent"), source_kind=data["source_kind"],
            provider_kind=data.get("provider_kind"), source=data.get("source"),
            source_ref=data.get("source_ref", ""),
            capture_scope=data.get("capture_scope", "mentions"),
            ingress_mode=data["ingress_mode"], fallback=data.get("fallback", "none"),
            reply_mode=data.get("reply_mode", "none"), mirror_ref=data.get("mirror_ref", ""))
        return Response(ConnectorSerializer(connector).data, status=status.HTTP_201_CREATED)


def _connector(pk: int) -> Connector:
    row = Connector.objects.filter(pk=pk).first()
    if row is None:
        raise NotFound(f"unknown connector {pk}")
    return row


class ConnectorDetail(RefusalsAnswered, APIView):
    @extend_schema(responses=ConnectorSerializer)
    def get(self, request, pk: int):
        return Response(ConnectorSerializer(_connector(pk)).data)

    @extend_schema(request=ReplyUpdate, responses=ConnectorSerializer)
    def patch(self, request, pk: int):
        """Change where replies go (reply_mode, mirror_ref); nothing else changes here."""
        _connector(pk)
        data = _valid(ReplyUpdate, request, partial=True)
        connector = actions.change_reply(pk, reply_mode=data.get("reply_mode"),
                                         mirror_ref=data.get("mirror_ref"))
        return Response(ConnectorSerializer(connector).data)

    # answers the disconnected connector (200), not an empty 204
    @extend_schema(responses={200: ConnectorSerializer})
    @no_body
    def delete(self, request, pk: int):
        """Disconnect (the receipts stay)."""
        _connector(pk)
        return Response(ConnectorSerializer(actions.disconnect(pk)).data)


class RebindSerializer(serializers.Serializer):
    rebound = serializers.IntegerField()
    session = serializers.IntegerField()


class ConnectorRebind(RefusalsAnswered, APIView):
    @extend_schema(request=None, responses={200: RebindSerializer})
    @no_body
    def post(self, request, pk: int):
        _connector(pk)
        return Response(actions.rebind(pk))


class ConnectorReconnect(RefusalsAnswered, APIView):
    @extend_schema(request=None, responses=ConnectorSerializer)
    @no_body
    def post(self, request, pk: int):
        """A disconnected connector listens again with the settings it had (409 while the
        agent has another active connection of its kind, or its source is disabled)."""
        _connector(pk)
        return Response(ConnectorSerializer(actions.reconnect(pk)).data)


class ConnectorChannel(RefusalsAnswered, APIView):
    @extend_schema(request=ChannelWrite, responses=ConnectorSerializer)
    def post(self, request, pk: int):
        """Choose a Lark Bot connection's channel among its source's configured groups
        (400 for another chat, 409 for one another active Lark Bot connection is bound
        to). The agent's mode, session and the goal's todos do not change."""
        _connector(pk)
        data = _valid(ChannelWrite, request)
        return Response(ConnectorSerializer(actions.select_channel(pk, data["source_ref"])).data)


class ReceiptList(generics.ListAPIView):
    serializer_class = ReceiptSerializer

    def get_queryset(self):
        rows = IngressReceipt.objects.all()
        connector = self.request.query_params.get("connector")
        if connector is not None:
            if not connector.isdigit():
                raise serializers.ValidationError({"connector": ["a connector id"]})
            rows = rows.filter(connector_id=int(connector))
        return rows


class ReceiptDetail(APIView):
    @extend_schema(responses=ReceiptSerializer)
    def get(self, request, pk: int):
        row = IngressReceipt.objects.filter(pk=pk).first()
        if row is None:
            raise NotFound(f"unknown receipt {pk}")
        return Response(ReceiptSerializer(row).data)


class ReceiptCancel(RefusalsAnswered, APIView):
    @extend_schema(request=None, responses=ReceiptSerializer)
    @no_body
    def post(self, request, pk: int):
        return Response(ReceiptSerializer(actions.cancel_queued(pk)).data)


class AttachWrite(JsonTyped, serializers.Serializer):
    session = serializers.CharField(max_length=limits.SESSION_REF,
                                    help_text="an attachable session's id (attachable-sessions/)")
    thread = serializers.CharField(max_length=limits.KEY, required=False,
                                   help_text="its thread (needed when it has several)")


class AgentAttach(RefusalsAnswered, APIView):
    """Attached mode: bind the agent to a running app-server's thread; no process starts."""

    @extend_schema(request=AttachWrite, responses={201: AgentSerializer})
    def post(self, request, slug: str, agent: str):
        _agent(slug, agent)
        data = _valid(AttachWrite, request)
        actions.attach(slug, agent, data["session"], data.get("thread"))
        return Response(AgentSerializer(_agent(slug, agent)).data,
                        status=status.HTTP_201_CREATED)
