"""Real work for the kept database (tests/support/kept_database.py): what an installation
of this amux holds after a while, made through amux's own REST API, actions and services
— the paths the panel, webhooks, workers and session hosts take — never raw inserts.

Run by the generator in a process of its own (`python -m tests.support.kept_work FILE`),
against an empty database it migrates first; the generator gives it the installation's
DATABASE_URL / AMUX_DATA_DIR / AMUX_SECRET_KEY. It fails when a concrete model's table is
left empty (unless EMPTY_BY_DESIGN says why it always is), and writes to FILE the facts the
upgrade test reads back. The sessions and goals are in kept_work_sessions.py, Lark in
kept_work_lark.py, the API client in kept_work_api.py."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from tests.support.kept_work_api import (
    OPERATOR_PASSWORD,
    PROVIDER_KEY,
    REPO,
    WEBHOOK_SECRET,
    Work,
    drain,
)
from tests.support.kept_work_lark import lark
from tests.support.kept_work_sessions import goals, sessions


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
    from intake.models import Thread
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


def panel_and_admin(w: Work) -> None:
    """Failed and good logins on the panel (axes' records, a session), and a superuser
    revoking the viewer's API token in the admin (the admin's log)."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from knox.models import AuthToken

    from amux_site import accounts

    browser = Client(SERVER_NAME="127.0.0.1")
    browser.post("/panel/login/", {"username": "operator", "password": "wrong-password"})
    browser.post("/panel/login/", {"username": "viewer", "password": "wrong-password"})
    answer = browser.post("/panel/login/", {"username": "operator",
                                            "password": OPERATOR_PASSWORD})
    if answer.status_code != 302:
        raise RuntimeError(f"panel login: {answer.status_code}")
    accounts.new_token("viewer")
    admin = get_user_model().objects.create_superuser("admin", password="kept-admin-pass-1")
    token = AuthToken.objects.get(user=w.viewer)
    site = Client(SERVER_NAME="127.0.0.1")
    site.force_login(admin)
    revoked = site.post(f"/admin/knox/authtoken/{token.pk}/delete/", {"post": "yes"})
    if revoked.status_code != 302 or AuthToken.objects.filter(pk=token.pk).exists():
        raise RuntimeError(f"revoking a token in the admin: {revoked.status_code}")


def outbox_states() -> None:
    """The outbox as a running installation has it: done effects gone, a dead letter (the
    reply on the GitHub issue: this GitHub API is not there), effects still due."""
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
