"""`amux doctor` checks of the session layer: the isolation backend (and its runtime user),
each runtime (installed, version, can start under that backend) and each provider profile
(reachable, authenticated)."""

from __future__ import annotations

import asyncio
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from django.conf import settings

from amux_common.doctor import Check, Probe
from runtimes import ProviderSpec, RuntimeConfig, errors, loopback_fence, registered
from runtimes import isolation as runtime_isolation
from sessions import isolation, warm_pool
from sessions.keys import api_key_problem
from sessions.models import ProviderProfile
from sessions.provider_routes import models_headers, models_url

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
        root = Path(settings.DATA_DIR) / "runtime"
        isolation.open_paths(Path(settings.DATA_DIR), root)
        with tempfile.TemporaryDirectory(prefix=f"doctor-{name}-", dir=root) as tmp:
            Path(tmp).chmod(0o711)  # a linux-dac runtime user must reach its state below
            config = RuntimeConfig(
                isolation=isolation.selected_backend(), runtime_user=isolation.runtime_user(),
                workdir=f"{tmp}/work", state_dir=f"{tmp}/state", model=_MODEL.get(name, "m"),
                provider=ProviderSpec(platform=platform, base_url=_IDLE_PROVIDER[platform],
                                      api_key="doctor"),
                runtimes_dir=Path(settings.AMUX_RUNTIMES_DIR))
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


def runtime_check(name: str, start: bool = True) -> Check:
    probe = registered()[name].probe(Path(settings.AMUX_RUNTIMES_DIR))
    if not probe.installed:
        return Check(f"runtime:{name}", False, f"missing: {probe.error or 'not installed'}",
                     required=False)
    ok, detail = can_start(name) if start else (True, "installed")
    return Check(f"runtime:{name}", ok, f"{probe.version}, {detail}", required=False)


def isolation_check() -> Check:
    """The backend new sessions get and why; under linux-dac and bwrap, whether its runtime
    user exists (it is created at the first launch, or by `make runtime-user`); under
    bwrap, whether a sandbox starts here (a probe as that user). A configured bwrap that
    cannot start fails every session clearly: amux never downgrades it."""
    info = isolation.status()
    why = info.get("reason", "")
    backend = info["backend"]
    if backend == runtime_isolation.PRIVATE_HOME:
        return Check("isolation", True, f"private-home (runtimes run as amux's user; {why})")
    if not info["user_exists"]:
        return Check("isolation", False, f"{backend}: runtime user {info['user']!r} does not "
                     f"exist yet (created at the first launch; `make runtime-user`); {why}",
                     required=False)
    who = f"runtimes run as {info['user']} (uid {info['uid']})"
    if backend == runtime_isolation.BWRAP:
        if info.get("sandbox_problem"):
            return Check("isolation", False, f"bwrap: the sandbox cannot start here: "
                         f"{info['sandbox_problem']} (`make sandbox` as root, or "
                         f"AMUX_ISOLATION=linux-dac); {why}")
        return Check("isolation", True, f"bwrap: {who} in a namespace sandbox "
                     f"({info.get('bwrap')} probe works; network: amux's port only); {why}")
    mode = settings.AMUX_LOOPBACK_FENCE
    problem = (None if mode == loopback_fence.OFF else loopback_fence.problem())
    if mode == loopback_fence.OFF:
        fenced = "loopback open to runtimes (AMUX_LOOPBACK_FENCE=off)"
    elif problem:
        fenced = (f"loopback open to runtimes: its fence cannot be set up ({problem}); "
                  "PostgreSQL, Redis and every local port are reachable from sessions")
    else:
        fenced = "loopback fenced (amux's port and DNS only)"
    return Check("isolation", mode != loopback_fence.OFF and not problem,
                 f"linux-dac: {who}; {fenced}; {why}",
                 required=mode == loopback_fence.ON)


def runtimes_access_check() -> Check:
    """Under linux-dac, whether the runtime user can reach, read and run the installed
    runtimes and not change them (an install made under amux's umask 077, or a clone under
    root's 0700 home, fails every turn with `Permission denied` otherwise)."""
    where = Path(settings.AMUX_RUNTIMES_DIR)
    if not isolation.uses_principal():
        return Check("runtimes:access", True, "runtimes run as amux's user", required=False)
    if not where.is_dir():
        return Check("runtimes:access", True, f"nothing installed at {where}", required=False)
    principal = runtime_isolation.lookup(isolation.runtime_user())
    if principal is None:
        return Check("runtimes:access", False, f"runtime user {isolation.runtime_user()!r} "
                     "does not exist yet (`make runtime-user`)", required=False)
    problem = runtime_isolation.runtimes_problem(where, principal)
    if problem:
        return Check("runtimes:access", False, problem, required=False)
    return Check("runtimes:access", True,
                 f"{where} readable and runnable by {principal.user}", required=False)


def runtime_checks(start: bool = True) -> Iterator[Check]:
    for name in sorted(registered()):
        yield runtime_check(name, start)


def provider_check(provider) -> Check:
    """GET the route's model list (models_url) with the key: any answer is reachable;
    401/403 is not authenticated."""
    key = (provider.secrets or {}).get("api_key", "")
    problem = api_key_problem(key)
    if problem:
        # stored before keys were checked on save: say so instead of failing inside http
        return Check(f"provider:{provider.slug}", False, f"unusable api_key: {problem}")
    url = models_url(provider.platform, provider.base_url)
    headers = models_headers(provider.platform, key)
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


def warm_pool_check() -> Check:
    """The runtime workers' warm pools (sessions/warm_pool.py) as they last published them:
    idle processes, hand-overs and cold starts."""
    wanted = settings.AMUX_SESSION_WARM_POOL
    pools = warm_pool.status()
    if not wanted and not pools:
        return Check("warm-pool", True, "off (AMUX_SESSION_WARM_POOL=0)", required=False)
    total = {k: sum(int(p.get(k) or 0) for p in pools)
             for k in ("idle", "starting", "hits", "misses", "keys")}
    return Check("warm-pool", True, (
        f"{wanted} per launch; {total['idle']} idle ({total['starting']} starting) for "
        f"{total['keys']} launch(es) on {len(pools)} runtime worker(s); "
        f"{total['hits']} new session(s) took one, {total['misses']} started cold"),
        required=False)


def checks() -> Iterator[Probe]:
    """Each runtime and each provider is a probe of its own (see amux_common.doctor)."""
    yield Probe("isolation", isolation_check, required=False)
    yield Probe("warm-pool", warm_pool_check, required=False)
    yield Probe("runtimes:access", runtimes_access_check, required=False)
    for name in sorted(registered()):
        yield Probe(f"runtime:{name}", partial(runtime_check, name), required=False)
    for provider in ProviderProfile.objects.all():
        yield Probe(f"provider:{provider.slug}", partial(provider_check, provider))
