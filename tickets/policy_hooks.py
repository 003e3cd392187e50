"""Tickets' side of the policy: what tickets asks the policy (acceptance mode, the gate's
decisions, a version's change) and what it provides to policy.hooks as plain data (source
facts, the live tickets' mandates; provided by tickets/wiring.py).

policy/ never imports tickets.
"""

from __future__ import annotations

from dataclasses import dataclass

from intake.models import Source
from intake.sources import plugin
from policy import services
from policy.document import SourceInfo, compile_policy, places_of, receives_all_scopes
from policy.effects import Affected, policy_effects
from policy.gate import Facts, Policy, Verdict, gate
from tickets.core import resume
from tickets.models import AgentSettings, Mandate, Ticket


def acceptance_mode() -> str:
    """`manual` (inferred candidates never become work) unless the policy says `auto`."""
    return "auto" if services.current().document.get("acceptance") == "auto" else "manual"


def current_version() -> str:
    return services.current().version or ""


def source_infos() -> dict[str, SourceInfo]:
    return {
        s.slug: SourceInfo(slug=s.slug, kind=s.kind, enabled=s.enabled, name=s.name,
                           receives_all=receives_all_scopes(s.kind, s.config),
                           places=places_of(s.kind, s.config))
        for s in Source.objects.all()
    }


def sources_stamp() -> tuple[str, ...]:
    """SQL naming the sources' state (policy.hooks.sources_stamp): every change saves its
    source, which moves `updated_at`; a removal lowers the count."""
    table = Source._meta.db_table
    return (f"(SELECT COUNT(*) FROM {table})", f"(SELECT MAX(updated_at) FROM {table})")


def worker_configured() -> bool:
    """Agent settings name the worker's provider and model (without them admitted work
    cannot run)."""
    settings = AgentSettings.objects.filter(pk=1).first()
    return bool(settings and settings.worker_provider_id and settings.worker_model.strip())


def worker_defaults() -> dict | None:
    """The worker's runtime, provider and model (sessions.hooks.worker_defaults: what a
    conversation session starts with while no Bot Profile exists); None when unset."""
    settings = AgentSettings.objects.select_related("worker_provider").filter(pk=1).first()
    if not (settings and settings.worker_provider_id and settings.worker_model.strip()):
        return None
    return {"runtime": settings.worker_runtime, "provider": settings.worker_provider.slug,
            "model": settings.worker_model.strip()}


def live_mandates() -> list[dict]:
    rows = (Mandate.objects.filter(ticket__ended_at__isnull=True)
            .select_related("ticket__thread__source").order_by("ticket_id"))
    return [
        {"ticket": m.ticket_id, "short_name": m.ticket.short_name, "title": m.ticket.title,
         "source": m.ticket.thread.source.slug, "scope": m.scope, "strength": m.strength,
         "rule": m.rule, "requester": m.requester, "basis": m.basis or {},
         "policy_version": m.policy_version}
        for m in rows
    ]


# --- what tickets.actions.policy_changes needs (plain data; the action does the writing) ---


@dataclass(frozen=True)
class PolicyChange:
    old_version: str | None
    new_version: str
    policy: Policy  # the new version, compiled
    affected: tuple[Affected, ...]


def change(old_version: str | None, new_version: str) -> PolicyChange:
    """The new version compiled and the live tickets the change affects (policy_effects)."""
    infos = source_infos()
    old_doc = services.document_of(old_version)
    new_doc = services.document_of(new_version)
    affected = policy_effects(old_doc, new_doc, live_mandates(), infos, old_version,
                              new_version)
    return PolicyChange(old_version, new_version,
                        compile_policy(new_doc, infos, version=new_version), tuple(affected))


def decide(trigger, policy: Policy) -> Verdict:
    """The gate's decision for a stored trigger under a (new) policy."""
    return gate(Facts.of(trigger.source.slug, trigger.source.kind, trigger), policy)


# --- revalidation before a ticket resumes (seed 002; the rule: tickets/core/resume.py) ---


def source_standing(ticket: Ticket) -> resume.SourceStanding:
    """Where the source of a ticket's mandate stands now, read inside the resuming
    transaction: whether it exists, is enabled, and still listens to the ticket's thread —
    its plugin's scope() of the stored trigger meta (what the source said about the
    thread when the work was asked for) against its current config.

    Read, not locked: a change committed after this read is one made after the resume,
    which revalidation does not undo (the next resume meets it)."""
    source = Source.objects.filter(pk=ticket.thread.source_id).first()
    if source is None:
        return resume.SourceStanding(exists=False)
    mandate = Mandate.objects.select_related("trigger").filter(ticket=ticket).first()
    meta = dict(ticket.thread.meta or {})
    if mandate is not None:
        meta = {**meta, "scope": mandate.scope,
                **(mandate.trigger.meta if mandate.trigger is not None else {})}
    listens = plugin(source.kind, source.config).scope(meta) is not None
    return resume.SourceStanding(exists=True, enabled=source.enabled, listens=listens)
