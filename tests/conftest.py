"""Shared fixtures. Real PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set, else SQLite
and the embedded Redis; never mocks of our own database, Redis or Celery."""

from __future__ import annotations

import pytest


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


@pytest.fixture(autouse=True)
def _runtime_user_passes_through_tmp_path(request):
    """Under linux-dac (amux's choice as root) the runtimes run as an unprivileged user, who
    must pass through pytest's 0700 temporary directories to the data and work directories
    a test puts there (search permission only)."""
    if "tmp_path" in request.fixturenames:
        from tests.support.isolation import reachable

        reachable(request.getfixturevalue("tmp_path"))


@pytest.fixture(autouse=True, scope="session")
def _runtime_user_reaches_data_and_runtimes():
    """The same for the test data directory (AMUX_DATA_DIR) and the installed runtimes."""
    from django.conf import settings

    from tests.support.isolation import reachable

    reachable(settings.DATA_DIR)
    reachable(settings.AMUX_RUNTIMES_DIR.resolve())
