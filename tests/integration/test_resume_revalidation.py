"""Revalidation before every resume (issue 32, item 1), through the real entry points: the
API's and the panel's Retry, new agent settings, a new policy version, and follow-ups
delivered as signed GitHub webhooks. A ticket resumes only while the source of its mandate
exists, is enabled and still listens to its thread; otherwise it ends with the reason and
the person who asked is told once, as a comment the real PyGithub posts to the recording
GitHub server through the outbox."""

from __future__ import annotations

import pytest

from effects import outbox
from intake.models import Source, Trigger
from intake.sources.github import GitHub
from policy import services as policy_services
from tests import factories as f
from tests.support.git_server import served_github
from tests.support.github_payloads import example, signed
from tests.support.intake import drained, processed
from tests.support.policy_versions import apply_saved_versions
from tickets.models import AgentSettings, Assignment, Input, Ticket

pytestmark = pytest.mark.django_db

REPO = "Codertocat/Hello-World"  # the repository of the example payloads
SECRET = "It's a Secret to Everybody"
NEW_SECRET = "the new app's secret"
TOLD = "cannot resume"


@pytest.fixture
def github(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    with served_github([REPO]) as (server, _git):
        server.state.issues[(REPO, 1)] = {"title": "Spelling error in the README file"}
        yield server


def github_source(server, slug, secret):
    config = GitHub.validate_config({"repo": [REPO], "api_url": server.url,
                                     "handle": "amux-bot"})
    source = Source(kind="github", slug=slug, name=slug, config=config)
    source.secrets = {"webhook_secret": secret, "token": "ghp_test"}
    source.save()
    return source


@pytest.fixture
def gh(github):
    source = github_source(github, "gh", SECRET)
    policy_services.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["Codertocat"],
        "rows": {"issue_new": {"addressed": True}, "comment": {"addressed": True}}}}}, None)
    apply_saved_versions()  # the version's outbox effect, written with it
    return source


def post(client, event, payload, *, slug="gh", secret=SECRET):
    body, headers = signed(event, payload, secret)
    return drained(client.post(f"/hooks/github/{slug}", data=body,
                               content_type="application/json", **headers))


def drain():
    outbox.drain(seconds=20)


@pytest.fixture
def ticket(client, gh):
    """Issue #1 asked for by an allowed person. No worker is configured yet, so its first
    run fails: a failed ticket, ready to be dispatched again."""
    issue = example("issues", "opened")
    issue["issue"]["body"] = "@amux-bot please fix the spelling"
    assert processed(post(client, "issues", issue))["outcome"] == "admitted"
    drain()
    ticket = Ticket.objects.get()
    assert Assignment.objects.get(ticket=ticket).state == "failed"
    return ticket


@pytest.fixture
def worker_settings():
    """Agent settings a worker run starts with (creating its session calls no provider)."""
    provider = f.ProviderProfileFactory(slug="local")
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})
    return provider


def comment(text, *, number=1, on_pr=False, comment_id=1):
    payload = example("issue_comment", "created")
    payload["comment"]["id"] += comment_id
    payload["comment"]["body"] = text
    payload["issue"]["number"] = number
    if on_pr:
        payload["issue"]["pull_request"] = {
            "url": f"https://api.github.com/repos/{REPO}/pulls/{number}"}
    return payload


def told(server) -> list[str]:
    """What the asker was told on the ticket's issue (comments amux posted there)."""
    return [c["body"] for c in server.state.comments.get((REPO, 1), []) if TOLD in c["body"]]


def disposition(outcome) -> str:
    return Trigger.objects.get(pk=outcome["trigger"]).disposition


def runs(ticket) -> int:
    return Assignment.objects.filter(ticket=ticket).count()


def test_a_retry_after_the_source_was_disabled_ends_the_ticket_and_tells_the_asker_once(
        api, client, operator, github, gh, ticket):
    # A source that has received events cannot be deleted: disabling is how it goes.
    deleted = api.delete("/api/v1/sources/gh")
    assert deleted.status_code == 409 and "disable it instead" in deleted.json()["error"][
        "message"]
    assert api.patch("/api/v1/sources/gh", {"enabled": False}, format="json").status_code == 200

    answer = api.post(f"/api/v1/tickets/{ticket.pk}/retry")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["stage"] == "ended" and body["end_reason"] == "not_resumable:source_disabled"
    assert body["label"] == "Ended — could not resume: its source has been disabled"
    assert runs(ticket) == 1  # no run under the old mandate
    drain()
    (message,) = told(github)
    assert "amux has been switched off here" in message

    # Pressed again: refused (the ticket ended), and nobody is told twice.
    again = api.post(f"/api/v1/tickets/{ticket.pk}/retry")
    assert again.status_code == 409 and again.json()["error"]["code"] == "ticket_ended"
    drain()
    assert len(told(github)) == 1
    # The panel shows why, and a follow-up to the disabled source is not taken at all.
    client.force_login(operator)
    page = client.get(f"/panel/tickets/{ticket.pk}/").content.decode()
    assert "Ended — could not resume: its source has been disabled" in page
    assert post(client, "issue_comment", comment("@amux-bot any news?")).status_code == 404
    drain()
    assert runs(ticket) == 1 and len(told(github)) == 1


def test_the_panel_retry_of_a_ticket_whose_thread_is_no_longer_listened_to(
        api, client, operator, github, gh, ticket):
    # The repository leaves the source (it now follows another one).
    moved = api.patch("/api/v1/sources/gh", {"config": {"repo": ["Codertocat/Other"]}},
                      format="json")
    assert moved.status_code == 200, moved.content
    client.force_login(operator)
    assert client.post(f"/panel/tickets/{ticket.pk}/retry/").status_code == 302
    page = client.get(f"/panel/tickets/{ticket.pk}/").content.decode()
    assert "Ended — could not resume: amux no longer listens to this thread" in page
    ticket.refresh_from_db()
    assert ticket.end_reason == "not_resumable:not_listening" and runs(ticket) == 1
    drain()
    (message,) = told(github)
    assert "amux no longer follows this thread" in message
    # A follow-up on that repository is no longer taken by the source: nothing wakes.
    outcome = processed(post(client, "issue_comment", comment("@amux-bot hello?")))
    assert outcome["reason"] == "repo_not_configured"
    drain()
    assert runs(ticket) == 1 and len(told(github)) == 1


def test_receiving_everything_is_not_needed_a_follow_up_still_resumes_the_ticket(
        client, github, gh, ticket, worker_settings):
    assert not gh.config["receive_all"]  # only addressed comments are candidates here
    outcome = processed(post(client, "issue_comment", comment("@amux-bot try again please")))
    assert disposition(outcome) == "follow_up"
    drain()
    first, second = Assignment.objects.filter(ticket=ticket).order_by("pk")
    assert first.state == "failed" and second.state == "running" and second.attempt == 2
    (item,) = Input.objects.filter(ticket=ticket)
    assert item.delivered_at is not None and not item.failure
    ticket.refresh_from_db()
    assert ticket.ended_at is None and told(github) == []


def test_a_follow_up_through_another_source_does_not_revive_a_ticket_whose_source_is_off(
        api, client, github, gh, ticket):
    """The team moves the repository to a new source and disables the old one. The
    ticket's pull request arrives through the new source and joins it (its branch); a
    person's comment there would revive the ticket under the old source's mandate."""
    github_source(github, "gh-new", NEW_SECRET)
    pr = example("pull_request", "opened")
    pr["pull_request"]["head"]["ref"] = f"amux/{ticket.short_name}"
    pr["pull_request"]["body"] = "The fix."
    post(client, "pull_request", pr, slug="gh-new", secret=NEW_SECRET)
    drain()
    ticket.refresh_from_db()
    assert ticket.pr_state == "open" and ticket.ended_at is None
    assert runs(ticket) == 2  # the opening, a person's message, dispatched it again
    merged = example("pull_request", "closed")
    merged["pull_request"]["merged"] = True
    merged["pull_request"]["head"]["ref"] = f"amux/{ticket.short_name}"
    post(client, "pull_request", merged, slug="gh-new", secret=NEW_SECRET)
    drain()
    ticket.refresh_from_db()
    assert ticket.end_reason == "merged"

    assert api.patch("/api/v1/sources/gh", {"enabled": False}, format="json").status_code == 200
    for n, text in enumerate(["one more thing", "and another"], start=1):
        outcome = processed(post(client, "issue_comment", comment(text, number=2, on_pr=True,
                                                                   comment_id=n),
                                 slug="gh-new", secret=NEW_SECRET))
        assert disposition(outcome) == "revive"
        drain()
        ticket.refresh_from_db()
        assert ticket.end_reason == "not_resumable:source_disabled"
        assert runs(ticket) == 2  # no new run
        last = Input.objects.filter(ticket=ticket).latest("pk")
        assert last.text == text and last.failure == "not_resumable:source_disabled"
    # Told once, on the thread where the work was asked for.
    (message,) = told(github)
    assert "amux has been switched off here" in message
    assert not [c for c in github.state.comments.get((REPO, 2), []) if TOLD in c["body"]]


def test_new_agent_settings_do_not_restart_a_ticket_whose_source_no_longer_listens(
        api, github, gh, ticket, worker_settings):
    Source.objects.filter(pk=gh.pk).update(config={**gh.config, "repo": ["Codertocat/Other"]})
    response = api.put("/api/v1/settings/agents", {"worker_runtime": "pi",
                                                  "worker_provider": "local",
                                                  "worker_model": "m2"}, format="json")
    assert response.status_code == 200, response.content
    ticket.refresh_from_db()
    assert ticket.end_reason == "not_resumable:not_listening" and runs(ticket) == 1
    drain()
    assert len(told(github)) == 1
    # Saved again: nothing failed is left to dispatch, nobody is told again.
    api.patch("/api/v1/settings/agents", {"worker_model": "m3"}, format="json")
    drain()
    assert len(told(github)) == 1


def test_a_policy_change_does_not_wake_the_worker_of_a_ticket_no_longer_listened_to(
        api, github, gh, ticket, django_capture_on_commit_callbacks):
    Source.objects.filter(pk=gh.pk).update(config={**gh.config, "repo": ["Codertocat/Other"]})
    base = api.get("/api/v1/policy/").json()["version"]
    with django_capture_on_commit_callbacks(execute=True):
        saved = api.put("/api/v1/policy/", {
            "base_version": base, "acceptance": "manual", "sources": {"gh": {
                "allowed": [], "rows": {"issue_new": {"addressed": True}}}}}, format="json")
    assert saved.status_code == 200, saved.content
    apply_saved_versions()
    ticket.refresh_from_db()
    # The requester is no longer allowed, but the input telling the worker so would wake
    # it under a mandate its source no longer carries: the ticket ends instead.
    assert ticket.end_reason == "not_resumable:not_listening"
    assert not Input.objects.filter(ticket=ticket, kind="policy").exists()
    drain()
    assert len(told(github)) == 1


def test_listening_is_the_lark_plugins_own_scope_of_the_stored_trigger():
    """What "still listens" means is the source plugin's: a group taken out of `groups`
    still reaches the bot when it is mentioned (it listens, without receiving all); a
    document comment stops reaching it when document comments are turned off."""
    from tickets.actions import commands
    from tickets.core.resume import refusal
    from tickets.policy_hooks import source_standing

    lark = f.SourceFactory(kind="lark", slug="lk", name="Lark", config={
        "app_id": "cli_a", "groups": ["oc_team"], "doc_comments": True})

    def ticket_from(key, scope, meta):
        trigger = f.TriggerFactory(source=lark, thread__key=key, scope=scope,
                                   meta={"scope": scope, **meta}, rule=f"lk.{scope}.addressed")
        return commands.open_ticket(trigger_id=trigger.pk, title=key)

    group = ticket_from("oc_team:om_1", "group_configured", {"chat_id": "oc_team"})
    doc = ticket_from("doc:doxA:c1", "doc_comment", {"file_token": "doxA"})
    assert refusal(source_standing(group)) is None and refusal(source_standing(doc)) is None
    Source.objects.filter(pk=lark.pk).update(config={"app_id": "cli_a", "groups": [],
                                                     "doc_comments": False})
    assert refusal(source_standing(group)) is None
    assert refusal(source_standing(doc)) == "not_listening"
