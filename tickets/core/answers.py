"""Did a person speak after the executor's last word? (one definition for the engine,
which may end a ticket only when the executor owes nobody an answer, and for the stage,
where a person's new message hands a failed or blocked ticket back to the executor).

The executor's last word is its latest report that is not progress, or the end of one of
its runs or turns, whichever came last."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime


def last_word(reports: Iterable[tuple[str, datetime]],
              run_times: Iterable[datetime | None]) -> datetime | None:
    """`reports`: (status, created_at) of the ticket's reports; `run_times`: each run's
    ended_at and last_turn_at (None where there is none)."""
    times = [at for status, at in reports if status != "progress" and at]
    times += [at for at in run_times if at]
    return max(times, default=None)


def spoke_after(person_at: datetime | None, word: datetime | None) -> bool:
    """A person's message at `person_at` came after the executor's last word (any message
    does while the executor has said nothing yet)."""
    return person_at is not None and (word is None or person_at > word)
