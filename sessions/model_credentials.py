"""A session's model-gateway credential: what its runtime presents in place of the
provider's key (sessions/model_gateway.py).

Issued at each runtime launch (the previous one stops working: only one process holds a
session's runtime), stored as a hash, revoked when the session is archived or the ticket's
assignment it serves ends. The runtime's base URL becomes amux's own gateway path for the
provider's API (``gateway_spec``), so the provider's key stays in amux.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC

from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone

from runtimes.base import ProviderSpec
from sessions import gateway_rules, hooks
from sessions.models import (
    AppServer,
    Lifecycle,
    ModelCredential,
    ProviderProfile,
    Session,
    UsageDay,
)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def gateway_url(platform: str) -> str:
    """The base URL a runtime is given for a provider of ``platform``."""
    return (f"{settings.AMUX_URL.rstrip('/')}{gateway_rules.PREFIX}"
            f"{gateway_rules.API_OF_PLATFORM[platform]}")


def new_token() -> tuple[str, str]:
    """A fresh credential and the hash that is all amux keeps of it."""
    token = gateway_rules.TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, _hash(token)


def issue(session_id: int) -> str:
    """A new credential for the session (replacing any earlier one); only its hash is
    stored. From then on the session's usage is metered by the gateway
    (``Session.usage_metered``)."""
    token, token_hash = new_token()
    Session.objects.filter(pk=session_id, usage_metered=False).update(usage_metered=True)
    ModelCredential.objects.update_or_create(
        session_id=session_id,
        defaults={"token_hash": token_hash, "issued_at": timezone.now(),
                  "revoked_at": None})
    return token


issue_for = issue  # the name gateway_spec's keyword shadows


def gateway_spec(session: Session, *, issue: bool = True) -> ProviderSpec:
    """The provider as the session's runtime sees it: amux's gateway and a fresh session
    credential (never the provider's own URL or key); ``issue`` False: no credential (and
    the running runtime's stays valid)."""
    provider = session.provider
    assert provider is not None
    return ProviderSpec(platform=provider.platform, base_url=gateway_url(provider.platform),
                        api_key=issue_for(session.pk) if issue else "", slug=provider.slug)


def revoke(session_id: int) -> None:
    """The session's credential stops working at once (its next request answers 401)."""
    ModelCredential.objects.filter(session_id=session_id, token_hash__isnull=False).update(
        token_hash=None, revoked_at=timezone.now())


@dataclass(frozen=True)
class Grant:
    """What one credential lets its session (or spawned app-server) reach."""

    session_id: int | None  # None: an app-server's, which no session's caps or prompt bind
    platform: str
    base_url: str
    key: str  # the provider's: never leaves amux
    app_server_id: int | None = None
    provider: str = ""  # the profile's slug and the model configured (metrics' labels)
    model: str = ""
    # what the caps' probes read with the grant (sessions.hooks.model_request_caps)
    probed: tuple | None = None

    @property
    def holder(self) -> str:
        return (f"session {self.session_id}" if self.session_id is not None
                else f"app-server {self.app_server_id}")


def grant_for(token: str) -> Grant | None:
    """The live grant of a credential, or None (unknown, revoked, archived session, or a
    session without a provider)."""
    if not gateway_rules.looks_like_credential(token):
        return None
    token_hash = _hash(token)
    probes = hooks.model_request_caps.probes("s.id")
    probed = None
    with connection.cursor() as cursor:
        cursor.execute(_grant_sql(probes), [token_hash, Lifecycle.ARCHIVED.value])
        row = cursor.fetchone()
        if row is None:  # rarely: a spawned app-server's credential
            cursor.execute(_APP_SERVER_GRANT_SQL, [token_hash])
            found = cursor.fetchone()
            if found is None:
                return None
            row = (None, *found[1:])
            app_server_id = found[0]
        else:
            app_server_id = None
            row, probed = row[:6], tuple(row[6:])
    session_id, platform, base_url, stored, provider, model = row
    secrets_ = _SECRETS.from_db_value(stored, None, connection)
    return Grant(session_id, platform, base_url, (secrets_ or {}).get("api_key", ""),
                 app_server_id, provider, model, probed)


# One statement, only the columns needed, made once per set of probes: this runs before
# every model request, where the ORM's compiling of a three-table query alone costs about
# 2 ms, and a round trip of its own for each cap about 0.3.
_SECRETS = ProviderProfile._meta.get_field("secrets")


@functools.cache
def _grant_sql(probes: tuple[str, ...]) -> str:
    return (f"SELECT s.id, p.platform, p.base_url, p.secrets, p.slug, s.model"
            f"{''.join(f', {probe}' for probe in probes)} "
            f"FROM {ModelCredential._meta.db_table} c "
            f"JOIN {Session._meta.db_table} s ON s.id = c.session_id "
            f"JOIN {ProviderProfile._meta.db_table} p ON p.id = s.provider_id "
            f"WHERE c.token_hash = %s AND s.lifecycle <> %s")


_APP_SERVER_GRANT_SQL = (
    f"SELECT a.id, p.platform, p.base_url, p.secrets, p.slug, a.model "
    f"FROM {AppServer._meta.db_table} a "
    f"JOIN {ProviderProfile._meta.db_table} p ON p.id = a.provider_id "
    f"WHERE a.model_token_hash = %s AND a.state <> 'stopped'")


def usage_counted(session_id: int, tokens: int) -> None:
    """Add one model request's tokens (as the provider answered them) to the session's
    record of today (UTC): the figure the day and ticket caps read."""
    if tokens <= 0:
        return
    day = timezone.now().astimezone(UTC).date()
    # a plain statement, after every answer: it shares the gateway's threads (and the
    # interpreter) with the requests that follow
    with connection.cursor() as cursor:
        cursor.execute(_ADD_USAGE_SQL, [tokens, session_id, day])
        if cursor.rowcount:
            return
    UsageDay.objects.get_or_create(session_id=session_id, day=day)
    UsageDay.objects.filter(session_id=session_id, day=day).update(
        tokens=F("tokens") + tokens)


_ADD_USAGE_SQL = (f"UPDATE {UsageDay._meta.db_table} SET tokens = tokens + %s "
                  f"WHERE session_id = %s AND day = %s")
