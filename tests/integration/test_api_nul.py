"""A NUL character (which PostgreSQL cannot store) is a 400 at the API's door, never a 500."""

from __future__ import annotations

import json

import pytest

from intake.models import Source

pytestmark = pytest.mark.django_db


def test_a_body_holding_nul_is_400_and_stores_nothing(api):
    body = {"kind": "webchat", "slug": "chat", "name": "Chat", "config": {"note": "a\x00b"}}
    response = api.generic("POST", "/api/v1/sources/", json.dumps(body),
                           content_type="application/json")
    assert response.status_code == 400, response.content
    assert "NUL" in response.json()["error"]["message"]
    assert not Source.objects.exists()


def test_a_query_or_path_holding_nul_is_400(api):
    for path in ("/api/v1/policy/versions/diff/?from=%00", "/api/v1/prompts/main%00role/",
                 "/api/v1/sessions/1/timeline/?after=%00"):
        response = api.get(path)
        assert response.status_code == 400, (path, response.content)
        assert response.json()["error"]["code"] == "invalid"
