"""`amux doctor` checks of the session layer: each runtime (installed, version, can start)
and each provider profile (reachable, authenticated)."""

from __future__ import annotations

import asyncio
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator

from amux_common.doctor import Check
from sessions.runtimes import ProviderSpec, RuntimeConfig, errors, registered

# a provider that is never contacted: starting a native session makes no model call
_IDLE_PROVIDER = {"openai-compat": "http://127.0.0.1:9/v1",
                  "anthropic-compat": "http://127.0.0.1:9"}
_MODEL = {"codex": "gpt-5.5", "acp": "gpt-5.5", "pi": "doctor-model",
          "claude": "claude-sonnet-4-5"}


def can_start(name: str, timeout: float = 60) -> tuple[bool, str]:
    """Start the runtime and a native session in a throwaway directory, then close it."""
    cls = registered()[name]
    platform = sorted(cls.platforms)[0]

    async def attempt() -> str:
        with tempfile.TemporaryDirectory(prefix=f"amux-doctor-{name}-") as tmp:
            config = RuntimeConfig(
                workdir=f"{tmp}/work", state_dir=f"{tmp}/state", model=_MODEL.get(name, "m"),
                provider=ProviderSpec(platform=platform, base_url=_IDLE_PROVIDER[platform],
                                      api_key="doctor"))
            adapter = cls(config)
            try:
                return await asyncio.wait_for(adapter.start(), timeout)
            finally:
                await adapter.close()

    try:
        _run_in_thread(attempt())
    except (errors.RuntimeAdapterError, TimeoutError, OSError) as exc:
        return False, f"does not start: {getattr(exc, 'code', type(exc).__name__)}: {exc}"[:300]
    return True, "starts"


def _run_in_thread(coro) -> None:
    """asyncio.run on a fresh thread (the caller's thread may already run a loop)."""
    import threading

    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name="amux-doctor")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def runtime_checks(start: bool = True) -> Iterator[Check]:
    for name, cls in sorted(registered().items()):
        probe = cls.probe()
        if not probe.installed:
            yield Check(f"runtime:{name}", False, probe.error or "not installed",
                        required=False)
            continue
        ok, detail = can_start(name) if start else (True, "installed")
        yield Check(f"runtime:{name}", ok, f"{probe.version}, {detail}", required=False)


def provider_check(provider) -> Check:
    """GET <base_url>/models with the key: any answer is reachable; 401/403 is not
    authenticated."""
    key = (provider.secrets or {}).get("api_key", "")
    url = provider.base_url.rstrip("/") + "/models"
    headers = {"User-Agent": "amux-doctor"}
    if key and provider.platform == "anthropic-compat":
        headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
    elif key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=10) as resp:
            status = resp.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        return Check(f"provider:{provider.slug}", False,
                     f"unreachable: {getattr(exc, 'reason', exc)}")
    if status in (401, 403):
        return Check(f"provider:{provider.slug}", False, f"{status}: not authenticated")
    return Check(f"provider:{provider.slug}", True, f"reachable ({status})")


def checks() -> Iterator[Check]:
    from sessions.models import ProviderProfile

    yield from runtime_checks()
    for provider in ProviderProfile.objects.all():
        yield provider_check(provider)
