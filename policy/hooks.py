"""What the policy needs from the apps above it (amux_common.ports; no Django, no imports
of tickets: the dependency points tickets -> policy). tickets/wiring.py provides them:

- `sources()`: `{slug: SourceInfo}` for every source (enabled or not);
- `live_mandates()`: the live tickets' mandates as plain dicts (see policy/effects.py for
  the keys);
- `worker_configured()`: whether agent settings name a worker provider and model (the
  Policy tab warns while the policy admits work and none is configured); None when nobody
  provided it (then it warns about nothing);
- `sources_stamp()`: scalar SQL expressions whose values change whenever a source is
  added, removed or changed (the per-request policy part keeps the sources' kinds by
  them); nobody provided: the sources are read for every request;
- `new_version`: told `(old_version, new_version)` (hashes; `old_version` is None for the
  first save) after a new version is committed. tickets' `policy_changed` listens.
"""

from __future__ import annotations

from amux_common.ports import Event, Port

sources = Port("policy.sources", default=dict)
live_mandates = Port("policy.live_mandates", default=list)
worker_configured = Port("policy.worker_configured")
sources_stamp = Port("policy.sources_stamp", default=tuple)
new_version = Event("policy.new_version")


def new_version_saved(old_version: str | None, new_version_hash: str) -> bool:
    """Tell every listener; one that fails is logged and does not stop the others (the
    version is committed already: a save never answers 500 for its aftermath). True when
    all of them succeeded."""
    return new_version.tell(old_version, new_version_hash)
