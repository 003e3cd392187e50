"""The only writer of goals state. Each command is one durable transaction that locks its
root (the goal, agent or connector; goals/locks.py, in the one order), asks a pure rule in
goals/core/ and saves. A ``*_in_txn`` form is the same change as one step of a caller's
transaction (an inbox settle, a turn's writeback). Refusals raise ``Refused`` (status,
code, field)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from goals import comments, locks, queue, writeback
from goals.core import agent_access as access
from goals.core import connectors as ck
from goals.core import inbox as inbox_rules
from goals.core import lifecycle as lc
from goals.core import quota
from goals.core.lifecycle import Faults, Refused
from goals.models import (
    Agent,
    Connector,
    Decision,
    Goal,
    Material,
    QueuedIngress,
    Todo,
    WorkingSession,
)
from intake.models import Source
from sessions import app_servers, new_session, ownership, services
from sessions.models import ProviderProfile
from sessions.new_session import Launch, SessionSpec


def active_binding(agent: Agent) -> WorkingSession | None:
    return agent.bindings.filter(active=True).select_related("session").first()


# ------------------------------------------------------------------------------ goals
def create_goal(*, slug: str, title: str, description: str = "", check_command: str = "",
                quota_spec: dict[str, Any] | None = None) -> Goal:
    spec = quota_spec or {}
    unit, limit = spec.get("unit", "turns"), spec.get("limit", 0)
    quota.check(unit, limit, 0)
    with transaction.atomic(durable=True):
        if Goal.objects.filter(slug=slug).exists():
            raise Refused(f"a goal {slug!r} exists", code="exists", field="slug")
        try:
            with transaction.atomic():
                return Goal.objects.create(slug=slug, title=title, description=description,
                                           check_command=check_command, quota_unit=unit,
                                           quota_limit=limit)
        except IntegrityError as exc:
            raise Refused(f"a goal {slug!r} exists", code="exists", field="slug") from exc


def update_goal(slug: str, changes: dict[str, Any]) -> Goal:
    with transaction.atomic(durable=True):
        goal = locks.goal(slug=slug)
        if "state" in changes:
            goal.state = lc.transition(lc.GOAL_TRANSITIONS, "goal", goal.state,
                                       changes["state"])
        for field in ("title", "description", "check_command"):
            if field in changes:
                setattr(goal, field, changes[field])
        if "quota" in changes:
            spec = changes["quota"]
            unit = spec.get("unit", goal.quota_unit)
            limit = spec.get("limit", goal.quota_limit)
            if unit != goal.quota_unit and goal.quota_spent:
                raise Refused("quota.unit cannot change once quota is spent",
                              code="invalid", status=400, field="quota")
            quota.check(unit, limit, goal.quota_spent)
            goal.quota_unit, goal.quota_limit = unit, limit
        goal.save()
        return goal


# ------------------------------------------------------------------------------ todos
def add_todo(goal_slug: str, title: str) -> Todo:
    with transaction.atomic(durable=True):
        return add_todo_in_txn(goal_slug, title)


def add_todo_in_txn(goal_slug: str, title: str) -> Todo:
    """``add_todo`` as one step of the caller's transaction (an inbox settle)."""
    goal = locks.goal(slug=goal_slug)
    return Todo.objects.create(goal=goal, title=title)


def change_todo(goal_slug: str, todo_id: int, **changes: Any) -> Todo:
    """The change of a todo (``change_todo_in_txn``) in one transaction of its own."""
    with transaction.atomic(durable=True):
        return change_todo_in_txn(goal_slug, todo_id, **changes)


def change_todo_in_txn(goal_slug: str, todo_id: int, *, state: str | None = None,
                       evidence: str | None = None, title: str | None = None,
                       agent: str | None = None, as_agent: str | None = None) -> Todo:
    """``as_agent``: the change comes from that agent's own token (goals/agent_auth.py),
    which claims only for itself and never takes or drops a todo (core/agent_access.py)."""
    goal = locks.goal(slug=goal_slug)
    todo = locks.todo(goal, todo_id)
    if todo is None:
        raise Refused(f"unknown todo {todo_id}", code="not_found", status=404)
    if as_agent is not None:
        refused = access.todo_change_refusal(
            agent=as_agent, target_state=state, named_agent=agent,
            claimed_by=todo.claimed_by.slug if todo.claimed_by else None)
        if refused is not None:
            raise refused
        agent = as_agent
        acting = goal.agents.filter(slug=as_agent).first()
        if state == "done" and acting is not None and acting.mode == lc.ATTACHED:
            # its word alone is not done: amux checks first (goals/writeback.py)
            if title is not None:
                todo.title = title
            return writeback.request_in_txn(
                goal, todo, acting, evidence if evidence is not None else todo.evidence)
    if evidence is not None:
        todo.evidence = evidence
    if title is not None:
        todo.title = title
    if state is not None:
        new = lc.todo_transition(todo.state, state, todo.evidence)
        if new == "claimed" and todo.state != "claimed":
            todo.claimed_by = (goal.agents.filter(slug=agent).first() if agent else None)
            if agent and todo.claimed_by is None:
                raise Refused(f"unknown agent {agent!r}", code="invalid", status=400,
                              field="agent")
            if as_agent is not None and todo.claimed_by.mode == lc.ATTACHED:
                writeback.note_claim(todo, todo.claimed_by)
        elif new == "open":
            todo.claimed_by = None
        todo.state = new
    todo.save()
    return todo


# -------------------------------------------------------------------------- decisions
def open_decision_in_txn(goal_slug: str, kind: str, fields: dict,
                         settlement=None) -> Decision:
    """A decision an inbox settle leaves for a person (goals.core.inbox.DECISION_KINDS),
    as one step of the settle's transaction; a todo it names must be the goal's."""
    goal = locks.goal(slug=goal_slug)
    todo = None
    if fields.get("todo") is not None:
        todo = locks.todo(goal, fields["todo"])
        if todo is None:
            raise Refused(f"unknown todo {fields['todo']}", code="not_found", status=404,
                          field="todo")
    return Decision.objects.create(
        goal=goal, settlement=settlement, kind=kind, todo=todo,
        text=inbox_rules.decision_text(kind, fields),
        contradicts=fields.get("contradicts") or "")


def resolve_decision(goal_slug: str, pk: int, *, resolution: object, by: str) -> Decision:
    """A person decides: the decision is closed with their note, once. What the goal
    should now hold (a todo reopened, a material revised) is theirs to change, in its
    own place."""
    with transaction.atomic(durable=True):
        goal = locks.goal(slug=goal_slug)
        row = locks.decision(goal, pk)
        if row is None:
            raise Refused(f"unknown decision {pk}", code="not_found", status=404)
        row.resolution = inbox_rules.check_resolution(resolution, row.state)
        row.state, row.resolved_by, row.resolved_at = "resolved", by, timezone.now()
        row.save(update_fields=["resolution", "state", "resolved_by", "resolved_at"])
        return row


# -------------------------------------------------------------------------- materials
def register_material(goal_slug: str, **fields: Any) -> Material:
    """``register_material_in_txn`` in one transaction of its own."""
    with transaction.atomic(durable=True):
        return register_material_in_txn(goal_slug, **fields)


def register_material_in_txn(goal_slug: str, *, key: str, body: str, title: str = "",
                             source_ref: str = "", max_age_s: int | None = None
                             ) -> Material:
    """Register or refresh a document body: a changed body is a new revision; the same body
    only refreshes ``fetched_at``. Reading a body acknowledges no comment."""
    now = timezone.now()
    goal = locks.goal(slug=goal_slug)
    material = locks.material(goal, key)
    if material is None:
        return Material.objects.create(goal=goal, key=key, title=title, body=body,
                                       source_ref=source_ref, fetched_at=now,
                                       max_age_s=max_age_s or 86400)
    if body != material.body:
        material.revision += 1
        material.body = body
    material.fetched_at = now
    material.title = title or material.title
    material.source_ref = source_ref or material.source_ref
    if max_age_s:
        material.max_age_s = max_age_s
    material.save()
    return material


# ----------------------------------------------------------------------------- agents
def create_agent(goal_slug: str, *, slug: str, mode: str, name: str = "",
                 runtime: str = "pi", provider: str | None = None, model: str = "") -> Agent:
    lc.mode_change(mode, mode, False)  # a known mode
    provider_row = None
    if provider:
        provider_row = ProviderProfile.objects.filter(slug=provider).first()
        if provider_row is None:
            raise Refused(f"unknown provider {provider!r}", code="unknown_provider",
                          status=400, field="provider")
    if provider_row is not None and model:
        _check_provider_model(provider_row, model)
    with transaction.atomic(durable=True):
        goal = locks.goal(slug=goal_slug)
        if goal.agents.filter(slug=slug).exists():
            raise Refused(f"goal {goal_slug!r} has an agent {slug!r}", code="exists",
                          field="slug")
        return Agent.objects.create(goal=goal, slug=slug, name=name, mode=mode,
                                    runtime=runtime or "pi", provider=provider_row,
                                    model=model)


def _check_provider_model(provider_row, model: str) -> None:
    """The profile's own boundary (an Ark Agent Plan profile: its models, its key)."""
    try:
        new_session.check_template(provider_row, model)
    except services.CommandError as exc:
        raise Refused(str(exc), code=exc.code, status=400, field=exc.field) from exc


def change_provider(goal_slug: str, agent_slug: str, *, provider: str, model: str) -> Agent:
    """The explicit rebinding of a managed agent's provider and model (never a fallback):
    refused while a working session is bound — detach, change, start again."""
    faults = Faults()
    provider_row = ProviderProfile.objects.filter(slug=provider).first()
    if provider_row is None:
        faults.add(f"unknown provider {provider!r}", field="provider", code="unknown_provider")
    if not model.strip():
        faults.add("model is required", field="model", code="model_required")
    elif provider_row is not None:
        faults.check(_check_provider_model, provider_row, model)
    faults.settle()
    with transaction.atomic(durable=True):
        agent = locks.agent_of(goal_slug, agent_slug)
        if agent.mode != lc.MANAGED:
            raise Refused("an attached agent brings its session's provider",
                          code="wrong_mode", field="mode")
        if active_binding(agent) is not None:
            raise Refused("detach the agent's working session before changing its provider "
                          "or model", code="session_active", field="provider")
        agent.provider, agent.model = provider_row, model
        agent.save(update_fields=["provider", "model"])
        return agent


def change_mode(goal_slug: str, agent_slug: str, mode: str) -> Agent:
    with transaction.atomic(durable=True):
        agent = locks.agent_of(goal_slug, agent_slug)
        agent.mode = lc.mode_change(agent.mode, mode, active_binding(agent) is not None)
        agent.save(update_fields=["mode"])
        return agent


def start(goal_slug: str, agent_slug: str, by=None) -> WorkingSession:
    """Start a managed agent: create its working session through sessions' create path
    with the agent's runtime, provider and model, acting for (and reading the memory of)
    ``by``, the operator who started it. A second start while one is bound: 409."""
    with transaction.atomic(durable=True):
        agent = locks.agent_of(goal_slug, agent_slug)
        if agent.mode != lc.MANAGED:
            raise Refused("an attached agent is attached to a running session, not started",
                          code="wrong_mode", field="mode")
        if active_binding(agent) is not None:
            raise Refused("the agent already has an active working session",
                          code="session_active")
        if agent.provider_id is None:
            raise Refused("the agent has no provider: set one before starting it",
                          code="provider_required", status=400, field="provider")
        if not agent.model:
            raise Refused("the agent has no model: set one before starting it",
                          code="model_required", status=400, field="model")
        agent.lifecycle = lc.transition(lc.AGENT_TRANSITIONS, "agent", agent.lifecycle
                                        if agent.lifecycle != "stale" else "terminal",
                                        "starting")
        try:
            session = services.create_session(
                Launch.direct(runtime=agent.runtime, provider=agent.provider.slug,
                              model=agent.model),
                spec=SessionSpec(name=f"goal {agent.goal.slug} · {agent.slug}",
                                 scope=ownership.of_caller("goal", by)))
        except services.CommandError as exc:
            field = exc.field if exc.field in ("runtime", "provider", "model",
                                               "api_key") else None
            raise Refused(str(exc), code=exc.code, status=exc.status, field=field) from exc
        binding = WorkingSession.objects.create(agent=agent, session=session, mode=agent.mode)
        agent.lifecycle = lc.transition(lc.AGENT_TRANSITIONS, "agent", "starting", "ready")
        agent.save(update_fields=["lifecycle"])
        return binding


def attach(goal_slug: str, agent_slug: str, ref: str, thread: str | None = None
           ) -> WorkingSession:
    """Attach an attached-mode agent to a running app-server's thread (the broker's
    ``ref``; ``thread`` may be left out when it has one): checked live and matching the
    goal, agent and workspace first. No process starts: the amux session it creates
    drives that thread over the app-server's websocket. A second attach while bound: 409."""
    def refuse_mode(agent: Agent) -> None:
        if agent.mode != lc.ATTACHED:
            raise Refused("a managed agent is started, not attached", code="wrong_mode",
                          field="mode")
        if active_binding(agent) is not None:
            raise Refused("the agent already has an active working session",
                          code="session_active")

    agent = (Agent.objects.select_related("goal")
             .filter(goal__slug=goal_slug, slug=agent_slug).first())
    if agent is None:
        raise Refused(f"unknown agent {agent_slug!r} of goal {goal_slug!r}", code="not_found",
                      status=404)
    refuse_mode(agent)  # before any connection is made
    server = app_servers.get(ref) if isinstance(ref, str) else None
    if server is None:
        raise Refused(f"unknown attachable session {ref!r}", code="invalid", status=400,
                      field="session")
    info = app_servers.check(server)  # live now: connected and handshaken
    if info is None:
        raise Refused(f"the app-server {ref!r} is not live ({server.state})",
                      code="not_live", field="session")
    threads = info["threads"]
    if thread is None and len(threads) != 1:
        raise Refused(f"the app-server has {len(threads)} threads: name one",
                      code="invalid", status=400, field="thread")
    chosen = next((t for t in threads if thread is None or t["id"] == thread), None)
    if chosen is None:
        raise Refused(f"the app-server has no thread {thread!r}", code="invalid",
                      status=400, field="thread")
    for field, want, have in (("goal", goal_slug, server.goal),
                              ("agent", agent_slug, server.agent)):
        if have and have != want:
            raise Refused(f"the app-server belongs to {field} {have!r}, not {want!r}",
                          code="mismatch", field="session")
    if server.workspace and chosen["cwd"] != server.workspace:
        raise Refused("the thread works outside the app-server's workspace",
                      code="workspace_mismatch", field="thread")
    with transaction.atomic(durable=True):
        agent = locks.agent_of(goal_slug, agent_slug)
        refuse_mode(agent)
        if WorkingSession.objects.filter(
                active=True, session__runtime=app_servers.ATTACHED_RUNTIME,
                session__native_ref=chosen["id"]).exists():
            raise Refused("another agent is attached to that thread",
                          code="session_bound", field="thread")
        agent.lifecycle = lc.transition(lc.AGENT_TRANSITIONS, "agent", agent.lifecycle
                                        if agent.lifecycle != "stale" else "terminal",
                                        "starting")
        session = app_servers.attached_session(
            server, chosen, name=f"goal {agent.goal.slug} · {agent.slug} (attached)")
        # the agent's own loop reaches its goal's todos with this binding's token (an
        # app-server amux started reads it from its token file; detaching ends it)
        token = access.new_token() if server.origin == "spawned" else ""
        binding = WorkingSession.objects.create(
            agent=agent, session=session, mode=agent.mode,
            token_digest=access.digest(token) if token else "")
        if token:
            transaction.on_commit(lambda: app_servers.write_agent_token(server, token))
        agent.lifecycle = lc.transition(lc.AGENT_TRANSITIONS, "agent", "starting", "ready")
        agent.save(update_fields=["lifecycle"])
        return binding


def detach(goal_slug: str, agent_slug: str) -> WorkingSession:
    """Remove only the binding: the session, the goal and its todos stay as they are."""
    with transaction.atomic(durable=True):
        agent = locks.agent_of(goal_slug, agent_slug)
        binding = locks.binding(agent)
        if binding is None:
            raise Refused("the agent has no active working session", code="no_session")
        binding.active = False
        binding.ended_at = timezone.now()
        binding.save(update_fields=["active", "ended_at"])
        agent.lifecycle = "terminal"
        agent.save(update_fields=["lifecycle"])
        if binding.token_digest:  # the token already ended with the binding; take it back

            server = app_servers.app_server_of(binding.session)
            if server is not None:
                transaction.on_commit(lambda: app_servers.write_agent_token(server, ""))
        return binding


# ------------------------------------------------------------------------- connectors
def create_connector(*, goal: str, agent: str | None, source_kind: str,
                     provider_kind: str | None = None, source: str | None = None,
                     source_ref: str = "", capture_scope: str = "mentions",
                     ingress_mode: str = "", fallback: str = "none",
                     reply_mode: str = "none", mirror_ref: str = "") -> Connector:
    faults = Faults()  # every faulty field is named at once, before anything is kept
    kind = ck.check(source_kind=source_kind, provider_kind=provider_kind,
                    capture_scope=capture_scope, ingress_mode=ingress_mode,
                    fallback=fallback, reply_mode=reply_mode, faults=faults)
    source_row = None
    if kind is not None and kind.needs_source:
        source_row = _connector_source(faults, kind=source_kind, source=source,
                                       source_ref=source_ref)
    mirror_ref = faults.check(
        ck.check_mirror, source_kind=source_kind, reply_mode=reply_mode,
        mirror_ref=mirror_ref,
        groups=ck.configured_groups(source_row.config if source_row else None)) or ""
    if not Goal.objects.filter(slug=goal).exists():
        faults.add(f"unknown goal {goal!r}", field="goal")
    elif agent and not Agent.objects.filter(goal__slug=goal, slug=agent).exists():
        faults.add(f"goal {goal!r} has no agent {agent!r}", field="agent")
    elif not agent and Agent.objects.filter(goal__slug=goal).count() != 1:
        # several agents (or none) and no agent named: routing would be ambiguous
        faults.add("name the agent: a connector binds to one explicit agent",
                   field="agent", code="agent_required")
    faults.settle()
    with transaction.atomic(durable=True):
        goal_row = locks.goal(slug=goal)
        if agent:
            agent_row = goal_row.agents.filter(slug=agent).first()
            if agent_row is None:
                raise Refused(f"goal {goal!r} has no agent {agent!r}", code="invalid",
                              status=400, field="agent")
        else:
            agents = list(goal_row.agents.all()[:2])
            if len(agents) != 1:
                # several agents (or none) and no agent named: routing would be ambiguous
                raise Refused("name the agent: a connector binds to one explicit agent",
                              code="agent_required", status=400, field="agent")
            agent_row = agents[0]
        if source_kind == ck.LARK_BOT and Connector.objects.filter(
                agent=agent_row, source_kind=ck.LARK_BOT).exclude(
                state="disconnected").exists():
            raise Refused("the agent already has an active Lark Bot connection",
                          code="lark_bot_exists", field="agent")
        if source_kind == ck.LARK_BOT:
            _refuse_bound_chat(source_row, source_ref)
        state = "connected"
        if source_row is not None:
            state = "listening" if source_row.enabled else "disconnected"
        if source_kind == ck.DOCUMENT_COMMENT:
            # the document is attached: watched by its source from now on (bounded catch-up)
            source_row = locks.source(source_row.pk)
            source_ref = comments.watch(source_row, source_ref)
        return Connector.objects.create(
            goal=goal_row, agent=agent_row, provider_kind=kind.provider_kind,
            source_kind=source_kind, source=source_row, source_ref=source_ref,
            capture_scope=capture_scope, ingress_mode=ingress_mode, fallback=fallback,
            reply_mode=reply_mode, mirror_ref=mirror_ref, state=state)


def _connector_source(faults: Faults, *, kind: str, source: str | None, source_ref: str):
    """The intake source a Lark connector listens on, its faults (and its source_ref's)
    added to ``faults``."""
    if not source_ref:
        faults.add(f"a {kind} connector needs its source_ref", field="source_ref")
    if not source:
        faults.add(f"a {kind} connector needs its intake source", field="source")
        return None
    source_row = Source.objects.filter(slug=source, kind="lark").first()
    if source_row is None:
        faults.add(f"unknown lark source {source!r}", field="source")
        return None
    if ck.in_conversation_mode(source_row.config):
        # one source has one intake consumer: a conversation-mode source feeds
        # conversations, so a connector on it would never hear a message or comment
        faults.add(f"lark source {source!r} is in a conversation mode; a {ck.label(kind)} "
                   "connector needs a source whose conversation is off", field="source")
    if source_ref and kind == ck.DOCUMENT_COMMENT:
        faults.check(ck.document_ref, source_ref)
    if source_ref and kind == ck.LARK_BOT:  # as an explicit channel selection checks it
        faults.check(ck.check_channel, source_kind=kind, source_ref=source_ref,
                     groups=ck.configured_groups(source_row.config))
    return source_row


def _refuse_bound_chat(source, chat: str, exclude: int | None = None) -> None:
    """A chat hears one active Lark Bot connection: a second one on it would route each
    message to two agents. The source row is locked, so two connections made or moved at
    once onto one chat cannot both pass."""
    locks.source(source.pk)
    if Connector.objects.filter(source_kind=ck.LARK_BOT, source_ref=chat).exclude(
            state="disconnected").exclude(pk=exclude).exists():
        raise Refused("another active Lark Bot connection is bound to that chat",
                      code="channel_bound", field="source_ref")


def change_reply(pk: int, *, reply_mode: str | None = None,
                 mirror_ref: str | None = None) -> Connector:
    """Change where a connector's replies go (its reply_mode, and the mirror chat of a
    configured_mirror one), checked as at creation. A reply already asked for keeps the
    place it was asked for; capture, ingress, state and the agent do not change."""
    with transaction.atomic(durable=True):
        connector = locks.connector(pk)
        mode = connector.reply_mode if reply_mode is None else reply_mode
        mirror = connector.mirror_ref if mirror_ref is None else mirror_ref
        if mode != "configured_mirror" and reply_mode is not None and mirror_ref is None:
            mirror = ""  # leaving configured_mirror drops its mirror
        ck.check(source_kind=connector.source_kind, provider_kind=connector.provider_kind,
                 capture_scope=connector.capture_scope, ingress_mode=connector.ingress_mode,
                 fallback=connector.fallback, reply_mode=mode)
        groups = ck.configured_groups(connector.source.config if connector.source_id else None)
        connector.reply_mode = mode
        connector.mirror_ref = ck.check_mirror(source_kind=connector.source_kind,
                                               reply_mode=mode, mirror_ref=mirror,
                                               groups=groups)
        connector.save(update_fields=["reply_mode", "mirror_ref", "updated_at"])
        return connector


def select_channel(pk: int, source_ref: str) -> Connector:
    """The explicit channel selection of a Lark Bot connection: it listens on another of
    its source's configured chats from now on. Refused (400) for a chat the source is not
    configured for, (409) for one another active Lark Bot connection is bound to. The
    agent's mode, working session, queue and inbox, and the goal's todos stay as they are;
    choosing the chat it already has changes nothing."""
    with transaction.atomic(durable=True):
        connector = locks.connector(pk)
        groups = ck.configured_groups(connector.source.config if connector.source_id else None)
        ck.check_channel(source_kind=connector.source_kind, source_ref=source_ref,
                         groups=groups)
        if source_ref == connector.source_ref:
            return connector
        _refuse_bound_chat(connector.source, source_ref, exclude=pk)
        connector.source_ref = source_ref
        connector.save(update_fields=["source_ref", "updated_at"])
        return connector


def disconnect(pk: int) -> Connector:
    with transaction.atomic(durable=True):
        connector = locks.connector(pk)
        connector.state = "disconnected"
        connector.save(update_fields=["state", "updated_at"])
        return connector


def reconnect(pk: int) -> Connector:
    """A disconnected connector listens again with the settings it had; refused while the
    agent has another active connection of the same kind (one Lark Bot, one web chat) and
    while its source is disabled (it would only stay disconnected). A connector that is
    not disconnected is answered as it is."""
    with transaction.atomic(durable=True):
        connector = locks.connector(pk)
        if connector.state != "disconnected":
            return connector
        kind = connector.source_kind
        if kind in (ck.LARK_BOT, "web_chat") and Connector.objects.filter(
                agent_id=connector.agent_id, source_kind=kind).exclude(
                state="disconnected").exclude(pk=pk).exists():
            raise Refused(f"the agent already has an active {ck.label(kind)} connection; "
                          "disconnect it first",
                          code="lark_bot_exists" if kind == ck.LARK_BOT else "connection_exists",
                          field="agent")
        if connector.source_id is not None and not connector.source.enabled:
            raise Refused(f"source {connector.source.slug!r} is disabled: enable it before "
                          "reconnecting", code="source_disabled", field="source")
        if kind == ck.LARK_BOT and connector.source_id is not None:
            ck.check_channel(source_kind=kind, source_ref=connector.source_ref,
                             groups=ck.configured_groups(connector.source.config))
            _refuse_bound_chat(connector.source, connector.source_ref, exclude=pk)
        if kind == ck.DOCUMENT_COMMENT and connector.source_id is not None:
            comments.watch(locks.source(connector.source_id),
                           connector.source_ref)
        connector.state = "connected" if connector.source_id is None else "listening"
        connector.save(update_fields=["state", "updated_at"])
        return connector


def ensure_web_chat(agent: Agent) -> Connector:
    """The agent's web chat connector, created the first time someone writes to the agent:
    live steering into its working session, no fallback (create one with other settings
    through ``connectors/`` beforehand to change that)."""
    with transaction.atomic(durable=True):
        agent = locks.agent(agent.pk)
        existing = agent.connectors.filter(source_kind="web_chat").exclude(
            state="disconnected").order_by("id").first()
        if existing:
            return existing
        return Connector.objects.create(
            goal=agent.goal, agent=agent, provider_kind="web", source_kind="web_chat",
            capture_scope="configured_chat_all", ingress_mode="live_steering")


def rebind(pk: int) -> dict[str, int]:
    """Explicitly move this connector's queue onto its agent's current working session:
    items waiting for, or dead-lettered because of, a replaced session are queued again in
    their order. Expired or cancelled items stay as they are."""
    with transaction.atomic(durable=True):
        connector = locks.connector(pk)
        binding = active_binding(connector.agent)
        if binding is None:
            raise Refused("the agent has no active working session to rebind to",
                          code="no_session")
        items = locks.queued(
            QueuedIngress.objects.filter(receipt__connector=connector,
                                         state__in=["queued", "dead"])
            .exclude(session=binding.session).select_related("receipt"))
        moved = 0
        for item in items:
            if item.state == "dead" and item.receipt.reason != "session_replaced":
                continue
            item.session, item.state, item.ended_at = binding.session, "queued", None
            item.save(update_fields=["session", "state", "ended_at"])
            receipt = item.receipt
            receipt.session, receipt.outcome, receipt.reason = binding.session, "queued", ""
            receipt.save(update_fields=["session", "outcome", "reason", "updated_at"])
            queue.schedule(item)  # in the new session's line, in their order
            moved += 1
        return {"rebound": moved, "session": binding.session_id}


def cancel_queued(receipt_id: int):
    with transaction.atomic(durable=True):
        receipt = locks.receipt(receipt_id)
        if receipt is None:
            raise Refused(f"unknown receipt {receipt_id}", code="not_found", status=404)
        item = next(iter(locks.queued(QueuedIngress.objects.filter(receipt=receipt))), None)
        if item is None or item.state != "queued":
            raise Refused("only a queued item can be cancelled", code="not_queued")
        item.state, item.ended_at = "cancelled", timezone.now()
        item.save(update_fields=["state", "ended_at"])
        receipt.outcome, receipt.reason = "cancelled", "cancelled"
        receipt.save(update_fields=["outcome", "reason", "updated_at"])
        return receipt
