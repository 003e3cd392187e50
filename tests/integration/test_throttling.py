"""Nothing unbounded: refused webhooks cost no database write each, the API throttles per
account, and wrong passwords lock a login out (panel and admin)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from knox.models import AuthToken
from rest_framework.test import APIClient

from intake import rejections
from intake.health_view import health
from intake.models import Delivery, Source
from intake.sources.github import GitHub
from tests.support.github_payloads import example, signed

pytestmark = pytest.mark.django_db

SECRET = "It's a Secret to Everybody"


def _writes(queries) -> list[str]:
    return [q["sql"] for q in queries
            if q["sql"].lstrip().split(" ", 1)[0].upper() in ("INSERT", "UPDATE", "DELETE")]


@pytest.fixture
def gh():
    config = GitHub.validate_config({"repo": ["Codertocat/Hello-World"], "handle": "amux-bot"})
    source = Source(kind="github", slug="gh", name="GitHub", config=config)
    source.secrets = {"webhook_secret": SECRET, "token": "ghp_test"}
    source.save()
    yield source
    rejections.client().delete(rejections.key(source))
    rejections.client().srem(rejections.PENDING, rejections.key(source))


def test_600_forged_webhooks_write_nothing_and_are_all_counted(gh):
    client = Client()
    body, headers = signed("issues", example("issues", "opened"), "forged secret")
    with CaptureQueriesContext(connection) as queries:
        for _ in range(600):
            response = client.post("/hooks/github/gh", data=body,
                                   content_type="application/json", **headers)
            assert response.status_code == 401
    assert _writes(queries) == []
    assert not Delivery.objects.exists()
    # the health shown is whole before the flush …
    assert health(gh)["rejected"] == {"bad_signature": 600}
    gh.refresh_from_db()
    assert not (gh.health or {}).get("rejected")
    # … and after it, from the database alone, counted once
    with CaptureQueriesContext(connection) as flushing:
        assert rejections.flush() == 600
    assert len(_writes(flushing)) == 1  # one write for the source, not one per refusal
    gh.refresh_from_db()
    assert gh.health["rejected"] == {"bad_signature": 600}
    assert rejections.pending(gh) == {}
    assert health(gh)["rejected"] == {"bad_signature": 600}


def test_counts_of_a_deleted_source_are_not_given_to_its_successor(gh):
    body, headers = signed("issues", example("issues", "opened"), "forged secret")
    Client().post("/hooks/github/gh", data=body, content_type="application/json", **headers)
    pk = gh.pk
    Source.objects.filter(pk=pk).delete()
    successor = Source.objects.create(pk=pk, kind="github", slug="gh2", name="Other")
    rejections.flush()
    successor.refresh_from_db()
    assert not (successor.health or {}).get("rejected")
    assert health(successor)["rejected"] == {}


def test_the_api_throttles_per_account(operator, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"account": "3/minute",
                                                          "anonymous": "2/minute"}}
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=operator)[1]}")
    codes = [client.get("/api/v1/tickets/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    response = client.get("/api/v1/tickets/")
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert response.json()["error"]["code"] == "throttled"
    # another account has its own allowance
    other = APIClient()
    other.force_authenticate(None)
    from django.contrib.auth import get_user_model

    second = get_user_model().objects.create_user("second", password="second-pass-123")
    other.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=second)[1]}")
    assert other.get("/api/v1/tickets/").status_code == 200


def test_anonymous_requests_are_throttled_per_address_a_header_cannot_change(settings):
    import secrets

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"account": "3/minute",
                                                          "anonymous": "2/minute"}}
    address = f"10.{secrets.randbelow(250)}.{secrets.randbelow(250)}.{secrets.randbelow(250)}"
    client = APIClient(REMOTE_ADDR=address)
    codes = [client.get("/api/v1/schema/", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}").status_code
             for i in range(3)]
    assert codes == [200, 200, 429]


@pytest.mark.parametrize("login_url, next_url", [("/panel/login/", "/panel/tickets/"),
                                                ("/admin/login/", "/admin/")])
def test_wrong_passwords_lock_the_login_out(operator, login_url, next_url):
    client = Client()
    codes = [client.post(login_url, {"username": "operator", "password": "wrong",
                                     "next": next_url}).status_code for _ in range(5)]
    assert codes == [200, 200, 200, 200, 429]  # the form again with its error, then locked
    # locked: even the right password is refused now
    response = client.post(login_url, {"username": "operator",
                                       "password": "operator-pass-123", "next": next_url})
    assert response.status_code == 429
    assert b"Too many wrong passwords" in response.content
    assert "_auth_user_id" not in client.session
    # another user from the same address is not locked out
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("other", password="other-pass-123", is_staff=True)
    response = client.post(login_url, {"username": "other", "password": "other-pass-123",
                                       "next": next_url})
    assert response.status_code == 302


def test_a_right_password_before_the_limit_resets_the_count(operator):
    client = Client()
    for _ in range(4):
        client.post("/panel/login/", {"username": "operator", "password": "wrong"})
    assert client.post("/panel/login/", {"username": "operator",
                                         "password": "operator-pass-123"}).status_code == 302
    client.logout()
    for _ in range(4):
        client.post("/panel/login/", {"username": "operator", "password": "wrong"})
    assert client.post("/panel/login/", {"username": "operator",
                                         "password": "operator-pass-123"}).status_code == 302
