"""Pull requests and issues, as the worker's tools and the sources report them: a pull
request joins its ticket, a merged or closed one (or the ticket's closed issue) may end it.
The rules: tickets/core/linking.py and tickets/core/routing.py (`end_reason`)."""

from __future__ import annotations

import dataclasses

from django.db import transaction
from django.db.models import Q

from amux_common.clock import now as clock
from intake import rules as intake_core
from intake.models import Source, Thread
from tickets import locks
from tickets.actions import common
from tickets.core import linking
from tickets.models import Subscription, Ticket


def pr_linked(*, ticket_id: int, pr_thread_id: int, url: str = "") -> None:
    """Fact: a PR for this ticket exists (opened by the agent, or by hand linking the
    ticket's thread). Its thread joins the ticket's subscriptions."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        thread = Thread.objects.get(pk=pr_thread_id)
        if not Subscription.objects.filter(thread=thread).exists():
            Subscription.objects.create(ticket=ticket, thread=thread)
        _note_open(thread)
        common.save_changes(ticket, {"pr_url": url or thread.url or ticket.pr_url,
                                     "pr_state": "open"})


def pr_opened(*, ticket_id: int, thread_key: str, url: str, title: str = "") -> Thread:
    """Fact: the worker opened a pull request on the ticket's source. The PR's thread joins
    the ticket's subscriptions, so its reviews and its merge reach the ticket."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        thread, _ = Thread.objects.get_or_create(
            source=ticket.thread.source, key=thread_key,
            defaults={"url": url[:500], "title": title[:300]},
        )
        if not Subscription.objects.filter(thread=thread).exists():
            Subscription.objects.create(ticket=ticket, thread=thread)
        _note_open(thread)
        common.save_changes(ticket, {"pr_url": url[:500], "pr_state": "open"})
    return thread


def pr_closed(*, pr_thread_id: int, merged: bool) -> Ticket | None:
    """Fact: the PR was merged or closed. The ticket ends when nothing is in flight;
    otherwise it ends as soon as the executor answers or its run ends."""
    with transaction.atomic(durable=True):
        return _pr_final(pr_thread_id, merged)


def thread_state_reported(source: Source, thread: Thread, facts: dict) -> None:
    """Fact, in intake's transaction (the thread locked, its meta saved): a thread's own
    state was reported. A pull request joins or ends its ticket (`pr_state`); the
    ticket's own issue closed may end it (`issue_state`)."""
    if "pr_state" in facts:
        _pull_request_reported(source, thread, facts)
    if "issue_state" in facts:
        _issue_reported(thread)


def locate_on_pull_request(source: Source, result):
    """A CI result on a pull request's head reaches only a followed pull request (one
    that belongs to a ticket); one that names no pull request (a commit status, a fork's
    check) belongs to the open, followed pull request whose head is its commit or branch.
    Anything else concerns no ticket and leaves no trigger."""
    if not intake_core.is_trigger(result) or result.scope != "ci_pull_request":
        return result
    if result.thread:
        followed = Subscription.objects.filter(thread__source=source,
                                               thread__key=result.thread).exists()
        return result if followed else intake_core.ignored("pull_request_not_followed")
    match = result.meta.get("match_pr") or {}
    sha, branches = match.get("sha") or "", list(match.get("branches") or [])
    rows = (
        Thread.objects.filter(source=source, subscription__isnull=False,
                              key__startswith=f"{match.get('repo')}#", meta__pr_state="open")
        .filter(Q(meta__head_sha=sha) | Q(meta__head_ref__in=branches))
        .values_list("key", "meta")
    )
    key = linking.pr_for_commit(sha, branches, [
        (k, m.get("head_ref") or "", m.get("head_sha") or "") for k, m in rows])
    if key is None:
        return intake_core.ignored("pull_request_not_followed")
    return dataclasses.replace(result, thread=key)


def _note_open(thread: Thread) -> None:
    # A webhook may have told its state already (it raced the tool): that one stands.
    if "pr_state" not in thread.meta:
        common.save_changes(thread, {"meta": {**thread.meta, "pr_state": "open"}})


def _pr_final(pr_thread_id: int, merged: bool) -> Ticket | None:
    subscription = Subscription.objects.filter(thread_id=pr_thread_id).first()
    if subscription is None:
        return None
    ticket = locks.ticket(subscription.ticket_id)
    other_open = (
        Thread.objects.filter(subscription__ticket=ticket, meta__pr_state="open")
        .exclude(pk=pr_thread_id).exists()
    )
    common.save_changes(ticket, {"pr_state": linking.pr_state_after(merged, other_open)})
    common.end_if_due(ticket, clock())
    return ticket


def _pull_request_reported(source: Source, thread: Thread, facts: dict) -> None:
    """A pull request's state, head or text was reported. An unlinked one joins the
    ticket whose branch is its head or whose issue it closes, whoever opened it; a merged
    or closed one may end its ticket; a reopened one is open again."""
    subscription = Subscription.objects.filter(thread=thread).first()
    if subscription is not None:
        ticket_id = subscription.ticket_id
    else:
        ticket_id = _ticket_for_pull(source, thread, facts)
        if ticket_id is None:
            return
        Subscription.objects.create(ticket_id=ticket_id, thread=thread)
    ticket = locks.ticket(ticket_id)
    url = (facts.get("pr_url") or thread.url or ticket.pr_url)[:500]
    if subscription is None and url != ticket.pr_url:
        common.save_changes(ticket, {"pr_url": url})
    state = facts.get("pr_state")
    if state in ("merged", "closed"):
        _pr_final(thread.pk, state == "merged")
    elif ticket.pr_state != "open":
        common.save_changes(ticket, {"pr_state": "open"})


def _ticket_for_pull(source: Source, thread: Thread, facts: dict) -> int | None:
    pull = linking.PullFacts(facts.get("pr_state") or "", facts.get("head_ref") or "",
                             tuple(facts.get("closes") or ()))
    short = linking.short_name_of_branch(pull.head_ref)
    by_branch = None
    if short:
        row = Ticket.objects.filter(short_name=short).values_list("pk", "ended_at").first()
        by_branch = linking.Candidate(row[0], row[1] is not None) if row else None
    repo = thread.key.partition("#")[0]
    keys = [f"{repo}#{n}" for n in pull.closes]
    found = {
        key: linking.Candidate(pk, ended is not None)
        for pk, key, ended in Ticket.objects.filter(thread__source=source, thread__key__in=keys)
        .values_list("pk", "thread__key", "ended_at")
    }
    return linking.ticket_to_link(pull, by_branch, [found[k] for k in keys if k in found])


def _issue_reported(thread: Thread) -> None:
    """The ticket's own issue was closed (or reopened): it may end now."""
    subscription = Subscription.objects.filter(thread=thread).first()
    if subscription is None:
        return
    ticket = locks.ticket(subscription.ticket_id)
    if ticket.thread_id == thread.pk:
        common.end_if_due(ticket, clock())
