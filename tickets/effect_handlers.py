"""The outbox handlers, one per effect kind (registered on app start).

Each handler is idempotent per effect id: the id is the idempotency key of every send.
A handler makes one engine call to report what happened; it never writes ticket state.
"""

from __future__ import annotations

import logging

from tickets import engine, outbox, triage
from tickets.models import Eval

log = logging.getLogger(__name__)


@outbox.register("assess")
def assess_candidate(effect_id: int, payload: dict) -> None:
    """Triage one inferred candidate with the configured model, then report the verdict."""
    from prompts_app import service as prompts

    evaluation = (
        Eval.objects.select_related("trigger__source", "trigger__thread")
        .filter(pk=payload.get("eval"))
        .first()
    )
    if evaluation is None or evaluation.state != "running":
        return  # discarded by a policy change, or already decided: nothing to do
    try:
        verdict = triage.assess(
            evaluation,
            system_prompt=prompts.current("triage").text,
            idempotency_key=f"amux-effect-{effect_id}",
        )
    except triage.TriageUnavailable:
        verdict = triage.Verdict("needs_person", "No triage model is configured.")
    engine.eval_finished(eval_id=evaluation.pk, result=verdict.result, note=verdict.note)
