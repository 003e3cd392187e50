"""Settings of the Celery worker that test_outbox_worker.py starts: amux's own, pointed at
the test database (AMUX_TEST_DB_NAME)."""

import os

from amux_site.settings import *  # noqa: F403
from amux_site.settings import DATABASES

DATABASES["default"]["NAME"] = os.environ["AMUX_TEST_DB_NAME"]
