"""Which ticket a pull request belongs to, and what its CI results tell the ticket.

A pull request joins a ticket whoever opened it: when its head branch is the ticket's own
branch (`amux/<short name>`), or when its title or body closes the ticket's issue with
GitHub's closing keywords. CI on its head reaches the ticket as inputs keyed so that
redeliveries and repeated check runs make one input: one per (head commit, check name)
for failures, one per head commit for success. Pure: no Django, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BRANCH_PREFIX = "amux/"

# GitHub's closing keywords ("Linking a pull request to an issue"): the keyword, an
# optional colon, spaces, then `#N` or `owner/repo#N`. The keyword must stand alone
# ("prefix#3" and "fixes-#3" close nothing).
_CLOSING = re.compile(
    r"(?<![\w/#-])(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)"
    r"(?::[ \t]*|[ \t]+)"
    r"(?:(?P<repo>[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9_.-]+))?#(?P<number>[0-9]+)\b",
    re.IGNORECASE,
)


def ticket_branch(short_name: str) -> str:
    """The branch a ticket's worker pushes: `amux/<short name>`."""
    return BRANCH_PREFIX + short_name


def short_name_of_branch(branch: str) -> str | None:
    """The ticket short name a head branch names, or None for any other branch."""
    if not branch or not branch.startswith(BRANCH_PREFIX):
        return None
    rest = branch[len(BRANCH_PREFIX):]
    return rest if rest and "/" not in rest else None


def closed_issues(text: str, repo: str) -> list[int]:
    """Issue numbers of `repo` (owner/name) that `text` closes, in order, without repeats.

    A bare `#N` means the pull request's own repository; `owner/name#N` counts only when
    it names that same repository (compared case-insensitively, as GitHub does)."""
    found: list[int] = []
    for m in _CLOSING.finditer(text or ""):
        named = m.group("repo")
        if named and named.lower() != (repo or "").lower():
            continue
        number = int(m.group("number"))
        if number > 0 and number not in found:
            found.append(number)
    return found


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


# --- CI results ------------------------------------------------------------------------

FAILED = frozenset({"failure", "timed_out", "action_required", "startup_failure", "error"})
PASSED = frozenset({"success"})


@dataclass(frozen=True)
class CiResult:
    """One completed CI result on a commit: a check run, a check suite, a workflow run
    or a commit status. `summary` is true for suites and workflows (and statuses, which
    have no suite): only those report success."""

    repo: str
    sha: str
    name: str
    conclusion: str
    url: str = ""
    summary: bool = False


def ci_outcome(r: CiResult) -> str | None:
    """"failed", "passed" or None (in progress, cancelled, skipped, neutral: nothing to
    tell). A single check run passing tells nothing; its suite or workflow does."""
    if r.conclusion in FAILED:
        return "failed"
    if r.conclusion in PASSED and r.summary:
        return "passed"
    return None


def ci_trigger_id(r: CiResult) -> str | None:
    """A stable trigger id: one failure per (head commit, check name), one success per
    head commit, however many deliveries, check runs or polls report it."""
    outcome = ci_outcome(r)
    if outcome is None or not r.sha:
        return None
    repo = r.repo.lower()
    if outcome == "passed":
        return f"ci_passed:{repo}:{r.sha}"
    return f"ci_failed:{repo}:{r.sha}:{r.name}"


def ci_text(r: CiResult) -> str:
    """The input the ticket reads: what failed or passed, on which commit, and where."""
    short = r.sha[:7]
    if ci_outcome(r) == "passed":
        text = f"CI passed on {short}: {r.name}."
    else:
        text = f"CI failed on {short}: {r.name} ({r.conclusion})."
    return f"{text}\n{r.url}" if r.url else text


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
