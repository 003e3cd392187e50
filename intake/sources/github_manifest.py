"""The GitHub App manifest flow, pure: what amux asks GitHub to create (the manifest), where
the person is sent to create it (GitHub's form for a personal account or an organization,
on github.com or a GitHub Enterprise Server) and where they install it afterwards.

GitHub's flow: the browser POSTs a form with one field, `manifest` (JSON), to
`<web>/settings/apps/new?state=…` (or `<web>/organizations/<org>/settings/apps/new`);
GitHub shows the app for the person to name and confirm, then redirects to the manifest's
`redirect_url` with `?code=…&state=…`; amux exchanges the code, once and within an hour,
at `POST <api>/app-manifests/<code>/conversions` for the app's id, private key and
webhook secret. No Django and no I/O here: intake/github_app.py does the rest.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import quote, urlencode, urlsplit

from intake.sources.github import HANDLED, REPO

GITHUB_COM = "https://github.com"
GITHUB_COM_API = "https://api.github.com"

# What the GitHub source does with an installation token (intake/sources/github.py and
# the git gateway): comment on issues and pull requests, open pull requests, push the
# work branch, and read the CI results it relays. Each event amux handles needs the
# permission GitHub ties it to (checks → check_run/check_suite, actions → workflow_run,
# statuses → status); metadata is required of every app.
PERMISSIONS = {
    "issues": "write",
    "pull_requests": "write",
    "contents": "write",
    "checks": "read",
    "statuses": "read",
    "actions": "read",
    "metadata": "read",
}
# Exactly the events the source translates; `installation` is sent to every app unasked.
EVENTS = sorted(HANDLED)

# GitHub refuses an app name longer than this (the registration form's own limit).
NAME_MAX = 34
_ORG = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
_REPO = re.compile(REPO)


class SetupInvalid(ValueError):
    """The operator's input, every faulty field named: ``fields`` maps a field to why."""

    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


@dataclass(frozen=True)
class Target:
    """Where the app is created: the GitHub web and API bases, and whose account."""

    web_url: str  # https://github.com or https://ghe.example.com
    api_url: str  # https://api.github.com or https://ghe.example.com/api/v3
    owner: str  # "personal" or "organization"
    org: str = ""


@dataclass(frozen=True)
class Setup:
    """A checked request to create an app: where, for which new source, watching what."""

    target: Target
    slug: str
    name: str
    app_name: str
    repos: tuple[str, ...]


FIELDS = ("host", "enterprise_url", "owner", "org", "slug", "name", "app_name", "repos")


def checked(form: dict) -> Setup:
    """The operator's form as a Setup, or SetupInvalid naming every faulty field at once
    (unknown fields included)."""
    errors: dict[str, str] = {}
    for key in form:
        if key not in FIELDS:
            errors[key] = "unknown field"
    host = _text(form.get("host")) or "github.com"
    web = api = ""
    if host == "github.com":
        web, api = GITHUB_COM, GITHUB_COM_API
    elif host == "enterprise":
        web = _text(form.get("enterprise_url")).rstrip("/")
        problem = _url_problem(web)
        if problem:
            errors["enterprise_url"] = problem
        else:
            web = _web_base(web)
            api = f"{web}/api/v3"
    else:
        errors["host"] = "must be github.com or enterprise"
    owner = _text(form.get("owner")) or "personal"
    org = _text(form.get("org"))
    if owner not in ("personal", "organization"):
        errors["owner"] = "must be personal or organization"
    elif owner == "organization":
        if not org:
            errors["org"] = "is required for an organization's app"
        elif not _ORG.fullmatch(org):
            errors["org"] = "is not a GitHub organization name (letters, digits and -)"
    else:
        org = ""
    slug = _text(form.get("slug"))
    if not slug:
        errors["slug"] = "is required"
    elif not _SLUG.fullmatch(slug) or len(slug) > 60:
        errors["slug"] = "letters, digits, - and _ only (at most 60)"
    name = _text(form.get("name")) or slug
    app_name = _text(form.get("app_name")) or f"amux {slug}"
    if len(app_name) > NAME_MAX:
        errors["app_name"] = f"GitHub takes at most {NAME_MAX} characters"
    repos = _repos(form.get("repos"))
    if not repos:
        errors["repos"] = "name at least one repository, owner/name, one per line"
    else:
        bad = [r for r in repos if not _REPO.fullmatch(r)]
        if bad:
            errors["repos"] = f"not owner/name: {', '.join(bad)}"
    if errors:
        raise SetupInvalid(errors)
    return Setup(Target(web, api, owner, org), slug, name[:120], app_name, tuple(repos))


def manifest(setup: Setup, *, amux_url: str, redirect_url: str) -> dict:
    """The manifest GitHub creates the app from: private, its webhook at amux's
    `/hooks/github/<slug>`, the permissions and events the GitHub source needs. After
    installing, GitHub sends the person back to `redirect_url` too (`setup_url`)."""
    base = amux_url.rstrip("/")
    return {
        "name": setup.app_name,
        "url": base,
        "hook_attributes": {"url": f"{base}/hooks/github/{setup.slug}", "active": True},
        "redirect_url": redirect_url,
        "setup_url": redirect_url,
        "setup_on_update": False,
        "public": False,
        "default_permissions": dict(PERMISSIONS),
        "default_events": list(EVENTS),
    }


def amux_url_problem(url: str) -> str | None:
    """Why amux's own address cannot go into a manifest (GitHub must reach its webhook)."""
    return _url_problem(url)


def unreachable_hint(amux_url: str) -> str | None:
    """A warning when amux is opened at an address no other machine reaches (loopback,
    or a private network that only an Enterprise Server inside it may reach): GitHub
    would create the app, and its webhooks would never arrive."""
    host = (urlsplit(amux_url).hostname or "").lower()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        loopback, private = host == "localhost" or host.endswith(".localhost"), False
    else:
        loopback, private = ip.is_loopback, ip.is_private
    if loopback:
        return (f"You opened amux at {host}, which only this machine reaches: GitHub could "
                "not deliver the app's events. Open the panel at an address GitHub "
                "reaches (a public name, or a tunnel in front of amux), then create the app.")
    if private:
        return (f"{host} is a private address: github.com cannot reach it (a GitHub "
                "Enterprise Server on the same network may).")
    return None


def form_url(target: Target, state: str) -> str:
    """Where the browser POSTs the manifest: the account's or the organization's new-app
    form, carrying the single-use `state` GitHub hands back with the code."""
    query = urlencode({"state": state})
    if target.owner == "organization":
        return f"{target.web_url}/organizations/{quote(target.org)}/settings/apps/new?{query}"
    return f"{target.web_url}/settings/apps/new?{query}"


def conversion_path(code: str) -> str:
    """The REST path (under the API base) that exchanges a manifest code, once."""
    return f"/app-manifests/{quote(code, safe='')}/conversions"


def install_url(html_url: str) -> str:
    """Where the person installs the app they just created (`html_url` as GitHub gives it,
    e.g. https://github.com/apps/<slug>)."""
    return f"{html_url.rstrip('/')}/installations/new"


CONVERSION_KEYS = ("id", "slug", "html_url", "pem", "webhook_secret")


def conversion_problem(answer: object) -> str | None:
    """Why a conversion's answer cannot be used (a key amux needs is missing), or None."""
    if not isinstance(answer, dict):
        return "GitHub's answer is not a JSON object"
    missing = [k for k in CONVERSION_KEYS if not answer.get(k)]
    if missing:
        return f"GitHub's answer lacks {', '.join(missing)}"
    if "PRIVATE KEY" not in str(answer["pem"]):
        return "GitHub's answer has no private key in pem"
    return None


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else ""


def _repos(value) -> list[str]:
    if isinstance(value, (list, tuple)):
        items = [x for x in value if isinstance(x, str)]
    else:
        items = re.split(r"[\s,]+", _text(value))
    seen: list[str] = []
    for item in (x.strip() for x in items):
        if item and item not in seen:
            seen.append(item)
    return seen


def _url_problem(url: str) -> str | None:
    if not url:
        return "is required"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL, e.g. https://github.example.com"
    if parts.query or parts.fragment:
        return "must not carry a query or fragment"
    return None


def _web_base(url: str) -> str:
    """An Enterprise URL as the person may paste it (its API base included) → its web base."""
    return re.sub(r"/api/v3/?$", "", url.rstrip("/"))
