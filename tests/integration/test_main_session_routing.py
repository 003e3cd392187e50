"""The team's main session routes explicit requests (seed 002, path B and role separation):
a signed GitHub comment with an explicit request waits for it, its route makes the same
ticket, mandate and first run as amux's own routing plus the routing note, a 31-word note
is refused whole, a follow-up the executor owns may be stopped but not taken, and with no
main runtime configured (or none any more) amux routes by code."""

from __future__ import annotations

import pytest

from effects.models import Effect
from intake.models import Source, Trigger
from policy import services as policy
from sessions.models import ProviderProfile
from tests.support.github_payloads import example, signed
from tests.support.intake import processed
from tests.support.policy_versions import apply_saved_versions
from tickets import main_config
from tickets.actions import main_routing
from tickets.core import main_session as rules
from tickets.core.errors import InvalidCommand, NotFound
from tickets.models import AgentSettings, Mandate, Subscription, Ticket

pytestmark = pytest.mark.django_db

SECRET = "It's a Secret to Everybody"
REPO = "Codertocat/Hello-World"
NOTE = "Start at the login handler in src/auth; the stack trace is in the issue."


@pytest.fixture
def gh():
    source = Source(kind="github", slug="gh", name="GitHub",
                    config={"repo": [REPO], "handle": "amux-bot"})
    source.secrets = {"webhook_secret": SECRET, "token": "ghp_test"}
    source.save()
    policy.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["Codertocat"],
        "rows": {"comment": {"addressed": True, "unaddressed_allowed": False,
                             "unaddressed_anyone": False}}}}}, None)
    return source


@pytest.fixture
def main():
    provider = ProviderProfile.objects.create(slug="scripted", platform="openai-compat",
                                              base_url="http://127.0.0.1:9/v1")
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "main_runtime": "codex", "main_provider": provider, "main_model": "scripted-model"})
    return provider


def comment(client, text: str, comment_id: int | None = None) -> Trigger:
    payload = example("issue_comment", "created")
    payload["comment"]["body"] = text
    if comment_id is not None:
        payload["comment"]["id"] = comment_id
    body, headers = signed("issue_comment", payload, SECRET)
    outcome = processed(client.post(f"/hooks/github/{'gh'}", data=body,
                                    content_type="application/json", **headers))
    assert outcome["outcome"] == "admitted", outcome
    return Trigger.objects.get(pk=outcome["trigger"])


def test_without_a_main_runtime_amux_routes_by_code(client, gh):
    assert not main_config.configured()
    assert "deterministic routing" in main_config.describe()
    trigger = comment(client, "@amux-bot please fix the typo")
    ticket = Ticket.objects.get()
    assert trigger.disposition == "admitted"
    assert (ticket.routed_by, ticket.routing_note) == ("code", "")
    assert not Effect.objects.filter(kind="main.notify").exists()


def test_an_explicit_request_waits_for_the_main_session_whose_route_opens_the_ticket(
        client, gh, main, api):
    assert "main session on codex (scripted/scripted-model)" in main_config.describe()
    trigger = comment(client, "@amux-bot please fix the typo")
    assert trigger.disposition == rules.AWAITING and not Ticket.objects.exists()
    notice = Effect.objects.get(kind="main.notify")
    assert notice.payload == {"trigger": trigger.pk, "what": "request", "ticket": None}

    thirty_one = " ".join(["look"] * 31)
    with pytest.raises(InvalidCommand, match="note has 31 words"):
        main_routing.route(trigger_id=trigger.pk, note=thirty_one)
    assert not Ticket.objects.exists()  # refused whole: nothing written, nothing cut
    assert Trigger.objects.get(pk=trigger.pk).disposition == rules.AWAITING

    routed = main_routing.route(trigger_id=trigger.pk, note=NOTE)
    ticket = Ticket.objects.get()
    assert (routed.ticket, routed.disposition) == (ticket.pk, "admitted")
    assert (ticket.routed_by, ticket.routing_note) == ("main", NOTE)
    # the same mandate, subscription and first run amux's own routing makes
    mandate = Mandate.objects.get(ticket=ticket)
    assert (mandate.trigger_id, mandate.strength, mandate.requester, mandate.rule) == (
        trigger.pk, "explicit", "Codertocat", trigger.rule)
    assert Subscription.objects.filter(ticket=ticket, thread=trigger.thread).exists()
    assert Effect.objects.filter(kind="dispatch").count() == 1
    from tickets import worker

    brief = worker.brief(ticket, ticket.assignments.get())
    # the worker reads the source first; the note is a pointer after it, labelled as such
    assert brief.index("please fix the typo") < brief.index(
        f"Routing note (where to look, not what to build): {NOTE}")
    shown = api.get(f"/api/v1/tickets/{ticket.pk}/").json()
    assert (shown["routed_by"], shown["routing_note"], shown["stop_note"]) == (
        "main", NOTE, "")
    # routed once: the trigger now belongs to the ticket's executor
    with pytest.raises(rules.OwnedByExecutor):
        main_routing.route(trigger_id=trigger.pk, note="")


def test_a_follow_up_reaches_the_executor_and_the_main_session_may_only_stop(
        client, gh, main, operator):
    first = comment(client, "@amux-bot please fix the typo")
    ticket_id = main_routing.route(trigger_id=first.pk, note=NOTE).ticket
    follow = comment(client, "@amux-bot also the second typo", comment_id=99_001)
    assert follow.disposition == "follow_up"  # path B: the executor's input, as without it
    assert follow.inputs.get().ticket_id == ticket_id
    told = Effect.objects.get(kind="main.notify", key=f"trigger:{follow.pk}")
    assert told.payload == {"trigger": follow.pk, "what": "follow_up", "ticket": ticket_id}

    with pytest.raises(rules.OwnedByExecutor, match=f"executor of ticket {ticket_id}"):
        main_routing.route(trigger_id=follow.pk, note="")
    with pytest.raises(rules.OwnedByExecutor):
        main_routing.dismiss(trigger_id=follow.pk, reason="mine now")
    stopped = main_routing.stop(ticket_id=ticket_id, reason="the requester withdrew it")
    assert stopped.ended_at is not None and stopped.end_reason == "stopped"
    assert stopped.stop_note == "main session: the requester withdrew it"
    client.force_login(operator)
    page = client.get(f"/panel/tickets/{ticket_id}/").content.decode()
    assert f'<p id="routing-note">Routing note from the main session (where to look, not ' \
        f'what to build): {NOTE}</p>' in page
    assert '<p id="stop-note">Stopped — main session: the requester withdrew it</p>' in page


def test_hostile_arguments_are_refused_with_reasons(client, gh, main):
    trigger = comment(client, "@amux-bot please fix the typo")
    with pytest.raises(NotFound):
        main_routing.route(trigger_id=trigger.pk + 1000, note="")
    with pytest.raises(InvalidCommand, match="trigger must be an id"):
        main_routing.route(trigger_id="1; drop table", note="")
    with pytest.raises(InvalidCommand, match="note must be text"):
        main_routing.route(trigger_id=trigger.pk, note={"plan": "step 1"})
    with pytest.raises(NotFound):
        main_routing.stop(ticket_id=424242, reason="x")
    with pytest.raises(InvalidCommand, match="reason must be a non-empty line"):
        main_routing.dismiss(trigger_id=trigger.pk, reason="")
    assert main_routing.dismiss(trigger_id=trigger.pk, reason="a duplicate of #3").disposition \
        == rules.DISMISSED
    assert Trigger.objects.get(pk=trigger.pk).meta["dismissed"] == "a duplicate of #3"
    assert not Ticket.objects.exists()


def test_a_request_left_waiting_when_the_main_runtime_goes_is_routed_by_code(
        client, gh, main):
    from effects import outbox

    trigger = comment(client, "@amux-bot please fix the typo")
    AgentSettings.objects.filter(pk=1).update(main_runtime="")
    outbox.drain(seconds=10)
    ticket = Ticket.objects.get()
    assert ticket.routed_by == "code" and ticket.mandate.trigger_id == trigger.pk
    assert Trigger.objects.get(pk=trigger.pk).disposition == "admitted"


def test_a_request_whose_notice_is_a_dead_letter_is_routed_by_code_by_the_sweep(
        client, gh, main):
    from effects.models import EffectState
    from tickets import tasks

    waiting = comment(client, "@amux-bot please fix the typo", comment_id=501)
    other = comment(client, "@amux-bot please fix the docs", comment_id=502)
    assert not Ticket.objects.exists()  # both await the main session
    # the outbox gave up on the first notice (as its last failed attempt leaves a row)
    Effect.objects.filter(kind="main.notify", key=f"trigger:{waiting.pk}").update(
        state=EffectState.DEAD, attempts=12, last_error="RuntimeError: unreachable")
    assert tasks.routing_sweep() == 1
    ticket = Ticket.objects.get()
    assert ticket.routed_by == "code" and ticket.mandate.trigger_id == waiting.pk
    assert Trigger.objects.get(pk=waiting.pk).disposition == "admitted"
    # the other notice is still in line: its request keeps waiting for the main session
    assert Trigger.objects.get(pk=other.pk).disposition == rules.AWAITING
    assert tasks.routing_sweep() == 0


def test_the_agent_settings_api_sets_and_clears_the_main_session(api, main):
    body = api.get("/api/v1/settings/agents/").json()
    assert (body["main_runtime"], body["main_provider"], body["main_model"]) == (
        "codex", "scripted", "scripted-model")
    for wrong in ("emacs", "pi"):  # pi takes no MCP servers: it could not route
        refused = api.patch("/api/v1/settings/agents/", {"main_runtime": wrong}, format="json")
        assert refused.status_code == 400
        assert "main_runtime" in refused.json()["error"]["fields"]
    cleared = api.patch("/api/v1/settings/agents/", {"main_runtime": ""}, format="json")
    assert cleared.status_code == 200 and cleared.json()["main_runtime"] == ""
    assert not main_config.configured()


def test_the_panel_shows_which_router_is_in_use_and_sets_the_main_session(client, operator):
    provider = ProviderProfile.objects.create(slug="scripted", platform="openai-compat",
                                              base_url="http://127.0.0.1:9/v1")
    client.force_login(operator)
    page = client.get("/panel/settings/agents/").content.decode()
    assert 'id="router">Routing of explicit requests: deterministic routing' in page
    saved = client.post("/panel/settings/agents/", {
        "worker_runtime": "codex", "worker_provider": provider.pk, "worker_model": "m",
        "main_runtime": "claude", "main_provider": provider.pk, "main_model": "scripted-model",
        "triage_model": ""})
    assert saved.status_code == 302
    page = client.get("/panel/settings/agents/").content.decode()
    assert "main session on claude (scripted/scripted-model) routes explicit requests" in page


def test_doctor_names_the_router(main):
    from tickets import doctor

    (probe,) = doctor.checks()
    check = probe.run()
    assert (check.name, check.ok, check.required) == ("router", True, False)
    assert check.detail.startswith("main session on codex")



def test_a_new_policy_decides_a_request_awaiting_the_main_session_again(
        client, gh, main, django_capture_on_commit_callbacks):
    kept = comment(client, "@amux-bot please fix the typo")
    rows = {"comment": {"addressed": True, "unaddressed_allowed": False,
                        "unaddressed_anyone": False}}
    # still allowed: it waits again, stamped with the new version
    with django_capture_on_commit_callbacks(execute=True):
        second = policy.save({"acceptance": "manual", "sources": {"gh": {
            "allowed": ["Codertocat", "mona"], "rows": rows}}},
            policy.current().version).version
    apply_saved_versions()  # the version's outbox effect, written with it
    kept.refresh_from_db()
    assert (kept.disposition, kept.policy_version) == (rules.AWAITING, second)
    # no longer allowed: the old admission does not hold, and the main session cannot route it
    with django_capture_on_commit_callbacks(execute=True):
        policy.save({"acceptance": "manual", "sources": {"gh": {
            "allowed": ["mona"], "rows": rows}}}, second)
    apply_saved_versions()
    kept.refresh_from_db()
    assert (kept.decision, kept.disposition) == ("ignore", "ignore")
    with pytest.raises(rules.NotAwaiting):
        main_routing.route(trigger_id=kept.pk, note="")
    assert not Ticket.objects.exists()


@pytest.mark.django_db(transaction=True)  # the MCP door closes stale connections per call
def test_the_main_sessions_token_reaches_its_own_tools_only(main):
    from amux_site import mcp
    from tests import factories as f
    from tickets.core import tokens
    from tickets.models import MainSession
    from tickets.tools import main_server
    from tickets.tools.service import ToolRefused

    token = tokens.new_token()
    MainSession.objects.create(pk=1, session=f.SessionFactory(),
                               token_hash=tokens.token_hash(token))
    assert mcp.route(token) == mcp.MAIN
    assert main_config.session_for_token(token) is not None
    with pytest.raises(ToolRefused) as refused:
        mcp.route(tokens.new_token())  # an unknown token of the same shape
    assert refused.value.status == 401
    # a replaced token (a new main session) reaches nothing
    MainSession.objects.filter(pk=1).update(token_hash=tokens.token_hash("amx_other"))
    assert main_config.session_for_token(token) is None
    names = {t.name for t in main_server.build_server()._tool_manager.list_tools()}  # noqa: SLF001
    assert names == {"route", "dismiss", "stop"}  # no tool takes a message or writes a plan


def test_main_runtimes_are_those_that_take_mcp():
    from runtimes.registry import registered

    takes = {name for name, adapter in registered().items() if adapter.takes_mcp}
    assert set(main_config.MAIN_RUNTIMES) == takes & {"codex", "claude", "pi", "acp"}
