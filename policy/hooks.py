"""What the policy needs from the rest of amux, filled in at start-up (no Django, no imports
of tickets: the dependency points tickets -> policy).

The tickets app registers, from TicketsConfig.ready():

- ``sources``: a callable returning ``{slug: SourceInfo}`` for every source (enabled or not);
- ``live_mandates``: a callable returning the live tickets' mandates as plain dicts (see
  policy/effects.py for the keys);
- ``worker_configured``: a callable answering whether agent settings name a worker provider
  and model (the Policy tab warns while the policy admits work and none is configured);
- ``on_new_version``: listeners called after a new version is committed, with
  ``(old_version, new_version)`` (hashes; ``old_version`` is None for the first save). The
  engine's ``policy_changed`` command is one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from policy.document import SourceInfo

log = logging.getLogger(__name__)

_sources: Callable[[], Mapping[str, SourceInfo]] | None = None
_live_mandates: Callable[[], list[dict]] | None = None
_listeners: list[Callable[[str | None, str], None]] = []
_worker_configured: Callable[[], bool] | None = None


def provide_sources(fn: Callable[[], Mapping[str, SourceInfo]]) -> None:
    global _sources
    _sources = fn


def provide_live_mandates(fn: Callable[[], list[dict]]) -> None:
    global _live_mandates
    _live_mandates = fn


def provide_worker_configured(fn: Callable[[], bool]) -> None:
    global _worker_configured
    _worker_configured = fn


def worker_configured() -> bool | None:
    """None when nobody told the policy app (then it warns about nothing)."""
    return _worker_configured() if _worker_configured else None


def on_new_version(fn: Callable[[str | None, str], None]) -> None:
    if fn not in _listeners:
        _listeners.append(fn)


def sources() -> dict[str, SourceInfo]:
    return dict(_sources()) if _sources else {}


def live_mandates() -> list[dict]:
    return list(_live_mandates()) if _live_mandates else []


def new_version_saved(old_version: str | None, new_version: str) -> bool:
    """Tell every listener; one that fails is logged and does not stop the others (the
    version is committed already: a save never answers 500 for its aftermath). True when
    all of them succeeded."""
    ok = True
    for listener in list(_listeners):
        try:
            listener(old_version, new_version)
        except Exception:
            ok = False
            log.exception("policy listener %r failed for version %s", listener, new_version)
    return ok
