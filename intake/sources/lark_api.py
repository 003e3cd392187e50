"""What a refused Lark API call raises (shared by the Lark plugin's modules)."""

from __future__ import annotations


class LarkApiError(RuntimeError):
    """A Lark API call answered with a non-zero code (`status` is the HTTP status)."""

    def __init__(self, what: str, resp):
        self.code = resp.code
        self.status = resp.raw.status_code if resp.raw is not None else None
        super().__init__(f"lark {what}: code {resp.code}")
