"""What GitHub tells about pull requests and CI, read by the GitHub plugin (pure).

A pull request's title or body closes issues with GitHub's closing keywords. CI on a pull
request's head reaches its ticket as inputs keyed so that redeliveries and repeated check
runs make one input: one per (head commit, check name) for failures, one per head commit
for success. No Django, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# GitHub's closing keywords ("Linking a pull request to an issue"): the keyword, an
# optional colon, spaces, then `#N` or `owner/repo#N`. The keyword must stand alone
# ("prefix#3" and "fixes-#3" close nothing).
_CLOSING = re.compile(
    r"(?<![\w/#-])(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)"
    r"(?::[ \t]*|[ \t]+)"
    r"(?:(?P<repo>[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9_.-]+))?#(?P<number>[0-9]+)\b",
    re.IGNORECASE,
)


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
