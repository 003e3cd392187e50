"""Secrets encrypted at rest (Fernet, key derived from the site's SECRET_KEY).

A secret is write-only everywhere else: the API and panel show only which keys are set.
"""

from __future__ import annotations

import base64
import hashlib
import json

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import models


def _fernet() -> Fernet:
    digest = hashlib.sha256(b"amux-secrets:" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("secret cannot be decrypted with this SECRET_KEY") from exc


class EncryptedJSONField(models.TextField):
    """A dict of secrets stored as one Fernet token; never rendered in forms or admin."""

    def from_db_value(self, value, expression, connection):
        if value in (None, ""):
            return {}
        return json.loads(decrypt(value))

    def to_python(self, value):
        if isinstance(value, dict):
            return value
        if value in (None, ""):
            return {}
        return json.loads(decrypt(value))

    def get_prep_value(self, value):
        if value is None:
            value = {}
        return encrypt(json.dumps(value, sort_keys=True))

    def value_to_string(self, obj):
        return ""


def set_keys(secrets: dict) -> dict[str, bool]:
    """What the API shows of a secrets dict: which keys are set, never their values."""
    return {key: bool(value) for key, value in (secrets or {}).items()}
