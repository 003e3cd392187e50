"""A Celery worker killed mid-dispatch recovers from the outbox with no duplicate comment on
GitHub.

One real worker drains a ticket's outbox: the dispatch (the run decided and its worker
session made, in one transaction with the start effect that clones and posts the brief), then
a reply the executor asked to post on the GitHub thread. The recording server (PyGithub
talks to it) stores the comment and then stalls its answer; while it stalls, the test
SIGKILLs the whole worker — the comment has reached GitHub, the dispatch's row and the
reply's row are not settled, the start's has not run. A second worker, woken by the beat's
sweep once the dead worker's leases expire, runs them: they complete, GitHub holds one comment,
and the dispatch started one session with one brief."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from effects import outbox
from effects.models import Effect
from intake.models import Source, Thread, Trigger
from intake.sources.github import MARKER, GitHub
from sessions.models import ProviderProfile, Session, Turn
from tests.support.git_server import GitServer
from tests.support.recording_server import RecordingServer
from tests.support.workers import Worker, purge_queues, wait_for, worker_env
from tickets import worker
from tickets.actions import commands as ticket_commands
from tickets.actions import executor
from tickets.models import AgentSettings, Assignment

pytestmark = [pytest.mark.xdist_group("processes"),
              pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]

REPO = "octo/app"
COMMENTS = rf"/repos/{REPO}/issues/7/comments"


@pytest.fixture
def github(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    settings.WORK_DIR.mkdir(parents=True)
    purge_queues()
    cache.delete(outbox.KICK_FLAG)  # the commit's kick must reach the first worker
    with RecordingServer() as server, GitServer(token="ghp_test") as git_server:
        git_server.create(REPO, {"README.md": "app\n"})
        server.git = git_server  # the dispatch clones the repository from here
        server.state.issues[(REPO, 7)] = {"title": "Login crash", "body": "It crashes"}
        yield server
    purge_queues()


def _ticket(github):
    config = GitHub.validate_config({"repo": [REPO], "api_url": github.url,
                                     "handle": "amux-bot"})
    source = Source(kind="github", slug="gh", name="GitHub", config=config)
    source.secrets = {"webhook_secret": "s", "token": "ghp_test"}
    source.save()
    # No runtime worker runs in this test: the session is created, not started.
    provider = ProviderProfile.objects.create(slug="local", platform="openai-compat",
                                              base_url="http://127.0.0.1:9/v1")
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})
    thread = Thread.objects.create(source=source, key=f"{REPO}#7", title="Login crash")
    trigger = Trigger.objects.create(
        source=source, thread=thread, external_id="c7", scope="comment", actor="octocat",
        text="@amux-bot please fix the login crash", decision="explicit",
        strength="explicit", policy_version="v1")
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the login crash")
    assignment = Assignment.objects.get(ticket=ticket)
    executor.reply_requested(assignment_id=assignment.pk, text="On it: reproducing the crash.")
    return ticket, assignment


def test_a_worker_killed_mid_dispatch_recovers_without_a_duplicate_comment(github, tmp_path,
                                                                           settings):
    ticket, assignment = _ticket(github)
    dispatch = Effect.objects.get(kind="dispatch")
    relay = Effect.objects.get(kind="relay")
    assert dispatch.pk < relay.pk  # one drain runs the dispatch, then the reply
    held = github.hold("POST", COMMENTS)
    # Leases short enough for the test to wait out, and a drain task time limit under half
    # of them (start-up refuses anything else).
    env = worker_env(settings.DATA_DIR, AMUX_OUTBOX_LEASE_SECONDS="20",
                     AMUX_OUTBOX_TASK_TIME_LIMIT="9")
    first = Worker("outbox-first", env, queues="default", log=tmp_path / "first.log")
    second = None
    try:
        assert held.arrived.wait(90), first.log()[-3000:]
        first.kill()  # SIGKILL the worker while GitHub has the comment and it has no answer
        first.proc.wait(10)
        held.release()

        # The crash left the rows unsettled: the dispatch ran (its decision committed with
        # the run's start effect: the clone and the brief) but its row was not yet deleted,
        # the reply was sent but not recorded as done, and the start waits behind them.
        start = Effect.objects.get(kind="dispatch", key=f"assignment:{assignment.pk}:start")
        assert start.pk > relay.pk
        assert set(Effect.objects.values_list("pk", flat=True)) == {
            dispatch.pk, relay.pk, start.pk}
        assert len(github.state.comments[(REPO, 7)]) == 1
        assignment.refresh_from_db()
        assert assignment.state == "running", assignment.end_reason

        second = Worker("outbox-second", env, queues="default", beat=True,
                        log=tmp_path / "second.log")
        wait_for(lambda: not Effect.objects.exists(), timeout=90)
    finally:
        for w in (first, second):
            if w is not None:
                w.stop()
    assert "effects.drain_outbox" in second.log()

    # GitHub holds one comment: the replay found its marker and posted nothing.
    posts = github.matching("POST", COMMENTS)
    assert len(posts) == 1 and len(github.state.comments[(REPO, 7)]) == 1
    assert posts[0].body["body"] == (
        "On it: reproducing the crash.\n\n" + MARKER.format(relay.payload["message_id"]))
    assert len(github.matching("GET", COMMENTS)) == 2  # each run looked before posting

    # The dispatch started one session with one brief, and one assignment.
    ticket.refresh_from_db()
    session = Session.objects.get()
    assert ticket.session_id == session.pk and session.name == worker.session_name(ticket)
    assert Turn.objects.filter(session=session).count() == 1
    assert Assignment.objects.filter(ticket=ticket).count() == 1
    assert Assignment.objects.get(ticket=ticket).state == "running"
