"""The kept database's work (tests/support/kept_work.py) goes through amux's REST API as
an operator: this is its client, and what the parts of the work share."""

from __future__ import annotations

from typing import Any

API = "/api/v1"
PROVIDER_KEY = "sk-kept-provider-key"
OPERATOR_PASSWORD = "kept-operator-pass-1"
REPO = "Codertocat/Hello-World"
WEBHOOK_SECRET = "kept-webhook-secret"


class Work:
    """The operator's and the viewer's accounts (made as `amux user add` makes them), the
    operator's API client (its token from `amux token`), and the ids the facts are read
    from at the end."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from rest_framework.test import APIClient

        from amux_site import accounts

        # `amux user add` and `amux token`, as an operator sets an installation up
        accounts.add_user("operator", "operator", OPERATOR_PASSWORD)
        accounts.add_user("viewer", "viewer", "kept-viewer-pass-1")
        users = get_user_model().objects
        self.operator, self.viewer = users.get(username="operator"), users.get(username="viewer")
        self.api = APIClient(SERVER_NAME="127.0.0.1")
        self.api.credentials(HTTP_AUTHORIZATION=f"Token {accounts.new_token('operator')}")
        self.facts: dict[str, Any] = {}

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """The API's answer; anything but a success stops the work, saying why."""
        response = getattr(self.api, method)(API + path, body, format="json")
        if response.status_code not in (200, 201, 202, 204):
            raise RuntimeError(f"{method.upper()} {path}: {response.status_code} "
                               f"{response.content[:500]!r}")
        return response.json() if response.content else None


def drain() -> None:
    """Stored deliveries processed and due effects run, as the workers would."""
    from effects import outbox
    from intake import process

    process.drain()
    outbox.drain(seconds=5)
