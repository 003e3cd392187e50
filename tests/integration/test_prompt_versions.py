"""The three version invariants (seed 002 版本的三个不变量) through the REST API."""

import pytest

from prompts_app import service
from prompts_app.models import ImmutableError, PromptVersion

pytestmark = pytest.mark.django_db


def put(api, key, text, base):
    return api.put(f"/api/v1/prompts/{key}", {"base_revision": base, "text": text},
                   format="json")


def test_every_save_is_an_immutable_version_of_the_whole_configuration(api):
    assert put(api, "team.about", "We build amux.", 0).json()["revision"] == 1
    assert put(api, "main.role", "# Role\n\nRoute.", 1).json()["revision"] == 2
    first, second = PromptVersion.objects.order_by("revision")
    # Whole configuration: revision 2 still holds revision 1's team text.
    assert second.config["team"] == {"team.about": "We build amux.\n"}
    assert second.config["fragments"]["main.role"]["text"] == "# Role\n\nRoute.\n"
    assert first.config["fragments"] == {}
    assert second.predecessor == first and first.predecessor is None
    assert (second.origin, second.author) == ("api", "operator")
    assert second.at >= first.at
    with pytest.raises(ImmutableError):
        first.config = {}
        first.save()
    with pytest.raises(ImmutableError):
        first.delete()
    listed = api.get("/api/v1/prompts/versions/").json()
    assert listed["count"] == 2
    assert [(v["revision"], v["predecessor"], v["origin"]) for v in listed["results"]] == [
        (2, 1, "api"), (1, None, "api")]
    assert all(v["at"] for v in listed["results"])


def test_restoring_a_default_or_an_old_version_creates_a_new_version(api):
    put(api, "main.role", "mine", 0)
    put(api, "team.about", "We build amux.", 1)
    restored = api.post("/api/v1/prompts/main.role/restore", {"base_revision": 2},
                        format="json").json()
    assert (restored["revision"], restored["state"]) == (3, "default")
    assert restored["text"] == restored["default_text"]
    back = api.post("/api/v1/prompts/versions/1/restore", {"base_revision": 3},
                    format="json").json()
    assert back == {"revision": 4, "created": True}
    v4 = PromptVersion.objects.get(revision=4)
    assert v4.config["fragments"]["main.role"]["text"] == "mine\n"
    assert v4.config["team"] == {} and v4.predecessor.revision == 3
    assert PromptVersion.objects.count() == 4


def test_a_stale_base_is_refused_with_409_and_nothing_is_written(api):
    put(api, "team.about", "first", 0)
    put(api, "team.about", "second", 1)
    response = put(api, "team.about", "my draft", 1)
    assert response.status_code == 409
    body = response.json()
    assert body["error"]["code"] == "conflict" and "base_revision" in body["error"]["fields"]
    assert body["revision"] == 2
    assert body["fragment"]["text"] == "second\n"  # what changed underneath
    assert PromptVersion.objects.count() == 2
    assert service.fragment("team.about")["text"] == "second\n"
    for path in ("/api/v1/prompts/team.about/restore", "/api/v1/prompts/versions/1/restore"):
        assert api.post(path, {"base_revision": 1}, format="json").status_code == 409
    assert PromptVersion.objects.count() == 2
    # Saving again on the revision it now knows goes through.
    assert put(api, "team.about", "my draft", 2).json()["revision"] == 3


def test_sessions_read_the_latest_version_on_every_request(api):
    text, revision, _ = service.current("worker")
    assert revision == 0 and "We build amux" not in text
    put(api, "team.about", "We build amux.", 0)
    text, revision, parts = service.current("worker")
    assert revision == 1 and "We build amux." in text
    put(api, "team.about", "We build amux and more.", 1)
    assert service.current("worker").revision == 2
    assert "and more" in service.current("worker").text


def test_a_save_that_changes_nothing_makes_no_version(api):
    put(api, "team.about", "same", 0)
    again = put(api, "team.about", "same", 1)
    assert again.status_code == 200 and again.json()["revision"] == 1
    assert PromptVersion.objects.count() == 1


def test_diff_between_any_two_versions(api):
    put(api, "team.about", "one\ntwo", 0)
    put(api, "team.about", "one\nthree", 1)
    put(api, "skill.identities", "Lark ou_1 is GitHub octocat", 2)
    body = api.get("/api/v1/prompts/versions/1/diff/3").json()
    by_key = {c["key"]: c for c in body["changes"]}
    assert set(by_key) == {"team.about", "skill.identities"}
    assert "-two" in by_key["team.about"]["diff"] and "+three" in by_key["team.about"]["diff"]
    assert api.get("/api/v1/prompts/versions/1/diff/9").status_code == 404


def test_origin_is_recorded_for_tool_saves():
    saved = service.save("skill.identities", "ou_1 = octocat", 0, origin="tool", author="w-7")
    v = PromptVersion.objects.get(revision=saved.revision)
    assert (v.origin, v.author) == ("tool", "w-7")


def test_the_409_answer_says_what_changed_underneath(api):
    put(api, "team.about", "first", 0)
    put(api, "skill.identities", "ou_1 is octocat", 1)
    body = put(api, "team.about", "draft", 1).json()
    assert [c["key"] for c in body["changes"]] == ["skill.identities"]
    assert "+ou_1 is octocat" in body["changes"][0]["diff"]


@pytest.mark.django_db(transaction=True)
def test_two_saves_racing_on_the_same_base_one_wins_one_is_stale():
    import threading

    from django.db import connection

    barrier = threading.Barrier(2)
    outcomes = []

    def racer(text):
        try:
            barrier.wait()
            outcomes.append(("saved", service.save("team.about", text, 0, origin="api")))
        except service.Stale as exc:
            outcomes.append(("stale", exc.latest))
        finally:
            connection.close()

    threads = [threading.Thread(target=racer, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(kind for kind, _ in outcomes) == ["saved", "stale"]
    assert PromptVersion.objects.count() == 1
