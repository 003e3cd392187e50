"""The long-connection receiver: events dispatched by lark-oapi's own handler (the path the
WebSocket client uses) enter intake like webhook events; the supervisor that `amux run`
starts keeps one receiver process per enabled long-connection source."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from intake import process
from intake.lark_receiver import event_handler
from intake.models import Delivery, Source, Trigger
from intake.sources.lark import Lark
from tests.support.lark_events import bot_verified, message_event
from tests.support.lark_ws import LarkLongConnection
from tests.support.recording_server import RecordingServer
from tests.support.workers import ROOT, wait_for, worker_env

pytestmark = pytest.mark.django_db


@pytest.fixture
def lark():
    config = Lark.validate_config({"app_id": "cli_test", "bot_open_id": "ou_bot",
                                   "groups": ["oc_team"], "receiver": "long_connection"})
    source = Source(kind="lark", slug="lk", name="Lark", config=config)
    source.secrets = {"verification_token": "v", "app_secret": "s"}
    source.save()
    bot_verified(source)
    return source


def test_sdk_dispatched_message_becomes_a_trigger_once(lark):
    handler = event_handler("lk")
    event = message_event(token="", chat_id="oc_team", text="@_user_1 hi",
                          mentions=[("ou_bot", "amux")], message_id="om_ws1")
    handler._do_without_validation(json.dumps(event).encode())
    # stored (the frame is acknowledged then), processed off the connection by the drainer
    assert Delivery.objects.get().processed_at is None and not Trigger.objects.exists()
    assert process.drain() == 1
    trigger = Trigger.objects.get()
    assert trigger.scope == "group_configured" and trigger.addressed
    assert trigger.external_id == "message:om_ws1"
    # A reconnect backfill: same message, new event id.
    event["header"]["event_id"] = "another"
    handler._do_without_validation(json.dumps(event).encode())
    assert process.drain() == 1
    assert Trigger.objects.count() == 1 and Delivery.objects.count() == 2
    assert Delivery.objects.get(delivery_id="another").outcome == "duplicate"


def _children(root: int) -> dict[int, str]:
    """pid → command line of every live descendant of `root`."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text() if entry.isdigit() else ""
        except OSError:
            continue
        if stat and stat.rsplit(")", 1)[1].split()[0] != "Z":
            parents.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = {}, [root]
    while todo:
        for pid in parents.get(todo.pop(), []):
            with contextlib.suppress(OSError):
                found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                todo.append(pid)
    return found


def _receiver_pids(root: int) -> dict[str, int]:
    return {cmd.split("--source ", 1)[1].split()[0]: pid
            for pid, cmd in _children(root).items() if "lark_receiver --source" in cmd}


@pytest.mark.django_db(transaction=True)
def test_the_supervisor_keeps_a_receiver_per_enabled_long_connection_source(tmp_path):
    """`manage.py lark_receivers` (what `amux run` starts) against a fake long-connection
    endpoint: a receiver per enabled long-connection source, events through it become
    triggers, a dead receiver comes back, a disabled source's receiver stops, and SIGTERM
    leaves no receiver behind."""
    with RecordingServer() as api, LarkLongConnection() as ws:
        api.state.lark_ws_url = ws.url
        for slug, app, receiver in (("lk", "cli_one", "long_connection"),
                                    ("lk2", "cli_two", "long_connection"),
                                    ("hook", "cli_hook", "webhook")):
            config = Lark.validate_config({"app_id": app, "bot_open_id": "ou_bot",
                                           "groups": ["oc_team"], "domain": api.url,
                                           "receiver": receiver})
            source = Source(kind="lark", slug=slug, name=slug, config=config)
            source.secrets = {"verification_token": "v", "app_secret": "s"}
            source.save()
        log = tmp_path / "receivers.log"
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "lark_receivers", "--interval", "0.3"],
            cwd=ROOT, env=worker_env(tmp_path), stdout=log.open("wb"),
            stderr=subprocess.STDOUT, start_new_session=True)
        try:
            ws.wait(lambda s: s.apps() == ["cli_one", "cli_two"])
            first = _receiver_pids(proc.pid)
            assert set(first) == {"lk", "lk2"}

            # An event over the connection is stored, then acknowledged.
            event = message_event(token="", chat_id="oc_team", text="@_user_1 hi",
                                  mentions=[("ou_bot", "amux")], message_id="om_ws2",
                                  app_id="cli_one")
            frame = ws.push(event, app="cli_one")
            ws.wait(lambda s: frame in s.acks)
            assert ws.acks[frame] == 200
            assert Delivery.objects.get().processed_at is None
            assert process.drain() == 1
            trigger = Trigger.objects.get()
            assert (trigger.source.slug, trigger.external_id) == ("lk", "message:om_ws2")

            # A receiver that dies is started again.
            os.kill(first["lk"], signal.SIGKILL)
            ws.wait(lambda s: s.opened == 3 and s.apps() == ["cli_one", "cli_two"])
            again = _receiver_pids(proc.pid)
            assert again["lk"] != first["lk"] and again["lk2"] == first["lk2"]

            # Disabled in the panel: its receiver stops, the other one stays.
            Source.objects.filter(slug="lk2").update(enabled=False)
            ws.wait(lambda s: s.apps() == ["cli_one"])
            wait_for(lambda: set(_receiver_pids(proc.pid)) == {"lk"}, timeout=30)
            receivers = set(_children(proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == 0, log.read_text()
        ws.wait(lambda s: not s.open)
        assert not [pid for pid in receivers if Path(f"/proc/{pid}").exists()
                    and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
        text = log.read_text()
        assert "lk exited with -9; restarting in 1 s" in text and "stopping lk2" in text
        assert "hook" not in text  # a webhook source gets no receiver
        assert Source.objects.get(slug="lk").health["last_error"]["reason"] == "receiver_exited"
