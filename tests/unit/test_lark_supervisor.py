"""The reconciler of Lark receivers, on a clock the test moves, with real child processes
(one that exits at once, one that waits to be stopped)."""

from __future__ import annotations

import subprocess
import sys

from intake.lark_receiver import Supervisor

CRASH = [sys.executable, "-c", "import sys; sys.exit(3)"]
WAIT = [sys.executable, "-c", "import time; time.sleep(120)"]


def test_starts_restarts_with_backoff_and_stops_what_is_no_longer_wanted():
    now = [0.0]
    started, exits, stopped = [], [], []

    def spawn(slug):
        started.append((slug, now[0]))
        return subprocess.Popen(CRASH if slug == "bad" else WAIT)

    sup = Supervisor(spawn, clock=lambda: now[0], stop_wait=10,
                     on_exit=lambda slug, code, delay: exits.append((slug, code, delay)),
                     on_stop=stopped.append)
    want = {"bad": "f1", "good": "g1"}

    def crash_then_tick(at):
        sup.children["bad"].proc.wait()
        now[0] = at
        sup.tick(want)

    try:
        sup.tick(want)
        assert started == [("bad", 0.0), ("good", 0.0)]
        crash_then_tick(0.5)
        assert exits == [("bad", 3, 1.0)] and len(started) == 2  # not before its backoff
        now[0] = 1.5
        sup.tick(want)
        assert started[-1] == ("bad", 1.5)
        crash_then_tick(1.6)
        assert exits[-1] == ("bad", 3, 2.0)  # doubling
        now[0] = 3.5
        sup.tick(want)
        assert started[-1] == ("bad", 1.5)
        now[0] = 3.6
        sup.tick(want)
        assert started[-1] == ("bad", 3.6)
        crash_then_tick(200.0)  # it had run long enough: the backoff starts over
        assert exits[-1] == ("bad", 3, 1.0)

        good = sup.children["good"].proc
        assert good.poll() is None  # never disturbed
        want = {"good": "g2"}  # "bad" removed, "good" reconfigured
        sup.tick(want)
        assert sorted(stopped) == ["bad", "good"]
        assert good.poll() is not None and started[-1] == ("good", 200.0)
        assert set(sup.children) == {"good"}
        newer = sup.children["good"].proc
    finally:
        sup.stop_all()
    assert newer.poll() is not None and sup.children == {}
