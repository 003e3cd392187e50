"""The policy document (pure): validation, canonical form, version hash and diff.

The document (CONTRACT.md)::

    {"acceptance": "manual" | "auto",
     "sources": {"<slug>": {"allowed": [...], "bots": [...],
                            "rows": {"<scope>": {"<cell>": bool, ...}}}}}

The canonical form fills every row of the source's kind with every cell it has (missing
means off), sorts and de-duplicates the lists (GitHub logins lower-cased, since GitHub
compares them case-insensitively) and drops nothing else; the version is the SHA-256 of
its sorted-key JSON, so equal content always gives the same id and any material change a
new one.

Facts about sources (does it exist, is it enabled, which scopes does it receive whole)
come in as ``SourceInfo`` values; this module never looks anything up.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.gate import (
    ACCEPTANCE_MODES,
    ADDRESSED,
    CASE_INSENSITIVE_KINDS,
    CELLS,
    MANUAL,
    NO_SENDER_SCOPES,
    PLACED_SCOPES,
    SCOPES,
    UNADDRESSED_ALLOWED,
    UNADDRESSED_ANYONE,
    UNADDRESSED_CELLS,
    Policy,
    base_scope,
    cells_of,
    placed,
)
from policy.limits import MAX_LIST, MAX_NAME, MAX_ROWS, MAX_SOURCES

PART_KEYS = ("allowed", "bots", "rows")
TOP_KEYS = ("acceptance", "sources")
IGNORED_TOP_KEYS = ("version", "base_version", "saved_at", "author", "origin")

# Plain-language labels (the panel and the executor's policy-change input use them).
SCOPE_LABELS = {
    "issue_new": "New issues",
    "pr_new": "New pull requests",
    "comment": "Comments on issues and pull requests",
    "ci_default_branch": "CI results on the default branch",
    "group_configured": "Messages in configured groups without a row of their own",
    "group_other": "Other groups the agent is in",
    "direct": "Direct messages",
    "doc_comment": "Comments on documents",
}
CELL_LABELS = {
    ADDRESSED: "An allowed person @mentions the agent",
    UNADDRESSED_ALLOWED: "An allowed person writes without @mentioning it",
    UNADDRESSED_ANYONE: "Anyone writes without @mentioning it",
}
CELL_OUTCOMES = {
    ADDRESSED: "explicit request",
    UNADDRESSED_ALLOWED: "inferred candidate",
    UNADDRESSED_ANYONE: "inferred candidate",
}


def open_cells(document: Mapping, infos: Mapping[str, SourceInfo]) -> list[str]:
    """The cells (``<source>.<scope>.<cell>``) through which work can be admitted: open in
    the document on an enabled source (explicit and inferred cells alike)."""
    opened = []
    for slug, part in sorted(((document or {}).get("sources") or {}).items()):
        info = infos.get(slug)
        if info is None or not info.enabled:
            continue
        for scope, cells in sorted((part.get("rows") or {}).items()):
            opened += [f"{slug}.{scope}.{cell}" for cell, on in sorted(cells.items()) if on]
    return opened

# The gate's content-free reasons in words (the Policy tab's "try the gate", web chat).
GATE_REASON_WORDS = {
    "self_message": "it is the agent's own message",
    "source_not_in_policy": "the policy allows nothing on this source",
    "unknown_scope": "this source has no such scope",
    "scope_disabled": "every cell of this row is closed (or the policy has no such row)",
    "bot_not_listed": "a bot that is not on the bot list",
    "not_addressed": "it does not @mention the agent and no unaddressed cell admits it",
    "not_allowed": "the sender is not on the allowlist",
    "cell_closed": "the matching cell is closed",
    "not_receiving_all": "the source does not receive every message here",
    "acceptance_manual": "an inferred candidate, and acceptance is manual",
}


@dataclass(frozen=True)
class SourceInfo:
    """What the policy needs to know about one source (filled by the tickets app)."""

    slug: str
    kind: str
    enabled: bool = True
    name: str = ""
    receives_all: frozenset[str] = field(default_factory=frozenset)
    places: tuple[str, ...] = ()  # a Lark source's configured groups, each its own row


def places_of(kind: str, config: Mapping | None) -> tuple[str, ...]:
    """The places a source keeps a row each for: a Lark source's configured groups."""
    if kind != "lark":
        return ()
    groups = (config or {}).get("groups") or []
    return tuple(dict.fromkeys(g for g in groups if isinstance(g, str) and g))


def rows_of(info: SourceInfo) -> tuple[str, ...]:
    """The admission table's rows of one source, in the panel's order: its kind's scopes,
    each placed scope followed by one row per place (``group_configured:oc_…``)."""
    rows: list[str] = []
    for scope in SCOPES.get(info.kind, ()):
        rows.append(scope)
        if scope in PLACED_SCOPES:
            rows.extend(placed(scope, p) for p in info.places)
    return tuple(rows)


def row_label(row: str) -> str:
    scope, _, place = row.partition(":")
    return f"Group {place}" if place else SCOPE_LABELS.get(scope, scope)


class PolicyInvalid(ValueError):  # noqa: N818 - reads as "the policy is invalid"
    """Bad input; ``fields`` maps a dotted path (``sources.gh.rows.comment``) to a message."""

    def __init__(self, fields: Mapping[str, str]):
        self.fields = dict(fields)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.fields.items()))


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "all")
    return bool(value)


def receives_all_scopes(kind: str, config: Mapping | None) -> frozenset[str]:
    """The scopes a source receives whole, from its config.

    github: the ``receive_all`` switch opens every row. lark: a configured group set to
    receive all messages (``receive_all`` per group: a mapping chat id → bool, a list of chat
    ids, or one bool for all groups) opens ``group_configured``; a direct chat is always
    received whole; other groups and document comments only deliver @mentions.
    webchat: every message is written to the agent, received whole (all its scopes).
    """
    config = config or {}
    if kind == "github":
        return frozenset(SCOPES["github"]) if _truthy(config.get("receive_all")) else frozenset()
    if kind == "lark":
        scopes = {"direct"}
        flag = config.get("receive_all")
        groups = [g for g in config.get("groups") or [] if isinstance(g, str)]
        if isinstance(flag, Mapping):
            whole = [g for g, v in flag.items() if _truthy(v)]
        elif isinstance(flag, list | tuple):
            whole = [g for g in flag if isinstance(g, str)]
        else:
            whole = groups if _truthy(flag) else []
        if whole:
            scopes.add("group_configured")
        scopes.update(placed("group_configured", g) for g in whole if g in groups)
        return frozenset(scopes)
    if kind == "webchat":
        return frozenset(SCOPES.get("webchat", ()))
    return frozenset()


def closed_reason(kind: str, scope: str, cell: str, info: SourceInfo | None) -> str | None:
    """Why a cell cannot open, in plain language; None when it can."""
    if cell not in cells_of(scope):
        return "A CI result has no sender: only the \u201canyone\u201d cell exists."
    if cell in UNADDRESSED_CELLS and (info is None or scope not in info.receives_all):
        if kind == "github":
            return ("This source only receives events that @mention the agent. Turn on "
                    "\u201creceive all\u201d in its settings (Sources) to open this cell.")
        if kind == "lark" and scope == "group_configured":
            return ("No configured group is set to receive all messages. Set a group to "
                    "\u201creceive all\u201d in the source's settings (Sources) to open it.")
        if kind == "lark" and base_scope(scope) == "group_configured":
            return ("This group is not set to receive all messages. Add it to "
                    "\u201cGroups that receive all messages\u201d in the source's settings "
                    "(Sources) to open it.")
        return ("This source only receives messages that @mention the agent here, so "
                "there is no unaddressed message to admit.")
    return None


def empty_document() -> dict:
    return {"acceptance": MANUAL, "sources": {}}


def _names(value, path: str, errors: dict, fold: bool) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        errors[path] = "must be a list of names"
        return []
    if len(value) > MAX_LIST:
        errors[path] = f"at most {MAX_LIST} names"
        return []
    out = set()
    for i, name in enumerate(value):
        if not isinstance(name, str) or not name.strip():
            errors[f"{path}.{i}"] = "must be a non-empty string"
            continue
        name = name.strip()
        if len(name) > MAX_NAME or any(c.isspace() for c in name):
            errors[f"{path}.{i}"] = (
                f"must be one name without spaces, at most {MAX_NAME} characters")
            continue
        out.add(name.lower() if fold else name)
    return sorted(out)


def validate(document, sources: Mapping[str, SourceInfo]) -> dict:
    """Check a document against the sources and return its canonical form.

    Raises PolicyInvalid naming every bad field: an unknown or disabled source, an unknown
    scope or cell, a malformed list, a cell that cannot open on that source.
    """
    errors: dict[str, str] = {}
    if not isinstance(document, Mapping):
        raise PolicyInvalid({"document": "must be a JSON object"})
    for key in document:
        if key not in TOP_KEYS and key not in IGNORED_TOP_KEYS:
            errors[str(key)] = "unknown field"
    acceptance = document.get("acceptance")
    if acceptance not in ACCEPTANCE_MODES:
        errors["acceptance"] = "must be \u201cmanual\u201d or \u201cauto\u201d"
    out_sources: dict[str, dict] = {}
    for slug, part in _raw_sources(document.get("sources"), errors).items():
        path = f"sources.{slug}"
        info = sources.get(slug)
        refused = _source_refused(info, part)
        if refused is not None:
            errors[path] = refused
            continue
        checked = _source_part(path, part, info, errors)
        if checked is not None:
            out_sources[slug] = checked
    if errors:
        raise PolicyInvalid(errors)
    return {"acceptance": acceptance, "sources": dict(sorted(out_sources.items()))}


def _raw_sources(raw: Any, errors: dict[str, str]) -> Mapping:
    if raw is None:
        errors["sources"] = "required (an object, one entry per source)"
    elif not isinstance(raw, Mapping):
        errors["sources"] = "must be an object keyed by source slug"
    elif len(raw) > MAX_SOURCES:
        errors["sources"] = f"Ensure this object has no more than {MAX_SOURCES} keys."
    else:
        return raw
    return {}


def _source_refused(info: SourceInfo | None, part: Any) -> str | None:
    """Why a source's part cannot be read at all, or None."""
    if info is None:
        return "unknown source"
    if not info.enabled:
        return "source is disabled: remove it from the policy or enable it"
    if info.kind not in SCOPES:
        return f"source kind {info.kind!r} has no admission table"
    if not isinstance(part, Mapping):
        return "must be an object with allowed, bots and rows"
    return None


def _source_part(path: str, part: Mapping, info: SourceInfo, errors: dict[str, str]
                 ) -> dict | None:
    """One source's canonical part, or None when it allows nothing (the same policy as no
    part at all); its bad fields go to `errors`."""
    for key in part:
        if key not in PART_KEYS:
            errors[f"{path}.{key}"] = "unknown field (known: allowed, bots, rows)"
    fold = info.kind in CASE_INSENSITIVE_KINDS
    allowed = _names(part.get("allowed"), f"{path}.allowed", errors, fold)
    bots = _names(part.get("bots"), f"{path}.bots", errors, fold)
    rows_in = part.get("rows") or {}
    if not isinstance(rows_in, Mapping):
        errors[f"{path}.rows"] = "must be an object keyed by scope"
        rows_in = {}
    elif len(rows_in) > MAX_ROWS:
        errors[f"{path}.rows"] = f"Ensure this object has no more than {MAX_ROWS} keys."
        rows_in = {}
    kind_scopes = SCOPES[info.kind]
    for scope in rows_in:
        why = _unknown_scope(scope, kind_scopes, info)
        if why is not None:
            errors[f"{path}.rows.{scope}"] = why
    rows: dict[str, dict[str, bool]] = {}
    # every scope's row, and a place's own row only where the document keeps one
    for scope in (*kind_scopes, *(r for r in rows_of(info) if r in rows_in)):
        rows[scope] = _row(f"{path}.rows.{scope}", scope, rows_in.get(scope) or {}, info,
                           errors)
    if allowed or bots or any(any(row.values()) for row in rows.values()):
        return {"allowed": allowed, "bots": bots, "rows": rows}
    return None


def _unknown_scope(scope: Any, kind_scopes: tuple[str, ...] | list[str], info: SourceInfo
                   ) -> str | None:
    """Why a row's scope is not one of the source kind's (or a configured group's), or
    None."""
    if scope in kind_scopes:
        return None
    base, _, place = str(scope).partition(":")
    if place and base in PLACED_SCOPES and base in kind_scopes:
        if place not in info.places:
            return (f"{place} is not one of the source's configured groups "
                    f"({', '.join(info.places) or 'none'})")
        return None
    return (f"unknown scope for a {info.kind} source (known: {', '.join(kind_scopes)}"
            + (f", or {base}:<configured group>" if PLACED_SCOPES & set(kind_scopes)
               else "") + ")")


def _row(rpath: str, scope: str, cells_in: Any, info: SourceInfo, errors: dict[str, str]
         ) -> dict[str, bool]:
    """One scope's canonical row: every cell of the scope, true only where the document
    opens it and it may open."""
    if not isinstance(cells_in, Mapping):
        errors[rpath] = "must be an object keyed by cell"
        cells_in = {}
    for cell, value in cells_in.items():
        cpath = f"{rpath}.{cell}"
        if cell not in CELLS:
            errors[cpath] = f"unknown cell (known: {', '.join(CELLS)})"
        elif not isinstance(value, bool):
            errors[cpath] = "must be true or false"
        elif value and cell not in cells_of(scope):
            errors[cpath] = "a CI result has no sender: only unaddressed_anyone exists"
        elif value and (why := closed_reason(info.kind, scope, cell, info)):
            errors[cpath] = "cannot open: " + why
    return {cell: cells_in.get(cell) is True for cell in cells_of(scope)}


def canonical_json(document: Mapping) -> str:
    return json.dumps({"acceptance": document["acceptance"], "sources": document["sources"]},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def version_of(document: Mapping) -> str:
    """The version id: SHA-256 over the canonical form (rules, acceptance, each source's
    part with its lists)."""
    return hashlib.sha256(canonical_json(document).encode()).hexdigest()


def compile_policy(document: Mapping, sources: Mapping[str, SourceInfo] | None = None,
                   version: str | None = None, acceptance: str | None = None) -> Policy:
    kinds = {slug: info.kind for slug, info in (sources or {}).items()}
    return Policy(document, kinds, version, acceptance, scopes=SCOPES)


def diff(old: Mapping, new: Mapping) -> list[dict]:
    """What changed between two canonical documents, one plain-language line per change.

    Each change: ``{"path", "before", "after", "text"}``.
    """
    changes: list[dict] = []

    def add(path, before, after, text):
        changes.append({"path": path, "before": before, "after": after, "text": text})

    if old.get("acceptance") != new.get("acceptance"):
        add("acceptance", old.get("acceptance"), new.get("acceptance"),
            "Acceptance: proactive work is now "
            + ("accepted after triage (auto)" if new.get("acceptance") == "auto"
               else "never taken on (manual)"))
    old_sources, new_sources = old.get("sources") or {}, new.get("sources") or {}
    for slug in sorted(set(old_sources) | set(new_sources)):
        o, n = old_sources.get(slug), new_sources.get(slug)
        if o is None:
            add(f"sources.{slug}", None, n, f"Source {slug} added to the policy")
            o = {"allowed": [], "bots": [], "rows": {}}
        if n is None:
            add(f"sources.{slug}", o, None, f"Source {slug} removed from the policy")
            continue
        for key, noun in (("allowed", "allowed people"), ("bots", "bots")):
            before, after = set(o.get(key) or []), set(n.get(key) or [])
            for name in sorted(after - before):
                add(f"sources.{slug}.{key}", None, name, f"{slug}: {name} added to {noun}")
            for name in sorted(before - after):
                add(f"sources.{slug}.{key}", name, None, f"{slug}: {name} removed from {noun}")
        orows, nrows = o.get("rows") or {}, n.get("rows") or {}
        for scope in sorted(set(orows) | set(nrows)):
            for cell in cells_of(scope):
                b = bool((orows.get(scope) or {}).get(cell))
                a = bool((nrows.get(scope) or {}).get(cell))
                if a != b:
                    add(f"sources.{slug}.rows.{scope}.{cell}", b, a,
                        f"{slug} \u00b7 {row_label(scope)} \u00b7 "
                        f"{CELL_LABELS[cell]}: {'opened' if a else 'closed'}")
    return changes


__all__ = [
    "CELL_LABELS", "CELL_OUTCOMES", "NO_SENDER_SCOPES", "SCOPE_LABELS", "PolicyInvalid",
    "SourceInfo", "canonical_json", "closed_reason", "compile_policy", "diff",
    "empty_document", "receives_all_scopes", "validate", "version_of",
]
