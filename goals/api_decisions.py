"""REST: ``goals/<slug>/decisions/`` — what inbox events left for a person to decide
(owner gates, pending decisions, evidence gaps; ``?state=open|resolved``), and
``decisions/<id>/resolve`` where a person closes one with a note. Agents read them with
their own token; only people resolve."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.fields import JsonTyped
from goals import actions
from goals.agent_auth import AgentOrOperator
from goals.api import RefusalsAnswered, _goal, _valid
from goals.core import inbox as rules
from goals.models import Decision

STATES = ("open", "resolved")


class DecisionSerializer(serializers.ModelSerializer):
    todo = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    inbox_event = serializers.SerializerMethodField()

    class Meta:
        model = Decision
        fields = ["id", "kind", "text", "contradicts", "todo", "inbox_event", "state",
                  "resolution", "resolved_by", "created_at", "resolved_at"]
        read_only_fields = fields

    def get_inbox_event(self, obj: Decision) -> int | None:
        return obj.settlement.event_id if obj.settlement_id else None


class DecisionResolve(JsonTyped, serializers.Serializer):
    resolution = serializers.CharField(max_length=rules.RESOLUTION_MAX,
                                       help_text="what was decided, in a person's words")


@extend_schema(parameters=[OpenApiParameter("state", OpenApiTypes.STR, enum=STATES,
                                            description="only open or resolved ones")])
class DecisionList(RefusalsAnswered, AgentOrOperator, generics.ListAPIView):
    serializer_class = DecisionSerializer

    def get_queryset(self):
        rows = Decision.objects.filter(goal=_goal(self.kwargs["slug"])).select_related(
            "settlement")
        state = self.request.query_params.get("state")
        if state is not None and state not in STATES:
            raise serializers.ValidationError({"state": [f"must be one of {', '.join(STATES)}"]})
        return rows.filter(state=state) if state else rows


class DecisionDetail(RefusalsAnswered, AgentOrOperator, APIView):
    @extend_schema(responses=DecisionSerializer)
    def get(self, request, slug: str, pk: int):
        row = Decision.objects.filter(goal=_goal(slug), pk=pk).first()
        if row is None:
            raise NotFound(f"unknown decision {pk}")
        return Response(DecisionSerializer(row).data)


class DecisionResolveView(RefusalsAnswered, APIView):
    """A person resolves an open decision (operators only: an agent token is refused)."""

    @extend_schema(request=DecisionResolve, responses=DecisionSerializer)
    def post(self, request, slug: str, pk: int):
        _goal(slug)
        data = _valid(DecisionResolve, request)
        row = actions.resolve_decision(slug, pk, resolution=data["resolution"],
                                       by=request.user.get_username())
        return Response(DecisionSerializer(row).data)
