"""REST: ``goals/<g>/agents/<a>/inbox/drain`` and ``inbox/<id>/settle`` (goals/inbox.py).
Operators, and the agent itself with its token (goals/agent_auth.py): a drain is no read —
it claims — and it is the one answer that carries an event's private body (never urgency,
status or receipts)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.bounds import json_bounds
from amux_common.fields import JsonTyped
from goals import inbox, limits
from goals.agent_auth import AgentOrOperator
from goals.api import RefusalsAnswered, _agent, _valid
from goals.core import inbox as rules
from goals.core.urgency import ASKS_FOR_REPLY
from goals.models import InboxEvent


class DrainWrite(JsonTyped, serializers.Serializer):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=rules.DRAIN_MAX,
                                     help_text="events to take (default 1)")
    key = serializers.CharField(required=False, max_length=limits.KEY,
                                help_text="the drain's key: the same key again answers "
                                          "the same claim (default: a new one)")
    lease_s = serializers.IntegerField(required=False, min_value=rules.LEASE_MIN_S,
                                       max_value=rules.LEASE_MAX_S,
                                       help_text="how long the claim lasts (default 300)")


class DrainedEvent(serializers.ModelSerializer):
    """An event as its drainer sees it: its body and author, never its place."""

    reply_due = serializers.SerializerMethodField()
    connector = serializers.SerializerMethodField()
    reply_mode = serializers.SerializerMethodField()

    class Meta:
        model = InboxEvent
        fields = ["id", "kind", "text", "actor", "received_at", "reply_due", "connector",
                  "reply_mode", "state", "claimed_until", "drains"]

    def get_reply_due(self, obj: InboxEvent) -> bool:
        return obj.kind in ASKS_FOR_REPLY

    def get_connector(self, obj: InboxEvent) -> int:
        return obj.receipt.connector_id

    def get_reply_mode(self, obj: InboxEvent) -> str:
        return obj.receipt.connector.reply_mode


class DrainSerializer(serializers.Serializer):
    key = serializers.CharField()
    events = DrainedEvent(many=True)


class SettleWrite(JsonTyped, serializers.Serializer):
    effect = serializers.DictField(help_text='{"kind": "todo"|"design_revision"|'
                                             '"no_follow_up"|"owner_gate"|'
                                             '"pending_decision"|"evidence_gap", ...}',
                                   validators=json_bounds(limits.EFFECT_KEYS,
                                                          limits.EFFECT_BYTES))
    reply = serializers.CharField(required=False, max_length=rules.REPLY_MAX,
                                  help_text="sent through the connector's reply_mode")
    key = serializers.CharField(required=False, allow_blank=True, max_length=limits.KEY,
                                help_text="the key of the drain that claimed it")


class SettledSerializer(serializers.ModelSerializer):
    """Content-free: the effect's kind and ids, the state and outcome."""

    effect = serializers.SerializerMethodField()
    reply = serializers.SerializerMethodField()

    class Meta:
        model = InboxEvent
        fields = ["id", "state", "outcome", "acked_at", "effect", "reply"]

    def get_effect(self, obj: InboxEvent) -> dict[str, Any]:
        settled = getattr(obj, "settlement", None)
        if settled is None:
            return {}
        kept = {k: v for k, v in settled.effect.items()
                if k in ("todo", "created", "state", "material", "revision", "decision")}
        return {"kind": settled.effect_kind, **kept}

    def get_reply(self, obj: InboxEvent) -> str:
        """none, pending (not read back yet), replied or gone."""
        reply = getattr(obj.receipt, "reply", None)
        return reply.state if reply else "none"


class InboxDrain(RefusalsAnswered, AgentOrOperator, APIView):
    @extend_schema(request=DrainWrite, responses={200: DrainSerializer})
    def post(self, request, slug: str, agent: str):
        _agent(slug, agent)
        data = _valid(DrainWrite, request)
        drained = inbox.drain(slug, agent, limit=data.get("limit", 1),
                              key=data.get("key", ""), lease_s=data.get("lease_s"))
        return Response({"key": drained.key,
                         "events": DrainedEvent(drained.events, many=True).data})


class InboxSettle(RefusalsAnswered, AgentOrOperator, APIView):
    @extend_schema(request=SettleWrite, responses={200: SettledSerializer})
    def post(self, request, slug: str, agent: str, pk: int):
        _agent(slug, agent)
        data = _valid(SettleWrite, request)
        event = inbox.settle(slug, agent, pk, effect=data["effect"], reply=data.get("reply"),
                             key=data.get("key", ""))
        event = InboxEvent.objects.select_related("settlement", "receipt").get(pk=event.pk)
        return Response(SettledSerializer(event).data)
