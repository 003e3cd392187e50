"""Accounts from the command line: `amux user add` and `amux token` (shown once each)."""

from __future__ import annotations

import secrets
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from amux_common import roles


class AccountError(Exception):
    """A refusal the command prints as its error (exit 1)."""


def _user(name: str):
    User = get_user_model()
    try:
        return User.objects.get(**{User.USERNAME_FIELD: name})
    except User.DoesNotExist:
        raise AccountError(f"no user named {name!r}") from None


def read_password_file(path: str) -> str:
    """The first line of the file (a trailing newline is not part of the password)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise AccountError(f"cannot read the password file {path!r}: {exc}") from None
    lines = text.splitlines()
    password = lines[0] if lines else ""
    if not password:
        raise AccountError(f"the password file {path!r} is empty")
    return password


def add_user(name: str, role: str, password: str | None) -> str | None:
    """Create ``name`` with ``role``. Returns the generated password when none was given
    (the caller prints it once; only its hash is stored)."""
    User = get_user_model()
    name = (name or "").strip()
    if role not in roles.ROLES:
        raise AccountError(f"role must be one of: {', '.join(roles.ROLES)}")
    try:
        User._meta.get_field(User.USERNAME_FIELD).run_validators(name)
    except ValidationError as exc:
        raise AccountError(f"invalid user name {name!r}: {' '.join(exc.messages)}") from None
    if not name:
        raise AccountError("the user name is empty")
    if User.objects.filter(**{User.USERNAME_FIELD: name}).exists():
        raise AccountError(f"a user named {name!r} exists already")
    generated = None
    if password is None:
        generated = password = secrets.token_urlsafe(16)
    user = User(**{User.USERNAME_FIELD: name})
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise AccountError(f"the password is refused: {' '.join(exc.messages)}") from None
    roles.apply_role(user, role)
    user.set_password(password)
    user.save()
    return generated


def new_token(name: str) -> str:
    """A new API token for ``name``, replacing the ones it had. Only a digest is stored, so
    this return value is the only time the token is seen."""
    from knox.models import AuthToken

    account = _user(name)
    if not account.is_active:
        raise AccountError(f"user {name!r} is inactive; a token would not authenticate")
    with transaction.atomic():
        AuthToken.objects.filter(user=account).delete()
        _, token = AuthToken.objects.create(user=account, expiry=None)
    return token
