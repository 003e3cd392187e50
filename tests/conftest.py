"""Shared fixtures. Real PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set, else SQLite
and the embedded Redis; never mocks of our own database, Redis or Celery."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import zlib

import pytest

from tests.support import parallel

pytest_xdist_setupnodes = parallel.pytest_xdist_setupnodes

# Each test process leases runtime users from a pool of its own (every test database hands
# out slot 1 again, and releasing a slot kills what runs as its uid), per checkout (two
# suites running at once on one machine must not end each other's runtimes) and stable
# (a rerun reuses its users): worker processes a test starts inherit it.
_checkout = zlib.crc32(os.path.abspath(__file__).encode()) % 10000
os.environ["AMUX_RUNTIME_POOL"] = \
    f"amux-t{_checkout}-{os.environ.get('PYTEST_XDIST_WORKER') or 'main'}"
# Each test process counts metrics (amux_common/metrics.py) into a directory of its own,
# which the servers and workers its tests start inherit: a scrape sees this process's work,
# not that of a parallel test process. Set before Django loads the apps, whose modules
# import prometheus_client (it reads the variable then; the settings' default is overruled).
os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="amux-metrics-")
atexit.register(shutil.rmtree, os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
pytest_collection_modifyitems = parallel.pytest_collection_modifyitems
pytest_runtest_makereport = parallel.pytest_runtest_makereport
pytest_deselected = parallel.pytest_deselected


@pytest.fixture(autouse=True)
def fast_idle(settings, request):
    """Session hosts and goals on a test's clock, through the settings production reads: a
    host sleeps a second (``@pytest.mark.host_idle(seconds)`` for another floor; 60 s in
    production) after its queue is empty and looks at its clock every 0.2 s while idle, a
    lease expires in seconds, and goals look at a running turn every half second."""
    marker = request.node.get_closest_marker("host_idle")
    settings.AMUX_SESSION_MIN_IDLE_SECONDS = marker.args[0] if marker else 1
    settings.AMUX_SESSION_CONTROL_POLL_SECONDS = 0.2
    settings.AMUX_SESSION_LEASE_SECONDS = 6


@pytest.fixture
def operator(django_user_model):
    return django_user_model.objects.create_user(
        "operator", password="operator-pass-123", is_staff=True
    )


@pytest.fixture
def viewer(django_user_model):
    return django_user_model.objects.create_user("viewer", password="viewer-pass-123")


@pytest.fixture
def api(operator):
    """An API client authenticated with a real token of an operator."""
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    client = APIClient()
    _, token = AuthToken.objects.create(user=operator)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.fixture
def tmp_path(request, tmp_path_factory):
    """Under linux-dac (amux's choice as root) the runtimes run as an unprivileged user, who
    must pass through the directories a test gives them. pytest's own temporary root is
    0700, and every pytest run on the machine makes it 0700 again (even mid-test), so such a
    test gets a directory under a root of its own, searchable (never listable) by others."""
    import re

    from tests.support.isolation import backend

    name = re.sub(r"[\W]", "_", request.node.name)[:30]
    if backend() not in ("linux-dac", "bwrap"):  # the backends with a runtime user
        yield tmp_path_factory.mktemp(name, numbered=True)
        return
    import shutil
    import tempfile
    from pathlib import Path

    root = Path(tempfile.gettempdir()) / "amux-linux-dac-tests"
    root.mkdir(mode=0o711, exist_ok=True)
    root.chmod(0o711)
    path = Path(tempfile.mkdtemp(prefix=name + "-", dir=root))
    path.chmod(0o711)
    yield path
    if not os.environ.get("AMUX_KEEP_TEST_DIRS"):
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def _own_runtime_pool():
    """The test process's pool, and its users deleted when the process ends: every checkout
    and xdist worker has a pool of its own, and left behind they use up the machine's
    system group ids (about 900), after which no runtime starts."""
    from django.conf import settings

    from runtimes.isolation import remove_pool

    settings.AMUX_RUNTIME_POOL = os.environ["AMUX_RUNTIME_POOL"]
    yield
    remove_pool(os.environ["AMUX_RUNTIME_POOL"])


@pytest.fixture(autouse=True, scope="session")
def _runtime_user_reaches_data_and_runtimes():
    """The same for the test data directory (AMUX_DATA_DIR) and the installed runtimes."""
    from django.conf import settings

    from tests.support.isolation import reachable

    reachable(settings.DATA_DIR)
    reachable(settings.AMUX_RUNTIMES_DIR.resolve())


@pytest.fixture(autouse=True, scope="session")
def _no_keys_from_an_earlier_run():
    """A new test database hands out the same ids again (session 1, 2, …), so what an
    earlier run left in Redis under those ids — a session's control stream, a host task in
    a host's own queue — would reach this run's sessions of the same number. Only amux's
    session keys and its Celery queues go; nothing else in the database is touched."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    stale = [*client.scan_iter(match="amux:session:*"), *client.scan_iter(match="runtime.*")]
    client.delete("runtime", "default", "unacked", "unacked_index", "unacked_mutex", *stale)
