"""Stand-ins for benchmarks, for the tests of the `make bench` runner (bench/run.py): each
is called in a child process as `tests.support.fake_benches:<name>`."""

import os


def good() -> dict:
    return {"fake_rate": {"value": 12.5, "unit": "x", "goal": ">= 10", "met": True},
            "fake_extra": {"value": 3, "unit": "ms", "goal": "-", "met": None, "note": "n"}}


def raises() -> dict:
    raise RuntimeError("the fake bench broke")


def partial() -> dict:
    return {"fake_one": {"value": 1.0, "unit": "", "goal": "", "met": None},
            "fake_bad": {"value": "fast", "unit": "", "goal": "", "met": None}}


def crashes() -> dict:
    os._exit(3)  # dies without a word, as a segfaulting or OOM-killed bench would


def sleeps() -> dict:
    import time

    time.sleep(60)
    return {}
