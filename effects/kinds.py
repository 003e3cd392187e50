"""Each effect kind's rules (concurrency, backoff, attempts, lease) and the rule that ties
the drain task's time limit to the leases. Pure: settings.py checks the rule while it loads,
before any app is ready, so this module imports nothing from Django or our apps."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KindPolicy:
    concurrency: int  # drainers that may run this kind at once
    base_backoff: float  # seconds before the 2nd attempt; doubles per attempt, with jitter
    max_backoff: float
    max_attempts: int  # failed attempts before the row becomes a dead letter
    lease_seconds: float  # a claim's lifetime; a handler must finish within half of it
    batch: int = 50  # rows of this kind one drainer claims at a time
    ordered: bool = False  # serial per channel


# Keyed by the values of effects.models.EffectKind (a test holds the two to the same set).
KINDS: dict[str, KindPolicy] = {
    "dispatch": KindPolicy(4, 5, 600, 12, 600, batch=10),
    "deliver": KindPolicy(16, 2, 300, 15, 300),
    "relay": KindPolicy(16, 2, 300, 15, 300, ordered=True),
    "notice": KindPolicy(16, 2, 300, 15, 300, ordered=True),
    "assess": KindPolicy(2, 10, 900, 8, 900, batch=1),
    # a fact (effects/events.py): one row per subscriber (tickets, goals, tasks)
    "session.turn_ended": KindPolicy(16, 2, 300, 15, 300),
    # conversations/: the one Lark card of a turn (coalesced: the latest state supersedes),
    # and the card of a question, permission request or goal state (create, then patches)
    "conversation.reply": KindPolicy(8, 1, 120, 20, 300),
    "conversation.card": KindPolicy(8, 1, 120, 20, 300),
    # goals/: a session's queued ingress, one row per item, in one line per session
    "goals.queue_dispatch": KindPolicy(8, 2, 120, 15, 300, ordered=True),
    "intake.ack": KindPolicy(8, 5, 600, 15, 300),
    # intake/: a mailbox whose head delivery's plugin or gate raised, tried again from it
    # (one row per mailbox; ~40 hours of tries, the last ones up to an hour apart)
    "intake.retry": KindPolicy(4, 30, 3600, 60, 300, batch=10),
    # goals/: a connector's reply (inbox settle or a steered turn's answer), read back
    "goals.connector_reply": KindPolicy(8, 2, 300, 15, 300),
    # goals/: a managed agent's inbox lane (agent:<id>) and an inbox turn's settle
    "goals.inbox_turn": KindPolicy(8, 2, 300, 15, 300),
    # goals/: a managed turn's supervisor, pending while the envelope is in flight (its
    # wait ends at the attempt's timeout; the session turn's end makes it due at once)
    "goals.turn": KindPolicy(8, 5, 300, 12, 300, batch=10),
    # goals/: an attached agent's "done", checked in its session (up to the check timeout)
    "goals.attached_writeback": KindPolicy(4, 5, 300, 8, 600, batch=1),
    # tickets/: an explicit request or a follow-up told to the team's main session
    "main.notify": KindPolicy(4, 5, 600, 12, 600, batch=10),
    # execution/: one schedule run set going (its task, or its prompt posted to its session)
    "schedule.fire": KindPolicy(4, 5, 300, 12, 300, batch=10),
    # policy/: a saved version's effects on live work (one row per version)
    "policy.apply": KindPolicy(1, 5, 300, 20, 600, batch=1),
}
ORDERED_KINDS = [kind for kind, policy in KINDS.items() if policy.ordered]


def lease_seconds(policy: KindPolicy, override: float | None) -> float:
    """A kind's lease: its own, or the one lease AMUX_OUTBOX_LEASE_SECONDS sets for all."""
    return float(override) if override else policy.lease_seconds


def lease_rule_error(lease_override: float | None, time_limit: float) -> str | None:
    """Why these settings would let a handler outlive its lease, or None when they are safe.

    The drain task's hard time limit bounds every handler, and a drainer starts a handler
    only with half its lease left; so the limit must stay under half the shortest lease, or
    another drainer could claim and run the same effect while the first still runs it."""
    if not time_limit > 0:
        return (f"AMUX_OUTBOX_TASK_TIME_LIMIT must be a positive number of seconds,"
                f" not {time_limit}")
    kind, lease = min(
        ((kind, lease_seconds(policy, lease_override)) for kind, policy in KINDS.items()),
        key=lambda pair: pair[1],
    )
    if time_limit * 2 < lease:
        return None
    if lease_override:
        return (
            f"AMUX_OUTBOX_LEASE_SECONDS={lease_override:g} is too short for"
            f" AMUX_OUTBOX_TASK_TIME_LIMIT={time_limit:g}: a lease must be more than twice the"
            f" drain task's time limit, or a handler can outlive its lease and run twice."
            f" Raise the lease above {2 * time_limit:g} s or lower the time limit below"
            f" {lease_override / 2:g} s."
        )
    return (
        f"AMUX_OUTBOX_TASK_TIME_LIMIT={time_limit:g} is too long: it must stay under half the"
        f" shortest lease ({kind}: {lease:g} s), or a handler can outlive its lease and run"
        f" twice. Lower it below {lease / 2:g} s."
    )
