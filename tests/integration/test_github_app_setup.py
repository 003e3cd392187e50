"""Creating a GitHub App from the Sources tab, through Django's test client against the
local GitHub (tests/support/github_apps.py): the manifest goes to GitHub's form, the code
comes back with the state, amux exchanges it once and keeps the app's credentials
encrypted in a new GitHub source, which is ready when the installation event arrives."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.db import connection

from amux_common.secrets import decrypt
from intake import process
from intake.models import Delivery, GitHubAppSetup, Source
from intake.sources.github import sign
from tests.support.github_apps import GitHubApps

pytestmark = pytest.mark.django_db

NEW = "/panel/sources/github-app/new/"


@pytest.fixture
def github():
    with GitHubApps() as server:
        yield server


@pytest.fixture
def panel(client, operator):
    client.force_login(operator)
    return client


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _post(url: str, form: dict) -> tuple[int, dict, str]:
    """A browser's form POST to the local GitHub, redirects not followed."""
    opener = urllib.request.build_opener(_NoRedirect)
    request = urllib.request.Request(url, data=urlencode(form).encode(), method="POST")
    try:
        with opener.open(request, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def _started(panel, github, slug="gh", **form):
    """The operator's form posted; answers the page that posts the manifest to GitHub."""
    response = panel.post(NEW, {"host": "enterprise", "enterprise_url": github.url,
                                "owner": "personal", "slug": slug, "repos": "octo/demo",
                                "app_name": f"amux {slug}", **form})
    assert response.status_code == 200, response.content.decode()
    return response


def _created_on_github(response, name=None) -> str:
    """What the person does on GitHub: the manifest POSTed (as the page's form does), the
    app named and confirmed. Answers the callback path GitHub redirects to."""
    target = response.context["target"]
    status, _h, page = _post(target, {"manifest": response.context["manifest"]})
    assert status == 200, page
    token = page.split("name='token' value='")[1].split("'")[0]
    manifest = json.loads(response.context["manifest"])
    status, headers, _page = _post(f"{response.context['setup'].web_url}/settings/apps/new/"
                                   "confirm", {"token": token, "name": name or manifest["name"]})
    assert status == 302
    location = urlsplit(headers["Location"])
    assert location.path == "/panel/sources/github-app/callback/"
    return f"{location.path}?{location.query}"


def _raw_secrets(slug: str) -> str:
    with connection.cursor() as cur:
        cur.execute("SELECT secrets FROM intake_source WHERE slug = %s", [slug])
        return cur.fetchone()[0]


def test_three_clicks_to_an_installed_app(panel, github):
    page = panel.get("/panel/sources/")
    assert b"data-create-github-app" in page.content
    form = panel.get(NEW, HTTP_HOST="127.0.0.1:8000")
    assert form.status_code == 200 and b"data-unreachable" in form.content
    response = _started(panel, github)
    html = response.content.decode()
    setup = response.context["setup"]
    assert f'action="{github.url}/settings/apps/new?state={setup.state}"' in html
    assert "data-autosubmit" in html
    assert github.url in response["Content-Security-Policy"].split("form-action")[1]
    manifest = json.loads(response.context["manifest"])
    assert manifest["hook_attributes"]["url"] == "http://testserver/hooks/github/gh"
    assert manifest["redirect_url"] == "http://testserver/panel/sources/github-app/callback/"

    callback = _created_on_github(response)
    done = panel.get(callback)
    assert done.status_code == 302
    status_url = done["Location"]
    assert status_url == f"/panel/sources/github-app/{setup.pk}/"
    source = Source.objects.get(slug="gh")
    app = github.apps["amux-gh"]
    assert source.kind == "github" and source.enabled
    assert source.config["repo"] == ["octo/demo"]
    assert source.config["api_url"] == github.api_url
    assert source.config["handle"] == "amux-gh"
    assert source.secrets == {"app_id": str(app.id), "private_key": app.pem,
                              "webhook_secret": app.webhook_secret}
    raw = _raw_secrets("gh")  # encrypted at rest: nothing of them readable in the column
    assert app.pem.splitlines()[1] not in raw and app.webhook_secret not in raw
    assert str(app.id) not in raw
    assert json.loads(decrypt(raw))["private_key"] == app.pem

    waiting = panel.get(status_url).content.decode()
    assert 'data-state="waiting_for_installation"' in waiting
    assert f'href="{github.url}/apps/amux-gh/installations/new"' in waiting
    tab = panel.get("/panel/sources/").content.decode()
    assert 'data-installation="waiting"' in tab

    headers, body, hook = github.installation_event("amux-gh", ["octo/demo"])
    assert hook == "http://testserver/hooks/github/gh"
    answer = panel.post("/hooks/github/gh", data=body, content_type="application/json",
                        headers={k: v for k, v in headers.items() if k != "Content-Type"})
    assert answer.status_code == 202, answer.content
    process.drain()
    source.refresh_from_db()
    installation_id = github.apps["amux-gh"].installations[-1]
    assert source.secrets["installation_id"] == str(installation_id)
    assert source.health["installation"]["state"] == "installed"
    assert source.health["installation"]["repositories"] == ["octo/demo"]
    assert Delivery.objects.get(source=source).reason == "app_installed"
    ready = panel.get(status_url).content.decode()
    assert 'data-state="ready"' in ready and str(installation_id) in ready
    tab = panel.get("/panel/sources/").content.decode()
    assert 'data-installation="installed"' in tab and str(installation_id) in tab

    # the same redirect again (a reload, a replay): the state is spent, nothing changes
    again = panel.get(callback)
    assert again.status_code == 409
    assert b"used already" in again.content
    assert Source.objects.count() == 1
    assert [status for _c, status in github.conversions] == [201]


def test_organization_app_on_the_org_form(panel, github):
    response = _started(panel, github, owner="organization", org="acme")
    assert response.context["target"].startswith(
        f"{github.url}/organizations/acme/settings/apps/new?state=")
    panel.get(_created_on_github(response))
    assert github.apps["amux-gh"].owner == "acme"
    assert Source.objects.filter(slug="gh").exists()


def test_a_used_code_is_refused_and_no_source_is_written(panel, github):
    first = _created_on_github(_started(panel, github, slug="one"))
    assert panel.get(first).status_code == 302
    used_code = parse_qs(urlsplit(first).query)["code"][0]
    second = _started(panel, github, slug="two")
    state = second.context["setup"].state
    answer = panel.get("/panel/sources/github-app/callback/",
                       {"code": used_code, "state": state})
    assert answer.status_code == 400
    text = answer.content.decode()
    assert 'data-error="code_refused"' in text and "used already or is older than an hour" in text
    assert not Source.objects.filter(slug="two").exists()
    setup = GitHubAppSetup.objects.get(state=state)
    assert setup.status == "failed" and "404" in setup.error
    assert github.conversions[-1] == (used_code, 404)
    # its state is spent too: GitHub's own redirect for it can no longer be taken
    assert panel.get("/panel/sources/github-app/callback/",
                     {"code": "x", "state": state}).status_code == 409


def test_an_expired_code_is_refused(panel, github):
    callback = _created_on_github(_started(panel, github))
    github.expire_codes()
    answer = panel.get(callback)
    assert answer.status_code == 400
    assert not Source.objects.exists()


def test_an_expired_or_unknown_state_is_refused_before_github_is_asked(panel, github):
    callback = _created_on_github(_started(panel, github))
    GitHubAppSetup.objects.update(expires_at=GitHubAppSetup.objects.get().created_at
                                  - timedelta(seconds=1))
    answer = panel.get(callback)
    assert answer.status_code == 410 and b'data-error="expired"' in answer.content
    unknown = panel.get("/panel/sources/github-app/callback/", {"code": "c", "state": "nope"})
    assert unknown.status_code == 404 and b'data-error="unknown_state"' in unknown.content
    missing = panel.get("/panel/sources/github-app/callback/", {"state": "nope"})
    assert missing.status_code == 400
    assert github.conversions == [] and not Source.objects.exists()


def test_a_wrongly_signed_installation_event_is_refused(panel, github):
    panel.get(_created_on_github(_started(panel, github)))
    headers, body, _hook = github.installation_event("amux-gh", ["octo/demo"],
                                                     secret="not-the-app-secret")
    answer = panel.post("/hooks/github/gh", data=body, content_type="application/json",
                        headers={k: v for k, v in headers.items() if k != "Content-Type"})
    assert answer.status_code == 401
    process.drain()
    source = Source.objects.get(slug="gh")
    assert "installation_id" not in source.secrets
    assert "installation" not in source.health
    assert not Delivery.objects.exists()


def test_bad_form_names_every_field_and_keeps_nothing(panel, github):
    Source.objects.create(kind="webchat", slug="taken", name="Taken")
    response = panel.post(NEW, {"host": "enterprise", "enterprise_url": "not a url",
                                "owner": "organization", "slug": "taken", "repos": "x",
                                "extra": "1"})
    assert response.status_code == 400
    text = response.content.decode()
    for field in ("enterprise_url", "org", "repos", "extra"):
        assert f'data-error="{field}"' in text, field
    assert not GitHubAppSetup.objects.exists()
    taken = panel.post(NEW, {"host": "github.com", "owner": "personal", "slug": "taken",
                             "repos": "octo/demo"})
    assert taken.status_code == 400 and b'data-error="slug"' in taken.content


def test_a_manifest_github_refuses_is_shown_by_github(github):
    status, _h, page = _post(f"{github.url}/settings/apps/new?state=s",
                             {"manifest": json.dumps({"url": "x", "colour": "blue"})})
    assert status == 422
    assert "Unknown attribute colour" in page and "Url is not a valid URL" in page


def test_viewers_cannot_create_apps(client, viewer, github):
    client.force_login(viewer)
    assert client.get(NEW).status_code == 403
    assert client.post(NEW, {"slug": "gh", "repos": "octo/demo"}).status_code == 403
    assert client.get("/panel/sources/github-app/callback/",
                      {"code": "c", "state": "s"}).status_code == 403
    assert not GitHubAppSetup.objects.exists()


def test_the_form_needs_csrf(operator, github):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator)
    assert strict.post(NEW, {"slug": "gh", "repos": "octo/demo"}).status_code == 403
    assert not GitHubAppSetup.objects.exists()


def test_an_uninstalled_app_clears_its_installation(panel, github):
    panel.get(_created_on_github(_started(panel, github)))
    headers, body, _hook = github.installation_event("amux-gh", ["octo/demo"])
    installed = json.loads(body)
    panel.post("/hooks/github/gh", data=body, content_type="application/json",
               headers={k: v for k, v in headers.items() if k != "Content-Type"})
    removed = json.dumps({**installed, "action": "deleted"}).encode()
    app = github.apps["amux-gh"]
    panel.post("/hooks/github/gh", data=removed, content_type="application/json",
               headers={**{k: v for k, v in headers.items() if k != "Content-Type"},
                        "X-GitHub-Delivery": "removed-1",
                        "X-Hub-Signature-256": sign(app.webhook_secret, removed)})
    process.drain()
    source = Source.objects.get(slug="gh")
    assert "installation_id" not in source.secrets
    assert source.health["installation"]["state"] == "removed"
    page = panel.get(f"/panel/sources/github-app/{GitHubAppSetup.objects.get().pk}/")
    assert b'data-state="waiting_for_installation"' in page.content
    tab = panel.get("/panel/sources/").content.decode()
    assert 'data-installation="removed"' in tab
