"""Goals' writers lock rows in one order (goals/locks.py): the goal first, then its agent,
then finer rows, each as FOR NO KEY UPDATE. Two writers that take locks in opposite orders
can deadlock each other; these read the statements a real settle, todo change and
connector change send to PostgreSQL (SQLite has no row locks)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from goals import actions, locks
from goals import inbox as inboxes
from goals.models import Agent, Connector, Goal, InboxEvent, Todo
from tests.integration.goals.test_inbox_drain import (  # noqa: F401 - fixtures
    drain,
    inbox,
    lark,
    mention,
)

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(60),
              pytest.mark.skipif("connection.vendor != 'postgresql'",
                                 reason="SQLite takes no row locks (one writer at a time): "
                                        "there is no lock order to read")]

TABLES = {model._meta.db_table: model.__name__
          for model in (Goal, Agent, Connector, InboxEvent, Todo)}


def locked(queries) -> list[str]:
    """The models locked, in the order their locks were asked for."""
    order = []
    for query in queries:
        sql = query["sql"]
        if "FOR NO KEY UPDATE" not in sql:
            assert "FOR UPDATE" not in sql, sql  # every lock is a no-key one
            continue
        table = re.search(r'FROM "(\w+)"', sql).group(1)
        order.append(TABLES.get(table, table))
    return order


def test_an_inbox_settle_locks_the_goal_then_the_agent_then_the_event(
        api, client, inbox, lark):  # noqa: F811
    asked = mention(client, lark, "can you cut the release today?", "om_ask")
    key = drain(api)["key"]
    with CaptureQueriesContext(connection) as seen:
        inboxes.settle("ship", "builder", asked.pk, key=key,
                     effect={"kind": "todo", "title": "Cut the release"}, reply="On it.")
    assert locked(seen)[:3] == ["Goal", "Agent", "InboxEvent"]
    assert set(locked(seen)) <= {"Goal", "Agent", "InboxEvent"}  # the todo is new


def test_a_todo_change_and_a_connector_change_lock_from_the_goal_down(
        api, inbox):  # noqa: F811
    todo = actions.add_todo("ship", "Write the notes")
    with CaptureQueriesContext(connection) as seen:
        actions.change_todo("ship", todo.pk, state="claimed", agent="builder")
    assert locked(seen) == ["Goal", "Todo"]
    with CaptureQueriesContext(connection) as seen:
        actions.disconnect(inbox.pk)
    assert locked(seen) == ["Goal", "Agent", "Connector"]
    with CaptureQueriesContext(connection) as seen:
        locks.agent(inbox.agent_id)
    assert locked(seen) == ["Goal", "Agent"]
