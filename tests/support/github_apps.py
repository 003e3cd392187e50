"""A local GitHub (a GitHub Enterprise Server: web at its root, REST at /api/v3) for the
GitHub App manifest flow, as strict as GitHub where it matters:

- `GET|POST /settings/apps/new` and `/organizations/<org>/settings/apps/new`: the new-app
  form. A POSTed `manifest` is checked as GitHub checks it (422 page naming the fault: not
  JSON, unknown key, `url` or `hook_attributes.url` missing or not a URL, a permission
  other than read/write, an event GitHub does not know or whose permission the manifest
  does not ask for); a good one shows the confirmation page with the app's name.
- `POST /settings/apps/new/confirm`: the person clicked "Create GitHub App": the app is
  registered and the browser is redirected to the manifest's `redirect_url` with
  `?code=…&state=…` (state passed through as it came).
- `POST /api/v3/app-manifests/<code>/conversions`: 201 with the app, its pem and webhook
  secret the first time; 404 for a used, unknown or expired (an hour) code.
- `GET /apps/<slug>/installations/new` and `POST /apps/<slug>/installations`: install the
  app; the signed `installation` event (action `created`) is delivered to the app's
  webhook, then the browser goes to the manifest's `setup_url`.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode, urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from intake.sources.github import sign
from tests.support.loopback_http import LoopbackServer, QuietHandler

MANIFEST_KEYS = {"name", "url", "hook_attributes", "redirect_url", "callback_urls",
                 "setup_url", "description", "public", "default_events",
                 "default_permissions", "request_oauth_on_install", "setup_on_update"}
# The events an app may subscribe to, and the permission each needs (GitHub refuses
# "Default events unsupported" for an event whose permission is not asked for).
EVENT_PERMISSION = {
    "issues": ("issues",), "issue_comment": ("issues", "pull_requests"),
    "pull_request": ("pull_requests",), "pull_request_review": ("pull_requests",),
    "pull_request_review_comment": ("pull_requests",),
    "pull_request_review_thread": ("pull_requests",),
    "check_run": ("checks",), "check_suite": ("checks",), "workflow_run": ("actions",),
    "workflow_job": ("actions",), "status": ("statuses",), "push": ("contents",),
    "create": ("contents",), "delete": ("contents",), "release": ("contents",),
}
PERMISSIONS = {"actions", "administration", "checks", "contents", "deployments",
               "issues", "metadata", "pages", "pull_requests", "statuses", "workflows",
               "members", "organization_administration"}
CODE_TTL = 3600


@dataclass
class App:
    id: int
    slug: str
    name: str
    owner: str
    manifest: dict
    pem: str
    webhook_secret: str
    client_id: str
    client_secret: str
    installations: list = field(default_factory=list)


@dataclass
class Pending:
    manifest: dict
    owner: str
    state: str


class GitHubApps(LoopbackServer):
    """The stand-in; `url` is its web base, `api_url` its REST base."""

    def __init__(self):
        self.lock = threading.Lock()
        self.apps: dict[str, App] = {}  # slug -> app
        self.codes: dict[str, tuple[str, float]] = {}  # code -> (app slug, issued at)
        self.pending: dict[str, Pending] = {}  # confirmation token -> manifest
        self.conversions: list[tuple[str, int]] = []  # (code, status answered)
        self.deliveries: list[tuple[str, int]] = []  # (hook url, status answered)
        self.next_id = 4100
        self.login = "octocat"
        stand_in = self

        class Handler(QuietHandler):
            def _handle(self):
                raw = self.read_body()
                url = urlsplit(self.path)
                status, headers, body = stand_in.answer(self.command, url.path,
                                                        parse_qs(url.query), raw)
                self.reply(status, body, headers.items())

            do_GET = do_POST = _handle

        self.listen(Handler)

    @property
    def url(self) -> str:
        return self.origin

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/v3"

    # -- what a test drives directly ------------------------------------------------------
    def expire_codes(self) -> None:
        """Every code issued so far is older than GitHub keeps it."""
        with self.lock:
            self.codes = {c: (s, at - CODE_TTL - 1) for c, (s, at) in self.codes.items()}

    def installation_event(self, slug: str, repos: list[str], *, secret: str | None = None
                           ) -> tuple[dict, bytes, str]:
        """The `installation` (created) event of a new installation of app `slug` on
        `repos`, signed with the app's webhook secret (or `secret`): (headers, body, hook
        url)."""
        with self.lock:
            app = self.apps[slug]
            self.next_id += 1
            inst_id = self.next_id
            app.installations.append(inst_id)
        owner = repos[0].split("/", 1)[0] if repos else app.owner
        payload = {
            "action": "created",
            "installation": {"id": inst_id, "app_id": app.id, "app_slug": app.slug,
                             "account": {"login": owner, "type": "User"},
                             "repository_selection": "selected", "target_type": "User",
                             "permissions": app.manifest.get("default_permissions", {}),
                             "events": app.manifest.get("default_events", [])},
            "repositories": [{"full_name": r, "name": r.split("/", 1)[1], "private": True}
                             for r in repos],
            "sender": {"login": self.login, "type": "User"},
        }
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "X-GitHub-Event": "installation",
                   "X-GitHub-Delivery": str(uuid.uuid4()),
                   "X-GitHub-Hook-Installation-Target-Type": "integration",
                   "X-GitHub-Hook-Installation-Target-ID": str(app.id),
                   "X-Hub-Signature-256": sign(secret or app.webhook_secret, body)}
        return headers, body, app.manifest["hook_attributes"]["url"]

    # -- the platform's answers -----------------------------------------------------------
    def answer(self, method: str, path: str, query: dict, raw: bytes):
        parts = path.rstrip("/").split("/")
        if path.startswith("/api/v3/app-manifests/") and path.endswith("/conversions"):
            if method != "POST":
                return _json(404, {"message": "Not Found"})
            return self._convert(parts[4])
        if path.rstrip("/") == "/settings/apps/new" or (
                len(parts) == 6 and parts[1] == "organizations" and parts[3:] == [
                    "settings", "apps", "new"]):
            owner = parts[2] if parts[1] == "organizations" else self.login
            if method == "GET":
                return _page(200, "Register new GitHub App", "<p>No manifest given.</p>")
            return self._manifest_posted(owner, query, raw)
        if path.rstrip("/") == "/settings/apps/new/confirm" and method == "POST":
            return self._confirmed(raw)
        if len(parts) == 5 and parts[1] == "apps" and parts[3:] == ["installations", "new"]:
            return self._install_page(parts[2])
        if len(parts) == 4 and parts[1] == "apps" and parts[3] == "installations" \
                and method == "POST":
            return self._installed(parts[2], raw)
        return _json(404, {"message": "Not Found"})

    def _manifest_posted(self, owner: str, query: dict, raw: bytes):
        form = parse_qs(raw.decode(errors="replace"))
        state = (query.get("state") or [""])[0]
        text = (form.get("manifest") or [""])[0]
        problems = manifest_problems(text)
        if problems:
            items = "".join(f"<li class='error'>{html.escape(p)}</li>" for p in problems)
            return _page(422, "Invalid GitHub App configuration", f"<ul>{items}</ul>")
        token = secrets.token_hex(8)
        with self.lock:
            self.pending[token] = Pending(json.loads(text), owner, state)
        manifest = json.loads(text)
        name = html.escape(manifest.get("name") or "")
        return _page(200, "Create GitHub App", (
            f"<p>Owner: <strong id='owner'>{html.escape(owner)}</strong></p>"
            "<form method='post' action='/settings/apps/new/confirm'>"
            f"<input type='hidden' name='token' value='{token}'>"
            f"<label>GitHub App name <input id='app-name' name='name' value='{name}'></label>"
            "<button type='submit' id='create-app'>Create GitHub App</button></form>"))

    def _confirmed(self, raw: bytes):
        form = parse_qs(raw.decode(errors="replace"))
        token = (form.get("token") or [""])[0]
        name = (form.get("name") or [""])[0].strip()
        with self.lock:
            pending = self.pending.pop(token, None)
        if pending is None:
            return _page(404, "Not Found", "<p>No such registration.</p>")
        if not name or len(name) > 34:
            return _page(422, "Invalid GitHub App configuration",
                         "<ul><li class='error'>Name can't be blank and is at most 34 "
                         "characters</li></ul>")
        slug = "-".join(name.lower().split())
        with self.lock:
            if slug in self.apps:
                return _page(422, "Invalid GitHub App configuration",
                             "<ul><li class='error'>Name is already in use</li></ul>")
            self.next_id += 1
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.TraditionalOpenSSL,
                                    serialization.NoEncryption()).decode()
            app = App(self.next_id, slug, name, pending.owner, pending.manifest, pem,
                      secrets.token_hex(20), f"Iv1.{secrets.token_hex(8)}",
                      secrets.token_hex(20))
            self.apps[slug] = app
            code = secrets.token_hex(10)
            self.codes[code] = (slug, time.time())
        target = pending.manifest.get("redirect_url") or f"{self.url}/apps/{slug}"
        sep = "&" if "?" in target else "?"
        return 302, {"Location": f"{target}{sep}{urlencode({'code': code, 'state': pending.state})}"
                     }, b""

    def _convert(self, code: str):
        with self.lock:
            found = self.codes.pop(code, None)
            if found is None or time.time() - found[1] > CODE_TTL:
                self.conversions.append((code, 404))
                return _json(404, {"message": "Not Found",
                                   "documentation_url": "https://docs.github.com/rest/apps/"
                                   "apps#create-a-github-app-from-a-manifest"})
            app = self.apps[found[0]]
            self.conversions.append((code, 201))
        return _json(201, {
            "id": app.id, "slug": app.slug, "node_id": f"A_{app.id}", "name": app.name,
            "owner": {"login": app.owner, "type": "User"},
            "html_url": f"{self.url}/apps/{app.slug}", "description": "",
            "external_url": app.manifest["url"],
            "permissions": app.manifest.get("default_permissions", {}),
            "events": app.manifest.get("default_events", []),
            "client_id": app.client_id, "client_secret": app.client_secret,
            "webhook_secret": app.webhook_secret, "pem": app.pem})

    def _install_page(self, slug: str):
        if slug not in self.apps:
            return _page(404, "Not Found", "<p>No such app.</p>")
        return _page(200, f"Install {html.escape(slug)}", (
            f"<form method='post' action='/apps/{html.escape(slug)}/installations'>"
            "<label>Repositories <input id='repos' name='repos'></label>"
            "<button type='submit' id='install'>Install</button></form>"))

    def _installed(self, slug: str, raw: bytes):
        if slug not in self.apps:
            return _page(404, "Not Found", "<p>No such app.</p>")
        form = parse_qs(raw.decode(errors="replace"))
        repos = (form.get("repos") or [""])[0].split()
        headers, body, hook = self.installation_event(slug, repos)
        request = urllib.request.Request(hook, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                status = resp.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            status = 0  # GitHub shows a failed delivery; the installation stands
        self.deliveries.append((hook, status))
        app = self.apps[slug]
        target = app.manifest.get("setup_url") or f"{self.url}/apps/{slug}"
        sep = "&" if "?" in target else "?"
        installation = app.installations[-1]
        return 302, {"Location": f"{target}{sep}installation_id={installation}"
                                 "&setup_action=install"}, b""


def manifest_problems(text: str) -> list[str]:
    """What GitHub says of a posted manifest; empty when it takes it."""
    try:
        manifest = json.loads(text)
    except ValueError:
        return ["Manifest is not valid JSON"]
    if not isinstance(manifest, dict):
        return ["Manifest must be a JSON object"]
    problems = [f"Unknown attribute {k}" for k in sorted(set(manifest) - MANIFEST_KEYS)]
    if not _is_url(manifest.get("url")):
        problems.append("Url is not a valid URL")
    hook = manifest.get("hook_attributes")
    if hook is not None and (not isinstance(hook, dict) or not _is_url(hook.get("url"))):
        problems.append("Hook url is not a valid URL")
    for key in ("redirect_url", "setup_url"):
        if key in manifest and not _is_url(manifest[key]):
            problems.append(f"{key} is not a valid URL")
    if "public" in manifest and not isinstance(manifest["public"], bool):
        problems.append("Public must be true or false")
    perms = manifest.get("default_permissions") or {}
    if not isinstance(perms, dict):
        problems.append("Default permissions must be an object")
        perms = {}
    for name, level in perms.items():
        if name not in PERMISSIONS:
            problems.append(f"Default permission unknown: {name}")
        elif level not in ("read", "write"):
            problems.append(f"Default permission {name} must be read or write")
    events = manifest.get("default_events") or []
    if not isinstance(events, list):
        problems.append("Default events must be a list")
        events = []
    for event in events:
        needs = EVENT_PERMISSION.get(event)
        if needs is None:
            problems.append(f"Default events unsupported: {event}")
        elif not any(p in perms for p in needs):
            problems.append(f"Default events unsupported: {event} (needs {' or '.join(needs)})")
    return problems


def _is_url(value) -> bool:
    if not isinstance(value, str):
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _json(status: int, payload: dict):
    return status, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(payload)


def _page(status: int, title: str, content: str):
    body = (f"<!doctype html><html><head><title>{html.escape(title)}</title></head>"
            f"<body><h1>{html.escape(title)}</h1>{content}</body></html>")
    return status, {"Content-Type": "text/html; charset=utf-8"}, body
