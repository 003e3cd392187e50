"""REST for managed turns (loopx_turn_v0): ``goals/<g>/agents/<a>/turns`` (POST a turn,
list the recent ones newest first), ``turns/<key>``, ``turns/<key>/cancel``, ``autorun``,
and ``provider`` (the explicit provider/model rebinding).

A turn takes minutes, so POST never does the attempt itself: it records the envelope
(todo claimed) and hands it to the supervisor task, answering ``202`` with the envelope
while it is in flight and ``200`` once it has an outcome (``done``, ``skipped`` or
``cancelled``) — the same key again is the same envelope, with nothing attempted, written
or spent twice.
``"wait": true`` holds the request up to ``wait_s`` seconds (default 30, at most 60) for
the outcome; it still answers 202 when the turn runs longer. Poll ``turns/<key>``."""

from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.fields import JsonTyped, no_body
from amux_common.limits import ID_MAX
from goals import actions, limits, turns
from goals.api import AgentSerializer, RefusalsAnswered, _agent, _valid
from goals.core import turns as rules
from goals.models import GoalTurn

WAIT_MAX_S = 60


class TurnSerializer(serializers.ModelSerializer):
    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    session_turn = serializers.SerializerMethodField()
    validation = serializers.SerializerMethodField()
    writeback = serializers.SerializerMethodField()

    class Meta:
        model = GoalTurn
        fields = ["key", "agent", "state", "reason", "todo", "session", "session_turn",
                  "attempt", "validation", "writeback", "quota_spent", "hint", "created_at",
                  "updated_at"]

    def get_session_turn(self, obj: GoalTurn) -> str | None:
        return turns.session_turn_key(obj) if obj.session_turn_id else None

    def get_validation(self, obj: GoalTurn) -> dict[str, Any]:
        """``passed`` is null until amux's check has run."""
        v = obj.validation or {}
        return {"passed": v.get("passed"), "output": v.get("output", ""),
                "exit_code": v.get("exit_code"), "timed_out": bool(v.get("timed_out"))}

    def get_writeback(self, obj: GoalTurn) -> dict[str, Any] | None:
        return obj.writeback or None


class TurnWrite(JsonTyped, serializers.Serializer):
    key = serializers.RegexField(
        rf"^{rules.KEY_PATTERN.pattern}\Z", max_length=rules.KEY_MAX,
        error_messages={"invalid": "letters, digits, '.', '_', ':' or '-', starting with a "
                                   "letter or digit"},
        help_text="idempotency key: the same key is the same turn")
    todo = serializers.IntegerField(required=False, min_value=1, max_value=ID_MAX,
                                    help_text="the todo to work (default: the oldest open)")
    wait = serializers.BooleanField(required=False, default=False)
    wait_s = serializers.IntegerField(required=False, min_value=1, max_value=WAIT_MAX_S)


class AutorunWrite(JsonTyped, serializers.Serializer):
    autorun = serializers.BooleanField()


class ProviderWrite(JsonTyped, serializers.Serializer):
    provider = serializers.SlugField(max_length=limits.SLUG)
    model = serializers.CharField(max_length=limits.MODEL)


def _answer(turn: GoalTurn) -> Response:
    code = (status.HTTP_202_ACCEPTED if turn.state in rules.IN_FLIGHT else status.HTTP_200_OK)
    return Response(TurnSerializer(turn).data, status=code)


class TurnList(RefusalsAnswered, generics.ListAPIView):
    serializer_class = TurnSerializer

    def get_queryset(self):
        row = _agent(self.kwargs["slug"], self.kwargs["agent"])
        return GoalTurn.objects.filter(agent=row).select_related("agent").order_by("-id")

    @extend_schema(request=TurnWrite, responses={200: TurnSerializer, 202: TurnSerializer})
    def post(self, request, slug: str, agent: str):
        _agent(slug, agent)
        data = _valid(TurnWrite, request)
        turn, _ = turns.request(slug, agent, key=data["key"], todo=data.get("todo"))
        if data.get("wait") and turn.state in rules.IN_FLIGHT:
            deadline = time.monotonic() + data.get("wait_s", 30)
            while turn.state in rules.IN_FLIGHT and time.monotonic() < deadline:
                time.sleep(0.25)
                turn.refresh_from_db()
        return _answer(turn)


class TurnDetail(RefusalsAnswered, APIView):
    @extend_schema(responses={200: TurnSerializer, 202: TurnSerializer})
    def get(self, request, slug: str, agent: str, key: str):
        turn = GoalTurn.objects.filter(agent=_agent(slug, agent), key=key).first()
        if turn is None:
            raise NotFound(f"no turn {key!r}")
        return _answer(turn)


class TurnCancel(RefusalsAnswered, APIView):
    """Cancel a turn (goals.turns.cancel): ``200`` with the ``cancelled`` envelope, or
    ``202`` while its interrupted session turn is still ending (``attempt.cancel_requested``;
    poll ``turns/<key>``); the same call again answers the same. ``404`` unknown key,
    ``409`` a settled (done, skipped) or written turn, naming its state."""

    @extend_schema(request=None, responses={200: TurnSerializer, 202: TurnSerializer})
    @no_body
    def post(self, request, slug: str, agent: str, key: str):
        _agent(slug, agent)
        return _answer(turns.cancel(slug, agent, key))


class AgentAutorun(RefusalsAnswered, APIView):
    """Let the supervisor start the agent's next bounded turn by itself (off by default)."""

    @extend_schema(request=AutorunWrite, responses=AgentSerializer)
    def post(self, request, slug: str, agent: str):
        _agent(slug, agent)
        turns.set_autorun(slug, agent, _valid(AutorunWrite, request)["autorun"])
        return Response(AgentSerializer(_agent(slug, agent)).data)


class AgentProvider(RefusalsAnswered, APIView):
    """The explicit rebinding of a managed agent's provider and model (goals.actions)."""

    @extend_schema(request=ProviderWrite, responses=AgentSerializer)
    def post(self, request, slug: str, agent: str):
        _agent(slug, agent)
        data = _valid(ProviderWrite, request)
        actions.change_provider(slug, agent, provider=data["provider"], model=data["model"])
        return Response(AgentSerializer(_agent(slug, agent)).data)
