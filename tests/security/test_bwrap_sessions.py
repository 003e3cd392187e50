"""The bwrap backend through amux's session host: frozen with the session (a later change
of AMUX_ISOLATION does not move it), a real turn completes under it, and a session it
provider off this host is reached through the model gateway on amux's port only."""

from __future__ import annotations

import pytest

from runtimes import isolation, sandbox
from sessions import services
from sessions.models import ProviderProfile, Session, Turn
from sessions.new_session import Launch
from tests.runtimes.conftest import require_runtime
from tests.support.isolation import as_root
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240), as_root]


@pytest.fixture(autouse=True)
def _bwrap_works():
    principal = isolation.provision(isolation.DEFAULT_USER)
    why = sandbox.probe(principal.uid, principal.gid)
    if why is not None:
        pytest.skip(f"bwrap cannot start a sandbox on this machine: {why}")


def test_a_turn_runs_under_the_frozen_bwrap_backend(settings, session_dirs, openai_provider,
                                                    model_server):
    require_runtime("pi")
    settings.AMUX_ISOLATION = "bwrap"
    session = services.create_session(Launch.direct(runtime="pi", provider="scripted",
                                                    model="scripted-model"))
    assert session.snapshot["execution"]["isolation"] == "bwrap"
    assert session.snapshot["execution"]["isolation_reason"] == "AMUX_ISOLATION=bwrap"
    settings.AMUX_ISOLATION = "linux-dac"  # changed afterwards: the session keeps bwrap
    assert services.runtime_config(session).isolation == "bwrap"
    model_server.script(ToolCall("ls /proc | grep -c '^[0-9]' > procs.txt"), Text("done"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    services.post_message(session.pk, "count")
    assert run_host(session.pk) == "slept"
    turn = Turn.objects.get(session=session)
    assert turn.state == "completed", turn.state
    from pathlib import Path

    assert int((Path(session.workdir) / "procs.txt").read_text()) < 30  # its own pid ns


def test_a_provider_off_this_host_is_reached_through_amuxs_port_only(settings, session_dirs,
                                                                    db):
    """A provider on the internet: the runtime is configured with the model gateway on
    amux's own port, the one port the sandbox relays; the provider's own host is never
    in the sandbox's reach (a launch that named it would be refused naming bwrap)."""
    ProviderProfile.objects.create(slug="remote", platform="openai-compat",
                                   base_url="https://api.example.invalid/v1",
                                   model_names=["m"])
    settings.AMUX_ISOLATION = "bwrap"
    session = services.create_session(Launch.direct(runtime="pi", provider="remote", model="m"))
    config = services.runtime_config(session)
    assert config.isolation == "bwrap"
    assert config.provider.base_url.startswith(settings.AMUX_URL.rstrip("/") + "/gateway/model/")
    amux_port = sandbox.url_port(settings.AMUX_URL)
    assert sandbox.relayed_ports(config.amux_url, config.provider.base_url) == (amux_port,)
    refused = sandbox.unreachable_provider("https://api.example.invalid/v1")
    assert refused.startswith("bwrap: the model provider") and "linux-dac" in refused
