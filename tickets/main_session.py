"""The team's one main session (seed 002): a real runtime session whose every turn reads
the panel's "main" prompt (prompts_app role "main"), told of explicit requests and of
people's follow-ups, acting only through its amux tools (route, dismiss, stop; served by
tickets/tools/main_server.py with a bearer token of its own).

Its tools are the same actions whichever router decides (tickets/actions/main_routing.py);
the rules are in tickets/core/main_session.py. With no main runtime configured, or when
the session layer refuses to start it, a request takes amux's own route: nothing accepted
waits on a session that cannot run.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from django.conf import settings
from django.db import transaction

from intake.models import Trigger
from sessions import isolation
from sessions import services as sessions
from sessions.new_session import Launch, Prompting, SessionSpec
from tickets import main_config
from tickets.actions import main_routing
from tickets.core import main_session as rules
from tickets.core import tokens
from tickets.models import MainSession
from tickets.tools import mcp_server_entry
from tickets.workspace import amux_url

log = logging.getLogger(__name__)

SESSION_NAME = "main"


def token_file() -> Path:
    return Path(settings.DATA_DIR) / "run" / "worker-tokens" / "main"


def workdir() -> Path:
    """An empty directory of its own: the main session reads and writes no code."""
    path = Path(settings.WORK_DIR) / "main-session"
    path.mkdir(parents=True, exist_ok=True)
    return path


def ensure(config: main_config.MainConfig) -> int:
    """The main session for these settings: the one there, or a new one (with a new token)
    when there is none or the runtime, provider or model changed."""
    with transaction.atomic():
        MainSession.objects.get_or_create(pk=1)
        row = MainSession.objects.select_for_update(of=("self",)).select_related(
            "session__provider").get(pk=1)
        current = row.session
        if current is not None and row.token_hash and token_file().is_file() and (
                current.runtime, current.provider.slug if current.provider else "",
                current.model) == (config.runtime, config.provider, config.model):
            return current.pk
        session = sessions.create_session(
            Launch.direct(
                runtime=config.runtime, provider=config.provider, model=config.model,
                mcp_servers=[mcp_server_entry(amux_url(), str(token_file()))],
                ask_user=False),  # it decides with its tools; it never waits on a person
            # every turn reads the current "main" prompt of the panel
            Prompting(prompt_role="main"),
            SessionSpec(workdir=str(workdir()), name=SESSION_NAME),
        )
        token = tokens.new_token()
        row.session = session
        row.token_hash = tokens.token_hash(token)
        row.save(update_fields=["session", "token_hash", "updated_at"])
        _write_token(token, session.pk)
        return session.pk


def _write_token(token: str, session_id: int) -> None:
    path = token_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_suffix(".partial")
    partial.write_text(token)
    partial.chmod(0o600)
    os.replace(partial, path)
    isolation.share_with_session(path, session_id)  # its runtime user alone reads it


def notify(effect_id: int, payload: dict) -> None:
    """The outbox handler of `main.notify`: tell the main session of an explicit request
    (it routes or dismisses it) or of a person's follow-up (it may only stop the ticket)."""
    trigger = (Trigger.objects.select_related("source", "thread")
               .filter(pk=payload.get("trigger")).first())
    if trigger is None:
        return
    request = payload.get("what") == "request"
    if request and trigger.disposition != rules.AWAITING:
        return  # decided already (a replay after a crash)
    config = main_config.current()
    if config is None:  # the main runtime was removed meanwhile: amux routes it
        if request:
            main_routing.route_by_code(trigger_id=trigger.pk)
        return
    if request:
        text = rules.request_notice(
            trigger=trigger.pk, actor=trigger.actor, source=trigger.source.slug,
            thread=trigger.thread.key, url=trigger.thread.url, text=trigger.text)
    else:
        text = rules.followup_notice(
            trigger=trigger.pk, ticket=payload.get("ticket"), actor=trigger.actor,
            thread=trigger.thread.key, text=trigger.text)
    try:
        session_id = ensure(config)
        sessions.post_message(session_id, text, key=rules.notice_key(trigger.pk),
                              origin={"via": "amux", "actor": trigger.actor})
    except sessions.CommandError as exc:
        log.warning("main session cannot take trigger %s (%s); routing it by code",
                    trigger.pk, exc)
        if request:
            main_routing.route_by_code(trigger_id=trigger.pk)


def turn_ended(payload: dict) -> None:
    """A main-session turn ended (any state). An explicit request it was told of and left
    awaiting — the turn failed, or the model neither routed nor dismissed it — takes
    amux's own route: a person asked, and the request is not lost to a silent router."""
    session_id = payload.get("session")
    if session_id is None or not MainSession.objects.filter(pk=1, session_id=session_id).exists():
        return
    trigger = rules.told_trigger(payload.get("turn_key"))
    if trigger is not None:
        main_routing.route_by_code(trigger_id=trigger)
