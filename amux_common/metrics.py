"""Counters of events, incremented where each event happens, for GET /metrics.

What only an event can tell — a delivery received or refused, a trigger decided, a turn
ended, a model request answered, a cap that held something back — is counted here, at
the moment it happens and once (after its transaction commits), so a count never moves
back when old rows are pruned. State (the outbox, sessions, queues) is not counted here:
amux_site/metrics.py reads it from the database and Redis at scrape time.

Every amux process (the web server, each Celery worker and its children) writes its
counts to files of its own in PROMETHEUS_MULTIPROC_DIR (settings: ``run/metrics`` under the
data directory, emptied by ``amux run`` at start), which a scrape adds up. Labels take
only values amux chose (source slugs, runtimes, providers and models an operator
configured, fixed reasons), never text a client sent, so a forged request cannot make a
new series.
"""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import Counter, Histogram

# a turn takes seconds to hours; an input waits milliseconds to minutes for its turn
TURN_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400)
WAIT_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600)

_received = Counter(
    "amux_deliveries_received", "Deliveries verified and stored (webhooks, long connections, "
    "polls, web chat), by source", ["source"])
_refused = Counter(
    "amux_deliveries_refused", "Deliveries not stored, by source (empty: no such enabled "
    "source) and reason (bad_signature, bad_json, unknown_source, too_large, duplicate …)",
    ["source", "reason"])
_triggers = Counter(
    "amux_triggers", "Triggers recorded, by source and the policy's decision (explicit, "
    "inferred, ignore; empty: not decided)", ["source", "decision"])
_turns = Counter(
    "amux_turns", "Turns ended, by runtime and how (completed, failed, cancelled)",
    ["runtime", "state"])
_turn_seconds = Histogram(
    "amux_turn_duration_seconds", "Time from a turn's start to its end, by runtime",
    ["runtime"], buckets=TURN_BUCKETS)
_first_action = Histogram(
    "amux_first_action_seconds", "Time from an input's arrival in a session (a ticket's "
    "brief, a message, a reply) to its turn starting in the runtime (behind earlier turns, "
    "a free slot, the wake), by runtime",
    ["runtime"], buckets=WAIT_BUCKETS)
_model_requests = Counter(
    "amux_model_requests", "Model requests through the model gateway, by provider, model "
    "and outcome (ok, capped, upstream_error)", ["provider", "model", "outcome"])
_model_tokens = Counter(
    "amux_model_tokens", "Tokens the provider reported for answers passed through the model "
    "gateway, by provider, model and kind (input, output)", ["provider", "model", "kind"])
_guard_blocks = Counter(
    "amux_guard_blocks", "Work a cap held back, by cap (ticket_tokens, daily_tokens, "
    "hourly_messages, goal_tokens) and what (model_request, input, run, message)",
    ["cap", "what"])


def directory() -> Path:
    """Where this process's counters go (and every process's are read from): the one
    prometheus_client took from the environment."""
    return Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])


def delivery_received(source: str) -> None:
    _received.labels(source).inc()


def delivery_refused(source: str, reason: str) -> None:
    _refused.labels(source, reason).inc()


def trigger_decided(source: str, decision: str) -> None:
    _triggers.labels(source, decision).inc()


def turn_started(runtime: str, waited_s: float) -> None:
    _first_action.labels(runtime).observe(max(waited_s, 0.0))


def turn_ended(runtime: str, state: str, duration_s: float | None) -> None:
    _turns.labels(runtime, state).inc()
    if duration_s is not None:
        _turn_seconds.labels(runtime).observe(max(duration_s, 0.0))


def model_request(provider: str, model: str, outcome: str, input_tokens: int = 0,
                  output_tokens: int = 0) -> None:
    _model_requests.labels(provider, model, outcome).inc()
    if input_tokens:
        _model_tokens.labels(provider, model, "input").inc(input_tokens)
    if output_tokens:
        _model_tokens.labels(provider, model, "output").inc(output_tokens)


def guard_blocked(cap: str, what: str) -> None:
    _guard_blocks.labels(cap, what).inc()
