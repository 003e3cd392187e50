"""A ticket's whole life with a real runtime (Pi) against the scripted model server, real
GitHub webhooks signed as GitHub signs them, PyGithub against a recording server, and a
real git server (git http-backend over smart HTTP, the source's token as its password):

"@amux-bot please fix …" from an allowed login → explicit ticket → the worker starts in a
clone of the repository on amux/<short name>, commits, `git push`es through amux's git
gateway (its credential helper answers the assignment token), opens the PR with `amux pr`
and reports done → awaiting review → PR merged → ended, with one notice to the chat
channel → a later comment revives it under the same mandate, in the same directory and
branch. The source's token is never in the
work directory, the worker's environment, the timeline or the logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from effects import outbox
from intake.models import Channel, OutgoingMessage, Source
from intake.sources.github import GitHub
from policy import services as policy
from runtimes.base import tagged_pids
from sessions.models import ProviderProfile, Session, TimelineEvent
from tests.support.git_server import GitServer, git
from tests.support.github_payloads import example, signed
from tests.support.intake import drained, processed
from tests.support.model_server import ModelServer, Text, ToolCall
from tests.support.recording_server import RecordingServer
from tests.support.sessions import gateway_served, run_host
from tickets.models import AgentSettings, Assignment, Eval, Mandate, Ticket
from tickets.read import stages

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.timeout(300)]

SECRET = "webhook-secret"
REPO = "Codertocat/Hello-World"
TOKEN = "ghp_sourcetoken_e2e"


def stage(ticket) -> str:
    return str(stages([Ticket.objects.get(pk=ticket.pk)])[ticket.pk][0])


def post(client, event, payload):
    body, headers = signed(event, payload, SECRET)
    return drained(client.post("/hooks/github/gh", data=body,
                               content_type="application/json", **headers))


def comment(text: str, n: int) -> dict:
    payload = example("issue_comment", "created")
    payload["comment"]["id"] += n
    payload["comment"]["body"] = text
    payload["comment"]["user"]["login"] = "octocat"
    payload["sender"]["login"] = "octocat"
    return payload


@pytest.fixture
def world(settings, tmp_path, monkeypatch):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    settings.WORK_DIR.mkdir(parents=True)
    settings.AMUX_SESSION_MIN_IDLE_SECONDS = 1
    # The operator's own GitHub token must never reach a worker.
    monkeypatch.setenv("GH_TOKEN", "ghp_operator_e2e")
    with RecordingServer() as github, ModelServer() as model, GitServer(TOKEN) as git_server, \
            gateway_served(settings, monkeypatch) as amux:
        # The worker's `amux` command, its git and its runtime's model requests reach
        # amux's real ASGI app (its gateways are not Django views: pytest-django's WSGI
        # live server lacks them).
        settings.AMUX_URL = amux.url
        monkeypatch.setenv("AMUX_URL", amux.url)  # and the workers this test starts
        git_server.create(REPO, {"README.md": "Hello World\n"})
        github.git = git_server
        issue = comment("", 0)["issue"]
        github.state.issues[(REPO, issue["number"])] = {"title": issue["title"]}
        config = GitHub.validate_config({"repo": [REPO], "handle": "amux-bot",
                                         "api_url": github.url, "default_branch": "main",
                                         # results are announced in the team's web chat
                                         "notice_channel": "team:general"})
        source = Source(kind="github", slug="gh", name="GitHub", config=config)
        source.secrets = {"webhook_secret": SECRET, "token": TOKEN}
        source.save()
        chat_source = Source.objects.create(kind="webchat", slug="team", name="Team chat")
        chat = Channel.objects.create(source=chat_source, kind="chat", address="general")
        policy.save({"acceptance": "manual", "sources": {"gh": {
            "allowed": ["octocat"], "rows": {"comment": {"addressed": True}}}}}, None)
        provider = ProviderProfile(slug="scripted", platform="openai-compat",
                                   base_url=model.base_url, model_names=["scripted-model"])
        provider.secrets = {"api_key": "sk-test"}
        provider.save()
        AgentSettings.objects.update_or_create(pk=1, defaults={
            "worker_runtime": "pi", "worker_provider": provider,
            "worker_model": "scripted-model"})
        yield {"github": github, "model": model, "chat": chat, "issue": issue,
               "git": git_server, "amux": amux}


def _containing(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_from_comment_to_merged_pr_then_revival(client, world, settings, caplog):
    caplog.set_level("DEBUG")
    github, model, git_server = world["github"], world["model"], world["git"]
    model.script(
        ToolCall("env | sort; git config --show-origin --list"),
        ToolCall("echo fixed > fix.txt && git add fix.txt && git commit -qm 'Fix the crash' "
                 "&& git push -q && git log -1 --format=%an"),
        # a worker trying its way out: main, another ticket's branch, the upstream token
        ToolCall("git push origin HEAD:main 2>&1; git push origin HEAD:refs/heads/amux/other "
                 "2>&1; printf 'protocol=https\\nhost=github.com\\npath=" + REPO + ".git\\n\\n' "
                 "| git credential fill 2>&1; echo escape-attempts-done"),
        ToolCall("amux pr 'Fix the crash' --head \"$(git branch --show-current)\" "
                 "--body 'Guards the nil session.'"),
        ToolCall("amux report done 'Opened the pull request'"),
        Text("Done: the fix is in a pull request."),
    )
    response = post(client, "issue_comment", comment("@amux-bot please fix the crash", 1))
    assert processed(response)["outcome"] == "admitted"
    ticket = Ticket.objects.get()
    mandate = Mandate.objects.get(ticket=ticket)
    assert (mandate.requester, mandate.strength, mandate.scope) == (
        "octocat", "explicit", "comment")
    branch = f"amux/{ticket.short_name}"

    outbox.drain(seconds=30)  # dispatch: the clone, the worker session, its tools and brief
    ticket.refresh_from_db()
    assert ticket.session is not None and ticket.session.name == f"worker-{ticket.pk}"
    assert stage(ticket) == "working"
    workdir = Path(ticket.session.workdir)
    assert workdir == Path(settings.WORK_DIR) / ticket.short_name
    assert (workdir / "README.md").read_text() == "Hello World\n"
    type(ticket.session).objects.filter(pk=ticket.session_id).update(idle_timeout_s=1)
    assert run_host(ticket.session_id) == "slept"

    # The worker's own commit, pushed by the worker's own git, is on its branch.
    assert git_server.show(REPO, branch, "fix.txt") == "fixed\n"
    assert git_server.log(REPO, branch)[0] == (
        "amux-bot <amux-bot@users.noreply.github.com>|Fix the crash")
    assert git("branch", "--show-current", cwd=workdir).strip() == branch
    # The worker pushed it through amux's git gateway: its git met the gateway's 401 and
    # answered with its assignment token; the git host only ever saw amux's credential.
    pushes = [status for method, path, status, _ in git_server.requests
              if "git-receive-pack" in path]
    assert pushes and set(pushes) == {"200"}
    assert not [r for r in git_server.requests if r[2] == "401"]
    created = github.matching("POST", rf"/repos/{REPO}/pulls")
    assert len(created) == 1 and created[0].body["head"] == branch
    assert created[0].body["base"] == "main"
    assert created[0].body["body"] == (
        f"Guards the nil session.\n\nFixes #{world['issue']['number']}")
    ticket.refresh_from_db()
    assert ticket.pr_state == "open" and ticket.pr_url.endswith("/pull/2")
    assert stage(ticket) == "awaiting_review"

    # No token anywhere the worker or a reader can see it.
    seen_by_worker = str([r.body for r in model.requests])
    assert "AMUX_ASSIGNMENT_TOKEN_FILE=" in seen_by_worker  # the env listing did run
    assert "credential.helper=" in seen_by_worker
    assert f"remote.origin.url={world['amux'].url}/gateway/git/{REPO}.git" in seen_by_worker
    # From inside the runtime, pushes past the ticket's branch were refused by the gateway
    # (nothing reached the git host: every receive-pack it saw is the branch's, above) and
    # the credential helper had nothing to give for the git host itself.
    assert "escape-attempts-done" in seen_by_worker
    assert "! [remote rejected] HEAD -> main (amux: " in seen_by_worker
    assert "! [remote rejected] HEAD -> amux/other (amux: " in seen_by_worker
    assert "password=" not in seen_by_worker
    assert not any(entry.endswith("|Fix the crash") for entry in git_server.log(REPO, "main"))
    assert not git_server.has_branch(REPO, "amux/other")
    session = Session.objects.get(pk=ticket.session_id)
    for text in (seen_by_worker, str(session.runtime_env), str(session.snapshot),
                 str(list(TimelineEvent.objects.values_list("payload", flat=True))),
                 caplog.text):
        assert TOKEN not in text
        assert "ghp_operator_e2e" not in text and "GH_TOKEN" not in text
    assert _containing(workdir, TOKEN) == []
    assert _containing(Path(settings.DATA_DIR), TOKEN) == []

    # The corpus has no merged PR: a closed one, merged.
    merged = example("pull_request", "closed")
    merged["number"] = 2
    merged["pull_request"]["number"] = 2
    merged["pull_request"]["merged"] = True
    merged["pull_request"]["state"] = "closed"
    assert post(client, "pull_request", merged).status_code in (200, 202)
    outbox.drain(seconds=30)
    assert stage(ticket) == "ended"
    notices = OutgoingMessage.objects.filter(source=world["chat"].source)
    assert notices.count() == 1 and "merged" in notices.get().text
    # Nothing was repeated on GitHub: the only comments are none at all.
    assert not github.matching("POST", rf"/repos/{REPO}/issues/\d+/comments")

    # A later comment revives it under the same mandate, without an eval.
    model.script(Text("Looking at it again."))
    response = post(client, "issue_comment", comment("one more thing: also the logout", 2))
    assert response.status_code == 202
    ticket.refresh_from_db()
    assert ticket.ended_at is None
    assert Mandate.objects.get(ticket=ticket).pk == mandate.pk
    assert not Eval.objects.exists()
    assert Assignment.objects.filter(ticket=ticket).count() == 2
    outbox.drain(seconds=30)
    assert run_host(ticket.session_id) == "slept"
    assert "one more thing" in str(model.requests[-1].body)
    # … in the same directory, on the same branch, with the worker's commit.
    assert Ticket.objects.get(pk=ticket.pk).session.workdir == str(workdir)
    assert git("branch", "--show-current", cwd=workdir).strip() == branch
    assert (workdir / "fix.txt").read_text() == "fixed\n"

    # Outbound messages people received for this ticket: the one merge notice.
    outbound = notices.count() + len(github.matching("POST", r".*/comments"))
    assert outbound <= 3
    assert not tagged_pids(Ticket.objects.get(pk=ticket.pk).session.runtime_tag)
