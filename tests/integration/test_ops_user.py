"""`manage.py amux user add NAME --role viewer|operator [--password-file F]`."""

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command

from amux_common import roles

pytestmark = pytest.mark.django_db


def test_a_viewer_with_a_generated_password_shown_once(capsys):
    call_command("amux", "user", "add", "ada", "--role", "viewer")
    out = capsys.readouterr().out
    password = out.split("password: ", 1)[1].split()[0]
    user = authenticate(username="ada", password=password)
    assert user is not None and roles.role_of(user) == "viewer"
    assert password not in get_user_model().objects.get(username="ada").password  # hashed


def test_an_operator_with_a_password_file(tmp_path, capsys):
    secret = tmp_path / "pw"
    secret.write_text("correct-horse-battery\n")
    call_command("amux", "user", "add", "bob", "--role", "operator",
                 "--password-file", str(secret))
    out = capsys.readouterr().out
    assert "correct-horse-battery" not in out
    user = authenticate(username="bob", password="correct-horse-battery")
    assert roles.role_of(user) == "operator"


@pytest.mark.parametrize("argv, message", [
    (["ada", "--role", "viewer"], "exists already"),
    (["new", "--role", "viewer", "--password-file", "/nonexistent/pw"], "cannot read"),
    (["bad name!", "--role", "viewer"], "invalid user name"),
])
def test_refusals_are_clear_and_write_nothing(argv, message, django_user_model):
    django_user_model.objects.create_user("ada", password="x-pass-1234")
    with pytest.raises(CommandError, match=message) as failure:
        call_command("amux", "user", "add", *argv)
    assert failure.value.returncode == 1
    assert django_user_model.objects.count() == 1


def test_a_short_password_is_refused(tmp_path, django_user_model):
    secret = tmp_path / "pw"
    secret.write_text("short\n")
    with pytest.raises(CommandError, match="password is refused"):
        call_command("amux", "user", "add", "eve", "--role", "viewer",
                     "--password-file", str(secret))
    assert not django_user_model.objects.filter(username="eve").exists()


def test_an_unknown_role_is_refused():
    with pytest.raises(CommandError):
        call_command("amux", "user", "add", "x", "--role", "admin")


def test_the_admin_account_is_an_operator(django_user_model):
    admin = django_user_model.objects.create_superuser("admin", "", "admin-pass-123")
    assert roles.role_of(admin) == "operator"
