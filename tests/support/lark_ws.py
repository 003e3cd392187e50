"""A local stand-in for Lark's long-connection endpoint.

lark-oapi's WebSocket client first asks `POST <domain>/callback/ws/endpoint` for a URL
(the recording server answers with this server's, see `State.lark_ws_url`), connects, and
then receives events as protobuf `Frame`s (lark-oapi's own `pbbp2`): a data frame with
headers type=event, message_id, trace_id, sum, seq and the event JSON as payload. The
client answers each data frame with the same frame carrying `{"code": 200}` (or 500).
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from urllib.parse import parse_qs, urlsplit

from lark_oapi.ws.pb.pbbp2_pb2 import Frame
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import serve

SERVICE_ID = 7


class LarkLongConnection:
    def __init__(self):
        self.cond = threading.Condition()
        self.open: list = []  # connections currently open
        self.opened = 0  # connections ever accepted
        self.acks: dict[str, int] = {}  # frame message_id -> the client's answer code
        self.replies: dict[str, dict] = {}  # frame message_id -> the answer's data (a card
        # callback's toast and card), when it has any
        self.server = serve(self._serve, "127.0.0.1", 0)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The endpoint URL; the recording server fills in the connecting app's id."""
        port = self.server.socket.getsockname()[1]
        return f"ws://127.0.0.1:{port}/ws?device_id=dev-1&service_id={SERVICE_ID}&app={{app_id}}"

    def apps(self) -> list[str]:
        """The app id of each open connection."""
        return sorted(parse_qs(urlsplit(c.request.path).query)["app"][0] for c in self.open)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.thread.join(10)

    def _serve(self, conn) -> None:
        with self.cond:
            self.open.append(conn)
            self.opened += 1
            self.cond.notify_all()
        try:
            for message in conn:
                frame = Frame()
                frame.ParseFromString(message)
                if frame.method != 1:  # a control frame (ping)
                    continue
                headers = {h.key: h.value for h in frame.headers}
                answer = json.loads(frame.payload)
                with self.cond:
                    if answer.get("data"):
                        self.replies[headers["message_id"]] = json.loads(
                            base64.b64decode(answer["data"]))
                    self.acks[headers["message_id"]] = answer["code"]
                    self.cond.notify_all()
        except ConnectionClosed:
            pass
        finally:
            with self.cond:
                self.open.remove(conn)
                self.cond.notify_all()

    def wait(self, predicate, timeout: float = 60.0):
        """Block until predicate(self) is true (checked on every connection change/ack)."""
        with self.cond:
            if not self.cond.wait_for(lambda: predicate(self), timeout):
                raise TimeoutError("the long connection did not reach the expected state")

    def push(self, event: dict, app: str) -> str:
        """Send one event to the client of `app` as Lark does; answers the frame's id."""
        message_id = uuid.uuid4().hex
        frame = Frame(SeqID=1, LogID=1, service=SERVICE_ID, method=1,
                      payload=json.dumps(event).encode())
        for key, value in (("type", "event"), ("message_id", message_id),
                           ("trace_id", uuid.uuid4().hex), ("sum", "1"), ("seq", "0")):
            header = frame.headers.add()
            header.key, header.value = key, value
        with self.cond:
            conn = next(c for c in self.open
                        if parse_qs(urlsplit(c.request.path).query)["app"][0] == app)
        conn.send(frame.SerializeToString())
        return message_id
