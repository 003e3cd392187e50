"""Child processes that do not outlive the process that started them."""

from __future__ import annotations

import signal
from collections.abc import Callable


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` for a child: Linux sends it ``sig`` when the thread that started it
    dies, so a killed worker or supervisor leaves nothing running. Best effort (elsewhere a
    no-op): callers keep their own sweep as the backstop."""

    def preexec() -> None:  # pragma: no cover - runs in the child before exec
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(sig))  # PR_SET_PDEATHSIG
        except Exception:  # noqa: S110 - best effort, see above
            pass

    return preexec
