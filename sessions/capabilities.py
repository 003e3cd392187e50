"""Provider capability discovery: an explicit probe of a provider's route.

``probe(provider)`` asks the route ``GET <base_url>/models`` (``<base_url>/v1/models`` for
an Anthropic root, provider_routes.models_url) with the profile's key (the
headers of `amux doctor`'s provider check) and stores what it answered as a new revision of
versioned evidence (models.ProviderProbe): the model ids it lists (OpenAI's and Anthropic's
``data[].id``) and, per model, only the fields the route itself advertises — context window,
output limit, modalities, tool-call support. A field the route does not list is absent, i.e.
unknown; two differing values for one field (aliases, or the same id listed twice) are a
conflict, which stays unknown too (named under ``conflicts``) until a later probe resolves
it. amux keeps no model table of its own and never fills a gap from one.

Nothing of the key and nothing of the raw body is stored or answered: only the normalised
snapshot, its digest, and a short redacted health detail. Every failure is a snapshot with
``ok`` false and an ``outcome`` (``not_authenticated``, ``unreachable``,
``not_a_model_list``, ``http_error``, ``key_unusable``, ``paging_failed``), never an
exception.

An Anthropic route (``anthropic-compat``) pages its list: the probe asks ``limit=1000``
and follows ``after_id=<last_id>`` while ``has_more`` is true — at most MAX_PAGES pages,
and a ``last_id`` answered twice (a loop) or missing ends the probe as ``paging_failed``
rather than as a partial list taken for the whole."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from amux_common import bounded_json
from runtimes import catalog
from sessions.keys import api_key_problem
from sessions.models import ProviderProbe, ProviderProfile
from sessions.provider_routes import models_headers, models_url

TIMEOUT_S = 10
MAX_BODY = 4 * 1024 * 1024  # a model list is small; more is not one
MAX_MODELS = 2000
MAX_ID = 200
MAX_MODALITIES = 16

# advertised field -> where routes put it (a dotted path is a nested key)
_INT_FIELDS = {
    "context_window": ("context_window", "context_length", "max_context_length",
                       "max_input_tokens", "top_provider.context_length"),
    "max_output_tokens": ("max_output_tokens", "max_completion_tokens", "max_tokens",
                          "top_provider.max_completion_tokens"),
}
_LIST_FIELDS = {
    "input_modalities": ("input_modalities", "architecture.input_modalities",
                         "modalities.input"),
    "output_modalities": ("output_modalities", "architecture.output_modalities",
                          "modalities.output"),
}
_BOOL_TOOLS = ("supports_tools", "tool_calls", "function_calling", "capabilities.tool_use",
               "capabilities.tools", "capabilities.function_calling")


def _at(entry: dict[str, Any], path: str) -> Any:
    value: Any = entry
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _one(values: list[Any]) -> tuple[Any, bool]:
    """The one value the aliases agree on (None when none is given), and whether they
    conflict."""
    distinct: list[Any] = []
    for value in values:
        if value is not None and value not in distinct:
            distinct.append(value)
    if len(distinct) > 1:
        return None, True
    return (distinct[0] if distinct else None), False


def _advertised(entry: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The fields this model entry advertises, and those whose values conflict."""
    out: dict[str, Any] = {}
    conflicts: list[str] = []
    for name, paths in _INT_FIELDS.items():
        values = [v for v in (_at(entry, p) for p in paths)
                  if isinstance(v, int) and not isinstance(v, bool) and v > 0]
        value, conflict = _one(values)
        if conflict:
            conflicts.append(name)
        elif value is not None:
            out[name] = value
    for name, paths in _LIST_FIELDS.items():
        values = []
        for path in paths:
            raw = _at(entry, path)
            if isinstance(raw, list) and raw and all(isinstance(m, str) and 0 < len(m) <= 40
                                                     for m in raw):
                values.append(sorted(set(raw))[:MAX_MODALITIES])
        value, conflict = _one(values)
        if conflict:
            conflicts.append(name)
        elif value is not None:
            out[name] = value
    tools = [v for v in (_at(entry, p) for p in _BOOL_TOOLS) if isinstance(v, bool)]
    params = entry.get("supported_parameters")
    if isinstance(params, list) and all(isinstance(p, str) for p in params):
        tools.append("tools" in params)
    value, conflict = _one(tools)
    if conflict:
        conflicts.append("tool_calls")
    elif value is not None:
        out["tool_calls"] = value
    return out, conflicts


def _valid_id(raw: Any) -> str | None:
    if not isinstance(raw, str):
        return None
    ident = raw.strip()
    if not ident or len(ident) > MAX_ID or not ident.isprintable():
        return None
    return ident


def normalise(body: Any) -> list[dict[str, Any]] | None:
    """The model entries of a ``/models`` answer, sorted by id, or None when it is not a
    model list (``{"data": [...]}``, as OpenAI- and Anthropic-compatible routes answer)."""
    items = body.get("data") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return None
    merged: dict[str, dict[str, Any]] = {}
    conflicted: dict[str, set[str]] = {}
    for item in items[:MAX_MODELS]:
        ident = _valid_id(item.get("id")) if isinstance(item, dict) else None
        if ident is None:
            continue
        fields, conflicts = _advertised(item)
        bad = conflicted.setdefault(ident, set())
        bad.update(conflicts)
        if ident in merged:  # listed twice: what differs is a conflict, not a pick
            seen = merged[ident]
            for name in set(seen) | set(fields):
                if seen.get(name) != fields.get(name):
                    bad.add(name)
            fields = {k: v for k, v in seen.items() if fields.get(k) == v}
        merged[ident] = {k: v for k, v in fields.items() if k not in bad}
    out = []
    for ident in sorted(merged):
        entry = {"id": ident, **merged[ident]}
        if conflicted[ident]:
            entry["conflicts"] = sorted(conflicted[ident])
        out.append(entry)
    return out


def digest_of(platform: str, base_url: str, outcome: str, models: list[dict[str, Any]]
              ) -> str:
    """sha256 of the normalised snapshot: equal for an unchanged answer of the same route."""
    canonical = json.dumps({"platform": platform, "base_url": base_url, "outcome": outcome,
                            "models": models}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class _Answer:
    outcome: str
    status: int | None
    models: list[dict[str, Any]]
    detail: str


def _redact(text: str, key: str) -> str:
    if key:
        text = text.replace(key, "[redacted]")
    return text[:300]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as it is: following it would send the key to another URL."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _get(url: str, headers: dict[str, str], key: str) -> tuple[int, Any] | _Answer:
    """One ``GET`` of the route: its status and parsed body (None when it is not JSON or
    too big), or the failed answer."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with _OPENER.open(request, timeout=TIMEOUT_S) as resp:
            status, raw = resp.status, resp.read(MAX_BODY + 1)
    except urllib.error.HTTPError as exc:
        exc.close()
        status, raw = exc.code, b""
    except (urllib.error.URLError, OSError, ValueError) as exc:
        # ValueError: a key no header can carry, a URL http.client refuses
        reason = getattr(exc, "reason", exc)
        return _Answer("unreachable", None, [], _redact(f"unreachable: {reason}", key))
    if status in (401, 403):
        return _Answer("not_authenticated", status, [], f"{status}: not authenticated")
    if status >= 500:
        return _Answer("http_error", status, [], f"{status}: the route failed")
    if not 200 <= status < 300:
        shown = url.split("?", 1)[0]
        return _Answer("not_a_model_list", status, [],
                       f"{status}: {shown} is not a model list (check the base URL)")
    try:
        body = bounded_json.loads(raw) if len(raw) <= MAX_BODY else None
    except ValueError:
        body = None
    if normalise(body) is None:
        return _Answer("not_a_model_list", status, [],
                       f"{status}: the answer is not a model list (check the base URL)")
    return status, body


# Anthropic's GET /v1/models is paged: {"data", "has_more", "first_id", "last_id"}; the next
# page is asked with after_id=<last_id> (limit 1 to 1000, default 20)
PAGE_LIMIT = 1000
MAX_PAGES = 10  # 10,000 entries, five times MAX_MODELS: a route past that does not end


class PagingFailed(Exception):
    """The route's pages do not end: the listing is not trusted (outcome paging_failed)."""


def next_after(body: dict[str, Any], seen: set[str]) -> str | None:
    """The ``after_id`` of the next page of an Anthropic model list: None when this was
    the last page (``has_more`` not true). Raises PagingFailed when the route says there is
    more but gives no usable ``last_id``, or one already followed (a loop)."""
    if body.get("has_more") is not True:
        return None
    last = _valid_id(body.get("last_id"))
    if last is None:
        raise PagingFailed("the route says has_more but gives no last_id")
    if last in seen:
        raise PagingFailed(f"the route answered last_id {last!r} again: its pages loop")
    return last


def _pages(base: str, headers: dict[str, str], key: str) -> tuple[int, Any] | _Answer:
    """Every page of an Anthropic model list, merged into one ``{"data": [...]}``; bounded
    by MAX_PAGES and MAX_MODELS, and stopped when the route's pages loop."""
    items: list[Any] = []
    seen: set[str] = set()
    after: str | None = None
    status = 0
    for _ in range(MAX_PAGES):
        query = {"limit": PAGE_LIMIT, **({"after_id": after} if after else {})}
        fetched = _get(f"{base}?{urllib.parse.urlencode(query)}", headers, key)
        if isinstance(fetched, _Answer):
            return fetched
        status, body = fetched
        items.extend(body["data"])
        if len(items) >= MAX_MODELS:
            break  # as many as a snapshot keeps (normalise cuts the rest)
        try:
            after = next_after(body, seen)
        except PagingFailed as exc:
            return _Answer("paging_failed", status, [], f"{status}: {exc}")
        if after is None:
            break
        seen.add(after)
    else:
        return _Answer("paging_failed", status, [],
                       f"{status}: the route still had more after {MAX_PAGES} pages")
    return status, {"data": items, "pages": len(seen) + 1}


def _ask(provider: ProviderProfile) -> _Answer:
    key = (provider.secrets or {}).get("api_key", "")
    problem = api_key_problem(key)
    if problem:
        return _Answer("key_unusable", None, [], f"unusable api_key: {problem}")
    url = models_url(provider.platform, provider.base_url)
    headers = models_headers(provider.platform, key)
    if provider.platform == "anthropic-compat":
        fetched = _pages(url, headers, key)
    else:
        fetched = _get(url, headers, key)
    if isinstance(fetched, _Answer):
        return fetched
    status, body = fetched
    models = normalise(body) or []
    pages = body.get("pages", 1)
    return _Answer("ok", status, models, f"{status}: {len(models)} models listed"
                   + (f" on {pages} pages" if pages > 1 else ""))


def probe(provider: ProviderProfile) -> ProviderProbe:
    """Probe the provider's route now and store the answer as its next revision."""
    answer = _ask(provider)
    route = provider.base_url.rstrip("/")
    with transaction.atomic():
        # one writer per provider at a time, so revisions stay 1, 2, 3, …
        locked = ProviderProfile.objects.select_for_update().get(pk=provider.pk)
        last = locked.probes.aggregate(n=Max("revision"))["n"] or 0
        return ProviderProbe.objects.create(
            provider=locked, revision=last + 1, probed_at=timezone.now(),
            platform=provider.platform, base_url=route,
            ok=answer.outcome == "ok", outcome=answer.outcome, status_code=answer.status,
            listed_models=answer.models, detail=answer.detail,
            digest=digest_of(provider.platform, route, answer.outcome, answer.models))


def latest(provider: ProviderProfile) -> ProviderProbe | None:
    return provider.probes.order_by("-revision").first()


def latest_ok(provider: ProviderProfile) -> ProviderProbe | None:
    """The latest ok probe of the provider's *current* route: evidence about another route
    (the profile's base URL or platform changed since) is no evidence about this one."""
    return (provider.probes.filter(ok=True, platform=provider.platform,
                                   base_url=provider.base_url.rstrip("/"))
            .order_by("-revision").first())


def _at_z(row: ProviderProbe) -> str:
    return row.probed_at.isoformat().replace("+00:00", "Z")


def snapshot(row: ProviderProbe, provider: ProviderProfile) -> dict[str, Any]:
    """The snapshot as the API answers it (``provider``: the row's, already read)."""
    return {"provider": provider.slug, "revision": row.revision, "probed_at": _at_z(row),
            "platform": row.platform, "base_url": row.base_url, "ok": row.ok,
            "outcome": row.outcome, "status_code": row.status_code,
            "models": row.listed_models, "digest": row.digest, "detail": row.detail}


def summary(row: ProviderProbe | None) -> dict[str, Any] | None:
    """What a provider's own JSON says of its capabilities (``capabilities``)."""
    if row is None:
        return None
    return {"revision": row.revision, "probed_at": _at_z(row), "ok": row.ok,
            "models": row.model_ids}


def use_discovered(provider: ProviderProfile) -> tuple[list[Any] | None, str | None]:
    """The operator's explicit action: the profile's model list becomes the models its
    latest ok probe of its route discovered (an entry already listed keeps its display name
    and efforts). Answers the new list, or why not. Discovery never does this by itself."""
    row = latest_ok(provider)
    if row is None:
        return None, "no ok probe of this route yet: probe it first"
    if not row.model_ids:
        return None, f"probe revision {row.revision} discovered no models"
    kept: dict[str, Any] = {}
    for entry in provider.model_names or []:
        listed = catalog.names([entry])
        if listed:
            kept[listed[0]] = entry
    clean, problem = catalog.check_provider_models(
        [kept.get(ident, ident) for ident in row.model_ids])
    if problem:
        return None, f"the discovered models cannot be a model list: {problem}"
    provider.model_names = clean
    provider.save(update_fields=["model_names"])
    return clean, None
