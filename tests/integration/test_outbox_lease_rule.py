"""Start-up refuses outbox settings under which a handler could outlive its lease: the drain
task's hard time limit must stay under half the shortest lease (effects/outbox.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from effects import outbox
from effects.models import EffectKind

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_settings_keep_the_rule(settings):
    assert settings.AMUX_OUTBOX_LEASE_SECONDS is None
    shortest = min(policy.lease_seconds for policy in outbox.KINDS.values())
    assert shortest > 2 * settings.AMUX_OUTBOX_TASK_TIME_LIMIT
    outbox.check_lease_rule()


def test_every_kind_has_its_rules_and_every_rule_a_kind():
    assert set(outbox.KINDS) == set(EffectKind.values)


def test_a_lease_too_short_for_the_time_limit_is_refused_by_name(settings):
    settings.AMUX_OUTBOX_LEASE_SECONDS = 4.0
    with pytest.raises(ImproperlyConfigured,
                       match=r"AMUX_OUTBOX_LEASE_SECONDS=4 is too short for"
                             r" AMUX_OUTBOX_TASK_TIME_LIMIT=140"):
        outbox.check_lease_rule()
    settings.AMUX_OUTBOX_TASK_TIME_LIMIT = 1.5  # a test's crash-fast pair: allowed
    outbox.check_lease_rule()


def test_a_time_limit_over_half_a_kind_s_own_lease_is_refused_by_name(settings):
    settings.AMUX_OUTBOX_TASK_TIME_LIMIT = 150.0  # the shortest lease is 300 s
    with pytest.raises(ImproperlyConfigured,
                       match=r"AMUX_OUTBOX_TASK_TIME_LIMIT=150 is too long.*300 s"):
        outbox.check_lease_rule()


@pytest.mark.parametrize(("env", "message"), [
    ({"AMUX_OUTBOX_LEASE_SECONDS": "4"},
     "AMUX_OUTBOX_LEASE_SECONDS=4 is too short for AMUX_OUTBOX_TASK_TIME_LIMIT=140"),
    ({"AMUX_OUTBOX_LEASE_SECONDS": "100", "AMUX_OUTBOX_TASK_TIME_LIMIT": "60"},
     "AMUX_OUTBOX_LEASE_SECONDS=100 is too short for AMUX_OUTBOX_TASK_TIME_LIMIT=60"),
    ({"AMUX_OUTBOX_LEASE_SECONDS": "soon"},
     "AMUX_OUTBOX_LEASE_SECONDS must be a number of seconds, not 'soon'"),
    ({"AMUX_OUTBOX_TASK_TIME_LIMIT": "-1"},
     "AMUX_OUTBOX_TASK_TIME_LIMIT must be a positive number of seconds"),
])
def test_a_process_with_broken_outbox_settings_does_not_start(env, message, tmp_path):
    """What an operator sees: `manage.py` (like a worker or the web server) stops at start-up
    with the setting's name, instead of running handlers twice later."""
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    run_env.update(env, AMUX_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="amux_site.settings")
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=run_env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and message in result.stderr, result.stderr


def test_the_rule_is_checked_while_the_settings_load(tmp_path):
    """Before any app is ready: a process that only reads the settings stops too."""
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    run_env.update(AMUX_OUTBOX_LEASE_SECONDS="4", AMUX_DATA_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", "import amux_site.settings"], cwd=ROOT,
                            env=run_env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "AMUX_OUTBOX_LEASE_SECONDS=4 is too short for AMUX_OUTBOX_TASK_TIME_LIMIT=140" in \
        result.stderr, result.stderr
