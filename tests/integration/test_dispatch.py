"""Dispatching a worker is idempotent: a replay after a crash starts nothing twice."""

import pytest

from effects import outbox
from effects.models import Effect
from sessions import services
from sessions.models import Session, Turn
from tests import factories as f
from tests.support.git_server import served_github
from tickets.actions import commands as ticket_commands
from tickets.models import AgentSettings, Assignment

pytestmark = pytest.mark.django_db


@pytest.fixture
def ticket(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    with served_github(["octo/app"]) as (api, _git):  # the dispatch clones octo/app
        source = f.SourceFactory(config={"repo": ["octo/app"], "api_url": api.url},
                                 secrets={"webhook_secret": "s", "token": "ghp_test"})
        trigger = f.TriggerFactory(source=source, thread__key="octo/app#12",
                                   thread__title="Crash", external_id="c1", addressed=False,
                                   rule="")
        yield ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the crash")


def test_without_a_worker_model_the_run_fails_visibly(ticket):
    outbox.drain(seconds=10)
    assignment = Assignment.objects.get(ticket=ticket)
    assert assignment.state == "failed" and assignment.failure_code == "settings_missing"
    assert "no worker provider and model are configured" in assignment.failure_message


def test_a_replayed_dispatch_reuses_the_session_and_the_first_turn(ticket):
    provider = f.ProviderProfileFactory(slug="local")
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})
    dispatch = Effect.objects.get(kind="dispatch")
    outbox.drain(seconds=10)
    ticket.refresh_from_db()
    session = Session.objects.get()
    assert ticket.session == session and session.name == f"worker-{ticket.pk}"
    assert session.workdir.endswith(f"/work/{ticket.short_name}")
    assert "@amux please fix the crash" in Turn.objects.get(session=session).input["text"]
    assert session.snapshot["extra_path"] and "AMUX_API_URL" in session.runtime_env
    assert session.snapshot["ask_user"] is False  # the worker profile asks only via amux
    # every turn reads the current worker prompt; amux's MCP server with the token file;
    # the source plugin's variables (never a credential) in the worker's environment
    assert session.snapshot["prompt_role"] == "worker"
    assert session.snapshot["mcp_servers"][0]["name"] == "amux"
    assert session.snapshot["mcp_servers"][0]["bearer_token_file"].endswith(
        f"worker-tokens/ticket-{ticket.pk}")
    assert "AMUX_GITHUB_REPO" in session.runtime_env
    # … and moves slow shell commands to the background
    assert session.snapshot["background_shell_after"] == 5.0
    assert services.runtime_config(session).background_shell_after == 5.0
    # A crash after the session started but before the row was settled: the same effect
    # runs again. Nothing new starts.
    Assignment.objects.filter(ticket=ticket).update(state="dispatching")
    outbox.enqueue("dispatch", dispatch.key, dispatch.payload)
    outbox.drain(seconds=10)
    assert Session.objects.count() == 1 and Turn.objects.filter(session=session).count() == 1
