"""Tickets as intake's consumer (intake/consumers.py): where a recorded trigger goes — a
follow-up, a revival, a new ticket, an eval or nothing — and what a thread's own state
(a pull request merged, an issue closed) does to its ticket. Registered in
TicketsConfig.ready(); each method is one call into the engine, in intake's transaction."""

from __future__ import annotations

from intake.models import Source, Thread, Trigger
from tickets import engine


class TicketsConsumer:
    def locate(self, source: Source, result):
        return engine._locate_on_pull_request(source, result)

    def thread_state_reported(self, source: Source, thread: Thread, facts: dict) -> None:
        if "pr_state" in facts:
            engine._pull_request_reported(source, thread, facts)
        if "issue_state" in facts:
            engine._issue_reported(thread)

    def route_new(self, trigger: Trigger, acceptance: str | None) -> str:
        taken, ticket = engine._route_of(trigger, acceptance)
        trigger.disposition = engine._disposition(taken)
        trigger.save(force_insert=True)
        engine._take(trigger, taken, ticket)
        return trigger.disposition

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
