"""What the policy app needs from tickets, registered at start-up (TicketsConfig.ready).

policy/ never imports tickets; tickets fills policy.hooks with source facts and the live
tickets' mandates as plain data.
"""

from __future__ import annotations

from policy import hooks
from policy.document import SourceInfo, receives_all_scopes


def source_infos() -> dict[str, SourceInfo]:
    from tickets.models import Source

    return {
        s.slug: SourceInfo(slug=s.slug, kind=s.kind, enabled=s.enabled, name=s.name,
                           receives_all=receives_all_scopes(s.kind, s.config))
        for s in Source.objects.all()
    }


def live_mandates() -> list[dict]:
    from tickets.models import Mandate

    rows = (Mandate.objects.filter(ticket__ended_at__isnull=True)
            .select_related("ticket__thread__source").order_by("ticket_id"))
    return [
        {"ticket": m.ticket_id, "short_name": m.ticket.short_name, "title": m.ticket.title,
         "source": m.ticket.thread.source.slug, "scope": m.scope, "strength": m.strength,
         "rule": m.rule, "requester": m.requester, "basis": m.basis or {},
         "policy_version": m.policy_version}
        for m in rows
    ]


def register() -> None:
    hooks.provide_sources(source_infos)
    hooks.provide_live_mandates(live_mandates)
