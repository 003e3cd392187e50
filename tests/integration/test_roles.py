"""Roles: a viewer reads and changes nothing — through every mutating REST route and every
panel POST, enumerated from the URL resolver (a new route is covered the day it is added).

Each refused request must also have written nothing to the database."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from knox.models import AuthToken
from rest_framework.test import APIClient

from amux_common import roles
from intake.models import Source, Trigger

pytestmark = pytest.mark.django_db

MUTATING = ("post", "put", "patch", "delete")
# Values for every URL parameter name used by a route; the role is checked before any
# lookup, so a refusal does not depend on the object existing — but the web chat source is
# real, to show the panel no longer lets a viewer post to it.
PARAMS = {"pk": 1, "slug": "chat", "key": "main.role", "request_id": "req-1",
          "version": "0" * 64, "revision": 1, "a": 1, "b": 2, "role": "worker",
          "kind": "webchat", "name": "pi", "action": "pause", "agent": "builder",
          "ref": "as-1", "seq": 1}
# Bodies that would be accepted from an operator (as far as their shape goes).
BODY = {"text": "please fix the build", "thread": "chat-1", "base_revision": 0,
        "base_version": None, "enabled": False, "name": "Renamed", "option": "allow",
        "answer": "yes", "action": "save", "acceptance": "manual", "sources": {},
        "kind": "webchat", "slug": "new-chat", "triage_provider": "", "worker_runtime": "pi"}
# Routes of the account itself, not actions on amux's data.
ACCOUNT_ROUTES = {"login", "logout", "panel"}


def _walk(patterns, prefix=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p


def _params(pattern: URLPattern) -> list[str]:
    converters = getattr(pattern.pattern, "converters", None)
    if converters:
        return list(converters)
    return list(pattern.pattern.regex.groupindex)


def _url(pattern: URLPattern) -> str:
    return reverse(pattern.name, kwargs={k: PARAMS[k] for k in _params(pattern)})


def _methods(callback) -> list[str]:
    actions = getattr(callback, "actions", None)
    if actions:  # a viewset route: only the methods it maps
        return [m for m in actions if m in MUTATING]
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    return [m for m in MUTATING if cls is not None and hasattr(cls, m)]


def _api_routes():
    routes = []
    for route, pattern in _walk(get_resolver().url_patterns):
        if not route.startswith("api/v1/"):
            continue
        for method in _methods(pattern.callback):
            routes.append((pattern, method))
    return routes


def _panel_routes():
    return [(route, p) for route, p in _walk(get_resolver().url_patterns)
            if route.startswith("panel/") and p.name not in ACCOUNT_ROUTES]


def _writes(queries) -> list[str]:
    return [q["sql"] for q in queries
            if q["sql"].lstrip().split(" ", 1)[0].upper() in ("INSERT", "UPDATE", "DELETE")]


def _view_class(callback):
    return getattr(callback, "cls", None) or getattr(callback, "view_class", None)


def _accepts_user_credentials(callback) -> bool:
    from knox.auth import TokenAuthentication

    view = _view_class(callback)
    return any(issubclass(a, TokenAuthentication) for a in view().authentication_classes)


def _reads_only(callback) -> bool:
    view = _view_class(callback)
    return any(getattr(p, "reads_only", False) for p in view().permission_classes)


@pytest.fixture
def chat():
    return Source.objects.create(kind="webchat", slug="chat", name="Chat")


def test_the_walk_finds_the_mutating_routes_it_must_cover():
    found = {(p.name, m) for p, m in _api_routes()}
    assert {("source-messages", "post"), ("ticket-stop", "post"), ("api-policy", "put"),
            ("agent-settings", "patch"), ("source-detail", "delete")} <= found
    assert len(found) > 25
    names = {p.name for _, p in _panel_routes()}
    assert {"panel-source-chat", "panel-ticket-stop", "panel-policy-save"} <= names


def _viewer_api_clients(viewer):
    by_token = APIClient()
    by_token.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=viewer)[1]}")
    by_session = APIClient(enforce_csrf_checks=True)
    by_session.force_login(viewer)
    by_session.get("/panel/login/")  # the CSRF cookie a browser would hold
    csrf = by_session.cookies["csrftoken"].value
    return [("token", by_token, {}), ("session", by_session, {"HTTP_X_CSRFTOKEN": csrf})]


def test_a_viewer_is_refused_every_mutating_rest_route(viewer, chat):
    clients = _viewer_api_clients(viewer)
    refused, computed = [], []
    for pattern, method in _api_routes():
        url = _url(pattern)
        for how, client, extra in clients:
            with CaptureQueriesContext(connection) as queries:
                response = getattr(client, method)(url, BODY, format="json", **extra)
            assert not _writes(queries), (how, method, url, _writes(queries))
            if not _accepts_user_credentials(pattern.callback):
                # the executor's tools take only an assignment's bearer token
                assert response.status_code == 401, (how, method, url, response.status_code)
            elif _reads_only(pattern.callback):
                assert response.status_code != 403, (how, method, url)
                computed.append(url)
            else:
                assert response.status_code == 403, (how, method, url, response.status_code)
                assert response.json()["error"]["code"] == "permission_denied"
                assert "operators" in response.json()["error"]["message"], (how, url)
                refused.append((method, url))
    assert ("post", "/api/v1/sources/chat/messages/") in refused
    assert set(computed) == {"/api/v1/policy/check/", "/api/v1/policy/preview/"}
    assert not Trigger.objects.exists()


def test_an_operator_passes_the_same_rule(operator, chat):
    """The refusals above are the role's: the same request from an operator goes through."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=operator)[1]}")
    response = client.post("/api/v1/sources/chat/messages/", {"text": "hello"}, format="json")
    assert response.status_code in (200, 202), response.content
    assert Trigger.objects.filter(source=chat).count() == 1


def _panel_client(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/panel/tickets/")
    return client, client.cookies["csrftoken"].value


def test_a_viewer_is_refused_every_panel_post(viewer, chat):
    client, csrf = _panel_client(viewer)
    refused, read_pages, computed = [], [], []
    for _, pattern in _panel_routes():
        rule = getattr(pattern.callback, "amux_role_rule", None)
        assert rule, f"panel route {pattern.name} declares no role rule (amux_common.roles)"
        url = _url(pattern)
        with CaptureQueriesContext(connection) as queries:
            response = client.post(url, {**{k: v for k, v in BODY.items() if v is not None},
                                         "csrfmiddlewaretoken": csrf})
        assert not _writes(queries), (url, _writes(queries))
        if rule == "read_page":
            assert response.status_code == 405, (url, response.status_code)
            read_pages.append(url)
        elif rule == "reads_only":
            assert response.status_code != 403, url
            computed.append(url)
        else:
            assert response.status_code == 403, (url, response.status_code)
            refused.append(url)
    assert "/panel/sources/chat/chat/" in refused
    assert set(computed) == {"/panel/policy/preview/", "/panel/policy/try/"}
    assert "/panel/tickets/" in read_pages
    assert not Trigger.objects.exists()


def test_a_viewer_reads_web_chat_but_the_page_offers_no_send(viewer, chat):
    client, _ = _panel_client(viewer)
    page = client.get("/panel/sources/chat/chat/")
    assert page.status_code == 200
    assert b'name="text"' not in page.content


def test_an_operator_posts_web_chat_from_the_panel(operator, chat):
    client, csrf = _panel_client(operator)
    response = client.post("/panel/sources/chat/chat/",
                           {"text": "please fix the build", "csrfmiddlewaretoken": csrf})
    assert response.status_code == 302
    assert Trigger.objects.filter(source=chat).count() == 1


def test_roles_rule():
    from django.contrib.auth.models import AnonymousUser, User

    viewer, operator = User(username="v", is_active=True), User(username="o", is_staff=True)
    assert roles.may(viewer, "GET") and not roles.may(viewer, "POST")
    assert roles.may(operator, "DELETE")
    assert not roles.may(AnonymousUser(), "GET")
    assert roles.role_of(User(username="i", is_staff=True, is_active=False)) is None


def test_a_refusal_is_one_log_line_without_a_traceback(viewer, chat, caplog):
    client, csrf = _panel_client(viewer)
    with caplog.at_level("WARNING"):
        response = client.post("/panel/sources/chat/chat/",
                               {"text": "hi", "csrfmiddlewaretoken": csrf})
    assert response.status_code == 403
    refusals = [r for r in caplog.records if r.name == "django.request"]
    assert len(refusals) == 1 and refusals[0].exc_info is None
    assert refusals[0].getMessage() == "Forbidden: /panel/sources/chat/chat/"


def test_a_viewer_cannot_use_the_admin(viewer):
    client = Client()
    client.force_login(viewer)
    response = client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
