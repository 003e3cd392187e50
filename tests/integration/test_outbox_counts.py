"""Per-kind counts and ages of the outbox, as `amux doctor` and the admin show them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from amux_site import doctor
from effects import outbox, stats
from effects.models import Effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows():
    """deliver: 2 due (one 10 minutes old), 1 running, 1 backing off, 1 dead letter;
    relay: 1 due. Nothing else."""
    now = timezone.now()
    old = now - timedelta(minutes=10)
    make = Effect.objects.create
    make(kind="deliver", key="input-1", due_at=old)
    Effect.objects.filter(key="input-1").update(created_at=old)
    make(kind="deliver", key="input-2", due_at=now)
    make(kind="deliver", key="input-3", due_at=now, claimed_by="drainer-a",
         claimed_until=now + timedelta(minutes=5))
    make(kind="deliver", key="input-4", due_at=now + timedelta(minutes=1), attempts=2)
    make(kind="deliver", key="input-5", due_at=old, state="dead", attempts=15)
    make(kind="relay", key="ticket:1:report:1", due_at=now, channel="team:t1")
    return now


def test_counts_per_kind(rows):
    counts = {c.kind: c for c in stats.by_kind(rows)}
    assert list(counts) == ["deliver", "relay"], "kinds without rows are left out"
    deliver = counts["deliver"]
    assert (deliver.due, deliver.running, deliver.waiting, deliver.dead) == (2, 1, 1, 1)
    assert 599 <= deliver.oldest_seconds <= 601
    assert deliver.describe() == (
        "2 due, 1 running, 1 waiting, 1 dead letter, oldest 10 min")
    relay = counts["relay"]
    assert (relay.due, relay.running, relay.waiting, relay.dead) == (1, 0, 0, 0)


def doctor_lines() -> dict[str, str]:
    """The outbox's lines exactly as `amux doctor` prints them (the registry collects them
    from effects/doctor.py; the other apps' checks, which start runtimes, are left out)."""
    return {check.name: doctor.format_line(check)
            for check in doctor.plugin_checks(["effects.doctor"])}


def test_doctor_prints_one_line_per_kind_and_warns_of_dead_letters(rows):
    assert "effects.doctor" in doctor.app_modules()
    lines = doctor_lines()
    assert list(lines) == ["outbox:deliver", "outbox:relay"]
    deliver, relay = lines["outbox:deliver"], lines["outbox:relay"]
    assert deliver.startswith("warn") and "retry them from Admin" in deliver
    assert "2 due, 1 running, 1 waiting, 1 dead letter, oldest 10 min" in deliver
    assert relay.startswith("ok") and "1 due, 0 running, 0 waiting, 0 dead letters" in relay


def test_doctor_says_when_the_outbox_is_empty():
    assert list(doctor_lines().values()) == ["ok    outbox                   empty"]


def test_doctor_warns_of_pending_rows_no_handler_here_runs(monkeypatch):
    outbox.enqueue("assess", "eval-1", {})
    monkeypatch.setattr(outbox, "_handlers", {})
    (line,) = doctor_lines().values()
    assert line.startswith("warn  outbox:assess") and "no handler in this installation" in line


def test_the_admin_list_shows_the_counts_per_kind(rows, client, django_user_model):
    django_user_model.objects.create_superuser("root", "root@example.com", "root-pass-123")
    assert client.login(username="root", password="root-pass-123")
    page = client.get("/admin/effects/effect/")
    assert page.status_code == 200
    table = page.content.decode().split('id="outbox-by-kind"')[1].split("</table>")[0]
    assert "<th scope=\"row\">deliver</th><td>2</td><td>1</td>" in table
    assert "<td>1</td><td>1</td><td>10 min</td>" in table
    assert "<th scope=\"row\">relay</th><td>1</td><td>0</td>" in table
