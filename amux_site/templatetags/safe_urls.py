"""`{{ url|safe_url }}`: a URL from a payload becomes a link only when it is http or https.

URLs in webhooks and API results are data someone else wrote (a signed payload is signed by
the platform, not vouched for by it): `javascript:`, `data:` or `vbscript:` in an href runs
in the operator's session when clicked. Anything that is not a plain http(s) URL gives ""
so the template shows it as text instead.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django import template

register = template.Library()

_ALLOWED = ("http", "https")


def safe_url_or_empty(value) -> str:
    if not isinstance(value, str):
        return ""
    # browsers drop leading/trailing whitespace and control characters and tabs/newlines
    # inside the scheme ("java\tscript:"); a URL holding any of them is not one we link
    if value != value.strip() or any(ord(c) < 0x21 or c == "\x7f" for c in value):
        return ""
    try:
        parts = urlsplit(value)
    except ValueError:
        return ""
    if parts.scheme.lower() not in _ALLOWED or not parts.netloc:
        return ""
    return value


@register.filter(name="safe_url")
def safe_url(value) -> str:
    return safe_url_or_empty(value)
