"""Links and headers of the panel: only http(s) URLs from payloads become links; every page
sends a Content-Security-Policy and the usual security headers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from amux_site.templatetags.safe_urls import safe_url
from intake.models import Source
from intake.sources.github import GitHub
from tests.support.github_payloads import example, signed
from tests.support.intake import processed
from tickets.models import Ticket

pytestmark = pytest.mark.django_db

SECRET = "It's a Secret to Everybody"
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


@pytest.fixture
def gh():
    config = GitHub.validate_config({"repo": ["Codertocat/Hello-World"], "handle": "amux-bot"})
    source = Source(kind="github", slug="gh", name="GitHub", config=config)
    source.secrets = {"webhook_secret": SECRET, "token": "ghp_test"}
    source.save()
    return source


@pytest.mark.parametrize("url, linked", [
    ("https://github.com/o/r/issues/1", True), ("http://example.com/x", True),
    ("javascript:alert(document.cookie)", False), ("JavaScript:alert(1)", False),
    ("java\tscript:alert(1)", False), (" javascript:alert(1)", False),
    ("data:text/html,<script>alert(1)</script>", False), ("vbscript:msgbox", False),
    ("//evil.example/x", False), ("https:evil", False), ("", False), (None, False),
])
def test_safe_url(url, linked):
    assert safe_url(url) == (url if linked else "")


def test_a_javascript_url_in_a_signed_payload_renders_as_text(client, gh, operator):
    from policy import services

    services.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["Codertocat"],
        "rows": {"comment": {"addressed": True, "unaddressed_allowed": False,
                             "unaddressed_anyone": False}}}}}, None)
    payload = example("issue_comment", "created")
    payload["comment"]["body"] = "@amux-bot please fix the typo"
    payload["issue"]["html_url"] = "javascript:alert(document.cookie)"
    body, headers = signed("issue_comment", payload, SECRET, None)
    response = client.post("/hooks/github/gh", data=body, content_type="application/json",
                           **headers)
    assert processed(response)["outcome"] == "admitted"
    ticket = Ticket.objects.get()
    assert ticket.thread.url == "javascript:alert(document.cookie)"  # kept as received
    client.force_login(operator)
    page = client.get(f"/panel/tickets/{ticket.pk}/").content.decode()
    assert "javascript:alert(document.cookie)" in page  # shown, as text
    assert not re.search(r"href=[\"']\s*javascript:", page, re.I)


def test_every_template_link_from_data_goes_through_safe_url():
    """An href filled from a variable is a {% url %}, a tab of the panel, or |safe_url."""
    # made by the server, never from data: base.html's tab links and the set-up checklist's
    # steps (reverse()), the pager's neighbours (this page's own path with a page number)
    allowed = {"url", "step.url", "pager.prev_url", "pager.next_url"}
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        for m in re.finditer(r'(?:href|src|action)="\{\{\s*([^}|]+?)\s*(\|[^}]*)?\}\}',
                             path.read_text()):
            var, filters = m.group(1), m.group(2) or ""
            if "safe_url" not in filters and var not in allowed:
                offenders.append(f"{path.relative_to(TEMPLATES)}: {m.group(0)}")
    assert not offenders


@pytest.mark.parametrize("path", ["/panel/login/", "/panel/tickets/", "/panel/policy/",
                                  "/api/v1/"])
def test_security_headers(client, operator, path):
    if path != "/panel/login/":
        client.force_login(operator)
    response = client.get(path)
    assert response.status_code == 200
    csp = response["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"
    assert "unsafe" not in csp
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"


def test_panel_templates_hold_no_inline_script_style_or_handler():
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        for pattern in (r"<script(?![^>]*\bsrc=)[^>]*>", r"<style\b", r"\sstyle=",
                        r"\son[a-z]+=", r"\shx-on[:-]"):
            offenders += [f"{path.name}: {m.group(0)}" for m in re.finditer(pattern, text)]
    assert not offenders


def test_the_api_docs_page_loads_swagger_from_amuxs_own_files(client, operator):
    """Offline too: every script and style the page names is served by amux, and its CSP
    names no other origin."""
    client.force_login(operator)
    response = client.get("/api/v1/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page)  # its start-up is a file
    csp = response["Content-Security-Policy"]
    assert "http" not in csp and "'unsafe-eval'" not in csp
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert assets and not [a for a in assets if a.startswith(("http:", "https:", "//"))]
    for asset in assets:
        assert client.get(asset).status_code == 200, asset
    script = client.get("/api/v1/docs/?script=")
    assert script.status_code == 200 and b"SwaggerUIBundle" in script.content
