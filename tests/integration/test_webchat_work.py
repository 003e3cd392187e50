"""Web chat opens work (one scope vocabulary: the gate's rows are the plugins' declared
scopes), and a ticket's final notice goes where the request came from (issue 11, items 7
and 11). Real database; the outbox drained by the real drainer; replies kept by web chat."""

import pytest

from effects import outbox
from effects.models import Effect
from intake.models import Channel, OutgoingMessage, Source, Trigger
from intake.sources import KINDS
from policy.gate import NO_SENDER_SCOPES, SCOPES
from tests import factories as f
from tickets.actions import commands as ticket_commands
from tickets.actions import executor, pull_requests
from tickets.models import Assignment, Mandate, Ticket

pytestmark = pytest.mark.django_db


def test_the_gate_knows_exactly_the_scopes_the_plugins_declare():
    """Declared in the gate, taken by each plugin: no table is filled in at start-up."""
    assert {kind: SCOPES[kind] for kind in KINDS} == {
        kind: plugin.scopes for kind, plugin in KINDS.items()}
    assert set(SCOPES) == set(KINDS)  # every kind has its rows, and only kinds that exist
    assert SCOPES["webchat"] == ("direct",)
    assert NO_SENDER_SCOPES == {"ci_default_branch"} <= set(SCOPES["github"])


@pytest.fixture
def chat(api):
    response = api.post("/api/v1/sources", {"kind": "webchat", "slug": "chat", "name": "Chat"},
                        format="json")
    assert response.status_code == 201, response.content
    current = api.get("/api/v1/policy").json()["version"]
    saved = api.put("/api/v1/policy", {
        "base_version": current, "acceptance": "manual",
        "sources": {"chat": {"allowed": ["operator"],
                             "rows": {"direct": {"addressed": True}}}}}, format="json")
    assert saved.status_code == 200, saved.content
    return Source.objects.get(slug="chat")


def test_an_allowed_senders_web_chat_message_opens_a_ticket(api, chat):
    response = api.post("/api/v1/sources/chat/messages",
                        {"text": "please fix the login bug", "thread": "room-1", "id": "m1"},
                        format="json")
    assert response.status_code == 202, response.content
    trigger = Trigger.objects.get(pk=response.json()["trigger"])
    assert (trigger.decision, trigger.strength, trigger.rule, trigger.reason) == (
        "explicit", "explicit", "chat.direct.addressed", "")
    ticket = Ticket.objects.get()
    mandate = Mandate.objects.get(ticket=ticket)
    assert (mandate.requester, mandate.scope, mandate.strength) == (
        "operator", "direct", "explicit")
    assert ticket.thread.key == "room-1"
    assert ticket.channel == Channel.objects.get(source=chat, address="room-1")
    assert Effect.objects.filter(kind="dispatch").count() == 1


def test_a_sender_not_allowed_opens_nothing(client, django_user_model, chat):
    # an operator may post to web chat, but this one is not on the source's allowed list
    other = django_user_model.objects.create_user("carol", password="carol-pass-123",
                                                  is_staff=True)
    client.force_login(other)
    response = client.post("/panel/sources/chat/chat/", {"text": "do my homework"})
    assert response.status_code == 302
    trigger = Trigger.objects.get()
    assert (trigger.actor, trigger.decision, trigger.reason) == ("carol", "ignore",
                                                                 "not_allowed")
    assert not Ticket.objects.exists()


def test_the_panel_chat_opens_a_ticket(client, operator, chat):
    client.force_login(operator)
    response = client.post("/panel/sources/chat/chat/", {"text": "the export is broken"})
    assert response.status_code == 302
    ticket = Ticket.objects.get()
    assert ticket.title == "the export is broken"
    assert Mandate.objects.get(ticket=ticket).strength == "explicit"


def test_web_chat_scope_in_the_policy_tab_and_check(api, client, operator, chat):
    client.force_login(operator)
    html = client.get("/panel/policy/").content.decode()
    # the web chat source's row, its addressed cell on, and a "try it" option
    assert 'name="cell:chat:direct:addressed"' in html
    assert 'value="chat|direct"' in html
    check = api.post("/api/v1/policy/check", {"source": "chat", "scope": "direct",
                                              "actor": "operator", "addressed": True},
                     format="json")
    assert check.status_code == 200, check.content
    assert check.json()["decision"] == "explicit"
    assert check.json()["rule"] == "chat.direct.addressed"
    unknown = api.post("/api/v1/policy/check", {"source": "chat", "scope": "chat",
                                                "actor": "operator", "addressed": True},
                       format="json")
    assert unknown.status_code == 400
    assert "scope" in unknown.json()["error"]["fields"]


# --- notices go where the request came from ---------------------------------------------

def _merged(ticket):
    """The worker ran, opened a PR, and the PR was merged: the ticket ends."""
    executor.assignment_started(assignment_id=Assignment.objects.get(ticket=ticket).pk)
    pr = f.ThreadFactory(source=ticket.thread.source, key=f"{ticket.thread.key}-pr")
    pull_requests.pr_linked(ticket_id=ticket.pk, pr_thread_id=pr.pk)
    pull_requests.pr_closed(pr_thread_id=pr.pk, merged=True)
    ticket.refresh_from_db()
    assert ticket.ended_at is not None


def _github_ticket(config=None):
    trigger = f.TriggerFactory(source=f.SourceFactory(config=config or {}),
                               thread__key="octo/app#12", thread__title="Crash", rule="",
                               text="")
    return ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the crash")


def test_a_github_only_ticket_gets_no_notice_even_with_chats_around():
    other = f.SourceFactory(kind="webchat", slug="team", name="Team")
    Channel.objects.create(source=other, kind="chat", address="general")
    ticket = _github_ticket()
    _merged(ticket)
    assert not Effect.objects.filter(kind="notice").exists()


def test_a_web_chat_ticket_hears_the_result_in_its_own_thread(api, chat):
    api.post("/api/v1/sources/chat/messages", {"text": "fix the login bug", "thread": "room-1"},
             format="json")
    other = api.post("/api/v1/sources/chat/messages", {"text": "hi", "thread": "room-2"},
                     format="json")
    assert other.status_code == 202
    ticket = Ticket.objects.get(thread__key="room-1")
    _merged(ticket)
    outbox.drain(seconds=10)
    (notice,) = OutgoingMessage.objects.filter(source=chat)
    assert notice.thread_key == "room-1" and "merged" in notice.text


def test_a_relay_and_a_notice_to_one_chat_thread_share_its_line_and_keep_order(api, chat):
    """The worker's report (a relay to the ticket's thread) and the result (a notice to the
    channel the request came from) are the same place: one channel key, one line."""
    api.post("/api/v1/sources/chat/messages", {"text": "fix the login bug", "thread": "room-1"},
             format="json")
    ticket = Ticket.objects.get(thread__key="room-1")
    run = Assignment.objects.get(ticket=ticket)
    executor.assignment_started(assignment_id=run.pk)
    executor.report_received(assignment_id=run.pk, status="blocked", text="I need the logs.")
    pr = f.ThreadFactory(source=chat, key="room-1-pr")
    pull_requests.pr_linked(ticket_id=ticket.pk, pr_thread_id=pr.pk)
    pull_requests.pr_closed(pr_thread_id=pr.pk, merged=True)
    relay = Effect.objects.get(kind="relay")
    notice = Effect.objects.get(kind="notice")
    assert relay.channel == notice.channel == outbox.channel_key("chat", "room-1")
    assert relay.pk < notice.pk
    claimed = outbox.claim("drainer-a")
    assert relay.pk in {e.pk for e in claimed} and notice.pk not in {e.pk for e in claimed}, \
        "the notice waits while the relay ahead of it in its thread is pending"
    outbox._release(claimed, "drainer-a")
    outbox.drain(seconds=10)
    sent = list(OutgoingMessage.objects.filter(source=chat, thread_key="room-1")
                .order_by("pk").values_list("text", flat=True))
    assert len(sent) == 2 and sent[0] == "I need the logs." and "merged" in sent[1]


def test_a_configured_notice_channel_on_the_github_source_hears_it(api):
    team = f.SourceFactory(kind="webchat", slug="team", name="Team")
    ticket = _github_ticket({"notice_channel": "team:general"})
    _merged(ticket)
    outbox.drain(seconds=10)
    (notice,) = OutgoingMessage.objects.filter(source=team)
    assert notice.thread_key == "general" and "Fix the crash" in notice.text


def test_a_notice_channel_naming_a_missing_or_non_chat_source_sends_nothing():
    ticket = _github_ticket({"notice_channel": "gh:octo/app#1"})
    _merged(ticket)
    assert not Effect.objects.filter(kind="notice").exists()


def test_the_notice_channel_is_validated_with_the_github_config(api):
    body = {"kind": "github", "slug": "gh", "name": "GitHub",
            "config": {"repo": "octo/app", "notice_channel": "not a channel"},
            "secrets": {"webhook_secret": "s", "token": "t"}}
    response = api.post("/api/v1/sources", body, format="json")
    assert response.status_code == 400
    assert "config.notice_channel" in response.json()["error"]["fields"] or \
        "notice_channel" in str(response.json()["error"]["fields"])
    body["config"]["notice_channel"] = "team:oc_123"
    assert api.post("/api/v1/sources", body, format="json").status_code == 201
