"""Pure gate decisions per second on one core (goal: at least 200,000/s).

Run: python -m bench.gate  — prints decisions/s and the ratio to the goal, measured in one run.
"""

from __future__ import annotations

import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from policy.document import SourceInfo, compile_policy, validate  # noqa: E402
from policy.gate import SCOPES, Facts, gate  # noqa: E402

GOAL = 200_000


def measure(n: int = 1_000_000) -> float:
    """Decisions per second on one core."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    sources = {
        "gh": SourceInfo("gh", "github", receives_all=frozenset(SCOPES["github"])),
        "lk": SourceInfo("lk", "lark", receives_all=frozenset({"direct", "group_configured"})),
    }
    people = [f"user{i}" for i in range(200)]
    doc = validate({"acceptance": "auto", "sources": {
        "gh": {"allowed": people[:100], "bots": ["dependabot[bot]"], "rows": {
            "comment": {"addressed": True, "unaddressed_allowed": True},
            "issue_new": {"addressed": True, "unaddressed_anyone": True},
            "ci_default_branch": {"unaddressed_anyone": True}}},
        "lk": {"allowed": people[50:150], "rows": {
            "direct": {"addressed": True, "unaddressed_allowed": True},
            "group_configured": {"addressed": True}}}}}, sources)
    policy = compile_policy(doc, sources)
    rnd = random.Random(7)
    facts = []
    for _ in range(10_000):
        slug = rnd.choice(["gh", "lk"])
        kind = sources[slug].kind
        bot = rnd.random() < 0.1
        facts.append(Facts(slug, kind, rnd.choice(SCOPES[kind]),
                           "dependabot[bot]" if bot else rnd.choice(people), not bot, bot,
                           rnd.random() < 0.5, rnd.random() < 0.5, rnd.random() < 0.01))
    reps = n // len(facts)
    start = time.perf_counter()
    for _ in range(reps):
        for f in facts:
            gate(f, policy)
    elapsed = time.perf_counter() - start
    rate = reps * len(facts) / elapsed
    print(f"gate: {reps * len(facts):,} decisions in {elapsed:.3f}s = {rate:,.0f} decisions/s "
          f"on one core ({rate / GOAL:.2f}x the {GOAL:,}/s goal)")
    return rate


def figures() -> dict[str, dict]:
    from bench._setup import figure

    rate = measure()
    return {"gate_per_s": figure(rate, "decisions/s", f">= {GOAL:,}", rate >= GOAL)}


if __name__ == "__main__":
    measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
