"""REST: ``tasks/`` and ``instances/`` (``instances/<id>/tasks``). A caller sees only the
task runs and instances it owns (another's answer 404); operators see all in the panel."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from amux_common.bounds import one_line
from amux_common.fields import JsonTyped
from execution import instances, task_runs
from execution.core.launch_rules import TASK_POLICIES
from execution.models import AgentInstance, TaskRun
from sessions import limits, services
from sessions.api import _refused, _valid


class TaskRunSerializer(serializers.ModelSerializer):
    profile = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    error = serializers.SerializerMethodField()

    class Meta:
        model = TaskRun
        fields = ["id", "state", "prompt", "result", "error", "session", "instance", "profile",
                  "owner", "execution", "created_at", "started_at", "ended_at"]

    def get_error(self, obj: TaskRun) -> dict[str, Any] | None:
        if obj.state != "failed":
            return None
        return {"code": obj.error_code, "message": obj.error_message}


class SubmitTask(JsonTyped, serializers.Serializer):
    prompt = serializers.CharField(max_length=task_runs.MAX_PROMPT, trim_whitespace=False)
    profile = serializers.CharField(required=False, allow_null=True, max_length=limits.SLUG,
                                    help_text="the expert (an Agent Profile slug)")
    runtime = serializers.CharField(required=False, allow_null=True, max_length=limits.RUNTIME,
                                    help_text="default: the default launch preset's")
    model = serializers.CharField(required=False, allow_null=True, max_length=limits.MODEL)
    provider = serializers.CharField(required=False, allow_null=True, max_length=limits.SLUG)
    extra_args = serializers.ListField(
        child=serializers.CharField(trim_whitespace=False, max_length=limits.ARG,
                                    validators=[one_line]),
        required=False, allow_null=True, max_length=limits.ARGS,
        help_text="native command-line arguments")
    permission_policy = serializers.ChoiceField(list(TASK_POLICIES), required=False,
                                                allow_null=True)


class InstanceTask(JsonTyped, serializers.Serializer):
    prompt = serializers.CharField(max_length=task_runs.MAX_PROMPT, trim_whitespace=False)


class TaskList(generics.ListAPIView):
    serializer_class = TaskRunSerializer

    def get_queryset(self):
        return task_runs.visible_to(self.request.user).select_related("profile", "owner")

    @extend_schema(request=SubmitTask, responses={201: TaskRunSerializer})
    def post(self, request):
        data = _valid(SubmitTask, request)
        try:
            run = task_runs.submit_task(owner=request.user, **data)
        except services.CommandError as exc:
            return _refused(exc)
        return Response(TaskRunSerializer(run).data, status=status.HTTP_201_CREATED)


class TaskDetail(generics.RetrieveAPIView):
    serializer_class = TaskRunSerializer

    def get_queryset(self):
        return task_runs.visible_to(self.request.user).select_related("profile", "owner")


# ------------------------------------------------------------------------- instances
class InstanceSerializer(serializers.ModelSerializer):
    profile = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    lifecycle = serializers.CharField(source="session.lifecycle", read_only=True)
    execution = serializers.SerializerMethodField()

    class Meta:
        model = AgentInstance
        fields = ["id", "name", "profile", "owner", "session", "lifecycle", "execution",
                  "created_at"]

    def get_execution(self, obj: AgentInstance) -> dict[str, Any]:
        return dict((obj.session.snapshot or {}).get("execution") or {})


class CreateInstance(JsonTyped, serializers.Serializer):
    name = serializers.CharField(max_length=instances.MAX_NAME)
    profile = serializers.CharField(required=False, allow_null=True, max_length=limits.SLUG)
    runtime = serializers.CharField(required=False, allow_null=True, max_length=limits.RUNTIME)
    model = serializers.CharField(required=False, allow_null=True, max_length=limits.MODEL)
    provider = serializers.CharField(required=False, allow_null=True, max_length=limits.SLUG)
    extra_args = serializers.ListField(
        child=serializers.CharField(trim_whitespace=False, max_length=limits.ARG,
                                    validators=[one_line]),
        required=False, allow_null=True, max_length=limits.ARGS)
    permission_policy = serializers.ChoiceField(list(TASK_POLICIES), required=False,
                                                allow_null=True)


class InstanceList(generics.ListAPIView):
    serializer_class = InstanceSerializer

    def get_queryset(self):
        return instances.visible_to(self.request.user).select_related("profile", "owner",
                                                                       "session")

    @extend_schema(request=CreateInstance, responses={201: InstanceSerializer})
    def post(self, request):
        data = _valid(CreateInstance, request)
        try:
            agent = instances.create_instance(owner=request.user, **data)
        except services.CommandError as exc:
            return _refused(exc)
        return Response(InstanceSerializer(agent).data, status=status.HTTP_201_CREATED)


class InstanceDetail(generics.RetrieveAPIView):
    serializer_class = InstanceSerializer

    def get_queryset(self):
        return instances.visible_to(self.request.user).select_related("profile", "owner",
                                                                       "session")


class InstanceTasks(generics.ListAPIView):
    """A task posted while another runs waits in the instance's queue (``queued``)."""

    serializer_class = TaskRunSerializer

    def _instance(self) -> AgentInstance:
        agent = instances.visible_to(self.request.user).filter(pk=self.kwargs["pk"]).first()
        if agent is None:
            raise NotFound("no such instance of yours")
        return agent

    def get_queryset(self):
        return self._instance().task_runs.select_related("profile", "owner")

    @extend_schema(request=InstanceTask, responses={201: TaskRunSerializer})
    def post(self, request, pk: int):
        agent = self._instance()
        data = _valid(InstanceTask, request)
        try:
            run = task_runs.submit_task(owner=request.user, prompt=data["prompt"],
                                        instance=agent)
        except services.CommandError as exc:
            return _refused(exc)
        return Response(TaskRunSerializer(run).data, status=status.HTTP_201_CREATED)
