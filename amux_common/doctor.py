"""What an app's optional `<app>/doctor.py` returns to `manage.py amux doctor`.

An app that has something an operator should verify (a runtime installed and startable, a
provider reachable and authenticated) adds a module `<app>/doctor.py` with

    from amux_common.doctor import Check

    def checks():
        yield Check("runtime:codex", ok=True, detail="0.46.0, starts")
        yield Check("provider:openai", ok=False, detail="401 unauthorized")

`amux_site.doctor` collects them from every installed app; a failing check with
`required=True` (the default) makes `amux doctor` exit non-zero, `required=False` only warns.

A check that does work which may raise (contacting a provider, starting a runtime) is
better yielded as a `Probe`: `amux doctor` runs each probe on its own, and an exception in
one becomes that check's failing line instead of ending the app's other checks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""
    required: bool = True


@dataclass(frozen=True)
class Probe:
    """A check run later, on its own: `run()` returns its Check, or raises."""

    name: str
    run: Callable[[], Check]
    required: bool = True
