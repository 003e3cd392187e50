"""The skeleton answers: health, slash-optional paths, the API error shape, immutable mandates."""

import pytest
from django.db import IntegrityError, InternalError, connection, transaction

from tests import factories as f
from tickets.models import ImmutableError, Mandate

pytestmark = pytest.mark.django_db


def test_healthz_reports_database_and_redis(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"]
    assert client.get("/healthz/").status_code == 200


def test_api_requires_a_token_and_answers_in_the_error_shape(client):
    response = client.get("/api/v1/")
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "not_authenticated" and error["message"]


def test_api_root_lists_resources(api):
    response = api.get("/api/v1")
    assert response.status_code == 200
    assert "tickets" in response.json()["resources"]


def test_mandate_cannot_be_changed_through_the_model():
    mandate = f.MandateFactory(scope="comment")
    mandate.scope = "pr_new"
    with pytest.raises(ImmutableError):
        mandate.save()
    with pytest.raises(ImmutableError):
        mandate.delete()


def test_mandate_cannot_be_changed_in_bulk():
    mandate = f.MandateFactory(scope="comment")
    with pytest.raises(ImmutableError):
        Mandate.objects.filter(pk=mandate.pk).update(scope="pr_new")
    with pytest.raises(ImmutableError):
        Mandate.objects.filter(pk=mandate.pk).delete()


def test_mandate_cannot_be_changed_in_the_database():
    """Even SQL that bypasses the model is refused by the database."""
    mandate = f.MandateFactory(scope="comment")
    table = Mandate._meta.db_table
    refused = (IntegrityError, InternalError)
    with pytest.raises(refused), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET scope = 'pr_new' WHERE id = %s", [mandate.pk])
    if connection.vendor == "postgresql":
        with pytest.raises(refused), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {table} WHERE id = %s", [mandate.pk])
    assert Mandate.objects.get(pk=mandate.pk).scope == "comment"
