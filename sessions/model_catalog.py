"""``runtimes/<name>/models``: the model catalog a person picks from (runtimes.catalog).

With a provider binding the catalog is the provider's model list. Without one, Codex answers
live from its app-server under the runtime's own identity: a private HOME kept under the
data directory (``runtime/identity-codex/home``, its Codex config in ``home/.codex``), set up
exactly as a session's, where an operator logs Codex in (``codex login``). Other runtimes have
no native discovery here and say so.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from django.conf import settings

from runtimes import catalog, errors, registered
from runtimes.codex import discover_models
from sessions.models import ProviderProfile
from sessions.new_session import provider_spec
from sessions.services import CommandError, runtime_root

DISCOVERY_TIMEOUT = 30.0


def identity_dir(runtime: str) -> Path:
    """The runtime's own identity: the state directory whose ``home`` is its HOME."""
    return runtime_root() / f"identity-{runtime}"


def native_catalog(runtime: str) -> catalog.Catalog:
    if runtime != "codex":
        return catalog.Catalog.unavailable(
            catalog.UNSUPPORTED, f"{runtime} has no native model discovery in amux; "
                                 "bind a provider (?provider=<slug>) to list its models")

    found: list[catalog.Catalog] = []

    def run() -> None:  # its own thread: the caller's may already run an event loop
        found.append(asyncio.run(discover_models(
            identity_dir(runtime), Path(settings.AMUX_RUNTIMES_DIR),
            timeout=DISCOVERY_TIMEOUT)))

    worker = threading.Thread(target=run, name="model-discovery")
    worker.start()
    worker.join()
    if not found:
        return catalog.Catalog.unavailable(catalog.FAILED, "model discovery failed")
    return found[0]


def for_runtime(runtime: str, provider: str | None = None) -> dict[str, Any]:
    """The catalog of ``runtime`` (bound to ``provider`` when given) as the API shows it."""
    cls = registered().get(runtime)
    if cls is None:
        raise CommandError(f"unknown runtime {runtime!r}", code="not_found", status=404)
    if provider:
        profile = ProviderProfile.objects.filter(slug=provider).first()
        if profile is None:
            raise CommandError(f"unknown provider {provider!r}", code="unknown_provider",
                               field="provider")
        try:
            cls.check_provider(provider_spec(profile))
        except errors.ProviderUnsupported as exc:
            raise CommandError(str(exc), code="provider_unsupported",
                               field="provider") from exc
        found = catalog.provider_catalog(profile.model_names)
    else:
        found = native_catalog(runtime)
    return {"runtime": runtime, "provider": provider or None, **found.as_dict()}
