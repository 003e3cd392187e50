"""REST: ``schedules/`` (create, list, read, delete), ``schedules/<id>/pause|resume``,
``schedules/<id>/runs``. A caller sees and changes only its own schedules."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.api import error_response
from amux_common.bounds import one_line
from amux_common.fields import JsonTyped, no_body
from amux_common.pagination import BoundedLimitOffsetPagination
from amux_common.schema import page_of
from execution import schedule_timing, schedules
from execution.models import ScheduleMode, ScheduleRun
from sessions import limits
from sessions.services import CommandError


def _refused(exc: CommandError) -> Response:
    fields = exc.fields
    return error_response(exc.status, exc.code, str(exc), fields)


class CreateSchedule(JsonTyped, serializers.Serializer):
    # exactly one of cron and every_seconds (null is neither)
    openapi_request_rules = {"oneOf": [
        {"required": [given], "properties": {given: {"type": kind}},
         "not": {"required": [other], "properties": {other: {"type": other_kind}}}}
        for given, kind, other, other_kind in (("cron", "string", "every_seconds", "integer"),
                                               ("every_seconds", "integer", "cron", "string"))]}

    name = serializers.CharField(max_length=schedules.MAX_NAME)
    cron = serializers.CharField(required=False, allow_null=True, max_length=limits.CRON,
                                 help_text="five fields, UTC; or every_seconds")
    every_seconds = serializers.IntegerField(
        required=False, allow_null=True, min_value=schedule_timing.MIN_EVERY_SECONDS,
        max_value=schedule_timing.MAX_EVERY_SECONDS, help_text="or cron")
    mode = serializers.ChoiceField(ScheduleMode.values)
    prompt = serializers.CharField(max_length=schedules.MAX_PROMPT, trim_whitespace=False)
    runtime = serializers.CharField(required=False, allow_null=True, max_length=limits.RUNTIME,
                                    help_text="required except for subtask (default preset)")
    model = serializers.CharField(required=False, allow_null=True, max_length=limits.MODEL)
    provider = serializers.CharField(required=False, allow_null=True, max_length=limits.SLUG)
    profile = serializers.CharField(required=False, allow_null=True, max_length=limits.SLUG,
                                    help_text="the expert (Agent Profile slug)")
    extra_args = serializers.ListField(child=serializers.CharField(
        max_length=limits.ARG, trim_whitespace=False, validators=[one_line]),
                                       required=False, allow_null=True,
                                       max_length=limits.ARGS)

    def validate(self, attrs):
        # the timing rules live in one place (execution/schedule_timing.py)
        try:
            schedule_timing.check(attrs.get("cron"), attrs.get("every_seconds"))
        except schedule_timing.TimingError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        return attrs


class RunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    at = serializers.DateTimeField(help_text="the slot this run fired for")
    fired_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    state = serializers.ChoiceField(["pending", "queued", "running", "succeeded", "failed",
                                     "cancelled"])
    session = serializers.IntegerField(allow_null=True)
    task = serializers.IntegerField(allow_null=True)
    result = serializers.CharField(allow_null=True, help_text="the agent's final answer")
    error = serializers.DictField(allow_null=True)


class ScheduleSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    mode = serializers.ChoiceField(ScheduleMode.values)
    cron = serializers.CharField(allow_null=True)
    every_seconds = serializers.IntegerField(allow_null=True)
    timing = serializers.CharField()
    prompt = serializers.CharField()
    profile = serializers.CharField(allow_null=True)
    runtime = serializers.CharField(allow_null=True)
    model = serializers.CharField(allow_null=True)
    provider = serializers.CharField(allow_null=True)
    extra_args = serializers.ListField(child=serializers.CharField())
    execution = serializers.DictField(help_text="frozen when defined; every firing uses it")
    paused = serializers.BooleanField()
    next_fire_at = serializers.DateTimeField(allow_null=True)
    session = serializers.IntegerField(allow_null=True, help_text="reuse-session's session")
    last_run = RunSerializer(allow_null=True)
    created_at = serializers.DateTimeField()


def _page(request, view, queryset, render) -> Response:
    paginator: LimitOffsetPagination = BoundedLimitOffsetPagination()
    rows = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response([render(row) for row in rows])


class ScheduleList(APIView):
    @extend_schema(operation_id="schedules_list",
                   responses=page_of("SchedulePage", ScheduleSerializer(many=True)))
    def get(self, request):
        return _page(request, self, schedules.visible_to(request.user).order_by("-id"),
                     schedules.schedule_view)

    @extend_schema(request=CreateSchedule, responses={201: ScheduleSerializer})
    def post(self, request):
        body = CreateSchedule(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            schedule = schedules.create_schedule(owner=request.user, data=body.validated_data)
        except CommandError as exc:
            return _refused(exc)
        return Response(schedules.schedule_view(schedule), status=status.HTTP_201_CREATED)


def _mine(request, pk: int):
    return schedules.visible_to(request.user).filter(pk=pk).first()


def _missing(pk: int) -> Response:
    return error_response(404, "not_found", f"no schedule {pk} of yours")


class ScheduleDetail(APIView):
    @extend_schema(responses=ScheduleSerializer)
    def get(self, request, pk: int):
        schedule = _mine(request, pk)
        return Response(schedules.schedule_view(schedule)) if schedule else _missing(pk)

    @extend_schema(responses={204: None})
    @no_body
    def delete(self, request, pk: int):
        try:
            schedules.delete_schedule(owner=request.user, schedule_id=pk)
        except CommandError as exc:
            return _refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


class _Toggle(APIView):
    paused = True

    @extend_schema(request=None, responses=ScheduleSerializer)
    @no_body
    def post(self, request, pk: int):
        try:
            schedule = schedules.set_paused(owner=request.user, schedule_id=pk,
                                            paused=self.paused)
        except CommandError as exc:
            return _refused(exc)
        return Response(schedules.schedule_view(schedule))


class SchedulePause(_Toggle):
    paused = True


class ScheduleResume(_Toggle):
    paused = False


class ScheduleRuns(APIView):
    @extend_schema(operation_id="schedules_runs_list",
                   responses=page_of("ScheduleRunPage", RunSerializer(many=True)))
    def get(self, request, pk: int):
        if _mine(request, pk) is None:
            return _missing(pk)
        runs = ScheduleRun.objects.filter(schedule_id=pk).select_related("task") \
            .order_by("-slot")
        return _page(request, self, runs, schedules.run_view)
