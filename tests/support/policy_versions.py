"""A saved policy version's application, run as the outbox's drainer runs it, for the
`policy.apply` rows only: a test can then read the effects the application wrote (deliver,
assess) before anything runs them."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from effects import outbox
from effects.models import Effect, EffectKind, EffectState

OWNER = "test-policy-versions"


def run(effect: Effect) -> str:
    """Claim one `policy.apply` row and run it; the drainer's outcome (done, failed, …)."""
    until = timezone.now() + timedelta(minutes=5)
    Effect.objects.filter(pk=effect.pk).update(claimed_by=OWNER, claimed_until=until)
    effect.claimed_by, effect.claimed_until = OWNER, until
    return outbox.run_one(effect, OWNER)


def apply_saved_versions() -> None:
    for effect in Effect.objects.filter(kind=EffectKind.POLICY_APPLY,
                                        state=EffectState.PENDING):
        outcome = run(effect)
        assert outcome == "done", (effect.key, outcome)
