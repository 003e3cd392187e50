"""No credential in any log line: whatever logs a request's headers or URL (the web server
at debug level prints every handshake header), the value of an `Authorization` header, an
`amux.token.` subprotocol or a `token=` query parameter is replaced before it is written."""

from __future__ import annotations

import logging
import re

REDACTED = "[redacted]"
_PATTERNS = [
    # "authorization: Token abc", "'Authorization': 'Bearer abc'", b"authorization", b"..."
    re.compile(r"(?i)(authorization['\"]?\s*[:,=]\s*b?['\"]?\s*(?:token|bearer|basic)?\s*)"
               r"[^\s'\",)]+"),
    re.compile(r"(amux\.token\.)[^\s'\",)]+"),
    re.compile(r"(?i)([?&](?:access_)?token=)[^&\s'\"]+"),
]
# the loggers whose own handlers write the web server's lines (uvicorn configures them)
SERVER_LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "websockets")


def redact(text: str) -> str:
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


class RedactCredentials(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logging module's to report
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def install() -> None:
    """Put the filter on every handler that writes the server's and the app's lines (a
    handler's filter sees the records its logger's children propagate to it as well)."""
    seen = set()
    for name in SERVER_LOGGERS:
        for handler in logging.getLogger(name).handlers:
            if id(handler) in seen or any(isinstance(f, RedactCredentials)
                                          for f in handler.filters):
                continue
            seen.add(id(handler))
            handler.addFilter(RedactCredentials())
