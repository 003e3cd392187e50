"""What a provider key may hold: it travels in an HTTP header (`Authorization: Bearer <key>`
or `x-api-key`), so anything an HTTP client refuses to send there would only fail later, at
the first model call of a ticket, far from where it was typed."""

from __future__ import annotations


def api_key_problem(key: str) -> str | None:
    """Why `key` cannot be sent as an HTTP header value, or None when it can.

    Visible ASCII only: the HTTP clients of the runtimes and of `amux doctor` refuse
    non-ASCII (a pasted curly quote or a non-breaking space) and control characters (a
    newline would even split the header)."""
    for position, char in enumerate(key, start=1):
        if not ("\x21" <= char <= "\x7e"):
            if char in " \t":
                what = "a space"
            elif ord(char) < 0x20 or ord(char) == 0x7F:
                what = f"a control character (U+{ord(char):04X})"
            else:
                what = f"the non-ASCII character U+{ord(char):04X}"
            return (f"the key holds {what} at position {position}; a key may hold only "
                    "visible ASCII characters (it is sent in an HTTP header)")
    return None


def with_key(secrets: dict | None, key: str, clear: bool) -> dict:
    """The secrets after a form: cleared on request, replaced by a typed key, else kept."""
    secrets = dict(secrets or {})
    if clear:
        secrets.pop("api_key", None)
    elif key:
        secrets["api_key"] = key
    return secrets
