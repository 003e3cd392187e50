"""Dispatching a worker is idempotent: a replay after a crash starts nothing twice."""

import pytest
from django.db import connection
from django.utils import timezone

from effects import outbox
from effects.models import Effect
from sessions import services
from sessions.models import Session, Turn
from tests import factories as f
from tests.support.git_server import served_github
from tickets import effect_handlers, workspace
from tickets.actions import commands as ticket_commands
from tickets.models import AgentSettings, Assignment

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    with served_github(["octo/app"]) as (api, git):  # the dispatch clones octo/app
        source = f.SourceFactory(config={"repo": ["octo/app"], "api_url": api.url},
                                 secrets={"webhook_secret": "s", "token": "ghp_test"})
        trigger = f.TriggerFactory(source=source, thread__key="octo/app#12",
                                   thread__title="Crash", external_id="c1", addressed=False,
                                   rule="")
        yield ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the crash"), git


@pytest.fixture
def ticket(world):
    return world[0]


def _worker_settings():
    provider = f.ProviderProfileFactory(slug="local")
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})


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


REFUSE_START = {
    "postgresql": [
        """CREATE FUNCTION amux_test_refuse_start() RETURNS trigger AS $$
           BEGIN IF NEW.state = 'running' THEN RAISE EXCEPTION 'refused by the test'; END IF;
           RETURN NEW; END $$ LANGUAGE plpgsql""",
        """CREATE TRIGGER amux_test_refuse_start BEFORE UPDATE ON {table} FOR EACH ROW
           EXECUTE FUNCTION amux_test_refuse_start()"""],
    "sqlite": [
        """CREATE TRIGGER amux_test_refuse_start BEFORE UPDATE ON {table} FOR EACH ROW
           WHEN NEW.state = 'running' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"""],
}


def test_a_dispatch_that_fails_at_its_last_write_leaves_none_of_it(ticket):
    """The token, the session, its brief and the run's start are one transaction: the
    database refusing the last of them (a trigger on the run's row) leaves no session, no
    brief and no token behind, and the effect, run again, does all of it once."""
    provider = f.ProviderProfileFactory(slug="local")
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})
    table = Assignment._meta.db_table
    with connection.cursor() as cursor:
        for statement in REFUSE_START[connection.vendor]:
            cursor.execute(statement.format(table=table))
    outbox.drain(seconds=10)
    dispatch = Effect.objects.get(kind="dispatch")
    assert "refused by the test" in dispatch.last_error and dispatch.attempts == 1
    assignment = Assignment.objects.get(ticket=ticket)
    assert assignment.state == "dispatching" and not assignment.token_hash
    assert not Session.objects.exists() and not Turn.objects.exists()
    ticket.refresh_from_db()
    assert ticket.session_id is None

    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER amux_test_refuse_start"
                       + (f" ON {table}" if connection.vendor == "postgresql" else ""))
    Effect.objects.filter(pk=dispatch.pk).update(due_at=timezone.now())
    outbox.drain(seconds=10)
    assignment.refresh_from_db()
    assert assignment.state == "running" and assignment.token_hash
    session = Session.objects.get()
    assert Turn.objects.filter(session=session).count() == 1
    ticket.refresh_from_db()
    assert ticket.session == session


def test_the_dispatch_is_one_transaction_and_its_start_an_effect_written_with_it(ticket):
    """The decision (caps, token, session, run started) commits whole, with the start
    effect (the clone and the first message) as a row of the outbox: nothing outside the
    database is done before it commits."""
    _worker_settings()
    dispatch = Effect.objects.get(kind="dispatch")
    effect_handlers.dispatch_assignment(dispatch.pk, dispatch.payload)
    assignment = Assignment.objects.get(ticket=ticket)
    session = Session.objects.get()
    assert assignment.state == "running" and assignment.token_hash
    start = Effect.objects.get(kind="dispatch", key=f"assignment:{assignment.pk}:start")
    assert start.payload == {"assignment": assignment.pk, "ticket": ticket.pk,
                             "session": session.pk, "action": "start"}
    # neither the clone nor the brief yet: they are the effect's
    assert not (workspace.work_dir(ticket) / ".git").exists()
    assert not Turn.objects.exists()


def test_a_crash_between_the_clone_and_the_brief_replays_and_does_nothing_twice(
        world, monkeypatch):
    """The start effect dies after the clone, before the brief is posted: the outbox runs
    it again, which reuses the clone (no second fetch from the repository) and posts the
    brief once; a replay after it finished changes nothing either."""
    ticket, git = world
    _worker_settings()
    posted = services.post_message
    calls = []

    def dies_the_first_time(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("the worker process died here")
        return posted(*args, **kwargs)

    monkeypatch.setattr(services, "post_message", dies_the_first_time)
    outbox.drain(seconds=10)
    assignment = Assignment.objects.get(ticket=ticket)
    start = Effect.objects.get(kind="dispatch", key=f"assignment:{assignment.pk}:start")
    assert "died here" in start.last_error and start.attempts == 1
    ticket.refresh_from_db()
    session = Session.objects.get()
    assert assignment.state == "running" and ticket.session == session
    workdir = workspace.work_dir(ticket)
    assert (workdir / ".git").exists() and not Turn.objects.exists()
    (workdir / "left-by-the-first-attempt").write_text("kept")
    fetched = len(git.requests)

    Effect.objects.filter(pk=start.pk).update(due_at=timezone.now())
    outbox.drain(seconds=10)
    assert not Effect.objects.filter(pk=start.pk).exists()
    assert Turn.objects.filter(session=session).count() == 1
    assert (workdir / "left-by-the-first-attempt").read_text() == "kept"  # not cloned again
    assert len(git.requests) == fetched

    outbox.enqueue("dispatch", start.key, start.payload)  # delivered twice
    outbox.drain(seconds=10)
    assert Session.objects.count() == 1 and Turn.objects.filter(session=session).count() == 1
    assert len(git.requests) == fetched and len(calls) == 3


def test_a_start_for_a_run_that_ended_meanwhile_does_nothing(ticket):
    _worker_settings()
    dispatch = Effect.objects.get(kind="dispatch")
    effect_handlers.dispatch_assignment(dispatch.pk, dispatch.payload)
    assignment = Assignment.objects.get(ticket=ticket)
    ticket_commands.stop_ticket(ticket_id=ticket.pk, by="op")
    start = Effect.objects.get(kind="dispatch", key=f"assignment:{assignment.pk}:start")
    effect_handlers.dispatch_assignment(start.pk, start.payload)
    assert not Turn.objects.exists()
    assert not (workspace.work_dir(ticket) / ".git").exists()
