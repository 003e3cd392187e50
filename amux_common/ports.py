"""The one way a lower app asks an app above it for something (dependencies point down:
tickets -> policy -> prompts_app). The lower app declares a `Port` (one function it needs)
or an `Event` (listeners it tells); the app above provides or listens from its wiring
module, once, at start-up (its AppConfig.ready). Effects that must survive a crash go
through the outbox instead (effects.outbox.register).

Pure: no Django, no I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable)


class PortTaken(RuntimeError):
    """A port already has a provider of its own."""


class Port(Generic[F]):
    """One function the declaring app needs; answers `default(...)` until provided."""

    def __init__(self, name: str, default: Callable | None = None):
        self.name = name
        self._default = default
        self._provider: Callable | None = None

    def provide(self, fn: F) -> None:
        """Provide the function, once: a second, different provider is an error (two apps
        answering one question would be decided by the order they start in)."""
        if self._provider is not None and self._provider is not fn:
            raise PortTaken(f"{self.name} is provided already by {self._provider!r}")
        self._provider = fn

    def replace(self, fn: F | None) -> Callable | None:
        """Put ``fn`` (None: nothing) in place of whatever is provided and answer that one,
        so a test stands in for the provider and puts it back."""
        before, self._provider = self._provider, fn
        return before

    @property
    def provided(self) -> bool:
        return self._provider is not None

    def __call__(self, *args, **kwargs):
        fn = self._provider or self._default
        return fn(*args, **kwargs) if fn is not None else None

    def __repr__(self) -> str:
        return f"Port({self.name!r}, provided={self.provided})"


class Event:
    """Listeners told of one fact, in the order they listened. A listener that fails is
    logged and does not stop the others (the fact happened already)."""

    def __init__(self, name: str):
        self.name = name
        self._listeners: list[Callable] = []

    def listen(self, fn: Callable) -> None:
        if fn not in self._listeners:
            self._listeners.append(fn)

    def forget(self, fn: Callable) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def tell(self, *args, **kwargs) -> bool:
        """True when every listener succeeded."""
        ok = True
        for fn in list(self._listeners):
            try:
                fn(*args, **kwargs)
            except Exception:
                ok = False
                log.exception("%s listener %r failed", self.name, fn)
        return ok
