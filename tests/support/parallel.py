"""The suite on several pytest-xdist workers at once, each an installation of its own.

Settings are read once, when pytest-django sets Django up, before any conftest runs; so
each worker's environment is given to it when it starts (an execnet ``env:`` on its spec):
its own data directory (its SQLite file, embedded Redis, session directories and logs)
and, when REDIS_URL names a server, its own database number there. PostgreSQL test
databases get the worker's suffix from pytest-django itself (``test_test_gw0``).

Tests that start whole stacks of processes (`amux run`, several Celery workers, crashes
and restarts) share the xdist group ``processes``: they never overlap one another, and
the group is sent out first so the rest of the suite fills the other workers around it.
Tests whose figures or deadlines only hold on an otherwise quiet machine (the chaos run,
four drainers racing over 10,000 effects) are marked ``serial``: `make test` runs them
after the parallel run, alone.

A test that runs over ``SLOW_SECONDS`` without the ``slow`` mark fails: the suite's wall
time is bound by its slowest tests, so one must say so to be one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SLOW_SECONDS = 90.0
# Redis has 16 databases by default; the run's own (REDIS_URL's) stays the controller's.
REDIS_DATABASES = 16


def worker_env(index: int, environ: dict[str, str] | os._Environ) -> dict[str, str]:
    """What worker ``gw<index>`` runs with: a data directory under the run's own, and the
    next Redis database after REDIS_URL's."""
    base = Path(environ.get("AMUX_DATA_DIR") or Path.cwd() / "var" / "test")
    env = {"AMUX_DATA_DIR": str(base / f"gw{index}")}
    url = environ.get("REDIS_URL")
    if url:
        prefix, _, tail = url.rpartition("/")
        db = int(tail) if tail.isdigit() else 0
        number = db + 1 + index
        if number >= REDIS_DATABASES:
            raise pytest.UsageError(
                f"REDIS_URL {url}: worker gw{index} needs Redis database {number}, past the "
                f"server's {REDIS_DATABASES}; use fewer workers (-n) or a lower database")
        env["REDIS_URL"] = f"{prefix}/{number}" if tail.isdigit() else f"{url}/{number}"
    return env


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config, specs):
    for index, spec in enumerate(specs):
        spec.env.update(worker_env(index, os.environ))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Grouped tests first (a group is one unit of work: started last, it would be the
    run's tail); otherwise the order pytest-django chose."""
    _refuse_ungrouped(config, items)
    items.sort(key=lambda item: item.get_closest_marker("xdist_group") is None)


def _refuse_ungrouped(config, items):
    """pytest-xdist groups by a suffix it writes into each grouped test's node id; a pytest
    that ignores the write would spread `amux run`s over every worker at once, flaky on a
    loaded machine rather than failing plainly. So a worker that sees it stops the run."""
    if not getattr(config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(
            f"--dist loadgroup did not group {lost[0]} (and {len(lost) - 1} more): this "
            "pytest and pytest-xdist do not work together; reinstall with `make venv`")


def pytest_deselected(items):
    """The parallel run names the serial tests it left out (AMUX_TEST_SERIAL_LIST, set by
    `make test`), so the serial run collects only their files, not the whole suite again."""
    target = os.environ.get("AMUX_TEST_SERIAL_LIST")
    serial = [item.nodeid for item in items if item.get_closest_marker("serial")]
    if not target or not serial:
        return
    path = Path(target)
    scratch = path.with_name(f"{path.name}.{os.getpid()}")
    scratch.write_text("".join(f"{nodeid}\n" for nodeid in serial))
    os.replace(scratch, path)  # every worker collects the same suite: the last one wins


_TOTAL = pytest.StashKey[float]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    total = item.stash.get(_TOTAL, 0.0) + report.duration
    item.stash[_TOTAL] = total
    if (report.when == "teardown" and total > SLOW_SECONDS
            and item.get_closest_marker("slow") is None):
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} took {total:.0f} s (over {SLOW_SECONDS:.0f} s) "
                           f"without @pytest.mark.slow: make it faster or mark it slow")
    return report
