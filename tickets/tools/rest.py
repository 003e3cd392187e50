"""REST door to the executor's tools: /api/v1/tools/… with `Authorization: Bearer <token>`.

Only the assignment token authenticates here (an operator's API token or login does not),
and an assignment token authenticates nowhere else (the operator endpoints use DRF's
`Token` scheme and sessions). The logic is tickets.tools.service, shared with MCP. The
memory tools also take a session's own credential (a Pi session's `amux memory`, which has
no MCP: execution.session_tools); every other tool refuses it (403).
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import extend_schema
from rest_framework import authentication, exceptions, permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.api import bearer_token, error_response
from amux_common.fields import UNKNOWN, bound_errors
from execution import session_tools
from sessions import gateway_rules
from sessions.refusals import CommandError
from tickets import limits
from tickets.tools import service
from tickets.tools.service import ToolRefused


class AssignmentPrincipal:
    """The caller: one worker session acting for one live assignment."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False

    def __init__(self, assignment):
        self.assignment = assignment
        self.username = f"assignment-{assignment.pk}"

    def __str__(self):
        return self.username


class SessionPrincipal:
    """The caller: a session (no ticket's) with its own credential: memory tools only."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False

    def __init__(self, token: str, session_id: int):
        self.token = token
        self.username = f"session-{session_id}"

    def __str__(self):
        return self.username


class AssignmentTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer amx_…` → the live assignment it was issued for (or, for a
    live session's own credential, that session: ``SessionPrincipal``)."""

    keyword = "Bearer"

    def authenticate(self, request):
        token = bearer_token(request, "assignment token")
        if token is None:
            return None
        if gateway_rules.looks_like_credential(token):
            session = session_tools.session_of(token)
            if session is None:
                raise exceptions.AuthenticationFailed("not a live session's credential")
            return SessionPrincipal(token, session.pk), token
        try:
            assignment = service.resolve_token(token)
        except ToolRefused as refused:
            if refused.status == 401:
                raise exceptions.AuthenticationFailed(refused.message) from None
            raise exceptions.PermissionDenied(refused.message) from None
        return AssignmentPrincipal(assignment), token

    def authenticate_header(self, request):
        return f'{self.keyword} realm="amux assignment"'


class AssignmentTokenScheme(OpenApiAuthenticationExtension):
    target_class = AssignmentTokenAuthentication
    name = "assignmentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "The bearer token of one assignment (issued at dispatch)."}


class IsAssignment(permissions.BasePermission):
    def has_permission(self, request, view):
        return isinstance(request.user, AssignmentPrincipal)


def _check_bounds(body: type[serializers.Serializer], data) -> None:
    fields = bound_errors(body, data)
    if fields:
        raise ToolRefused(400, "invalid", "; ".join(f"{k}: {v}" for k, v in fields.items()),
                          fields)


class ToolView(APIView):
    authentication_classes = [AssignmentTokenAuthentication]
    permission_classes = [IsAssignment]
    tool = ""
    body: type[serializers.Serializer] | None = None  # the documented body: nothing else

    def _data(self, request) -> dict:
        data = request.data if request.method != "GET" else request.query_params
        if not hasattr(data, "get"):
            raise ToolRefused(400, "invalid", "the body must be a JSON object")
        if self.body is not None:
            unknown = sorted(str(k) for k in data if k not in self.body().fields)
            if unknown:
                raise ToolRefused(400, "invalid", f"unknown field: {', '.join(unknown)}",
                                  {name: [UNKNOWN] for name in unknown})
            _check_bounds(self.body, data)
        return data

    def _run(self, request, call, status: int = 200) -> Response:
        try:
            data = self._data(request)
            assignment = request.user.assignment
            service.check_named(assignment, data.get("assignment"))
            return Response(call(assignment, data), status=status)
        except ToolRefused as refused:
            return error_response(refused.status, refused.code, refused.message, refused.fields)


class ToolBody(serializers.Serializer):
    assignment = serializers.IntegerField(
        required=False, min_value=1, max_value=limits.ID_MAX,
        help_text="the token's own assignment id (any other answers 403)")


class ReportSerializer(ToolBody):
    status = serializers.ChoiceField(choices=["progress", "done", "blocked", "failed"])
    text = serializers.CharField(required=False, allow_blank=True, max_length=limits.REPORT_TEXT)


class AskSerializer(ToolBody):
    question = serializers.CharField(max_length=limits.QUESTION)
    options = serializers.ListField(child=serializers.CharField(max_length=limits.QUESTION_OPTION),
                                    required=False, max_length=limits.QUESTION_OPTIONS)
    multi = serializers.BooleanField(required=False)
    message_ref = serializers.CharField(required=False, allow_blank=True,
                                        max_length=limits.MESSAGE_REF)


class HandBackSerializer(ToolBody):
    trigger = serializers.IntegerField(min_value=1, max_value=limits.ID_MAX)
    reason = serializers.CharField(max_length=limits.REASON)


class ReplySerializer(ToolBody):
    text = serializers.CharField(max_length=limits.REPLY_TEXT)


class PullRequestSerializer(ToolBody):
    title = serializers.CharField(max_length=limits.PR_TITLE)
    head = serializers.CharField(max_length=limits.PR_BRANCH,
                                 help_text="the ticket's own branch, amux/<short name>")
    base = serializers.CharField(required=False, max_length=limits.PR_BRANCH)
    body = serializers.CharField(required=False, allow_blank=True, max_length=limits.PR_BODY)


class MemorySearchSerializer(ToolBody):
    query = serializers.CharField(max_length=limits.MEMORY_QUERY)


class MemoryReadSerializer(ToolBody):
    id = serializers.CharField(max_length=limits.MEMORY_ID)


class ReportView(ToolView):
    body = ReportSerializer
    @extend_schema(request=ReportSerializer, responses=dict,
                   description=service.DESCRIPTIONS["report"])
    def post(self, request):
        return self._run(request, lambda a, d: service.report(
            a, status=d.get("status"), text=d.get("text")), status=201)


class AskView(ToolView):
    body = AskSerializer

    @extend_schema(request=AskSerializer, responses=dict, description=service.DESCRIPTIONS["ask"])
    def post(self, request):
        return self._run(request, lambda a, d: service.ask(
            a, question=d.get("question"), options=_list(d, "options"), multi=d.get("multi"),
            message_ref=d.get("message_ref")), status=201)


class HandBackView(ToolView):
    body = HandBackSerializer

    @extend_schema(request=HandBackSerializer, responses=dict,
                   description=service.DESCRIPTIONS["hand_back"])
    def post(self, request):
        return self._run(request, lambda a, d: service.hand_back(
            a, trigger=d.get("trigger"), reason=d.get("reason")))


class HandBackDashView(HandBackView):
    """`hand-back`, the spelling of the command, answers the same (and is documented: the
    published document lists every route amux serves)."""


class ReplyView(ToolView):
    body = ReplySerializer

    @extend_schema(request=ReplySerializer, responses=dict,
                   description=service.DESCRIPTIONS["reply"])
    def post(self, request):
        return self._run(request, lambda a, d: service.reply(a, text=d.get("text")),
                         status=202)


class PullRequestView(ToolView):
    body = PullRequestSerializer

    @extend_schema(request=PullRequestSerializer, responses=dict,
                   description=service.DESCRIPTIONS["pull_request"])
    def post(self, request):
        return self._run(request, lambda a, d: service.pull_request(
            a, title=d.get("title"), head=d.get("head"), base=d.get("base"),
            body=d.get("body")), status=201)


class IsAssignmentOrSession(permissions.BasePermission):
    def has_permission(self, request, view):
        return isinstance(request.user, AssignmentPrincipal | SessionPrincipal)


class MemoryView(ToolView):
    """A memory tool: the worker's (its ticket's session) or a session's own."""

    permission_classes = [IsAssignmentOrSession]

    def _memory(self, request, call, tool: str, key: str, field: str) -> Response:
        if not isinstance(request.user, SessionPrincipal):
            return self._run(request, call)
        try:
            data = self._data(request)
            return Response(session_tools.memory_call(request.user.token, tool,
                                                      {key: data.get(field)}))
        except ToolRefused as refused:
            return error_response(refused.status, refused.code, refused.message,
                                  refused.fields)
        except session_tools.NotASession:
            return error_response(401, "not_authenticated", "not a live session's credential")
        except CommandError as exc:
            return error_response(exc.status, exc.code, str(exc))


class MemorySearchView(MemoryView):
    body = MemorySearchSerializer

    @extend_schema(request=MemorySearchSerializer, responses=dict,
                   description=service.DESCRIPTIONS["memory_search"])
    def post(self, request):
        return self._memory(request, lambda a, d: service.memory(a, query=d.get("query")),
                            "memory_search", "query", "query")


class MemoryReadView(MemoryView):
    body = MemoryReadSerializer

    @extend_schema(request=MemoryReadSerializer, responses=dict,
                   description=service.DESCRIPTIONS["memory_read"])
    def post(self, request):
        return self._memory(request, lambda a, d: service.memory(a, entry_id=d.get("id")),
                            "memory_read", "entry_id", "id")


class GitCredentialSerializer(ToolBody):
    protocol = serializers.CharField(max_length=limits.GIT_PROTOCOL)
    host = serializers.CharField(max_length=limits.GIT_HOST)
    path = serializers.CharField(required=False, allow_blank=True, max_length=limits.GIT_PATH)


class GitCredentialView(ToolView):
    """For the worker's git credential helper (`git-credential-amux`), not for the model."""

    body = GitCredentialSerializer

    @extend_schema(request=GitCredentialSerializer, responses=dict,
                   description="The worker's git credential (git's credential-helper "
                   "`get`): its assignment token, for amux's git gateway "
                   "(/gateway/git/<owner>/<repo>.git of the ticket's repository) only; "
                   "any other host or path answers 403. Never an upstream token.")
    def post(self, request):
        return self._run(request, lambda a, d: service.git_credential(
            a, request.auth, protocol=d.get("protocol"), host=d.get("host"),
            path=d.get("path")))


class ContextView(ToolView):
    @extend_schema(responses=dict, description=service.DESCRIPTIONS["context"])
    def get(self, request):
        return self._run(request, lambda a, d: service.context(a))


def _list(data, name):
    """A JSON list, or repeated form fields."""
    if hasattr(data, "getlist") and not isinstance(data.get(name), list):
        values = data.getlist(name)
        return values or None
    return data.get(name)
