"""REST `policy/`, `policy/versions/`, `policy/check`, `policy/preview` against the real DB."""

from __future__ import annotations

import pytest

from intake.models import Source, Thread
from policy import hooks
from policy.document import validate, version_of
from policy.models import PolicyHead, PolicyVersion
from tests.support.policy_versions import apply_saved_versions
from tickets.models import Mandate, Ticket

pytestmark = pytest.mark.django_db


@pytest.fixture
def gh(db):
    return Source.objects.create(kind="github", slug="gh", name="Our repo",
                                 config={"repo": "acme/app", "handle": "amux-bot",
                                         "receive_all": True})


@pytest.fixture
def lark(db):
    return Source.objects.create(kind="lark", slug="team", name="Team chat", config={
        "app_id": "cli_x", "groups": ["oc_1"], "receive_all": {"oc_1": False}})


def doc(base=None, acceptance="manual", **parts):
    return {"base_version": base, "acceptance": acceptance, "sources": parts}


COMMENTS = {"allowed": ["octocat"], "bots": ["dependabot[bot]"],
            "rows": {"comment": {"addressed": True, "unaddressed_allowed": True,
                                 "unaddressed_anyone": False}}}


def put(api, body, slash=True):
    return api.put("/api/v1/policy/" if slash else "/api/v1/policy", body, format="json")


def test_get_before_any_save_is_the_empty_manual_policy(api):
    r = api.get("/api/v1/policy/")
    assert r.status_code == 200
    assert r.json() == {"version": None, "base_version": None, "acceptance": "manual",
                        "sources": {}}


def test_save_answers_the_stored_document_with_its_content_hash(api, gh):
    r = put(api, doc(None, "auto", gh=COMMENTS))
    assert r.status_code == 200, r.content
    body = r.json()
    canonical = {"acceptance": "auto", "sources": {"gh": body["sources"]["gh"]}}
    assert body["version"] == version_of(canonical)
    assert body["base_version"] is None and body["author"] == "operator"
    assert body["sources"]["gh"]["rows"]["pr_new"] == {
        "addressed": False, "unaddressed_allowed": False, "unaddressed_anyone": False}
    assert api.get("/api/v1/policy").json()["version"] == body["version"]


def test_stale_save_is_409_and_nothing_is_written(api, gh):
    first = put(api, doc(None, gh=COMMENTS)).json()["version"]
    second = put(api, doc(first, "auto", gh=COMMENTS)).json()["version"]
    before = (PolicyVersion.objects.count(), PolicyHead.objects.get(pk=1).version)
    r = put(api, doc(first, gh={**COMMENTS, "allowed": ["someone"]}))
    assert r.status_code == 409
    err = r.json()["error"]
    assert err["code"] == "conflict" and second in err["message"]
    assert "base_version" in err["fields"]
    assert (PolicyVersion.objects.count(), PolicyHead.objects.get(pk=1).version) == before
    # a first save on top of "no policy" once a policy exists is stale too
    assert put(api, doc(None, gh=COMMENTS)).status_code == 409


@pytest.mark.parametrize("sources, field", [
    ({"nope": {}}, "sources.nope"),
    ({"gh": {"rows": {"direct": {"addressed": True}}}}, "sources.gh.rows.direct"),
    ({"gh": {"rows": {"comment": {"shout": True}}}}, "sources.gh.rows.comment.shout"),
    ({"gh": {"allowed": "octocat"}}, "sources.gh.allowed"),
    ({"gh": {"bots": [""]}}, "sources.gh.bots.0"),
    ({"gh": {"colour": "red"}}, "sources.gh.colour"),
    ({"team": {"rows": {"group_configured": {"unaddressed_anyone": True}}}},
     "sources.team.rows.group_configured.unaddressed_anyone"),
])
def test_bad_input_is_400_naming_the_field_and_the_current_version_stays(
        api, gh, lark, sources, field):
    current = put(api, doc(None, gh=COMMENTS)).json()["version"]
    r = put(api, {"base_version": current, "acceptance": "manual", "sources": sources})
    assert r.status_code == 400, r.content
    assert field in r.json()["error"]["fields"]
    assert api.get("/api/v1/policy/").json()["version"] == current
    assert PolicyVersion.objects.count() == 1


def test_a_policy_naming_a_disabled_source_is_400(api, gh):
    Source.objects.create(kind="github", slug="old", name="Old", enabled=False)
    r = put(api, doc(None, old={"allowed": ["a"]}))
    assert r.status_code == 400
    assert "disabled" in r.json()["error"]["fields"]["sources.old"][0]
    assert not PolicyVersion.objects.exists()


def test_missing_base_version_and_non_object_bodies_are_400(api, gh):
    r = api.put("/api/v1/policy/", {"acceptance": "manual", "sources": {}}, format="json")
    assert r.status_code == 400 and "base_version" in r.json()["error"]["fields"]
    r = api.put("/api/v1/policy/", [1, 2], format="json")
    assert r.status_code == 400
    r = api.put("/api/v1/policy/", "{not json", content_type="application/json")
    assert r.status_code == 400


def test_equal_content_is_the_same_version_and_no_new_history(api, gh):
    v = put(api, doc(None, gh=COMMENTS)).json()["version"]
    reordered = {"allowed": ["OctoCat", "octocat"], "bots": ["dependabot[bot]"],
                 "rows": {"comment": {"unaddressed_allowed": True, "addressed": True}}}
    r = put(api, doc(v, gh=reordered))
    assert r.status_code == 200 and r.json()["version"] == v
    assert PolicyVersion.objects.count() == 1


def test_returning_to_older_content_gives_its_old_id_as_a_new_history_entry(api, gh):
    a = put(api, doc(None, gh=COMMENTS)).json()["version"]
    b = put(api, doc(a, "auto", gh=COMMENTS)).json()["version"]
    again = put(api, doc(b, gh=COMMENTS)).json()["version"]
    assert again == a != b
    rows = api.get("/api/v1/policy/versions/").json()
    assert rows["count"] == 3
    assert [r["version"] for r in rows["results"]] == [a, b, a]
    assert rows["results"][0]["current"] and rows["results"][0]["base_version"] == b


def test_versions_detail_and_diff(api, gh):
    a = put(api, doc(None, gh=COMMENTS)).json()["version"]
    b = put(api, doc(a, gh={**COMMENTS, "allowed": ["octocat", "hubot"]})).json()["version"]
    detail = api.get(f"/api/v1/policy/versions/{a}").json()
    assert detail["version"] == a and detail["sources"]["gh"]["allowed"] == ["octocat"]
    assert api.get("/api/v1/policy/versions/feedbeef/").status_code == 404
    d = api.get(f"/api/v1/policy/versions/diff?from={a}&to={b}").json()
    assert [c["text"] for c in d["changes"]] == ["gh: hubot added to allowed people"]
    assert api.get("/api/v1/policy/versions/diff/?from=nope").status_code == 400


def test_check_answers_the_contract_example_without_storing(api, gh):
    v = put(api, doc(None, gh=COMMENTS)).json()["version"]
    body = {"source": "gh", "scope": "comment", "actor": "octocat", "is_bot": False,
            "addressed": True, "receives_all": False}
    r = api.post("/api/v1/policy/check", body, format="json")
    assert r.status_code == 200
    assert r.json() == {"decision": "explicit", "strength": "explicit",
                        "rule": "gh.comment.addressed", "reason": None, "version": v}
    stranger = api.post("/api/v1/policy/check/", {**body, "actor": "mallory"}, format="json")
    assert stranger.json()["decision"] == "ignore"
    assert stranger.json()["reason"] == "not_allowed"
    # receives_all defaults to the source's configuration (receive_all is on)
    unaddressed = {k: v for k, v in body.items() if k != "receives_all"} | {"addressed": False}
    inferred = api.post("/api/v1/policy/check/", unaddressed, format="json")
    assert inferred.json()["reason"] == "acceptance_manual"
    assert PolicyVersion.objects.count() == 1


def test_check_against_a_named_older_version(api, gh):
    a = put(api, doc(None, gh=COMMENTS)).json()["version"]
    put(api, doc(a, gh={**COMMENTS, "allowed": []}))
    body = {"source": "gh", "scope": "comment", "actor": "octocat", "addressed": True}
    assert api.post("/api/v1/policy/check", body, format="json").json()["decision"] == "ignore"
    old = api.post("/api/v1/policy/check", {**body, "version": a}, format="json").json()
    assert old["decision"] == "explicit" and old["version"] == a


@pytest.mark.parametrize("body, field", [
    ({"scope": "comment"}, "source"),
    ({"source": "nope", "scope": "comment"}, "source"),
    ({"source": "gh", "scope": "direct"}, "scope"),
    ({"source": "gh", "scope": "comment", "addressed": "yes"}, "addressed"),
    ({"source": "gh", "scope": "comment", "mood": "happy"}, "mood"),
    ({"source": "gh", "scope": "comment", "version": "nope"}, "version"),
])
def test_check_bad_facts_are_400_naming_the_field(api, gh, body, field):
    r = api.post("/api/v1/policy/check", body, format="json")
    assert r.status_code == 400
    assert field in r.json()["error"]["fields"]


def test_viewers_read_and_check_but_cannot_save(gh, viewer):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=viewer)[1]}")
    assert client.get("/api/v1/policy/").status_code == 200
    assert put(client, doc(None, gh=COMMENTS)).status_code == 403
    r = client.post("/api/v1/policy/check", {"source": "gh", "scope": "comment"}, format="json")
    assert r.status_code == 200
    assert not PolicyVersion.objects.exists()


def test_anonymous_is_401(client, gh):
    assert client.get("/api/v1/policy/").status_code in (401, 403)


def _live_ticket(source, n, rule, requester, strength="explicit", **basis):
    thread = Thread.objects.create(source=source, key=f"acme/app#{n}")
    ticket = Ticket.objects.create(short_name=f"t-{n}", title=f"Ticket {n}", thread=thread)
    Mandate.objects.create(ticket=ticket, policy_version="x", scope=rule.split(".")[1],
                           strength=strength, rule=rule, requester=requester, basis=basis)
    return ticket


def test_preview_lists_exactly_the_affected_live_tickets(api, gh):
    v = put(api, doc(None, "auto", gh=COMMENTS)).json()["version"]
    explicit = _live_ticket(gh, 1, "gh.comment.addressed", "octocat", addressed=True)
    inferred = _live_ticket(gh, 2, "gh.comment.unaddressed_allowed", "octocat", "inferred",
                            addressed=False, receives_all=True)
    ended = _live_ticket(gh, 3, "gh.comment.addressed", "octocat", addressed=True)
    Ticket.objects.filter(pk=ended.pk).update(ended_at="2026-01-01T00:00:00Z")
    draft = doc(v, "manual", gh={**COMMENTS, "rows": {"comment": {"addressed": False,
                                                                  "unaddressed_allowed": True}}})
    r = api.post("/api/v1/policy/preview", draft, format="json")
    assert r.status_code == 200, r.content
    affected = {a["ticket"]: a["reasons"] for a in r.json()["affected"]}
    assert affected == {explicit.pk: ["rule_disabled"], inferred.pk: ["acceptance_closed"]}
    assert PolicyVersion.objects.count() == 1  # nothing stored


def test_listeners_hear_each_new_version_after_commit(api, gh, django_capture_on_commit_callbacks):
    heard = []
    listener = lambda old, new: heard.append((old, new))  # noqa: E731
    hooks.new_version.listen(listener)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            a = put(api, doc(None, gh=COMMENTS)).json()["version"]
        apply_saved_versions()  # the version's outbox effect, written with it
        with django_capture_on_commit_callbacks(execute=True):
            put(api, doc(None, gh=COMMENTS))  # stale: nothing heard
        apply_saved_versions()
        with django_capture_on_commit_callbacks(execute=True):
            b = put(api, doc(a, "auto", gh=COMMENTS)).json()["version"]
        apply_saved_versions()
    finally:
        hooks.new_version.forget(listener)
    assert heard == [(None, a), (a, b)]


def test_sources_hook_reflects_the_tickets_sources(gh, lark):
    infos = hooks.sources()
    assert infos["gh"].kind == "github" and "comment" in infos["gh"].receives_all
    assert infos["team"].receives_all == frozenset({"direct"})
    canonical = validate({"acceptance": "manual", "sources": {"team": {"rows": {
        "direct": {"unaddressed_allowed": True}}, "allowed": ["ou_1"]}}}, infos)
    assert canonical["sources"]["team"]["rows"]["direct"]["unaddressed_allowed"] is True


def test_openapi_describes_the_policy_endpoints(api):
    r = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    assert r.status_code == 200
    text = r.content.decode()
    for path in ("/api/v1/policy/", "/api/v1/policy/check/", "/api/v1/policy/versions/"):
        assert path in text


def test_the_compiled_current_policy_follows_new_versions(api, gh):
    from policy import services

    assert services.current_policy().version is None
    v = put(api, doc(None, gh=COMMENTS)).json()["version"]
    assert services.current_policy().version == v
    assert services.current_policy() is services.current_policy()


def test_every_system_prompt_ends_with_the_current_policy(api, gh):
    from prompts_app import service as prompts

    before = prompts.current("main").text
    assert "No source admits anything" in before
    v = put(api, doc(None, "auto", gh=COMMENTS)).json()["version"]
    text = prompts.current("main").text
    policy_part = text[text.index("# Policy"):]
    assert f"Policy version {v[:12]}" in policy_part
    assert "Acceptance: automatic" in policy_part
    assert ("Comments on issues and pull requests: an allowed person @mentions the agent "
            "\u2192 explicit request") in policy_part
    assert "Allowed people: octocat." in policy_part
    assert "dependabot[bot]" in policy_part
