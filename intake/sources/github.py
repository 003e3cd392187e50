"""GitHub as a source: webhooks in (HMAC-SHA256 over the raw body), comments out (PyGithub).

Thread = the issue or PR (`owner/name#N`); CI results on the default branch whose run
names no PR land on `owner/name@<branch>`. Trigger ids are GitHub's own object ids, so a
webhook and a catch-up poll of the same comment make one trigger.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import ClassVar
from urllib.parse import parse_qs

from amux_common import bounded_json
from intake.sources.base import (
    NOTICE_CHANNEL,
    ConfigError,
    Context,
    Envelope,
    Field,
    HealthItem,
    Ignored,
    Incoming,
    Malformed,
    Message,
    SendResult,
    SourceKind,
    TriggerFacts,
    Unauthorized,
    mentions,
)
from intake.sources.capabilities import OpensPullRequests, Polling
from intake.sources.github_catchup import catch_up
from intake.sources.github_ci import CiResult, ci_text, ci_trigger_id, closed_issues
from policy.gate import SCOPES

log = logging.getLogger(__name__)

REPO = r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+"
MARKER = "<!-- amux:message={} -->"
HANDLED = {
    "issues",
    "issue_comment",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "check_suite",
    "check_run",
    "workflow_run",
    "status",
}
CI_EVENTS = ("check_suite", "check_run", "workflow_run", "status")
# Pull request actions that change what amux knows of it (head, text, state).
PR_UPDATES = {"reopened", "edited", "synchronize", "ready_for_review", "converted_to_draft"}


# Installation tokens minted per repository: (api, app id, repo) -> (token, expires at).
# In memory only, per process; a token is minted again this long before it expires.
TOKEN_MARGIN = 300
_minted: dict[tuple[str, str, str], tuple[str, float]] = {}
_minted_lock = threading.Lock()


def sign(secret: str, body: bytes) -> str:
    """`X-Hub-Signature-256` exactly as GitHub computes it."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class GitHub(SourceKind, Polling, OpensPullRequests):
    kind = "github"
    label = "GitHub"
    expected_interval = 7 * 86400  # a repository with no event for a week shows stale
    scopes = SCOPES["github"]  # the policy's rows for this kind (policy/gate.py)
    fields = (
        Field("repo", "Repositories", "list", required=True, pattern=REPO,
              help="owner/name, one per line"),
        Field("api_url", "API URL", "url", default="https://api.github.com",
              help="GitHub Enterprise Server: https://HOST/api/v3"),
        Field("handle", "Agent's login", default="",
              help="Mentions of @handle address the agent; its own messages are dropped"),
        Field("default_branch", "Default branch", default="main"),
        Field("bots", "Bot logins", "list", default=[],
              help="Senders treated as bots besides those GitHub marks as Bot"),
        Field("receive_all", "Receive all comments", "bool", default=False,
              help="Unaddressed comments become candidates (the policy decides)"),
        Field("poll", "Catch up by polling", "bool", default=True),
        Field("expected_interval", "Expected event interval (s)", "int",
              help="with no event for this long the source shows stale (default 604800, "
                   "a week; 0: never)"),
        Field("notice_channel", "Notice channel", default="", pattern=NOTICE_CHANNEL,
              help="Where a ticket's final result is announced: <chat source slug>:<chat "
                   "id> (a Lark chat or a web chat thread). Empty: the pull request says it"),
    )
    secret_fields = (
        Field("webhook_secret", "Webhook secret", required=True, secret=True),
        Field("token", "Token", secret=True, help="A personal or fine-grained token"),
        Field("app_id", "GitHub App id", secret=True),
        Field("private_key", "GitHub App private key", "text", secret=True),
        Field("installation_id", "Installation id", secret=True,
              help="Optional; found from the repository when empty"),
    )
    health_items = SourceKind.health_items + (HealthItem("cursor", "Catch-up cursor"),)

    def __init__(self, config=None, secrets=None, profile=None):
        super().__init__(config, secrets, profile)
        repos = self.config.get("repo") or []
        if isinstance(repos, str):
            repos = [repos]
        self.repos = {r.lower() for r in repos}

    @classmethod
    def check(cls, config):
        if not config.get("repo"):
            raise ConfigError({"config.repo": "is required"})

    @classmethod
    def check_secrets(cls, config, secrets):
        missing = super().check_secrets(config, secrets)
        if not secrets.get("token") and not (secrets.get("app_id") and secrets.get("private_key")):
            missing["token"] = "set a token, or app_id and private_key"
        return missing

    # -- intake ------------------------------------------------------------------------
    def verify(self, incoming: Incoming) -> Envelope:
        secret = self.secrets.get("webhook_secret") or ""
        given = incoming.header("x-hub-signature-256")
        if not given:
            raise Unauthorized("missing_signature", "X-Hub-Signature-256 is missing")
        if not secret:
            raise Unauthorized("no_secret", "this source has no webhook secret set")
        if not hmac.compare_digest(sign(secret, incoming.body).encode(), given.encode()):
            raise Unauthorized("bad_signature", "X-Hub-Signature-256 does not match")
        event = incoming.header("x-github-event")
        delivery = incoming.header("x-github-delivery")
        if not event:
            raise Malformed("no_event", "X-GitHub-Event is missing")
        if not delivery or len(delivery) > 200:
            raise Malformed("no_delivery", "X-GitHub-Delivery is missing or too long")
        payload, raw = _decode(incoming)
        if event == "ping":
            return Envelope("ping", delivery, event, payload=payload)
        return Envelope("event", delivery, event, self.thread_of(event, payload), payload,
                        raw=raw)

    def thread_of(self, event: str, p: dict) -> str:
        repo = _s(_d(p.get("repository")).get("full_name"))
        if event in ("issues", "issue_comment"):
            return f"{repo}#{_d(p.get('issue')).get('number')}"
        if event.startswith("pull_request"):
            return f"{repo}#{_d(p.get('pull_request')).get('number', p.get('number'))}"
        if event in ("check_suite", "check_run", "workflow_run"):
            obj = _d(p.get(event))
            number = _ci_pr_number(obj)
            if number is not None:
                return f"{repo}#{number}"
            branch = obj.get("head_branch") or _d(obj.get("check_suite")).get("head_branch")
            return f"{repo}@{_s(branch)}"
        if event == "status":
            return f"{repo}@{_s(p.get('sha'))}"
        return ""

    def is_bot(self, user: dict) -> bool:
        login = _s(user.get("login"))
        bots = {b.lower() for b in self.config.get("bots") or []}
        return user.get("type") == "Bot" or login.lower() in bots or login.endswith("[bot]")

    def is_self(self, login: str) -> bool:
        handle = (self.config.get("handle") or "").lstrip("@").lower()
        return bool(handle) and login.lower().removesuffix("[bot]") == handle.removesuffix(
            "[bot]"
        )

    def _installation_event(self, p: dict, env: Envelope) -> Ignored:
        """GitHub's word on the App installation this source's repositories use: no
        trigger, facts about the source itself. Created or unsuspended, the source works
        (its installation id is kept for minting tokens); deleted or suspended, it is
        disconnected until installed again. Another account's installation says nothing
        about this source."""
        action = _s(p.get("action"))
        state = INSTALLATION_STATES.get(action)
        inst = _d(p.get("installation"))
        if state is None or not isinstance(inst.get("id"), int):
            return Ignored("action_not_handled", env.thread)
        account = _s(_d(inst.get("account")).get("login"))
        if not account or account.lower() not in {r.split("/")[0] for r in self.repos}:
            return Ignored("installation_not_ours", env.thread)
        repos = [_s(_d(r).get("full_name")) for r in p.get("repositories") or []]
        return Ignored(f"app_{state}", env.thread, source_facts={
            "installation": {"state": state, "id": inst["id"], "account": account,
                             "repository_selection": _s(inst.get("repository_selection")),
                             "repositories": sorted(r for r in repos if r)},
            "provider": {"disconnected": state != "installed",
                         "reason": INSTALLATION_REASONS.get(state, "")}})

    def translate(self, env: Envelope) -> TriggerFacts | Ignored:
        p, event = env.payload, env.event
        if event == "installation":
            return self._installation_event(p, env)
        if event not in HANDLED:
            return Ignored("event_not_handled", env.thread)
        full = _s(_d(p.get("repository")).get("full_name"))
        repo = full.lower()
        if repo not in self.repos:
            return Ignored("repo_not_configured", env.thread)
        sender = _d(p.get("sender"))
        login = _s(sender.get("login"))
        action = _s(p.get("action"))
        if event in CI_EVENTS:
            # The sender of a CI result is whoever pushed, often the agent: no own message.
            return self._ci(event, action, p, full, env)
        # What the event says about its thread holds whoever acted, the agent included.
        facts = _thread_facts(event, action, p, full)
        if login and self.is_self(login):
            return Ignored("own_message", env.thread, facts)
        actor = {
            "actor": login,
            "is_bot": self.is_bot(sender),
            "is_human": not self.is_bot(sender),
            "receives_all": bool(self.config.get("receive_all")),
        }
        return self._TRANSLATORS[event](self, env, action, facts, repo, actor)

    def _issue_event(self, env: Envelope, action: str, facts: dict, repo: str, actor: dict):
        issue = _d(env.payload.get("issue"))
        if action != "opened":
            return Ignored(f"issue_{action}" if facts else "action_not_handled",
                           env.thread, facts)
        text = _join(issue.get("title"), issue.get("body"))
        return TriggerFacts(
            external_id=f"issue:{issue.get('id')}", thread=env.thread, scope="issue_new",
            addressed=mentions(text, self._handle()), text=text,
            thread_title=_s(issue.get("title")), thread_url=_s(issue.get("html_url")),
            meta={"scope": "issue_new", "event": env.event, "repo": repo}, **actor,
        )

    def _pull_request_event(self, env: Envelope, action: str, facts: dict, repo: str, actor: dict):
        pr = _d(env.payload.get("pull_request"))
        if action == "closed":
            return Ignored(f"pr_{facts['pr_state']}", env.thread, facts)
        if action != "opened":
            reason = "pr_updated" if action in PR_UPDATES else "action_not_handled"
            return Ignored(reason, env.thread, facts)
        text = _join(pr.get("title"), pr.get("body"))
        return TriggerFacts(
            external_id=f"pull_request:{pr.get('id')}", thread=env.thread, scope="pr_new",
            addressed=mentions(text, self._handle()), text=text,
            thread_title=_s(pr.get("title")), thread_url=_s(pr.get("html_url")),
            meta={"scope": "pr_new", "event": env.event, "repo": repo, "draft": pr.get("draft")},
            facts=facts, **actor,
        )

    def _comment_event(self, env: Envelope, action: str, facts: dict, repo: str, actor: dict):
        """A comment on an issue or a pull request, or on a line of a pull request's diff."""
        if action != "created":
            return Ignored("action_not_handled", env.thread)
        p, event = env.payload, env.event
        comment = _d(p.get("comment"))
        parent = _d(p.get("issue") or p.get("pull_request"))
        on_pr = event == "pull_request_review_comment" or "pull_request" in parent
        body = _s(comment.get("body"))
        kind = "issue_comment" if event == "issue_comment" else "review_comment"
        text = body if kind == "issue_comment" else _review_comment_text(comment)
        return TriggerFacts(
            external_id=f"{kind}:{comment.get('id')}", thread=env.thread, scope="comment",
            addressed=mentions(body, self._handle()), text=text,
            thread_title=_s(parent.get("title")), thread_url=_s(parent.get("html_url")),
            meta={"scope": "comment", "event": event, "repo": repo, "on_pr": on_pr,
                  "comment_id": comment.get("id"), "url": _s(comment.get("html_url"))},
            **actor,
        )

    def _review_event(self, env: Envelope, action: str, facts: dict, repo: str, actor: dict):
        review = _d(env.payload.get("review"))
        state = _s(review.get("state")).lower()
        body = _s(review.get("body"))
        if action != "submitted":
            return Ignored("action_not_handled", env.thread)
        if state == "commented" and not body.strip():
            # The container of line comments: each arrives as a review comment.
            return Ignored("review_without_text", env.thread)
        pr = _d(env.payload.get("pull_request"))
        return TriggerFacts(
            external_id=f"review:{review.get('id')}", thread=env.thread, scope="comment",
            addressed=mentions(body, self._handle()), text=_review_text(review),
            thread_title=_s(pr.get("title")), thread_url=_s(pr.get("html_url")),
            meta={"scope": "comment", "event": env.event, "repo": repo, "on_pr": True,
                  "review_state": state, "url": _s(review.get("html_url"))},
            **actor,
        )

    def _handle(self) -> str:
        return self.config.get("handle") or ""

    # The translator of each handled event that is not a CI result.
    _TRANSLATORS: ClassVar[dict[str, Callable[..., TriggerFacts | Ignored]]] = {
        "issues": _issue_event,
        "pull_request": _pull_request_event,
        "issue_comment": _comment_event,
        "pull_request_review_comment": _comment_event,
        "pull_request_review": _review_event,
    }

    def _ci(self, event: str, action: str, p: dict, full: str, env: Envelope):
        """A CI result: on a pull request's head, an input for the ticket that follows the
        pull request (path B; never a new ticket); on the default branch, a candidate
        under the admission table (scope `ci_default_branch`)."""
        repo = full.lower()
        if event == "status":
            if _s(p.get("state")) == "pending":
                return Ignored("ci_not_final", env.thread)
            result = CiResult(full, _s(p.get("sha")), _s(p.get("context")) or "status",
                              _s(p.get("state")), _s(p.get("target_url")), summary=True)
            branches = [_s(_d(b).get("name")) for b in p.get("branches") or []]
            number = None
        else:
            obj = _d(p.get(event))
            if action != "completed":
                return Ignored("action_not_handled", env.thread)
            suite = _d(obj.get("check_suite"))
            branch = _s(obj.get("head_branch") or suite.get("head_branch"))
            number = _ci_pr_number(obj)
            if number is None and branch == self.config.get("default_branch", "main"):
                return self._ci_default_branch(event, obj, full, branch, env)
            name = _s(obj.get("name")) if event != "check_suite" else ""
            name = name or _s(_d(obj.get("app")).get("name")) or event
            sha = _s(obj.get("head_sha") or suite.get("head_sha"))
            # A check suite has no page of its own: its commit's checks page stands in.
            site = _s(_d(p.get("repository")).get("html_url"))
            url = _s(obj.get("html_url")) or (f"{site}/commit/{sha}/checks" if site else "")
            result = CiResult(full, sha, name, _s(obj.get("conclusion")), url,
                              summary=event != "check_run")
            branches = [branch] if branch else []
        external_id = ci_trigger_id(result)
        if external_id is None:
            return Ignored("ci_not_final" if not result.conclusion else "ci_nothing_to_tell",
                           env.thread)
        # Without a pull request named (a fork, a status) the consumer finds the open pull
        # request thread by head commit or branch.
        meta = {"scope": "ci_pull_request", "event": event, "repo": repo,
                "head_sha": result.sha, "name": result.name, "conclusion": result.conclusion,
                "url": result.url}
        if number is None:
            meta["match_pr"] = {"repo": full, "sha": result.sha, "branches": branches}
        return TriggerFacts(
            external_id=external_id, thread=f"{full}#{number}" if number is not None else "",
            scope="ci_pull_request", actor="", is_human=False, is_bot=False, addressed=False,
            receives_all=True, text=ci_text(result), meta=meta,
        )

    def _ci_default_branch(self, event, obj, full, branch, env):
        repo = full.lower()
        conclusion = _s(obj.get("conclusion"))
        name = _s(obj.get("name") or _d(obj.get("app")).get("name") or event)
        return TriggerFacts(
            external_id=f"{event}:{obj.get('id')}:{conclusion}", thread=env.thread,
            scope="ci_default_branch", actor="", is_human=False, is_bot=False, addressed=False,
            receives_all=True, text=f"{name}: {conclusion or obj.get('status')}",
            thread_title=f"{repo} {branch}", thread_url=_s(obj.get("html_url")),
            meta={"scope": "ci_default_branch", "event": event, "repo": repo,
                  "branch": branch, "conclusion": conclusion, "head_sha": obj.get("head_sha")},
        )

    def scope(self, meta):
        scope = meta.get("scope")
        if scope not in self.scopes:
            return None
        if meta.get("repo") and meta["repo"] not in self.repos:
            return None
        return scope

    def environment(self):
        return {
            "AMUX_GITHUB_API_URL": self.config.get("api_url", ""),
            "AMUX_GITHUB_REPO": ",".join(sorted(self.repos)),
            "AMUX_GITHUB_HANDLE": self.config.get("handle", ""),
        }

    # -- client ------------------------------------------------------------------------
    def _api(self) -> dict:
        api_url = self.config.get("api_url") or "https://api.github.com"
        return {"base_url": api_url, "timeout": 15, "retry": None}

    def _integration(self):
        from github import Auth, GithubIntegration

        app_auth = Auth.AppAuth(self.secrets["app_id"], self.secrets["private_key"])
        return GithubIntegration(auth=app_auth, **self._api())

    def _installation(self, gi, repo: str | None = None) -> int:
        inst = self.secrets.get("installation_id")
        if inst:
            return int(inst)
        owner, name = (repo or sorted(self.repos)[0]).split("/", 1)
        return gi.get_repo_installation(owner, name).id

    def client(self):
        from github import Auth, Github

        if self.secrets.get("token"):
            return Github(auth=Auth.Token(self.secrets["token"]), **self._api())
        if self.secrets.get("app_id") and self.secrets.get("private_key"):
            gi = self._integration()
            return gi.get_github_for_installation(self._installation(gi))
        raise ConfigError({"secrets.token": "set a token, or app_id and private_key"})

    def _own(self, repo: str) -> str:
        if repo.lower() not in self.repos:
            raise ConfigError({"repo": f"{repo} is not a repository of this source"})
        return repo.lower()

    def repository(self, repo: str) -> dict:
        """Where git reaches `repo` (the API's own `clone_url`: github.com, an Enterprise
        host, or a test server) and its default branch."""
        self._own(repo)
        gh_repo = self.client().get_repo(repo)
        return {"clone_url": gh_repo.clone_url, "default_branch": gh_repo.default_branch}

    def git_credential(self, repo: str) -> tuple[str, str]:
        """(username, password) for git over HTTPS to `repo`. A token source answers its
        own token; a GitHub App answers an installation token minted for this repository
        alone, kept until shortly before it expires."""
        self._own(repo)
        if self.secrets.get("token"):
            return "x-access-token", self.secrets["token"]
        if not (self.secrets.get("app_id") and self.secrets.get("private_key")):
            raise ConfigError({"secrets.token": "set a token, or app_id and private_key"})
        key = (self._api()["base_url"], str(self.secrets["app_id"]), repo.lower())
        with _minted_lock:
            cached = _minted.get(key)
        if cached and cached[1] - time.time() > TOKEN_MARGIN:
            return "x-access-token", cached[0]
        gi = self._integration()
        installation = self._installation(gi, repo)
        # PyGithub's get_access_token takes permissions only; the REST call takes the
        # repositories the token may reach, which is the point here.
        _headers, data = gi.requester.requestJsonAndCheck(
            "POST", f"/app/installations/{installation}/access_tokens",
            headers=gi._get_headers(), input={"repositories": [repo.split("/", 1)[1]]})
        expires = datetime.fromisoformat(str(data["expires_at"]).replace("Z", "+00:00"))
        with _minted_lock:
            _minted[key] = (data["token"], expires.timestamp())
        return "x-access-token", data["token"]

    def _issue(self, gh, thread: str):
        repo, _, number = thread.partition("#")
        if not number.isdigit():
            raise ValueError(f"thread {thread!r} is not an issue or PR")
        return gh.withLazy(True).get_repo(repo).get_issue(int(number))

    def send(self, message: Message, ctx: Context) -> SendResult:
        """Post a comment once per message id: a hidden marker carries the id, and a
        replay first looks for it, so a crash between send and commit posts nothing twice."""
        from github import GithubException

        marker = MARKER.format(message.id)
        try:
            gh = self.client()
            issue = self._issue(gh, message.thread)
            for comment in issue.get_comments():
                if marker in (comment.body or ""):
                    return SendResult.SENT
            issue.create_comment(f"{message.text}\n\n{marker}")
            return SendResult.SENT
        except GithubException as exc:
            if exc.status in (404, 410):
                return SendResult.GONE
            log.warning("github send %s: %s", message.id, exc.status)
            return SendResult.RETRY
        except ValueError:
            return SendResult.GONE
        except Exception:
            log.warning("github send %s failed", message.id, exc_info=True)
            return SendResult.RETRY

    def open_pull_request(self, *, repo: str, title: str, body: str, head: str,
                          base: str, closes: int | None = None) -> dict:
        """Open a pull request, once per head branch: if one is already open for `head`
        (a retry after a crash), that one is returned. `closes` is the ticket's issue: the
        body says `Fixes #N` (unless it already closes it) so that merging closes it."""
        from github import GithubException

        self._own(repo)
        gh_repo = self.client().get_repo(repo)
        owner = repo.split("/", 1)[0]
        for pull in gh_repo.get_pulls(state="open", head=f"{owner}:{head}"):
            return {"number": pull.number, "url": pull.html_url, "created": False}
        if closes and closes not in closed_issues(body, repo) and _is_issue(gh_repo, closes):
            body = f"{body.rstrip()}\n\nFixes #{closes}".lstrip()
        try:
            pull = gh_repo.create_pull(title=title, body=body, head=head, base=base)
        except GithubException as exc:
            if exc.status == 422:
                raise ConfigError({"head": _validation(exc)}) from exc
            raise
        return {"number": pull.number, "url": pull.html_url, "created": True}

    def thread_context(self, thread, meta, ctx, limit=20):
        gh = self.client()
        issue = self._issue(gh, thread)
        out = [{"author": issue.user.login if issue.user else "", "text": _join(
            issue.title, issue.body), "at": _iso(issue.created_at)}]
        comments = list(issue.get_comments())[-limit:]
        out += [{"author": c.user.login if c.user else "", "text": c.body or "",
                 "at": _iso(c.created_at)} for c in comments]
        return out

    def catches_up(self) -> bool:
        return bool(self.config.get("poll", True))

    def poll(self, cursor: str | None, watching: list[dict] | None = None,
             ) -> tuple[list[Envelope], str | None]:
        """Catch-up after downtime: issues, pull requests (opened, changed, merged or
        closed), comments, reviews and review comments updated since `cursor`, and the CI
        results on the heads of the open pull requests tickets follow (`watching`), as
        webhook-shaped envelopes (intake/sources/github_catchup.py). The caller moves
        the cursor only after the triggers are stored."""
        since = datetime.fromisoformat(cursor) if cursor else None
        envs, newest = catch_up(self, self.client(), since, list(watching or []))
        return envs, (newest.isoformat() if newest else cursor)


# What an App's installation event changes for its source: created or unsuspended, the
# source works; deleted or suspended, it cannot mint tokens until installed again.
INSTALLATION_STATES = {"created": "installed", "unsuspend": "installed",
                       "deleted": "removed", "suspend": "suspended"}
# ... and the connection's reason while it cannot (goals' connector state reads it).
INSTALLATION_REASONS = {"removed": "installation_deleted", "suspended": "installation_suspended"}


def _is_issue(gh_repo, number: int) -> bool:
    try:
        return gh_repo.get_issue(number).pull_request is None
    except Exception:  # unknown number: link nothing rather than fail the pull request
        return False


def _validation(exc) -> str:
    """GitHub's 422 in a sentence: `head invalid` means the branch is not on the remote."""
    data = exc.data if isinstance(exc.data, dict) else {}
    errors = data.get("errors") or []
    parts = [e.get("message") or f"{e.get('field')} {e.get('code')}" for e in errors
             if isinstance(e, dict)]
    return f"GitHub refused it: {data.get('message') or 'Validation Failed'}" + (
        f" ({'; '.join(parts)})" if parts else "")


def _ci_pr_number(obj: dict):
    """The pull request a check names: the one whose head is the checked commit, else
    the first (GitHub lists the pull requests whose head or base the commit is)."""
    suite = _d(obj.get("check_suite"))
    prs = [x for x in (obj.get("pull_requests") or suite.get("pull_requests") or [])
           if isinstance(x, dict) and isinstance(x.get("number"), int)]
    sha = _s(obj.get("head_sha") or suite.get("head_sha"))
    for x in prs:
        if _s(_d(x.get("head")).get("sha")) == sha:
            return x["number"]
    return prs[0]["number"] if prs else None


def _thread_facts(event: str, action: str, p: dict, full: str) -> dict:
    """The thread's own state an event reports: an issue closed or reopened; a pull
    request's state, head and the issues it closes (kept in the thread's meta)."""
    if event == "issues" and action in ("closed", "reopened"):
        return {"issue_state": "closed" if action == "closed" else "open"}
    if event != "pull_request":
        return {}
    pr = _d(p.get("pull_request"))
    head = _d(pr.get("head"))
    if _s(pr.get("state")) == "open":
        state = "open"
    else:
        state = "merged" if pr.get("merged") or pr.get("merged_at") else "closed"
    return {"pr_state": state, "head_ref": _s(head.get("ref")),
            "head_sha": _s(head.get("sha")),
            "closes": closed_issues(_join(pr.get("title"), pr.get("body")), full),
            "pr_url": _s(pr.get("html_url"))}


def _review_text(review: dict) -> str:
    verdict = {"approved": "approved the pull request",
               "changes_requested": "requested changes",
               "commented": "reviewed"}.get(_s(review.get("state")).lower(), "reviewed")
    parts = [f"Review: {verdict}.", _s(review.get("body")).strip(), _s(review.get("html_url"))]
    return "\n".join(x for x in parts if x)


def _review_comment_text(comment: dict) -> str:
    line = comment.get("line") or comment.get("original_line")
    where = _s(comment.get("path")) + (f":{line}" if line else "")
    parts = [f"Review comment on {where}:" if where else "Review comment:",
             _s(comment.get("body")).strip(), _s(comment.get("html_url"))]
    return "\n".join(x for x in parts if x)


def _decode(incoming: Incoming) -> tuple[dict, bytes]:
    """The payload, and its JSON text as it came (a form's `payload` field, or the body)."""
    body = incoming.body
    ctype = incoming.header("content-type")
    try:
        if "application/x-www-form-urlencoded" in ctype:
            form = parse_qs(body.decode("utf-8"), strict_parsing=True)
            body = form["payload"][0].encode()
        payload = bounded_json.loads(body)
    except bounded_json.TooDeep as exc:
        raise Malformed("bad_json", str(exc)) from None
    except (ValueError, KeyError, UnicodeDecodeError):
        raise Malformed("bad_json", "the body is not a JSON payload") from None
    if not isinstance(payload, dict):
        raise Malformed("bad_json", "the payload must be a JSON object")
    return payload, body


def _d(value) -> dict:
    return value if isinstance(value, dict) else {}


def _s(value) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _join(title, body) -> str:
    return "\n\n".join(x for x in (_s(title), _s(body)) if x)


def _iso(value) -> str:
    return value.isoformat() if value else ""
