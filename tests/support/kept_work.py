"""Real work for the kept database (tests/support/kept_database.py): what an installation
of this amux holds after a while, made through amux's own REST API, actions and services
— the paths the panel, webhooks, workers and session hosts take — never raw inserts.

Run by the generator in a process of its own, against an empty database migrated by this
amux (its DATABASE_URL / AMUX_DATA_DIR / AMUX_SECRET_KEY are the generator's). Answers the
facts the upgrade test reads back (`make()` returns them)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

API = "/api/v1"
PROVIDER_KEY = "sk-kept-provider-key"
OPERATOR_PASSWORD = "kept-operator-pass-1"
REPO = "Codertocat/Hello-World"
WEBHOOK_SECRET = "kept-webhook-secret"


class Work:
    """One operator's API client, a viewer's, and the facts collected on the way."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from rest_framework.test import APIClient

        from amux_site import accounts

        # `amux user add` and `amux token`, as an operator sets an installation up
        accounts.add_user("operator", "operator", OPERATOR_PASSWORD)
        accounts.add_user("viewer", "viewer", "kept-viewer-pass-1")
        users = get_user_model().objects
        self.operator, self.viewer = users.get(username="operator"), users.get(username="viewer")
        self.api = APIClient(SERVER_NAME="127.0.0.1")
        self.api.credentials(HTTP_AUTHORIZATION=f"Token {accounts.new_token('operator')}")
        self.facts: dict[str, Any] = {}

    def call(self, method: str, path: str, body: Any = None, *, want: int | tuple = (200, 201,
                                                                                    202)):
        response = getattr(self.api, method)(API + path, body, format="json")
        wanted = (want,) if isinstance(want, int) else want
        if response.status_code not in wanted:
            raise RuntimeError(f"{method.upper()} {path}: {response.status_code} "
                               f"{response.content[:500]!r}")
        return response.json() if response.content else None


def drain() -> None:
    from effects import outbox
    from intake import process

    process.drain()
    outbox.drain(seconds=5)


def configure(w: Work) -> None:
    """Sources, providers, agent settings, the watchdog, a policy with several versions,
    prompts with several revisions."""
    w.call("post", "/providers/", {"slug": "openai", "platform": "openai-compat",
                                   "base_url": "http://127.0.0.1:9/v1",
                                   "api_key": PROVIDER_KEY, "models": ["gpt-5.5"]})
    w.call("post", "/sources/", {"kind": "webchat", "slug": "chat", "name": "Team chat"})
    w.call("post", "/sources/", {"kind": "github", "slug": "gh", "name": "GitHub",
                                 "config": {"repo": [REPO], "handle": "amux-bot",
                                            "receive_all": True,
                                            "api_url": "http://127.0.0.1:9"},
                                 "secrets": {"webhook_secret": WEBHOOK_SECRET,
                                             "token": "kept-github-token"}})
    w.call("put", "/settings/agents", {"worker_runtime": "pi", "worker_provider": "openai",
                                       "worker_model": "gpt-5.5"})
    w.call("put", "/settings/watchdog/", {"turn_hard_cap_seconds": 3600,
                                          "repeat_tool_call_limit": 0})
    base = w.call("get", "/policy")["version"]
    chat = {"allowed": ["operator", "alice"], "rows": {"direct": {"addressed": True}}}
    gh = {"allowed": ["Codertocat"],
          "rows": {"comment": {"addressed": True, "unaddressed_allowed": False,
                               "unaddressed_anyone": False},
                   "issue_new": {"addressed": True, "unaddressed_allowed": True,
                                 "unaddressed_anyone": False}}}
    for document in ({"acceptance": "manual", "sources": {"chat": chat}},
                     {"acceptance": "manual", "sources": {"chat": chat, "gh": gh}},
                     {"acceptance": "auto", "sources": {"chat": chat, "gh": gh}}):
        base = w.call("put", "/policy", {"base_version": base, **document})["version"]
    revision = 0
    for text in ("Work in small commits.", "Work in small commits; run the tests first."):
        revision = w.call("put", "/prompts/team.worker", {"base_revision": revision,
                                                          "text": text})["revision"]


def github(w: Work, event: str, payload: dict) -> dict:
    """A webhook GitHub signs, through the real hook, processed by the intake drainer."""
    from django.test import Client

    from tests.support.github_payloads import signed
    from tests.support.intake import processed

    body, headers = signed(event, payload, WEBHOOK_SECRET)
    response = Client(SERVER_NAME="127.0.0.1").post(
        "/hooks/github/gh", data=body, content_type="application/json", **headers)
    return processed(response)


def chat(w: Work, message_id: str, text: str, thread: str) -> dict:
    return w.call("post", "/sources/chat/messages/", {"text": text, "thread": thread,
                                                      "id": message_id})


def tickets(w: Work) -> None:
    """Tickets in several stages: working with a report and an answered question, stopped,
    ended by a merged pull request, and a candidate triaged into an eval."""
    from tests.support.github_payloads import example
    from tickets.actions import commands, executor, pull_requests
    from tickets.models import Assignment, Question, Ticket

    chat(w, "m1", "Please fix the login crash on Safari.", "room-login")
    login = Ticket.objects.get(thread__key="room-login")
    w.facts["ticket"] = login.pk
    run = Assignment.objects.filter(ticket=login).latest("pk")
    executor.assignment_started(assignment_id=run.pk)
    executor.report_received(assignment_id=run.pk, status="progress",
                             text="Reproduced it; the cookie is set too late.")
    executor.question_asked(assignment_id=run.pk, text="Keep support for Safari 15?",
                            options=["yes", "no"])
    question = Question.objects.get(ticket=login)
    commands.answer_question(question_id=question.pk, answer="yes", by="operator")
    w.call("post", f"/tickets/{login.pk}/inputs/", {"text": "Also check the logout page."})

    chat(w, "m2", "Rename the settings page.", "room-rename")
    rename = Ticket.objects.get(thread__key="room-rename")
    w.call("post", f"/tickets/{rename.pk}/stop/", {})

    comment = example("issue_comment", "created")
    comment["comment"]["body"] = "@amux-bot please fix the typo in the README"
    opened = github(w, "issue_comment", comment)
    typo = Ticket.objects.get(mandate__trigger_id=opened["trigger"])
    typo_run = Assignment.objects.filter(ticket=typo).latest("pk")
    executor.assignment_started(assignment_id=typo_run.pk)
    pr = example("pull_request", "opened")
    github(w, "pull_request", pr)
    from intake.models import Thread

    pr_thread = Thread.objects.get(key=f"{REPO}#{pr['pull_request']['number']}")
    pull_requests.pr_linked(ticket_id=typo.pk, pr_thread_id=pr_thread.pk)
    executor.report_received(assignment_id=typo_run.pk, status="done", text="PR is open")
    # a reply on the issue, which this GitHub (not there) never takes: a dead letter
    executor.reply_requested(assignment_id=typo_run.pk, text="The PR fixes the typo.")
    pull_requests.pr_closed(pr_thread_id=pr_thread.pk, merged=True)

    issue = example("issues", "opened")
    issue["issue"]["number"] += 100  # a new issue (the example's is the typo's thread)
    issue["issue"]["id"] += 100
    github(w, "issues", issue)  # an allowed person without @: a candidate, triaged
    drain()


def host_turn(session_id: int, turn_id: int, reply: str, tokens: int) -> None:
    """What a session host records of a turn the runtime ran: its start, the agent's
    message, the usage it reported and the end (sessions/timeline.py, as the host calls it)."""
    from runtimes import events as rt
    from sessions import model_credentials, timeline

    timeline.start_turn(session_id, turn_id, native_turn_id=f"native-{turn_id}")
    timeline.record(session_id, turn_id, [
        rt.MessageCompleted(text=reply),
        rt.UsageObserved(last={"input_tokens": tokens - 40, "output_tokens": 40}),
        rt.TurnCompleted()])
    # what the model gateway counts of the turn's model request
    model_credentials.usage_counted(session_id, tokens)


def sessions(w: Work) -> None:
    """A session with two turns (the canonical timeline, usage by day, its gateway
    credential), memory, experts and presets, an instance, a task and a schedule."""
    from sessions import native_goals, schedules, services
    from sessions.models import Session, Turn

    made = w.call("post", "/sessions/", {"runtime": "pi", "provider": "openai",
                                         "model": "gpt-5.5", "name": "kept session"})
    sid = made["id"]
    # the host's launch: the runtime's configuration, with the session's gateway credential
    services.runtime_config(Session.objects.get(pk=sid))
    for n, (text, reply) in enumerate((("What does the login view do?",
                                        "It checks the password, then sets the cookie."),
                                       ("And the logout view?", "It clears the cookie.")), 1):
        w.call("post", f"/sessions/{sid}/messages/", {"text": text})
        turn = Turn.objects.filter(session_id=sid).order_by("-seq").first()
        host_turn(sid, turn.pk, reply, 100 * n)
    w.facts["session"] = sid
    # the runtime reports a native goal (Codex's thread goal), as the host records it
    native_goals.record(sid, {"objective": "ship the login fix", "status": "active",
                              "token_budget": None, "tokens_used": 0,
                              "time_used_seconds": 0}, command="create",
                        native_thread="native-thread-1")
    w.call("post", "/providers/openai/probe/")  # the provider is not there: a failed probe
    # a Codex app-server amux started for attaching, then stopped (its row is kept)
    spawned = w.call("post", "/attachable-sessions/", {"provider": "openai", "model": "gpt-5.5",
                                                       "name": "kept app-server"})
    w.call("delete", f"/attachable-sessions/{spawned['id']}/")
    w.call("post", "/memory/", {"title": "Deploys", "text": "Never deploy on a Friday."})
    w.call("post", "/profiles/", {"manifest": {
        "version": 2, "name": "Reviewer", "description": "reviews diffs",
        "instructions": "Review the diff for bugs.", "skills": []}})
    w.call("get", "/launch-presets/")  # the built-in presets, as the panel lists them
    w.call("post", "/bot-profiles/", {"slug": "helper", "name": "Helper",
                                      "agent_profile": "reviewer", "launch_preset": "pi"})
    instance = w.call("post", "/instances/", {"name": "solo", "runtime": "pi",
                                              "provider": "openai", "model": "gpt-5.5"})
    w.call("post", f"/instances/{instance['id']}/tasks/", {"prompt": "Summarise the README."})
    w.call("post", "/tasks/", {"prompt": "List the open TODOs.", "runtime": "pi",
                               "provider": "openai", "model": "gpt-5.5"})
    w.call("post", "/schedules/", {
        "name": "nightly", "prompt": "Check the nightly build.", "mode": "subtask",
        "runtime": "pi", "provider": "openai", "model": "gpt-5.5", "every_seconds": 86400})
    schedules.fire_due(now=timezone.now() + timedelta(days=1, minutes=1))  # a day later



def goals(w: Work) -> None:
    """A goal with todos, a material, a managed agent started on its working session, a web
    chat connector and a message through it, and a goal turn asked for."""
    w.call("post", "/goals/", {"slug": "ship", "title": "Ship the release",
                               "check_command": "make test",
                               "quota": {"unit": "turns", "limit": 5}})
    first = w.call("post", "/goals/ship/todos/", {"title": "Write the release notes"})
    w.call("post", "/goals/ship/todos/", {"title": "Tag the release"})
    w.call("post", "/goals/ship/materials/", {"key": "spec", "title": "Release spec",
                                              "body": "Version 0.2.0, no breaking changes."})
    w.call("post", "/goals/ship/agents/", {"slug": "builder", "mode": "managed_agent_runtime",
                                           "provider": "openai", "model": "gpt-5.5"})
    w.call("post", "/goals/ship/agents/builder/start/")
    w.call("patch", f"/goals/ship/todos/{first['id']}/", {"state": "claimed",
                                                          "agent": "builder"})
    w.call("patch", f"/goals/ship/todos/{first['id']}/", {"state": "done",
                                                          "evidence": "notes.md written"})
    w.call("post", "/connectors/", {"goal": "ship", "agent": "builder",
                                    "source_kind": "web_chat",
                                    "ingress_mode": "session_queue"})
    w.call("post", "/goals/ship/agents/builder/messages/", {"text": "How far along are we?"})
    w.call("post", "/goals/ship/agents/builder/turns/", {"key": "kept-turn-1"})


LARK_TOKEN, LARK_KEY, BOT, ALICE = "kept-v-token", "kept-encrypt-key", "ou_bot", "ou_alice"


def lark_event(slug: str, event: dict) -> dict:
    """A Lark event, encrypted and signed as Lark sends it, through the real hook."""
    from django.test import Client

    from tests.support.intake import processed
    from tests.support.lark_events import sealed

    body, headers = sealed(event, encrypt_key=LARK_KEY)
    response = Client(SERVER_NAME="127.0.0.1").post(
        f"/hooks/lark/{slug}", data=body, content_type="application/json", **headers)
    if event["header"]["event_type"] == "card.action.trigger":
        if response.status_code != 200:
            raise RuntimeError(f"card callback: {response.status_code} {response.content!r}")
        return response.json()
    return processed(response)


def mention(lark, slug: str, app: str, *, chat: str, text: str, message_id: str,
            thread_id: str = "") -> dict:
    from tests.support.lark_events import message_event

    lark.lark_message(message_id, chat_id=chat, thread_id=thread_id, sender=ALICE, text=text)
    return lark_event(slug, message_event(
        token=LARK_TOKEN, chat_id=chat, text=f"@_user_1 {text}", sender=ALICE,
        mentions=[(BOT, "amux")], message_id=message_id, thread_id=thread_id, app_id=app))


def lark(w: Work) -> None:
    """Lark, against the recording Lark server: a topic bound to a conversation session
    (its turn's reply card, a question card answered by a click), and a goal agent's Lark
    Bot connection whose mention waits in the async inbox, is drained, settled and replied."""
    import time

    from conversations.models import Conversation, EventCard
    from intake import poll
    from intake.models import Source
    from runtimes import events as rt
    from sessions import timeline
    from sessions.models import Turn
    from tests.support.lark_events import card_action_event
    from tests.support.recording_server import RecordingServer

    secrets = {"verification_token": LARK_TOKEN, "encrypt_key": LARK_KEY,
               "app_secret": "kept-app-secret"}
    with RecordingServer() as server:
        server.state.lark_chats.update({"oc_team", "oc_work"})
        w.call("post", "/sources/", {"kind": "lark", "slug": "lk", "name": "Lark topics",
                                     "secrets": secrets, "config": {
                                         "app_id": "cli_kept_topics", "bot_open_id": BOT,
                                         "domain": server.url, "groups": ["oc_team"],
                                         "receive_all": ["oc_team"],
                                         "conversation": "topic", "language": "en"}})
        w.call("post", "/sources/", {"kind": "lark", "slug": "lm", "name": "Lark goals",
                                     "secrets": secrets, "config": {
                                         "app_id": "cli_kept_goals", "bot_open_id": BOT,
                                         "domain": server.url, "groups": ["oc_work"]}})
        current = w.call("get", "/policy")
        document = {k: current[k] for k in ("acceptance", "sources")}
        rows = {"group_configured": {"addressed": True}}
        document["sources"].update({"lk": {"allowed": [ALICE], "rows": rows},
                                    "lm": {"allowed": [ALICE], "rows": rows}})
        w.call("put", "/policy", {"base_version": current["version"], **document})

        mention(server, "lk", "cli_kept_topics", chat="oc_team", text="help me cut the release",
                message_id="om_kept_1", thread_id="omt_kept_1")
        conversation = Conversation.objects.get()
        sid = conversation.session_id
        turn = Turn.objects.get(session_id=sid)
        timeline.start_turn(sid, turn.pk)
        timeline.record(sid, turn.pk, [
            rt.MessageCompleted(text="Which branch do we cut from?"),
            rt.QuestionAsked(request_id="q-kept", questions=(
                rt.Question(text="Which branch?", options=("main", "dev"), id="branch"),))])
        drain_until(lambda: EventCard.objects.exclude(message_id="").exists())
        lark_event("lk", card_action_event(
            token=LARK_TOKEN, app_id="cli_kept_topics", chat_id="oc_team",
            value={"amux": "question.answer", "conversation": conversation.pk,
                   "session": sid, "gen": conversation.generation, "request": "q-kept",
                   "question": "branch", "option": 0}))

        w.call("post", "/connectors/", {"goal": "ship", "agent": "builder",
                                        "source_kind": "lark_group_message", "source": "lm",
                                        "source_ref": "oc_work", "ingress_mode": "async_inbox",
                                        "reply_mode": "source_thread"})
        mention(server, "lm", "cli_kept_goals", chat="oc_work", text="when is the cut?",
                message_id="om_kept_2")
        # the chat's catch-up poll (what beat runs): the first sets its cursor, the next
        # reads a message whose event never came and acknowledges it past the cursor
        poll.poll(Source.objects.get(slug="lm"))
        server.lark_message("om_kept_3", chat_id="oc_work", sender=ALICE,
                            create_time=(int(time.time()) + 1) * 1000,
                            text="@_user_1 and the changelog?", mentions=[(BOT, "amux")])
        time.sleep(1.1)
        poll.poll(Source.objects.get(slug="lm"))
        drained = w.call("post", "/goals/ship/agents/builder/inbox/drain/", {"limit": 5})
        first = drained["events"][0]
        w.call("post", f"/goals/ship/agents/builder/inbox/{first['id']}/settle/", {
            "key": drained["key"], "reply": "Cut at noon.",
            "effect": {"kind": "no_follow_up", "rationale": "answered"}})
        drain()


def drain_until(done, seconds: float = 60) -> None:
    import time

    from effects import outbox

    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError("the outbox did not get there in time")
        outbox.drain(seconds=2)


def panel_and_admin(w: Work) -> None:
    """A failed and a good login on the panel (axes' records, a session), and an admin
    change recorded in the admin's log."""
    from django.contrib.admin.models import CHANGE, LogEntry
    from django.test import Client

    browser = Client(SERVER_NAME="127.0.0.1")
    browser.post("/panel/login/", {"username": "operator", "password": "wrong-password"})
    browser.post("/panel/login/", {"username": "viewer", "password": "wrong-password"})
    answer = browser.post("/panel/login/", {"username": "operator",
                                            "password": OPERATOR_PASSWORD})
    if answer.status_code != 302:
        raise RuntimeError(f"panel login: {answer.status_code}")
    LogEntry.objects.log_actions(
        w.operator.pk, [w.viewer], CHANGE, change_message="kept: the viewer's e-mail set")


def outbox_states() -> None:
    """The outbox as a running installation has it: done effects gone, a dead letter
    (a notice to a GitHub API that is not there), effects still due."""
    from effects import outbox
    from effects.kinds import KINDS
    from effects.models import Effect

    for _ in range(KINDS["relay"].max_attempts + 1):
        outbox.drain(seconds=5)
        # the clock moves on to the next retry
        Effect.objects.filter(state="pending", attempts__gt=0).update(due_at=timezone.now())


# Tables this amux never fills, whatever the work: the upgrade test cannot ask for rows
# there. Every other concrete model's table must hold at least one.
EMPTY_BY_DESIGN = {
    "auth_group": "roles are the is_staff flag (amux_common/roles.py): no groups",
    "auth_group_permissions": "no groups",
    "auth_user_groups": "no groups",
    "auth_user_user_permissions": "roles are the is_staff flag: no per-user permissions",
    "axes_accessfailurelog": "AXES_ENABLE_ACCESS_FAILURE_LOG is left off (axes' default)",
    "axes_accessattemptexpiration": "AXES_USE_ATTEMPT_EXPIRATION is left off (axes' default)",
}


def table_counts() -> dict[str, int]:
    """Every concrete model table's rows (auto-created many-to-many tables too)."""
    from django.apps import apps

    return {model._meta.db_table: model._default_manager.count()
            for model in apps.get_models(include_auto_created=True)
            if model._meta.managed and not model._meta.proxy}


def check_every_table(counts: dict[str, int]) -> None:
    empty = sorted(t for t, n in counts.items() if n == 0 and t not in EMPTY_BY_DESIGN)
    if empty:
        raise RuntimeError(f"the work left these tables empty: {', '.join(empty)} — make "
                           "rows there through amux, or say in EMPTY_BY_DESIGN why it never can")
    filled = sorted(t for t in EMPTY_BY_DESIGN if counts.get(t))
    if filled:
        raise RuntimeError(f"EMPTY_BY_DESIGN names tables that have rows now: {filled}")


def chosen_facts(w: Work) -> dict[str, Any]:
    """What the upgrade test reads back through the ORM after migrating: read here by the
    same code (tests/support/kept_check.py) from the rows the work made."""
    from tests.support import kept_check

    return kept_check.facts({"ticket": {"id": w.facts["ticket"]},
                             "session": {"id": w.facts["session"]},
                             "prompt": {"key": "team.worker"}, "goal": {"slug": "ship"}})


def make() -> dict[str, Any]:
    """The work, the check that every table has rows, and what the manifest keeps."""
    w = Work()
    configure(w)
    tickets(w)
    sessions(w)
    goals(w)
    lark(w)
    panel_and_admin(w)
    outbox_states()
    counts = table_counts()
    check_every_table(counts)
    return {"facts": chosen_facts(w), "empty_by_design": EMPTY_BY_DESIGN}


if __name__ == "__main__":
    import json
    import sys

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    made = make()
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump(made, out, default=str)
