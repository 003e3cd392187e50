"""The end of a worker's turn reaches its ticket even when the session host dies right after
committing it (issue 11, "durable turn facts").

A real Celery worker on the `runtime` queue hosts the ticket's worker session (Pi against
the scripted model server). The terminal event and the `session.turn_ended` effect are
written in one transaction; the test SIGKILLs the whole worker as soon as that transaction
is visible, before anything drained it. Nothing in the host touches ticket state, so at that
moment the ticket has not heard of the turn; a second worker, a drainer on the `default`
queue with beat, then delivers the fact to the engine: the assignment's `last_turn_at` is
set for a completed turn, and for a turn a lost host cut (cancelled, continued later) too,
without failing the run."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from effects import outbox
from effects.models import Effect
from intake.models import Source, Thread, Trigger
from runtimes.base import tagged_pids
from sessions.models import ProviderProfile, Session, Turn
from sessions.tasks import sweep_sessions
from tests.support.model_server import ModelServer, Text
from tests.support.sessions import gateway_served
from tests.support.workers import Worker, purge_queues, wait_for, worker_env
from tickets.actions import commands as ticket_commands
from tickets.models import AgentSettings, Assignment
from tickets.read import stages

pytestmark = [pytest.mark.xdist_group("processes"),
              pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]

ENDED = ("completed", "failed", "cancelled")


@pytest.fixture
def model(settings, monkeypatch):
    # the worker's runtime reaches the provider through amux's model gateway
    with ModelServer() as server, gateway_served(settings, monkeypatch):
        yield server


@pytest.fixture
def ticket(settings, tmp_path, model):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    settings.WORK_DIR.mkdir(parents=True)
    purge_queues()
    cache.delete(outbox.KICK_FLAG)
    source = Source.objects.create(kind="webchat", slug="team", name="Team chat")
    provider = ProviderProfile(slug="scripted", platform="openai-compat",
                               base_url=model.base_url, model_names=["scripted-model"])
    provider.secrets = {"api_key": "sk-test"}
    provider.save()
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "scripted-model"})
    thread = Thread.objects.create(source=source, key="general:1", title="Login crash")
    trigger = Trigger.objects.create(
        source=source, thread=thread, external_id="m1", scope="chat", actor="octocat",
        text="please fix the login crash", decision="explicit", strength="explicit",
        policy_version="v1")
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the login crash")
    outbox.drain(seconds=30)  # the dispatch, here: the worker session and its brief (turn 1)
    ticket.refresh_from_db()
    assert ticket.session_id is not None
    yield ticket
    purge_queues()


def within(predicate, timeout, *workers, interval=0.1):
    """wait_for, failing with the workers' logs (what a host or drainer did, or did not)."""
    try:
        return wait_for(predicate, timeout=timeout, interval=interval)
    except TimeoutError:
        logs = "\n".join(f"--- {w.log_path}\n{w.log()[-3000:]}" for w in workers if w)
        pytest.fail(f"condition not reached in {timeout} s\n{logs}")


def turn_end_facts(session_id):
    """The tickets subscriber's rows of the turn-ended fact (goals and tasks have theirs)."""
    return list(Effect.objects.filter(kind="session.turn_ended", key__startswith="tickets:")
                .values_list("key", "payload"))


def tickets_fact(turn):
    return (f"tickets:turn:{turn.pk}", {
        "session": turn.session_id, "turn": turn.pk, "turn_key": turn.key,
        "state": turn.state, "error_code": turn.error_code,
        "ended_at": turn.ended_at.isoformat(), "task_runs": False,
        "fact": "session.turn_ended", "subscriber": "tickets"})


def live_assignment(ticket):
    return Assignment.objects.filter(ticket=ticket).order_by("-pk").first()


def ended_turn(session_id, seq):
    return Turn.objects.filter(session_id=session_id, seq=seq, state__in=ENDED).first()


def test_a_host_killed_right_after_the_turn_end_commits_loses_nothing(ticket, model, tmp_path,
                                                                      settings):
    model.script(Text("Reproduced it; fixing next."))
    env = worker_env(settings.DATA_DIR)
    host = Worker("turn-host", env, queues="runtime", log=tmp_path / "host.log")
    drainer = None
    try:
        turn = within(lambda: ended_turn(ticket.session_id, 1), 120, host)
        host.kill()  # SIGKILL the host's whole worker the moment the turn's end is committed
        host.proc.wait(10)
        tag = Session.objects.get(pk=ticket.session_id).runtime_tag

        assert turn.state == "completed"
        # The fact was committed with the terminal event; the ticket has not heard of it.
        assert turn_end_facts(ticket.session_id) == [tickets_fact(turn)]
        assignment = live_assignment(ticket)
        assert assignment.state == "running" and assignment.last_turn_at is None

        drainer = Worker("turn-drainer", env, queues="default", beat=True,
                         log=tmp_path / "drainer.log")
        # the fact applied, and its outbox row settled (deleted after the handler's
        # transaction: a drainer stopped between the two would leave it to run again)
        within(lambda: live_assignment(ticket).last_turn_at is not None
               and not turn_end_facts(ticket.session_id), 90, drainer)
    finally:
        for w in (host, drainer):
            if w is not None:
                w.stop()
    assignment = live_assignment(ticket)
    # The turn's own end, not when the fact was drained: a person who spoke in between
    # spoke after the worker's last word.
    assert assignment.state == "running" and assignment.last_turn_at == turn.ended_at
    assert turn_end_facts(ticket.session_id) == []
    assert "effects.drain_outbox" in drainer.log()
    wait_for(lambda: not tagged_pids(tag or "none"), timeout=15)  # died with its worker


def test_a_turn_cut_by_a_lost_host_reaches_the_ticket_after_a_second_crash(
        ticket, model, tmp_path, settings):
    model.script(Text("never arrives", delay=120))
    env = worker_env(settings.DATA_DIR, AMUX_SESSION_LEASE_SECONDS="4")
    first = Worker("turn-host-1", env, queues="runtime", log=tmp_path / "host-1.log")
    second = drainer = None
    try:
        within(lambda: model.tool_requests(), 90, first)
        first.kill()  # mid-turn: the turn is left running
        first.proc.wait(10)
        assert live_assignment(ticket).state == "running"
        # The next host gives the turn its terminal event (cancelled, host_lost; the same
        # input is queued again as a continuation). It is killed as soon as that commits.
        # The sweep that starts it once the dead host's lease has expired runs here, as
        # beat would run it on a `default` worker (none may run yet: it would drain the
        # fact before the kill).
        second = Worker("turn-host-2", env, queues="runtime", log=tmp_path / "host-2.log")
        # The second worker takes the session back as it starts (the dead host ran on this
        # machine), or else the sweep sends it there.
        within(lambda: ended_turn(ticket.session_id, 1) or sweep_sessions() > 0, 30, first,
               second, interval=0.5)
        turn = within(lambda: ended_turn(ticket.session_id, 1), 90, first, second)
        second.kill()
        second.proc.wait(10)

        assert turn.state == "cancelled"
        assert turn_end_facts(ticket.session_id) == [tickets_fact(turn)]
        assignment = live_assignment(ticket)
        assert assignment.state == "running" and assignment.last_turn_at is None
        assert Turn.objects.filter(session_id=ticket.session_id, seq=2).exists()  # continued

        drainer = Worker("turn-drainer", env, queues="default", beat=True,
                         log=tmp_path / "drainer.log")
        # the fact applied, and its outbox row settled (deleted after the handler's
        # transaction: a drainer stopped between the two would leave it to run again)
        within(lambda: live_assignment(ticket).last_turn_at is not None
               and not turn_end_facts(ticket.session_id), 90, drainer)
    finally:
        for w in (first, second, drainer):
            if w is not None:
                w.stop()
    assignment = live_assignment(ticket)
    # amux's own crash is not the agent's failure: the run goes on with the continuation.
    assert assignment.state == "running" and assignment.last_turn_at == turn.ended_at
    assert stages([ticket])[ticket.pk][0] != "failed"
    assert turn_end_facts(ticket.session_id) == []
