"""GitHub's word on a source's App installation: deleted or suspended shows the source
`disconnected` with the reason in its health, until GitHub creates or unsuspends it; an
installation on another account says nothing about this source."""

from __future__ import annotations

import pytest

from intake.health_view import health
from intake.models import Source
from intake.sources.github import GitHub
from tests.support.github_payloads import signed
from tests.support.intake import processed

pytestmark = pytest.mark.django_db

SECRET = "It's a Secret to Everybody"


def installation(action: str, account: str = "Codertocat") -> dict:
    # the shape GitHub documents for the `installation` event (webhook-events-and-payloads)
    return {"action": action,
            "installation": {"id": 2, "app_id": 7, "target_type": "Organization",
                             "account": {"login": account, "id": 21031067, "type": "User"},
                             "repository_selection": "selected", "events": ["issues"]},
            "repositories": [{"id": 1, "name": "Hello-World",
                              "full_name": f"{account}/Hello-World", "private": False}],
            "sender": {"login": account, "id": 21031067, "type": "User"}}


def post(client, payload):
    body, headers = signed("installation", payload, SECRET, None)
    return processed(client.post("/hooks/github/gh", data=body,
                                 content_type="application/json", **headers))


def test_an_installation_deleted_or_suspended_disconnects_the_source(client):
    config = GitHub.validate_config({"repo": ["Codertocat/Hello-World"], "handle": "amux"})
    source = Source(kind="github", slug="gh", name="GitHub", config=config)
    source.secrets = {"webhook_secret": SECRET, "app_id": "7", "private_key": "k"}
    source.save()

    assert post(client, installation("deleted", account="someone-else"))["reason"] == (
        "installation_not_ours")
    source.refresh_from_db()
    assert health(source)["connection"]["state"] == "listening"

    for action, reason in (("suspend", "installation_suspended"),
                           ("deleted", "installation_deleted")):
        said = {"suspend": "app_suspended", "deleted": "app_removed"}[action]
        assert post(client, installation(action))["reason"] == said
        source.refresh_from_db()
        connection = health(source)["connection"]
        assert (connection["state"], connection["reason"]) == ("disconnected", reason)
        assert connection["since"]

    post(client, installation("created"))
    source.refresh_from_db()
    assert health(source)["connection"]["state"] == "listening"
