"""GitHub catch-up after downtime: what the webhooks would have said, read through the API.

Each thing missed becomes an envelope shaped like the webhook payload it stands for, so it
goes through the same translation and the same trigger ids (a webhook and a poll of the
same object make one trigger). Delivery ids (`poll:…`) name the object and, for things
that can happen again (a pull request closed, reopened and closed again), when it
happened. Envelopes come in the order that keeps meaning: new issues and comments, pull
requests still open (so a new one joins its ticket first), their reviews and CI, then
pull requests merged or closed, then issues closed (a merge that closes an issue ends the
ticket as merged, not as issue closed).
"""

from __future__ import annotations

from datetime import datetime

from intake.sources.base import Envelope

FINAL_CHECK = "completed"


def catch_up(plug, gh, since: datetime | None, watching: list[dict]):
    """Envelopes for everything `plug`'s repositories saw after `since`, and the newest
    update time seen. `watching`: the open pull requests tickets follow
    (`{"thread": "owner/name#N", "head_sha"}`), whose CI results are read by commit
    (a CI result does not update its pull request, so `since` cannot find it)."""
    envs: list[Envelope] = []
    newest = since
    for full in sorted(plug.repos):
        repo = gh.get_repo(full)
        # Commits are read only for their CI: a lazy handle fetches nothing else.
        lazy = gh.withLazy(True).get_repo(repo.full_name)
        found, newest_here = _repository(plug, repo, lazy, since, watching)
        envs += found
        newest = max(filter(None, [newest, newest_here]), default=None)
    return envs, newest


def _repository(plug, repo, lazy, since, watching):
    data = {"full_name": repo.full_name, "html_url": repo.html_url}
    opened, closed_issues, newest = _issues(plug, repo, data, since)
    comments, newest = _comments(plug, repo, data, since, newest)
    pulls, open_states, closed_states, newest = _pulls(plug, repo, data, since, newest)
    reviews = [env for pull in pulls.values() for env in _reviews(plug, pull, data, since)]
    review_comments = _review_comments(plug, repo, data, since)
    ci = []
    for watched in watching:
        key, _, number = (watched.get("thread") or "").partition("#")
        if key.lower() == repo.full_name.lower() and number.isdigit():
            ci += _ci(plug, repo, lazy, data, int(number), watched.get("head_sha") or "",
                      pulls)
    envs = (opened + comments + open_states + reviews + review_comments + ci
            + closed_states + closed_issues)
    return envs, newest


def _envelope(plug, delivery: str, event: str, payload: dict) -> Envelope:
    return Envelope("event", delivery, event, plug.thread_of(event, payload), payload)


def _later(moment, since) -> bool:
    return moment is not None and (since is None or moment > since)


def _iso(moment) -> str:
    return moment.isoformat() if moment else ""


def _issues(plug, repo, data, since):
    kwargs = {"state": "all", "sort": "updated", "direction": "asc"}
    if since:
        kwargs["since"] = since
    opened, closed, newest = [], [], since
    for issue in repo.get_issues(**kwargs):
        raw = _raw(issue)
        newest = max(filter(None, [newest, issue.updated_at]))
        if "pull_request" in raw:
            continue  # the pull request list has them whole (head, merge state)
        sender = raw.get("user") or {}
        if _later(issue.created_at, since):
            opened.append(_envelope(plug, f"poll:issues:{raw.get('id')}", "issues", {
                "action": "opened", "issue": raw, "repository": data, "sender": sender}))
        if raw.get("state") == "closed" and _later(issue.closed_at, since):
            closer = raw.get("closed_by") or sender
            closed.append(_envelope(
                plug, f"poll:issues:closed:{raw.get('id')}:{_iso(issue.closed_at)}", "issues",
                {"action": "closed", "issue": raw, "repository": data, "sender": closer}))
    return opened, closed, newest


def _comments(plug, repo, data, since, newest):
    kwargs = {"sort": "updated", "direction": "asc"}
    if since:
        kwargs["since"] = since
    envs = []
    for comment in repo.get_issues_comments(**kwargs):
        raw = _raw(comment)
        newest = max(filter(None, [newest, comment.updated_at]))
        if not _later(comment.created_at, since):
            continue
        number = int(str(raw.get("issue_url") or "").rsplit("/", 1)[-1] or 0)
        envs.append(_envelope(plug, f"poll:issue_comment:{raw.get('id')}", "issue_comment", {
            "action": "created", "comment": raw, "repository": data,
            "issue": {"number": number}, "sender": raw.get("user") or {}}))
    return envs, newest


def _pulls(plug, repo, data, since, newest):
    """Pull requests updated since `since` (newest first, so the listing stops there):
    opened, changed (head, text) or merged and closed."""
    pulls, open_states, closed_states = {}, [], []
    for pull in repo.get_pulls(state="all", sort="updated", direction="desc"):
        if since and pull.updated_at and pull.updated_at < since:
            break
        raw = _raw(pull)
        newest = max(filter(None, [newest, pull.updated_at]))
        pulls[pull.number] = pull
        payload = {"number": pull.number, "pull_request": raw, "repository": data,
                   "sender": raw.get("user") or {}}
        pr_id = raw.get("id")
        if raw.get("state") == "closed":
            if _later(pull.closed_at, since):
                closed_states.append(_envelope(
                    plug, f"poll:pull_request:closed:{pr_id}:{_iso(pull.closed_at)}",
                    "pull_request", {"action": "closed", **payload}))
        elif _later(pull.created_at, since):
            open_states.append(_envelope(plug, f"poll:pull_request:{pr_id}", "pull_request",
                                         {"action": "opened", **payload}))
        else:
            open_states.append(_envelope(
                plug, f"poll:pull_request:edited:{pr_id}:{_iso(pull.updated_at)}",
                "pull_request", {"action": "edited", **payload}))
    return pulls, open_states, closed_states, newest


def _reviews(plug, pull, data, since):
    envs = []
    ref = {"number": pull.number, "title": pull.title, "html_url": pull.html_url}
    for review in pull.get_reviews():
        raw = _raw(review)
        if str(raw.get("state") or "").upper() == "PENDING":
            continue
        if not _later(review.submitted_at, since):
            continue
        envs.append(_envelope(plug, f"poll:pull_request_review:{raw.get('id')}",
                              "pull_request_review", {
                                  "action": "submitted", "review": raw, "pull_request": ref,
                                  "repository": data, "sender": raw.get("user") or {}}))
    return envs


def _review_comments(plug, repo, data, since):
    kwargs = {"sort": "updated", "direction": "asc"}
    if since:
        kwargs["since"] = since
    envs = []
    for comment in repo.get_pulls_review_comments(**kwargs):
        raw = _raw(comment)
        if not _later(comment.created_at, since):
            continue
        number = int(str(raw.get("pull_request_url") or "").rsplit("/", 1)[-1] or 0)
        envs.append(_envelope(plug, f"poll:pull_request_review_comment:{raw.get('id')}",
                              "pull_request_review_comment", {
                                  "action": "created", "comment": raw,
                                  "pull_request": {"number": number}, "repository": data,
                                  "sender": raw.get("user") or {}}))
    return envs


def _ci(plug, repo, lazy, data, number: int, head_sha: str, pulls: dict):
    """The completed CI results on a followed pull request's head, as the webhooks of
    check runs, check suites and commit statuses would carry them."""
    pull = pulls.get(number)
    if pull is None and not head_sha:
        pull = repo.get_pull(number)  # a pull request opened by the tool: head unknown
    if pull is not None:
        if pull.state != "open":
            return []
        head_sha, ref = pull.head.sha, pull.head.ref
    else:
        ref = ""
    commit = lazy.get_commit(head_sha)
    on_pr = [{"number": number, "head": {"sha": head_sha, "ref": ref}}]
    envs = []
    for event, results in (("check_run", commit.get_check_runs()),
                           ("check_suite", commit.get_check_suites())):
        for result in results:
            raw = _raw(result)
            if raw.get("status") != FINAL_CHECK:
                continue
            payload = {"action": "completed", event: {**raw, "pull_requests": on_pr},
                       "repository": data}
            envs.append(_envelope(
                plug, f"poll:{event}:{raw.get('id')}:{raw.get('conclusion')}", event,
                payload))
    for status in commit.get_combined_status().statuses:
        raw = _raw(status)
        payload = {**raw, "sha": head_sha, "repository": data,
                   "branches": [{"name": ref, "commit": {"sha": head_sha}}] if ref else []}
        envs.append(_envelope(plug, f"poll:status:{raw.get('id')}:{raw.get('state')}",
                              "status", payload))
    return envs


def _raw(obj) -> dict:
    # The JSON a list page returned; `raw_data` would fetch each object again.
    raw = getattr(obj, "_rawData", None)
    return raw if isinstance(raw, dict) else obj.raw_data
