"""Creating a GitHub App from the Sources tab (GitHub's manifest flow), the side that
stores and talks to GitHub; what is asked of GitHub is intake/sources/github_manifest.py.

`setup_started` keeps the operator's request with a random single-use `state`;
`code_exchanged` takes the code GitHub hands back with that state, exchanges it once at
`POST <api>/app-manifests/<code>/conversions`, and creates the GitHub source with the
app's id, private key and webhook secret in its encrypted secrets. The source is ready
when the app's `installation` event arrives at its webhook (intake/source_actions.py).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

import requests
from django.db import transaction

from amux_common.clock import now as clock
from intake import source_actions
from intake.models import GitHubAppSetup, Source
from intake.sources import github_manifest as gm

# GitHub's code is good for an hour; the person names and confirms the app in between.
STATE_TTL = timedelta(hours=1)
TIMEOUT = 15


@dataclass
class SetupRefused(Exception):  # noqa: N818 - an answer to the person, not a crash
    """The callback cannot go on: `status` is the HTTP status to answer, `code` a
    content-free reason, `message` what the person reads (and what to do)."""

    status: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def setup_started(form: dict, *, amux_url: str, callback_url: str, status_url,
                  user=None) -> GitHubAppSetup:
    """Command: keep a checked request to create an app, with its manifest and a fresh
    `state`. `status_url(pk)` is where GitHub sends the person after installing.
    Raises gm.SetupInvalid naming every faulty field."""
    setup = gm.checked(form)
    errors = {}
    problem = gm.amux_url_problem(amux_url)
    if problem:
        errors["amux_url"] = problem
    if Source.objects.filter(slug=setup.slug).exists():
        errors["slug"] = "is taken"
    if errors:
        raise gm.SetupInvalid(errors)
    with transaction.atomic():
        row = GitHubAppSetup.objects.create(
            state=secrets.token_urlsafe(32), expires_at=clock() + STATE_TTL,
            web_url=setup.target.web_url, api_url=setup.target.api_url,
            owner=setup.target.owner, org=setup.target.org, slug=setup.slug,
            name=setup.name, repos=list(setup.repos),
            created_by=user if user is not None and user.is_authenticated else None)
        manifest = gm.manifest(setup, amux_url=amux_url, redirect_url=callback_url)
        manifest["setup_url"] = status_url(row.pk)
        row.manifest = manifest
        row.save(update_fields=["manifest"])
    return row


def form_url(setup: GitHubAppSetup) -> str:
    return gm.form_url(gm.Target(setup.web_url, setup.api_url, setup.owner, setup.org),
                       setup.state)


def code_exchanged(*, state: str, code: str) -> GitHubAppSetup:
    """Command: GitHub handed back `code` with `state`. The state is claimed first (a
    replay finds it used), then the code is exchanged, then the source and the setup are
    written in one transaction. A failed exchange leaves no source, only the setup marked
    failed with GitHub's answer. Raises SetupRefused."""
    if not state or not code:
        raise SetupRefused(400, "incomplete", "GitHub's answer lacks its code or state; "
                           "start again from the Sources tab.")
    with transaction.atomic():
        setup = GitHubAppSetup.objects.select_for_update().filter(state=state).first()
        if setup is None:
            raise SetupRefused(404, "unknown_state", "This link does not belong to an app "
                               "amux asked for; start again from the Sources tab.")
        if setup.status != GitHubAppSetup.Status.PENDING:
            raise SetupRefused(409, "state_used", "This link was used already; open the "
                               "Sources tab to see the app, or start again.")
        expired = setup.expires_at <= clock()
        # an expired state is spent too (kept as failed, committed before the refusal)
        setup.status = (GitHubAppSetup.Status.FAILED if expired
                        else GitHubAppSetup.Status.EXCHANGING)
        setup.error = "expired" if expired else ""
        setup.save(update_fields=["status", "error"])
    if expired:
        raise SetupRefused(410, "expired", "This request is older than an hour; start "
                           "again from the Sources tab.")
    try:
        answer = _convert(setup.api_url, code)
    except SetupRefused as refused:
        _failed(setup.pk, refused.message)
        raise
    try:
        return _source_created(setup.pk, answer)
    except source_actions.SourceRefused as refused:
        message = (f"GitHub created the app {answer['html_url']}, but amux could not keep "
                   f"its source ({refused}). Delete that app on GitHub and start again.")
        _failed(setup.pk, message)
        raise SetupRefused(409, "source_refused", message) from refused


def _source_created(pk: int, answer: dict) -> GitHubAppSetup:
    """The source with the app's credentials and the setup that made it, in one go."""
    with transaction.atomic():
        setup = GitHubAppSetup.objects.select_for_update().get(pk=pk)
        source = source_actions.save(
            None, kind="github", slug=setup.slug, name=setup.name, enabled=True,
            config={"repo": list(setup.repos), "api_url": setup.api_url,
                    "handle": str(answer["slug"])},
            secrets={"webhook_secret": str(answer["webhook_secret"]),
                     "app_id": str(answer["id"]), "private_key": str(answer["pem"])})
        setup.status = GitHubAppSetup.Status.CREATED
        setup.app_id, setup.app_slug = int(answer["id"]), str(answer["slug"])[:100]
        setup.html_url, setup.source = str(answer["html_url"])[:300], source
        setup.save(update_fields=["status", "app_id", "app_slug", "html_url", "source"])
    return setup


def _failed(pk: int, message: str) -> None:
    with transaction.atomic():
        setup = GitHubAppSetup.objects.select_for_update().get(pk=pk)
        setup.status, setup.error = GitHubAppSetup.Status.FAILED, message
        setup.save(update_fields=["status", "error"])


def _convert(api_url: str, code: str) -> dict:
    """GitHub's conversion of a manifest code (no authentication: the code is the proof)."""
    url = api_url.rstrip("/") + gm.conversion_path(code)
    try:
        resp = requests.post(url, timeout=TIMEOUT, headers={
            "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"})
    except requests.RequestException as exc:
        raise SetupRefused(502, "unreachable", f"GitHub at {api_url} did not answer "
                           f"({type(exc).__name__}); try again from the Sources tab.") from exc
    if resp.status_code in (404, 422):
        raise SetupRefused(400, "code_refused", f"GitHub refused the code ({resp.status_code}: "
                           f"{_message(resp)}): it was used already or is older than an "
                           "hour. Start again from the Sources tab.")
    if resp.status_code != 201:
        raise SetupRefused(502, "conversion_failed", f"GitHub answered {resp.status_code} "
                           f"({_message(resp)}); try again from the Sources tab.")
    try:
        answer = resp.json()
    except ValueError:
        answer = None
    problem = gm.conversion_problem(answer)
    if problem:
        raise SetupRefused(502, "conversion_unusable", problem)
    return answer


def _message(resp) -> str:
    try:
        data = resp.json()
    except ValueError:
        return "no message"
    return str(data.get("message") or "no message")[:200] if isinstance(data, dict) else \
        "no message"


def readiness(setup: GitHubAppSetup) -> dict:
    """Where the setup stands for the person: the app, its install link, and whether the
    installation event arrived (derived from the source's health, never stored twice)."""
    source = Source.objects.filter(pk=setup.source_id).first() if setup.source_id else None
    installation = (source.health or {}).get("installation") if source else None
    installed = bool(installation and installation.get("state") == "installed")
    return {
        "setup": setup, "source": source,
        "install_url": gm.install_url(setup.html_url) if setup.html_url else "",
        "installation": installation, "ready": installed,
        "state": ("ready" if installed else "waiting_for_installation"
                  if setup.status == GitHubAppSetup.Status.CREATED else setup.status),
    }
