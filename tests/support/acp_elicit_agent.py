"""A small scripted ACP v1 agent (stdio JSON-RPC, one message per line) that asks its
client through ``elicitation/create`` during every prompt.

The pinned codex-acp never sends ``elicitation/create`` on its own, so the ACP adapter's
real protocol handling is tested against this process. Environment:
``ELICIT_SCHEMA`` (the requested schema, JSON), ``ELICIT_MESSAGE``, ``ELICIT_LOG`` (every
frame received is appended there, one JSON per line), ``ELICIT_SECRET_KEY`` and
``ELICIT_SECRET_SHA256``: the agent checks that field's value against the digest and says
only whether it matched (a secret is never repeated).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading

SCHEMA = json.loads(os.environ.get("ELICIT_SCHEMA") or '{"type": "object", "properties": {}}')
LOG = os.environ.get("ELICIT_LOG")
lock = threading.Lock()
waiting: dict[str, dict] = {}  # our request id → its answer, once it came
cancelled: set[str] = set()
answered = threading.Condition()


def send(msg: dict) -> None:
    with lock:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
        sys.stdout.flush()


def log(msg: dict) -> None:
    if LOG:
        with open(LOG, "a") as fh:
            fh.write(json.dumps(msg) + "\n")


def summary(result: dict) -> str:
    action = result.get("action")
    if action != "accept":
        return f"form {action}"
    content = dict(result.get("content") or {})
    key = os.environ.get("ELICIT_SECRET_KEY")
    if key and key in content:
        digest = hashlib.sha256(str(content.pop(key)).encode()).hexdigest()
        content[key] = "matched" if digest == os.environ.get("ELICIT_SECRET_SHA256") \
            else "did not match"
    return "form accept " + json.dumps(content, sort_keys=True)


def prompt(rid, session_id: str, seq: int) -> None:
    eid = f"elicit-{seq}"
    send({"id": eid, "method": "elicitation/create", "params": {
        "sessionId": session_id, "mode": "form",
        "message": os.environ.get("ELICIT_MESSAGE", "A few details, please"),
        "requestedSchema": SCHEMA}})
    with answered:
        answered.wait_for(lambda: eid in waiting or session_id in cancelled)
        result = waiting.pop(eid, None)
    if result is None:  # cancelled before the client answered: it still answers us
        with answered:
            answered.wait_for(lambda: eid in waiting, timeout=10)
            result = waiting.pop(eid, {"action": "none"})
    text = summary(result.get("result") or {"action": "error"})
    send({"method": "session/update", "params": {"sessionId": session_id, "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
    stop = "cancelled" if session_id in cancelled else "end_turn"
    cancelled.discard(session_id)
    send({"id": rid, "result": {"stopReason": stop}})


def main() -> None:
    seq = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        log(msg)
        method = msg.get("method")
        if method is None:  # an answer to one of our requests
            with answered:
                waiting[str(msg.get("id"))] = msg
                answered.notify_all()
        elif method == "initialize":
            send({"id": msg["id"], "result": {"protocolVersion": 1, "agentCapabilities": {
                "loadSession": False}, "authMethods": [],
                "agentInfo": {"name": "elicit-agent", "version": "0.1"}}})
        elif method == "session/new":
            send({"id": msg["id"], "result": {"sessionId": "elicit-session"}})
        elif method == "session/prompt":
            seq += 1
            threading.Thread(target=prompt, args=(msg["id"], msg["params"]["sessionId"], seq),
                             daemon=True).start()
        elif method == "session/cancel":
            with answered:
                cancelled.add(msg["params"]["sessionId"])
                answered.notify_all()
        elif "id" in msg:
            send({"id": msg["id"], "error": {"code": -32601, "message": "not here"}})


if __name__ == "__main__":
    main()
