"""`manage.py amux token --user NAME`: a new token, shown once, kept only as a digest."""

import pytest
from django.core.management import CommandError, call_command
from knox.models import AuthToken
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _token(capsys, name):
    call_command("amux", "token", "--user", name)
    return capsys.readouterr().out.strip()


def test_token_prints_a_token_that_authenticates_the_user(capsys, operator):
    key = _token(capsys, "operator")
    (stored,) = AuthToken.objects.filter(user=operator)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/").status_code == 200
    assert stored.expiry is None  # programs keep it until it is replaced


def test_the_token_is_stored_hashed_only(capsys, operator):
    key = _token(capsys, "operator")
    (stored,) = AuthToken.objects.filter(user=operator).values()
    assert key not in " ".join(str(v) for v in stored.values())
    assert len(stored["digest"]) == 128  # SHA-512 of the token
    # what the admin lists of it is the digest and a short lookup prefix, never the token
    assert len(stored["token_key"]) < len(key) // 4


def test_a_new_token_replaces_the_old_one(capsys, operator):
    first = _token(capsys, "operator")
    second = _token(capsys, "operator")
    assert first != second
    assert AuthToken.objects.filter(user=operator).count() == 1
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {first}")
    assert client.get("/api/v1/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {second}")
    assert client.get("/api/v1/").status_code == 200


def test_unknown_user_is_a_clear_error_and_writes_nothing(capsys):
    with pytest.raises(CommandError, match="no user named 'nobody'") as failure:
        call_command("amux", "token", "--user", "nobody")
    assert failure.value.returncode == 1
    assert AuthToken.objects.count() == 0


def test_inactive_user_gets_no_token(django_user_model):
    django_user_model.objects.create_user("gone", password="x-pass-123", is_active=False)
    with pytest.raises(CommandError, match="inactive"):
        call_command("amux", "token", "--user", "gone")
    assert AuthToken.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_clear_tokens_of_an_older_install_are_hashed_and_their_table_dropped(operator):
    """The migration from DRF's clear tokens: the token a program holds still works, and the
    database no longer holds it readable."""
    from importlib import import_module

    from django.apps import apps
    from django.db import connection

    migration = import_module("amux_site.migrations.0001_api_tokens_hashed")
    old_key = "0123456789abcdef0123456789abcdef01234567"
    with connection.schema_editor() as editor:
        editor.execute("CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
                       "user_id integer NOT NULL, created timestamp NOT NULL)")
        editor.execute("INSERT INTO authtoken_token VALUES (%s, %s, %s)",
                       [old_key, operator.pk, "2026-01-01 00:00:00"])
        migration.hash_clear_tokens(apps, editor)
    assert "authtoken_token" not in connection.introspection.table_names()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {old_key}")
    assert client.get("/api/v1/").status_code == 200
    assert not AuthToken.objects.filter(digest=old_key).exists()
