"""Triage reads the thread (seed 002): the candidate's issue and its earlier comments, as
GitHub has them (the recording GitHub, through PyGithub), reach the real triage model call
(the scripted model server), bounded in size."""

from __future__ import annotations

import json

import pytest

from tests import factories as f
from tests.integration.test_source_replies import REPO, github_source
from tests.integration.test_source_replies import server as github  # noqa: F401 - fixture
from tests.support.model_server import ModelServer
from tickets import effect_handlers, triage
from tickets.models import AgentSettings, Eval

pytestmark = pytest.mark.django_db

VERDICT = {"result": "accept", "note": "fix the flaky login test"}


@pytest.fixture
def triage_model():
    from sessions.models import ProviderProfile

    with ModelServer(side_text=json.dumps(VERDICT)) as server:
        provider = ProviderProfile.objects.create(slug="triage", platform="openai-compat",
                                                  base_url=server.base_url,
                                                  model_names=["gpt-5.5"])
        AgentSettings.objects.update_or_create(pk=1, defaults={
            "triage_provider": provider, "triage_model": "gpt-5.5"})
        yield server


def _candidate(source, text="could someone look at this?", number=7):
    trigger = f.TriggerFactory(source=source, thread__key=f"{REPO}#{number}",
                               thread__title="Flaky test", scope="comment", actor="bob",
                               addressed=False, decision="inferred", text=text)
    return Eval.objects.create(trigger=trigger, policy_version="v1")


def test_the_triage_call_carries_the_threads_earlier_comments(github, triage_model):  # noqa: F811
    from intake.send import send

    source = github_source(github.url)
    for n, text in enumerate(("It started after the login change", "Same on CI"), 1):
        assert send(source, message_id=f"c{n}", thread=f"{REPO}#7", text=text) == "sent"
    evaluation = _candidate(source)
    effect_handlers.assess_candidate(1, {"eval": evaluation.pk})
    [request] = [r for r in triage_model.requests if r.path.endswith("/chat/completions")]
    user = next(m["content"] for m in request.body["messages"] if m["role"] == "user")
    assert "could someone look at this?" in user
    context = user.split("Thread context:", 1)[1]
    # oldest first: the issue, then its comments as GitHub has them
    assert context.index("It fails") < context.index(
        "It started after the login change") < context.index("Same on CI")
    evaluation.refresh_from_db()
    assert (evaluation.state, evaluation.result, evaluation.note) == (
        "done", "accept", VERDICT["note"])


def test_an_unreadable_thread_leaves_triage_with_the_message_alone(
        github, triage_model):  # noqa: F811 - the fixture
    source = github_source(github.url)
    evaluation = _candidate(source, number=404)  # GitHub answers 404 for it
    effect_handlers.assess_candidate(2, {"eval": evaluation.pk})
    [request] = [r for r in triage_model.requests if r.path.endswith("/chat/completions")]
    user = next(m["content"] for m in request.body["messages"] if m["role"] == "user")
    assert "Thread context:" not in user and "could someone look at this?" in user
    evaluation.refresh_from_db()
    assert evaluation.result == "accept"


def test_the_context_keeps_the_newest_messages_within_its_bound():
    messages = [{"author": f"p{n}", "text": f"message {n} " + "x" * 900, "at": f"t{n}"}
                for n in range(20)]
    text = triage.context_text(messages, limit=3000)
    assert len(text) <= 3000 + 100
    assert text.startswith("(17 earlier messages left out)")
    kept = [line.split()[1] for line in text.splitlines()[1:]]
    assert kept == ["p17", "p18", "p19"]  # the newest, oldest first
    long = triage.context_text([{"author": "a", "text": "y" * 5000, "at": "t"}])
    assert len(long) < triage.MESSAGE_CHARS + 50 and long.endswith("…")
    assert triage.context_text([]) == ""
