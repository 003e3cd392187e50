"""Every model request reads the latest version; a turn records the revisions it used; a
save never restarts, cancels or wakes a session (seed 002, 版本的三个不变量 #3)."""

import pytest

from effects.models import Effect
from prompts_app import service
from sessions.models import Session, Turn

pytestmark = pytest.mark.django_db


def model_request(turn, role="worker"):
    """What a session host does before each model request of a turn."""
    text, revision, _parts = service.current(role)
    turn.prompt_revisions = service.note_revision(turn.prompt_revisions, revision)
    turn.save(update_fields=["prompt_revisions"])
    return text


def test_a_turn_records_every_revision_its_requests_used():
    session = Session.objects.create(runtime="codex", workdir="/tmp/w", lifecycle="running")
    turn = Turn.objects.create(session=session, seq=1, key="t1", state="running")
    service.save("team.about", "We build amux.", 0, origin="panel")
    assert "We build amux." in model_request(turn)
    assert "We build amux." in model_request(turn)
    # Saved mid-turn: the next request of the same turn reads the new version.
    service.save("team.worker", "Run make test before reporting.", 1, origin="panel")
    assert "Run make test before reporting." in model_request(turn)
    turn.refresh_from_db()
    assert turn.prompt_revisions == [1, 2]
    # The executor can look back at the version it worked under.
    result, _ = service.preview("worker", revision=turn.prompt_revisions[0])
    assert "We build amux." in result.text and "Run make test" not in result.text


def test_saving_never_restarts_cancels_or_wakes_a_session():
    asleep = Session.objects.create(runtime="codex", workdir="/tmp/a", lifecycle="sleeping",
                                    sleep_reason="idle_timeout")
    busy = Session.objects.create(runtime="pi", workdir="/tmp/b", lifecycle="running",
                                  lease_owner="host-1")
    turn = Turn.objects.create(session=busy, seq=1, key="t1", state="running")
    before = [(s.pk, s.lifecycle, s.lease_owner, s.updated_at) for s in Session.objects.all()]
    service.save("main.role", "# Main\n\nRoute only.", 0, origin="panel")
    service.restore("main.role", 1, origin="panel")
    assert [(s.pk, s.lifecycle, s.lease_owner, s.updated_at)
            for s in Session.objects.all()] == before
    turn.refresh_from_db()
    assert turn.state == "running" and Turn.objects.count() == 1
    assert Effect.objects.count() == 0
    asleep.refresh_from_db()
    assert asleep.lifecycle == "sleeping"


def test_the_policy_part_is_regenerated_for_every_request():
    calls = []

    def provider(role, **context):
        calls.append((role, context))
        return f"policy #{len(calls)}"

    before = service.policy_part.replace(provider)
    try:
        one = service.current("main", ticket=7)
        two = service.current("main", ticket=7)
    finally:
        service.policy_part.replace(before)
    assert one.text.rstrip().endswith("policy #1") and two.text.rstrip().endswith("policy #2")
    assert calls == [("main", {"ticket": 7}), ("main", {"ticket": 7})]
    assert one.text[: one.text.index("# Policy")] == two.text[: two.text.index("# Policy")]
