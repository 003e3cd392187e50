"""`amux run`'s process supervisor: honcho's manager (its processes, output and signals),
except that a child which exits on its own is started again instead of stopping them all.

A crash of the web server, a worker, beat or the Lark receivers is logged and the child
comes back after a backoff (1 s, doubling, at most 30 s); only a crash loop — more than
``CrashPolicy.limit`` exits of one child within ``CrashPolicy.window`` seconds — stops
everything, so `amux run` exits 1 and a process manager around it takes over. Ctrl-C,
SIGTERM, a closed terminal and `amux restart` stop everything as before.
"""

from __future__ import annotations

import datetime
import queue
import signal
import time
from dataclasses import dataclass, field

import honcho.manager


@dataclass
class CrashPolicy:
    """When a child that exited on its own starts again (pure: the caller gives the time)."""

    limit: int = 5  # exits of one child within `window` that make a crash loop (0: none)
    window: float = 300.0
    first_delay: float = 1.0
    max_delay: float = 30.0
    exits: dict[str, list[float]] = field(default_factory=dict)

    def on_exit(self, name: str, now: float) -> float | None:
        """Seconds to wait before starting ``name`` again, or None: a crash loop."""
        recent = [t for t in self.exits.get(name, []) if now - t < self.window] + [now]
        self.exits[name] = recent
        if len(recent) > self.limit:
            return None
        return min(self.first_delay * 2 ** (len(recent) - 1), self.max_delay)


class Supervisor(honcho.manager.Manager):
    """honcho's Manager with restarts (``loop`` is its loop with that one change)."""

    def __init__(self, printer=None, policy: CrashPolicy | None = None):
        super().__init__(printer)
        self.policy = policy or CrashPolicy()
        self.crash_loop: str | None = None  # the child whose crash loop stopped everything
        self._due: dict[str, float] = {}  # children waiting to start again

    def loop(self):
        def _terminate(signum, frame):
            self._system_print(f"{honcho.manager.SIGNALS[signum]['name']} received\n")
            self.returncode = honcho.manager.SIGNALS[signum]["rc"]
            self.terminate()

        signal.signal(signal.SIGTERM, _terminate)
        signal.signal(signal.SIGINT, _terminate)
        self._start()
        exit_start = None
        while True:
            try:
                msg = self.events.get(timeout=0.1)
            except queue.Empty:
                msg = None
            if msg is not None:
                self._handle(msg)
            if self._terminating:
                self._due.clear()
                if exit_start is None:
                    exit_start = self._clock.now()
                if self._all_stopped():
                    break
                if self._clock.now() - exit_start > datetime.timedelta(
                        seconds=honcho.manager.KILL_WAIT):
                    self.kill()
            else:
                now = time.monotonic()
                for name, due in list(self._due.items()):
                    if now >= due:
                        del self._due[name]
                        self._restart(name)

    def _handle(self, msg) -> None:
        proc = self._processes[msg.name]
        if msg.type == "line":
            self._printer.write(msg)
        elif msg.type == "start":
            proc["pid"] = msg.data["pid"]
            self._system_print(f"{msg.name} started (pid={msg.data['pid']})\n")
            if self._terminating:  # started again just as everything stops
                self._procmgr.terminate(proc["pid"])
        elif msg.type == "stop":
            code = msg.data["returncode"]
            proc["returncode"] = code
            self._system_print(f"{msg.name} stopped (rc={code})\n")
            if self._terminating:
                if self.returncode is None:
                    self.returncode = code
                return
            delay = self.policy.on_exit(msg.name, time.monotonic())
            if delay is None:
                self.crash_loop = msg.name
                self.returncode = code
                self._system_print(
                    f"{msg.name} exited on its own {len(self.policy.exits[msg.name])} times "
                    f"within {self.policy.window:.0f} s: a crash loop; stopping everything\n")
                self.terminate()
                return
            self._system_print(f"{msg.name} exited on its own (rc={code}); starting it again "
                               f"in {delay:.0f} s\n")
            self._due[msg.name] = time.monotonic() + delay

    def _restart(self, name: str) -> None:
        proc = self._processes[name]
        proc.pop("returncode", None)
        proc["pid"] = None
        proc["process"] = honcho.manager.multiprocessing.Process(
            name=name, target=proc["obj"].run, args=(self.events, True))
        proc["process"].start()

    def _killall(self, force=False):
        # a child started again whose pid is not known yet is stopped when it reports in
        for name, proc in self._processes.items():
            if "returncode" in proc or proc.get("pid") is None:
                continue
            signame = "SIGKILL" if force else "SIGTERM"
            self._system_print(f"sending {signame} to {name} (pid {proc['pid']})\n")
            if force:
                self._procmgr.kill(proc["pid"])
            else:
                self._procmgr.terminate(proc["pid"])
