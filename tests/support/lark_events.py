"""Lark schema 2.0 events, encrypted and signed by the documented algorithm."""

from __future__ import annotations

import json
import time
import uuid

from intake.sources.lark import encrypt, signature


def message_event(*, token: str, chat_id="oc_group", chat_type="group", text="hello",
                  sender="ou_alice", sender_type="user", mentions=(), message_id=None,
                  root_id="", thread_id="", event_id=None, app_id="cli_test") -> dict:
    message_id = message_id or f"om_{uuid.uuid4().hex[:16]}"
    return {
        "schema": "2.0",
        "header": {"event_id": event_id or uuid.uuid4().hex, "event_type": "im.message.receive_v1",
                   "create_time": str(int(time.time() * 1000)), "token": token,
                   "app_id": app_id, "tenant_key": "tk"},
        "event": {
            "sender": {"sender_id": {"open_id": sender, "union_id": "on_x", "user_id": None},
                       "sender_type": sender_type, "tenant_key": "tk"},
            "message": {"message_id": message_id, "root_id": root_id, "parent_id": root_id,
                        "thread_id": thread_id, "chat_id": chat_id, "chat_type": chat_type,
                        "message_type": "text", "create_time": str(int(time.time() * 1000)),
                        "content": json.dumps({"text": text}),
                        "mentions": [
                            {"key": f"@_user_{i + 1}",
                             "id": {"open_id": oid, "union_id": "on_y", "user_id": None},
                             "name": name, "tenant_key": "tk"}
                            for i, (oid, name) in enumerate(mentions)
                        ]},
        },
    }


def sealed(payload: dict, *, encrypt_key: str = "", timestamp: str | None = None,
           nonce: str | None = None, sign_key: str | None = None):
    """(body, Django test-client header kwargs): encrypted and signed when a key is given."""
    plain = json.dumps(payload)
    if not encrypt_key:
        return plain.encode(), {}
    body = json.dumps({"encrypt": encrypt(encrypt_key, plain)}).encode()
    ts = timestamp or str(int(time.time()))
    nonce = nonce or uuid.uuid4().hex
    return body, {
        "HTTP_X_LARK_REQUEST_TIMESTAMP": ts,
        "HTTP_X_LARK_REQUEST_NONCE": nonce,
        "HTTP_X_LARK_SIGNATURE": signature(ts, nonce, sign_key or encrypt_key, body),
    }


def card_action_event(*, token: str, value: dict, operator="ou_alice", form_value=None,
                      name="", tag="button", chat_id="oc_group", message_id="om_card",
                      event_id=None, app_id="cli_test") -> dict:
    """A `card.action.trigger` callback (schema 2.0) as Lark sends it for a click on a
    card button (`form_value` when the button submits a form)."""
    action = {"value": value, "tag": tag}
    if name:
        action["name"] = name
    if form_value is not None:
        action["form_value"] = form_value
    return {
        "schema": "2.0",
        "header": {"event_id": event_id or uuid.uuid4().hex, "event_type": "card.action.trigger",
                   "create_time": str(int(time.time() * 1000)), "token": token,
                   "app_id": app_id, "tenant_key": "tk"},
        "event": {
            "operator": {"tenant_key": "tk", "user_id": None, "open_id": operator,
                         "union_id": "on_x"},
            "token": f"c-{uuid.uuid4().hex[:12]}",
            "action": action,
            "host": "im_message",
            "context": {"open_message_id": message_id, "open_chat_id": chat_id},
        },
    }


def bot_verified(source, open_id: str = "ou_bot") -> None:
    """Record, through intake's own writer, that Lark's bot info named `open_id` as this
    source's bot (for tests whose source has no reachable bot info to read it from)."""
    from datetime import UTC, datetime

    from intake import source_actions

    source_actions.source_profile_checked(source_id=source.pk, profile={
        "state": "verified", "code": 0, "open_id": open_id,
        "app_id": source.config.get("app_id"), "verified_at": datetime.now(UTC).isoformat()})
    source.refresh_from_db()
