"""`manage.py amux token --user NAME`."""

import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _token(capsys, name):
    call_command("amux", "token", "--user", name)
    return capsys.readouterr().out.strip()


def test_token_prints_a_token_that_authenticates_the_user(capsys, operator):
    key = _token(capsys, "operator")
    assert Token.objects.get(user=operator).key == key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/").status_code == 200


def test_a_new_token_replaces_the_old_one(capsys, operator):
    first = _token(capsys, "operator")
    second = _token(capsys, "operator")
    assert first != second
    assert list(Token.objects.filter(user=operator).values_list("key", flat=True)) == [second]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {first}")
    assert client.get("/api/v1/").status_code == 401


def test_unknown_user_is_a_clear_error_and_writes_nothing(capsys):
    with pytest.raises(CommandError, match="no user named 'nobody'") as failure:
        call_command("amux", "token", "--user", "nobody")
    assert failure.value.returncode == 1
    assert Token.objects.count() == 0


def test_inactive_user_gets_no_token(django_user_model):
    django_user_model.objects.create_user("gone", password="x-pass-123", is_active=False)
    with pytest.raises(CommandError, match="inactive"):
        call_command("amux", "token", "--user", "gone")
    assert Token.objects.count() == 0
