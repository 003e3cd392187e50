"""The GitHub App manifest rules (pure): the operator's form checked field by field, the
manifest amux asks GitHub for, and the URLs of GitHub's new-app form and install page on
github.com and on an Enterprise Server."""

from __future__ import annotations

import json

import pytest

from intake.sources import github_manifest as gm
from intake.sources.github import HANDLED
from tests.support.github_apps import manifest_problems

FORM = {"host": "github.com", "owner": "personal", "slug": "gh", "repos": "octo/demo"}


def test_github_com_personal_form_and_manifest():
    setup = gm.checked({**FORM, "repos": "octo/demo\nocto/other, octo/demo"})
    assert setup.target == gm.Target("https://github.com", "https://api.github.com", "personal")
    assert setup.repos == ("octo/demo", "octo/other")
    assert setup.app_name == "amux gh" and setup.name == "gh"
    m = gm.manifest(setup, amux_url="https://amux.example/",
                    redirect_url="https://amux.example/panel/sources/github-app/callback/")
    assert m["hook_attributes"] == {"url": "https://amux.example/hooks/github/gh",
                                    "active": True}
    assert m["url"] == "https://amux.example" and m["public"] is False
    assert m["redirect_url"].endswith("/github-app/callback/")
    assert set(m["default_events"]) == HANDLED
    assert m["default_permissions"]["issues"] == "write"
    assert m["default_permissions"]["contents"] == "write"
    assert m["default_permissions"]["metadata"] == "read"
    assert gm.form_url(setup.target, "s t") == "https://github.com/settings/apps/new?state=s+t"


def test_the_manifest_is_one_github_takes():
    """Every event amux subscribes to has the permission GitHub ties it to."""
    setup = gm.checked(FORM)
    m = gm.manifest(setup, amux_url="https://amux.example", redirect_url="https://amux.example/cb")
    assert manifest_problems(json.dumps(m)) == []
    without_checks = {**m, "default_permissions": {
        k: v for k, v in m["default_permissions"].items() if k != "checks"}}
    assert manifest_problems(json.dumps(without_checks)) == [
        "Default events unsupported: check_run (needs checks)",
        "Default events unsupported: check_suite (needs checks)"]


def test_enterprise_organization():
    setup = gm.checked({**FORM, "host": "enterprise", "owner": "organization", "org": "acme",
                        "enterprise_url": "https://ghe.acme.test/api/v3/"})
    assert setup.target == gm.Target("https://ghe.acme.test", "https://ghe.acme.test/api/v3",
                                     "organization", "acme")
    assert gm.form_url(setup.target, "abc") == (
        "https://ghe.acme.test/organizations/acme/settings/apps/new?state=abc")


def test_personal_ignores_an_org_typed_before_switching():
    assert gm.checked({**FORM, "org": "acme"}).target.org == ""


def test_every_faulty_field_is_named_at_once():
    with pytest.raises(gm.SetupInvalid) as caught:
        gm.checked({"host": "enterprise", "enterprise_url": "ftp://x", "owner": "organization",
                    "slug": "no spaces", "repos": "justaname", "app_name": "x" * 35,
                    "colour": "blue"})
    assert caught.value.fields == {
        "colour": "unknown field",
        "enterprise_url": "must be an http(s) URL, e.g. https://github.example.com",
        "org": "is required for an organization's app",
        "slug": "letters, digits, - and _ only (at most 60)",
        "app_name": "GitHub takes at most 34 characters",
        "repos": "not owner/name: justaname",
    }


@pytest.mark.parametrize(("form", "field", "why"), [
    ({"host": "gitlab.com"}, "host", "must be github.com or enterprise"),
    ({"host": "enterprise"}, "enterprise_url", "is required"),
    ({"owner": "team"}, "owner", "must be personal or organization"),
    ({"owner": "organization", "org": "-bad name"}, "org",
     "is not a GitHub organization name (letters, digits and -)"),
    ({"slug": ""}, "slug", "is required"),
    ({"repos": ""}, "repos", "name at least one repository, owner/name, one per line"),
])
def test_one_fault(form, field, why):
    with pytest.raises(gm.SetupInvalid) as caught:
        gm.checked({**FORM, **form})
    assert caught.value.fields == {field: why}


def test_install_and_conversion_urls():
    assert gm.install_url("https://github.com/apps/amux-gh/") == (
        "https://github.com/apps/amux-gh/installations/new")
    assert gm.conversion_path("a/b") == "/app-manifests/a%2Fb/conversions"


def test_conversion_answer_checked():
    good = {"id": 1, "slug": "a", "html_url": "https://github.com/apps/a",
            "pem": "-----BEGIN RSA PRIVATE KEY-----\n…", "webhook_secret": "w"}
    assert gm.conversion_problem(good) is None
    assert gm.conversion_problem([]) == "GitHub's answer is not a JSON object"
    assert gm.conversion_problem({**good, "pem": "", "webhook_secret": None}) == (
        "GitHub's answer lacks pem, webhook_secret")
    assert gm.conversion_problem({**good, "pem": "junk"}) == (
        "GitHub's answer has no private key in pem")


def test_amux_url_must_be_reachable_shape():
    assert gm.amux_url_problem("https://amux.example") is None
    assert gm.amux_url_problem("amux.example") == (
        "must be an http(s) URL, e.g. https://github.example.com")


def test_an_address_github_cannot_reach_is_pointed_out():
    assert "only this machine reaches" in gm.unreachable_hint("http://127.0.0.1:8000")
    assert "only this machine reaches" in gm.unreachable_hint("http://localhost:8000")
    assert "private address" in gm.unreachable_hint("http://10.1.2.3")
    assert gm.unreachable_hint("https://amux.example.com") is None
