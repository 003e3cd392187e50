"""Which ticket a pull request belongs to.

A pull request joins a ticket whoever opened it: when its head branch is the ticket's own
branch (`amux/<short name>`), or when its title or body closes the ticket's issue with
GitHub's closing keywords (read by the GitHub plugin, intake/sources/github_ci.py). CI on
its head reaches the ticket through the open pull request its commit belongs to. Pure: no
Django, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BRANCH_PREFIX = "amux/"

def ticket_branch(short_name: str) -> str:
    """The branch a ticket's worker pushes: `amux/<short name>`."""
    return BRANCH_PREFIX + short_name


def short_name_of_branch(branch: str) -> str | None:
    """The ticket short name a head branch names, or None for any other branch."""
    if not branch or not branch.startswith(BRANCH_PREFIX):
        return None
    rest = branch[len(BRANCH_PREFIX):]
    return rest if rest and "/" not in rest else None


@dataclass(frozen=True)
class PullFacts:
    """What the source reported about a pull request (its thread's facts)."""

    state: str  # open, merged, closed
    head_ref: str = ""
    closes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Candidate:
    ticket: int
    ended: bool


def ticket_to_link(pr: PullFacts, by_branch: Candidate | None,
                   by_issue: Sequence[Candidate]) -> int | None:
    """The ticket an unlinked pull request joins, or None.

    The ticket's own branch wins over a closing keyword; among closed issues the first
    mentioned wins. An ended ticket takes no new pull request (a person's message on its
    thread revives it; a pull request opened later is not one). A pull request first seen
    closed without merging joins nothing: it would end a ticket that never worked on it."""
    if pr.state == "closed":
        return None
    for candidate in (by_branch, *by_issue):
        if candidate is not None and not candidate.ended:
            return candidate.ticket
    return None


def pr_state_after(merged: bool, other_open: bool) -> str:
    """The ticket's pull-request state once one of its pull requests is final: merged
    ends the work; closed without merging leaves it open while another one is."""
    if merged:
        return "merged"
    return "open" if other_open else "closed"


def pr_for_commit(sha: str, branches: Iterable[str],
                  open_prs: Iterable[tuple[str, str, str]]) -> str | None:
    """The open pull request a commit status belongs to (a status names only its commit
    and branches): `open_prs` is (thread key, head ref, head sha). The one whose head is
    that commit wins; else one whose head branch is among the status's branches."""
    names = set(branches)
    by_branch = None
    for key, ref, head_sha in sorted(open_prs):
        if sha and head_sha == sha:
            return key
        if by_branch is None and ref in names:
            by_branch = key
    return by_branch
