"""What an app's optional `<app>/doctor.py` returns to `manage.py amux doctor`.

An app that has something an operator should verify (a runtime installed and startable, a
provider reachable and authenticated) adds a module `<app>/doctor.py` with

    from amux_common.doctor import Check

    def checks():
        yield Check("runtime:codex", ok=True, detail="0.46.0, starts")
        yield Check("provider:openai", ok=False, detail="401 unauthorized")

`amux_site.doctor` collects them from every installed app; a failing check with
`required=True` (the default) makes `amux doctor` exit non-zero, `required=False` only warns.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""
    required: bool = True
