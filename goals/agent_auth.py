"""REST door for an attached agent's own loop: ``Authorization: Bearer amxg_…`` on its
goal's ``todos/`` and its own ``inbox/`` (urgency, drain, settle); goals/core/agent_access.py
says what it may do.

amux issues the token when it attaches the agent to a thread of an app-server it started
(goals.actions.attach) and hands it over in the app-server's token file
(``AMUX_AGENT_TOKEN_FILE``, with ``AMUX_API_URL``); the app-server's own agent, driven by
its automation prompt, reads and writes todos with it without any managed turn. Only the
digest is stored; the token ends with the binding. It authenticates nowhere else: the
operator endpoints use the ``Token`` scheme and sessions, the executor's tools their
assignment tokens."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.settings import api_settings

from amux_common.api import bearer_token
from amux_common.roles import OperatorOrReadOnly
from goals.core import agent_access as access
from goals.models import WorkingSession


class AgentPrincipal:
    """The caller: one agent, through one working-session binding."""

    is_authenticated = True
    is_anonymous = False
    is_active = False  # no role: operator rules never let it through
    is_staff = False
    is_superuser = False

    def __init__(self, binding: WorkingSession):
        self.binding = binding
        self.agent = binding.agent.slug
        self.goal = binding.agent.goal.slug
        self.username = f"agent-{self.goal}-{self.agent}"

    def get_username(self) -> str:
        return self.username

    def __str__(self):
        return self.username


class AgentTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        token = bearer_token(request, "agent token")
        if token is None:
            return None
        binding = (WorkingSession.objects.select_related("agent__goal")
                   .filter(token_digest=access.digest(token)).first()
                   if access.looks_like_agent_token(token) else None)
        if binding is None:
            raise exceptions.AuthenticationFailed("unknown agent token")
        return AgentPrincipal(binding), token

    def authenticate_header(self, request):
        return f'{self.keyword} realm="amux agent"'


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = AgentTokenAuthentication
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "An attached agent's token (issued on attach, ends on detach)."}


class OperatorOrOwnGoal(permissions.BasePermission):
    """People: the usual rule (signed-in users read, operators change). An agent token: on
    its own goal, while its binding is active."""

    message = OperatorOrReadOnly.message

    def has_permission(self, request, view):
        principal = request.user
        if not isinstance(principal, AgentPrincipal):
            return OperatorOrReadOnly().has_permission(request, view)
        binding_active = WorkingSession.objects.filter(pk=principal.binding.pk,
                                                       active=True).exists()
        refused = access.token_refusal(binding_active=binding_active,
                                       token_goal=principal.goal,
                                       goal=view.kwargs.get("slug", ""),
                                       token_agent=principal.agent,
                                       agent=view.kwargs.get("agent"))
        if refused is not None:
            self.message, self.code = str(refused), refused.code
            return False
        return True


class AgentOrOperator:
    """A view an agent token reaches as well as operators (viewers read)."""

    authentication_classes = [AgentTokenAuthentication,
                              *api_settings.DEFAULT_AUTHENTICATION_CLASSES]
    permission_classes = [OperatorOrOwnGoal]


def agent_of(request) -> AgentPrincipal | None:
    return request.user if isinstance(request.user, AgentPrincipal) else None
