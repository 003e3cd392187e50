"""What the upgrade test (tests/integration/test_upgrade_from_kept_db.py) needs to know of a
kept database loaded into a fresh installation: run in that installation's own process
(its DATABASE_URL / AMUX_DATA_DIR / AMUX_SECRET_KEY), it migrates the database with the
real `migrate`, then reports — it asserts nothing itself — the migrations applied, every
table's rows, the chosen facts read through the ORM, and what amux answers when it works
on that database (the ticket list over the API and in the panel, an input added to a ticket
through the API)."""

from __future__ import annotations

import json
import sys
from typing import Any


def migrate() -> dict[str, Any]:
    from django.core.management import call_command
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from amux_site.restore import known_migrations

    with connection.cursor() as cursor:
        cursor.execute("SELECT app, name FROM django_migrations")
        before = {(app, name) for app, name in cursor.fetchall()}
    call_command("migrate", interactive=False, verbosity=0)
    executor = MigrationExecutor(connection)
    return {"unknown_before": sorted(f"{a}.{n}" for a, n in before - known_migrations()),
            "unapplied_after": [f"{m.app_label}.{m.name}" for m, _ in executor.migration_plan(
                executor.loader.graph.leaf_nodes())]}


def counts() -> dict[str, int]:
    from django.db import connection

    out = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")  # noqa: S608
            out[table] = cursor.fetchone()[0]
    return out


def facts(kept: dict[str, Any]) -> dict[str, Any]:
    """The manifest's facts as this amux reads them now (same shape)."""
    from goals.models import Goal
    from intake.models import Source
    from policy import services as policy
    from policy.models import PolicyVersion
    from prompts_app import service as prompts
    from sessions.models import ProviderProfile, TimelineEvent
    from tickets.models import Ticket

    ticket = Ticket.objects.select_related("mandate__trigger").get(pk=kept["ticket"]["id"])
    sid = kept["session"]["id"]
    events = TimelineEvent.objects.filter(session_id=sid).order_by("seq")
    return {
        "ticket": {"id": ticket.pk, "short_name": ticket.short_name,
                   "mandate_text": ticket.mandate.trigger.text,
                   "mandate_requester": ticket.mandate.requester},
        "policy": {"version": policy.current_version(),
                   "versions": PolicyVersion.objects.count(),
                   "acceptance": policy.current().document["acceptance"]},
        "prompt": {"revision": prompts.latest().revision, "key": kept["prompt"]["key"],
                   "text": prompts.fragment(kept["prompt"]["key"])["text"]},
        "secrets": {"provider": {"slug": "openai", "api_key": ProviderProfile.objects.get(
                        slug="openai").secrets["api_key"]},
                    "source": {"slug": "gh", "webhook_secret": Source.objects.get(
                        slug="gh").secrets["webhook_secret"]}},
        "session": {"id": sid,
                    "timeline": [[e.seq, e.type] for e in events],
                    "replies": [e.payload.get("text") for e in events
                                if e.type == "message.completed"]},
        "goal": {"slug": kept["goal"]["slug"], "todos": sorted(
            Goal.objects.get(slug=kept["goal"]["slug"]).todos.values_list("title", flat=True))},
    }


def works(ticket_id: int) -> dict[str, Any]:
    """amux at work on the migrated database: the operator made by the kept work reads the
    tickets over the API (with a new token) and in the panel, and adds an input."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from rest_framework.test import APIClient

    from amux_site import accounts
    from tickets.models import Input

    api = APIClient(SERVER_NAME="127.0.0.1")
    api.credentials(HTTP_AUTHORIZATION=f"Token {accounts.new_token('operator')}")
    listed = api.get("/api/v1/tickets/")
    added = api.post(f"/api/v1/tickets/{ticket_id}/inputs/",
                     {"text": "Checked after the upgrade."}, format="json")
    browser = Client(SERVER_NAME="127.0.0.1")
    browser.force_login(get_user_model().objects.get(username="operator"))
    panel = browser.get("/panel/tickets/")
    page = browser.get(f"/panel/tickets/{ticket_id}/")
    return {"api_status": listed.status_code,
            "api_ids": [t["id"] for t in listed.json().get("results", [])]
            if listed.status_code == 200 else [],
            "input_status": added.status_code,
            "input_kept": Input.objects.filter(ticket_id=ticket_id,
                                               text="Checked after the upgrade.").exists(),
            "panel_status": panel.status_code,
            "panel_text": panel.content.decode(errors="replace"),
            "page_status": page.status_code,
            "page_text": page.content.decode(errors="replace")}


def main(kept_facts_file: str, out_file: str) -> None:
    import django

    django.setup()
    with open(kept_facts_file, encoding="utf-8") as f:
        kept = json.load(f)
    report = {"migrate": migrate(), "tables": counts(), "facts": facts(kept),
              "works": works(kept["ticket"]["id"])}
    with open(out_file, "w", encoding="utf-8") as out:
        json.dump(report, out, default=str)


if __name__ == "__main__":
    main(*sys.argv[1:3])
