"""Proof under faults, small: 5 ticket lifecycles (signed webhooks → real web server, real
Celery workers, real Pi against the scripted model, PyGithub against the recording GitHub)
while the web server, the workers and session hosts are SIGKILLed at random and restarted.
Nothing is lost, nothing is sent twice, every turn has exactly one terminal event.
`make chaos` runs the same driver over 50 lifecycles (tests/support/chaos.py). The seed is
printed; AMUX_CHAOS_SEED replays its choice of targets and moments."""

from __future__ import annotations

import os

import pytest

from tests.support import chaos
from tests.support.workers import worker_env

pytestmark = [pytest.mark.serial, pytest.mark.slow, pytest.mark.e2e,
              pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]


def test_five_lifecycles_under_random_sigkills(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    settings.WORK_DIR.mkdir(parents=True)
    seed = int(os.environ.get("AMUX_CHAOS_SEED") or 0) or None
    result = chaos.run(lifecycles=5, data_dir=settings.DATA_DIR, seed=seed, parallel=3,
                       kill_interval=(4.0, 8.0), min_kills=3, lifecycle_timeout=120,
                       settle_timeout=60,
                       env=worker_env(settings.DATA_DIR, **chaos.CHAOS_ENV))
    print(result.summary(), f"\nlogs: {settings.DATA_DIR / 'chaos-logs'}")
    assert (result.lost, result.duplicates, result.bad_turns) == (0, 0, 0), result.summary()
    # The killer deals its three targets in turn: three kills hit each kind of fault once;
    # the run starts more lifecycles while fewer than three have struck (five can take
    # as little as 20 s, two kills' time).
    assert sum(result.kills.values()) >= 3, result.summary()
