"""A new policy version's effects on live work, through the real engine and outbox."""

from __future__ import annotations

import pytest

from effects.models import Effect
from intake.models import Source, Trigger
from tests import factories as f
from tests.support import policy_versions
from tests.support.policy_versions import apply_saved_versions
from tickets.actions import policy_changes, routing
from tickets.models import Eval, Input, Ticket

pytestmark = pytest.mark.django_db

ROWS = {"comment": {"addressed": True, "unaddressed_allowed": True},
        "issue_new": {"addressed": True}}


@pytest.fixture
def gh():
    return f.SourceFactory(name="Repo", config={"repo": "acme/app", "receive_all": True})


def save(api, base, acceptance="auto", allowed=("octocat", "bob"), rows=ROWS, apply=True):
    """Save through the API, then (``apply``) run the version's application as the outbox
    would."""
    r = api.put("/api/v1/policy/", {"base_version": base, "acceptance": acceptance,
                                    "sources": {"gh": {"allowed": list(allowed), "rows": rows}}},
                format="json")
    assert r.status_code == 200, r.content
    if apply:
        apply_saved_versions()
    return r.json()["version"]


def trigger(source, n, version, *, scope="comment", actor="octocat", addressed=True):
    cell = "addressed" if addressed else "unaddressed_allowed"
    decision = "explicit" if addressed else "inferred"
    return f.TriggerFactory(
        source=source, thread__key=f"acme/app#{n}", thread__title=f"Thing {n}", scope=scope,
        actor=actor, addressed=addressed, receives_all=True, text="please", decision=decision,
        rule=f"gh.{scope}.{cell}", policy_version=version,
        meta={"scope": scope, "repo": "acme/app"})  # as the GitHub plugin stores it


@pytest.fixture
def live(api, gh, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        v1 = save(api, None)
    comment_ticket = trigger(gh, 1, v1)
    issue_ticket = trigger(gh, 2, v1, scope="issue_new")
    candidate = trigger(gh, 3, v1, actor="bob", addressed=False)
    assert routing.route_trigger(trigger_id=comment_ticket.pk) == "admitted"
    assert routing.route_trigger(trigger_id=issue_ticket.pk) == "admitted"
    assert routing.route_trigger(trigger_id=candidate.pk) == "evaluating"
    return {"v1": v1, "comment": Ticket.objects.get(thread=comment_ticket.thread),
            "issue": Ticket.objects.get(thread=issue_ticket.thread), "candidate": candidate}


def policy_inputs(ticket):
    return list(Input.objects.filter(ticket=ticket, kind="policy"))


def test_closing_a_rule_tells_only_the_tickets_resting_on_it(
        api, live, django_capture_on_commit_callbacks):
    effects_before = set(Effect.objects.values_list("kind", "key"))
    rows = {**ROWS, "comment": {"addressed": False, "unaddressed_allowed": True}}
    with django_capture_on_commit_callbacks(execute=True):
        v2 = save(api, live["v1"], rows=rows)
    (item,) = policy_inputs(live["comment"])
    # octocat is allowed and the source receives all: still admitted, now as inferred
    assert "has changed" in item.text and "now admitted by" in item.text
    assert not item.is_human
    assert policy_inputs(live["issue"]) == []
    new_effects = set(Effect.objects.values_list("kind", "key")) - effects_before
    # one deliver for the affected ticket; the discarded eval's trigger is assessed again
    assert ("deliver", f"input:{item.pk}") in new_effects
    assert {kind for kind, _ in new_effects} == {"deliver", "assess"}
    # nothing is cancelled
    assert Ticket.objects.filter(ended_at__isnull=True).count() == 2
    # the running eval was discarded and its trigger queued again under the new version
    old_eval = Eval.objects.order_by("pk").first()
    assert old_eval.state == "discarded"
    new_eval = Eval.objects.order_by("pk").last()
    assert new_eval.state == "running" and new_eval.policy_version == v2
    candidate = Trigger.objects.get(pk=live["candidate"].pk)
    assert candidate.policy_version == v2 and candidate.disposition == "evaluating"


def test_telling_the_same_change_twice_adds_nothing(api, live,
                                                    django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        v2 = save(api, live["v1"], allowed=("bob",))
    assert len(policy_inputs(live["comment"])) == 1
    assert len(policy_inputs(live["issue"])) == 1
    again = policy_changes.policy_changed(old_version=live["v1"], new_version=v2)
    assert again == {"requeued_evals": [], "informed_tickets": []}
    assert Input.objects.filter(kind="policy").count() == 2


def test_closing_acceptance_tells_inferred_tickets_and_drops_candidates(
        api, gh, live, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        save(api, live["v1"], acceptance="manual")
    # both live tickets are explicit: nobody is told
    assert Input.objects.filter(kind="policy").count() == 0
    # the candidate's eval is discarded; under manual acceptance it is not accepted
    assert Eval.objects.get().state == "discarded"
    assert Trigger.objects.get(pk=live["candidate"].pk).disposition == "not_accepted"


def test_a_stale_save_changes_no_live_work(api, live, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        v2 = save(api, live["v1"], allowed=("octocat",))
    inputs = Input.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        r = api.put("/api/v1/policy/", {"base_version": live["v1"], "acceptance": "manual",
                                        "sources": {}}, format="json")
    assert r.status_code == 409
    assert Input.objects.count() == inputs
    assert api.get("/api/v1/policy/").json()["version"] == v2


def test_revalidation_needs_the_source_to_listen_not_to_receive_all(api, gh, live):
    from tickets.core.resume import refusal
    from tickets.policy_hooks import source_standing

    def why():
        return refusal(source_standing(Ticket.objects.get(pk=live["comment"].pk)))

    assert why() is None
    # receiving every message is switched off: the ticket may still resume
    Source.objects.filter(pk=gh.pk).update(config={"repo": "acme/app", "receive_all": False})
    assert why() is None
    # the repository is no longer watched: it may not
    Source.objects.filter(pk=gh.pk).update(config={"repo": ["acme/other"]})
    assert why() == "not_listening"
    Source.objects.filter(pk=gh.pk).update(enabled=False, config={"repo": "acme/app"})
    assert why() == "source_disabled"


def test_a_saved_versions_application_is_an_outbox_effect_applied_once(api, live):
    """The save writes its application as an outbox effect (keyed by the version) in its
    own transaction: a crash after the commit only delays it, and applying it again
    changes nothing."""
    from policy import services
    from policy.models import PolicyHead

    # saved, its effect not run yet (as if the process died right after the commit)
    v2 = save(api, live["v1"], allowed=("bob",), apply=False)
    head = PolicyHead.objects.get(pk=1)
    assert head.version == v2 and head.applied_version == live["v1"]
    assert Input.objects.filter(kind="policy").count() == 0
    assert Effect.objects.filter(kind="policy.apply", key=f"version:{v2}").exists()
    apply_saved_versions()
    assert Input.objects.filter(kind="policy").count() == 2
    assert PolicyHead.objects.get(pk=1).applied_version == v2
    assert not Effect.objects.filter(kind="policy.apply").exists()
    assert services.apply_pending() is None
    assert Input.objects.filter(kind="policy").count() == 2


def test_a_failing_listener_leaves_the_version_to_the_outbox_again(api, live):
    """A listener that raises does not stop the others (the save answered already); the
    effect fails, stays pending with its error and applies the version on its next try."""
    from policy import hooks
    from policy.models import PolicyHead

    def broken(old, new):
        raise RuntimeError("engine down")

    hooks.new_version.listen(broken)
    try:
        v2 = save(api, live["v1"], allowed=("bob",), apply=False)
        effect = Effect.objects.get(kind="policy.apply", key=f"version:{v2}")
        assert policy_versions.run(effect) == "failed"
    finally:
        hooks.new_version.forget(broken)
    effect.refresh_from_db()
    assert effect.attempts == 1 and "NotApplied" in effect.last_error
    assert PolicyHead.objects.get(pk=1).applied_version == live["v1"]
    apply_saved_versions()
    assert PolicyHead.objects.get(pk=1).applied_version == v2
    assert Input.objects.filter(kind="policy").count() == 2


def _failed(ticket):
    from tickets.models import Assignment

    Assignment.objects.filter(ticket=ticket).update(state="failed", failure_code="crashed",
                                                    failure_message="the runtime crashed")


def test_a_retry_resumes_only_while_the_source_still_listens_to_the_thread(api, gh, live):
    from tickets.models import Assignment, TicketMessage

    ticket = live["comment"]
    _failed(ticket)
    runs = Assignment.objects.filter(ticket=ticket).count()
    # receiving everything switched off: still watched, so the retry is a new run
    Source.objects.filter(pk=gh.pk).update(config={"repo": "acme/app", "receive_all": False})
    assert api.post(f"/api/v1/tickets/{ticket.pk}/retry/").status_code == 200
    assert Assignment.objects.filter(ticket=ticket).count() == runs + 1
    # the repository is no longer watched: the next retry ends the ticket, saying why
    _failed(ticket)
    Source.objects.filter(pk=gh.pk).update(config={"repo": ["acme/other"]})
    answer = api.post(f"/api/v1/tickets/{ticket.pk}/retry/")
    assert answer.status_code == 200, answer.content
    assert answer.json()["end_reason"] == "not_resumable:not_listening"
    assert Assignment.objects.filter(ticket=ticket).count() == runs + 1
    told = [m.payload["text"] for m in TicketMessage.objects.filter(ticket=ticket)
            if m.kind == "relay" and m.key.startswith(f"ticket:{ticket.pk}:not-resumable")]
    assert len(told) == 1 and "amux no longer follows this thread" in told[0]
    # ended: a second retry is refused, and the thread is not told again
    assert api.post(f"/api/v1/tickets/{ticket.pk}/retry/").status_code == 409
    assert TicketMessage.objects.filter(ticket=ticket, kind="relay").count() == 1


def test_a_persons_input_does_not_restart_a_ticket_whose_source_is_disabled(api, gh, live):
    from tickets.actions import commands
    from tickets.models import Assignment

    ticket = live["comment"]
    _failed(ticket)
    runs = Assignment.objects.filter(ticket=ticket).count()
    Source.objects.filter(pk=gh.pk).update(enabled=False)
    item = commands.add_input(ticket_id=ticket.pk, text="any news?", author="octocat")
    ticket.refresh_from_db()
    assert ticket.ended_at is not None
    assert ticket.end_reason == "not_resumable:source_disabled"
    assert Assignment.objects.filter(ticket=ticket).count() == runs  # no new run
    item.refresh_from_db()
    assert item.failed_at is not None and item.failure == "not_resumable:source_disabled"
    assert not Effect.objects.filter(kind="deliver", key=f"input:{item.pk}").exists()


def test_a_policy_change_reaches_a_run_in_flight_even_where_its_source_stopped_listening(
        api, gh, live, django_capture_on_commit_callbacks):
    """Only a resume is revalidated: a run in flight just reads the change (nothing is
    cancelled), even though its source no longer watches the thread."""
    from tickets.models import Assignment

    ticket = live["comment"]
    assert Assignment.objects.filter(ticket=ticket, state="dispatching").exists()
    Source.objects.filter(pk=gh.pk).update(config={"repo": ["acme/other"],
                                                   "receive_all": True})
    with django_capture_on_commit_callbacks(execute=True):
        save(api, live["v1"], allowed=("bob",))
    ticket.refresh_from_db()
    assert ticket.ended_at is None
    (item,) = policy_inputs(ticket)
    assert "no longer eligible" in item.text
