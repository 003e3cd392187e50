"""Tickets as intake's consumer (intake/consumers.py): where a recorded trigger goes — a
follow-up, a revival, a new ticket, an eval or nothing — and what a thread's own state
(a pull request merged, an issue closed) does to its ticket. Registered in
TicketsConfig.ready(); each method is one call into tickets/actions/, in intake's transaction."""

from __future__ import annotations

from intake.models import Source, Thread, Trigger
from tickets.actions import pull_requests, routing


class TicketsConsumer:
    def locate(self, source: Source, result):
        return pull_requests.locate_on_pull_request(source, result)

    def thread_state_reported(self, source: Source, thread: Thread, facts: dict) -> None:
        pull_requests.thread_state_reported(source, thread, facts)

    def route_new(self, trigger: Trigger, acceptance: str | None) -> str:
        return routing.route_new(trigger, acceptance)

    def followed_pull_requests(self, source: Source) -> list[dict]:
        """The open pull requests that live tickets follow, with the head last reported:
        the catch-up reads their CI results by commit."""
        rows = (
            Thread.objects.filter(source=source, subscription__isnull=False,
                                  subscription__ticket__ended_at__isnull=True,
                                  meta__pr_state="open")
            .order_by("pk").values_list("key", "meta")
        )
        return [{"thread": key, "head_sha": meta.get("head_sha") or ""} for key, meta in rows]
