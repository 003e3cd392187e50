"""Lists answer bounded pages: a bad `limit`/`offset` is a 400 naming it, never a 500; the
panel's long lists come in pages too."""

from __future__ import annotations

import pytest

from amux_common.pagination import MAX_LIMIT
from intake.models import Source, Thread, Trigger

pytestmark = pytest.mark.django_db

LISTS = ["/api/v1/tickets/", "/api/v1/triggers/", "/api/v1/evals/", "/api/v1/sources/",
         "/api/v1/providers/", "/api/v1/sessions/", "/api/v1/policy/versions/",
         "/api/v1/prompts/versions/"]


@pytest.fixture
def triggers():
    source = Source.objects.create(kind="github", slug="gh", name="GitHub")
    thread = Thread.objects.create(source=source, key="octo/app#1", title="One")
    Trigger.objects.bulk_create(
        Trigger(source=source, thread=thread, external_id=f"c{i}", scope="comment",
                actor="octocat", decision="ignore", reason="not_addressed")
        for i in range(MAX_LIMIT + 30)
    )


BAD = [
    ("limit=99999999999999999999999", "limit"),
    ("offset=99999999999999999999999", "offset"),
    ("limit=-1", "limit"),
    ("offset=-5", "offset"),
    ("limit=abc", "limit"),
    ("offset=1.5", "offset"),
    ("limit=0", "limit"),
    (f"limit={MAX_LIMIT + 1}", "limit"),
    ("limit=5&limit=6", "limit"),
    ("offset=%EF%BC%91", "offset"),  # a full-width digit is not a number here
]


@pytest.mark.parametrize("path", LISTS)
def test_a_bad_limit_or_offset_is_400_naming_it(api, path):
    for query, name in BAD:
        response = api.get(f"{path}?{query}")
        assert response.status_code == 400, (path, query, response.content)
        error = response.json()["error"]
        assert error["code"] == "invalid" and list(error["fields"]) == [name]
        assert "whole number" in error["message"] or "once" in error["message"]
    assert api.get(f"{path}?limit={MAX_LIMIT}&offset=0").status_code == 200


def test_pages_are_bounded_and_link_to_each_other(api, triggers):
    first = api.get(f"/api/v1/triggers/?limit={MAX_LIMIT}").json()
    assert first["count"] == MAX_LIMIT + 30 and len(first["results"]) == MAX_LIMIT
    rest = api.get(first["next"]).json()
    assert len(rest["results"]) == 30 and rest["next"] is None
    assert len(api.get("/api/v1/triggers/").json()["results"]) == 50  # the default page
    beyond = api.get("/api/v1/triggers/?offset=1000000").json()
    assert beyond["results"] == [] and beyond["count"] == MAX_LIMIT + 30


def test_the_triage_tab_pages_its_triggers(client, viewer, triggers):
    client.force_login(viewer)
    first = client.get("/panel/triage/").content.decode()
    assert first.count("<td>octo/app#1</td>") == 50
    assert "page 1 of 5" in first and "triggers=2" in first
    last = client.get("/panel/triage/?triggers=5").content.decode()
    assert last.count("<td>octo/app#1</td>") == 30 and "page 5 of 5" in last
    # A bad page number shows a page, not an error.
    assert client.get("/panel/triage/?triggers=abc").status_code == 200
    assert client.get("/panel/triage/?triggers=99999999999999999999").status_code == 200
