"""The Policy tab (htmx): the admission table per source, acceptance, allowlists and bot
lists, version history with a diff between any two versions, a preview of the affected live
tickets before saving, and "try the gate"."""

from __future__ import annotations

import re

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from amux_common import roles
from policy import hooks, services
from policy.document import (
    CELL_LABELS,
    CELL_OUTCOMES,
    GATE_REASON_WORDS,
    PolicyInvalid,
    closed_reason,
    diff,
    open_cells,
    row_label,
    rows_of,
)
from policy.gate import AUTO, CELLS, MANUAL, SCOPES, Facts, base_scope, cells_of, gate
from policy.models import PolicyHead, PolicyVersion

KIND_NAMES = {"github": "GitHub", "lark": "Lark", "webchat": "Web chat"}
REASON_LABELS = GATE_REASON_WORDS
_SPLIT = re.compile(r"[\s,]+")


def _names(text: str) -> list[str]:
    return [n for n in _SPLIT.split(text or "") if n]


def form_document(post, infos) -> dict:
    """The draft document from the editor form (same validation as the API afterwards)."""
    sources = {}
    for slug in post.getlist("source"):
        info = infos.get(slug)
        rows = {}
        for scope in rows_of(info) if info else ():
            rows[scope] = {cell: f"cell:{slug}:{scope}:{cell}" in post for cell in cells_of(scope)}
        sources[slug] = {"allowed": _names(post.get(f"allowed:{slug}", "")),
                         "bots": _names(post.get(f"bots:{slug}", "")), "rows": rows}
    return {"acceptance": AUTO if post.get("acceptance") == AUTO else MANUAL,
            "sources": sources}


def _grid(document: dict, infos) -> list[dict]:
    parts = document.get("sources") or {}
    out = []
    for slug in sorted(set(infos) | set(parts)):
        info = infos.get(slug)
        part = parts.get(slug) or {}
        if info is None or not info.enabled:
            if part:
                out.append({"slug": slug, "name": info.name if info else slug, "kind": "",
                            "disabled": True, "missing": info is None})
            continue
        rows = []
        notes: list[str] = []
        part_rows = part.get("rows") or {}
        for scope in rows_of(info):
            # a group without a row of its own shows what the default row decides for it
            cells_on = part_rows.get(scope) or part_rows.get(base_scope(scope)) or {}
            cells = []
            for cell in CELLS:
                why = closed_reason(info.kind, scope, cell, info)
                exists = cell in cells_of(scope)
                if why and exists and why not in notes:
                    notes.append(why)
                cells.append({
                    "cell": cell, "name": f"cell:{slug}:{scope}:{cell}",
                    "exists": exists, "why": why,
                    "note": notes.index(why) + 1 if why and exists else None,
                    "checked": bool(cells_on.get(cell)) and not why,
                    "outcome": CELL_OUTCOMES[cell],
                })
            rows.append({"scope": scope, "label": row_label(scope), "cells": cells,
                         "placed": scope != base_scope(scope)})
        out.append({"slug": slug, "name": info.name or slug,
                    "kind": KIND_NAMES.get(info.kind, info.kind), "disabled": False,
                    "allowed": "\n".join(part.get("allowed") or []),
                    "bots": "\n".join(part.get("bots") or []), "rows": rows,
                    "notes": notes})
    return out


def _history():
    head = PolicyHead.objects.filter(pk=1).first()
    current_id = head.entry_id if head else None
    entries = list(PolicyVersion.objects.order_by("-id")[:100])
    return [{"id": e.id, "version": e.version, "short": e.version[:12],
             "base": (e.base_version or "")[:12], "author": e.author, "origin": e.origin,
             "at": e.created_at, "current": e.id == current_id} for e in entries]


def _can_edit(request) -> bool:
    return roles.is_operator(request.user)


@roles.read_page
def policy_tab(request):
    cur = services.current()
    infos = services.sources()
    history = _history()
    try_sources = [
        {"slug": slug, "kind": info.kind,
         "scopes": [(s, row_label(s)) for s in rows_of(info)]}
        for slug, info in sorted(infos.items()) if info.enabled and info.kind in SCOPES
    ]
    admitting = open_cells(cur.document, infos)
    return render(request, "panel/policy.html", {
        "tab": "policy", "current": cur, "grid": _grid(cur.document, infos),
        "no_worker": bool(admitting) and hooks.worker_configured() is False,
        "open_cells": admitting,
        "cell_labels": [(c, CELL_LABELS[c], CELL_OUTCOMES[c]) for c in CELLS],
        "history": history, "try_sources": try_sources, "can_edit": _can_edit(request),
        "saved": request.GET.get("saved", ""),
    })


def _fragment(request, template, context, status=200):
    return render(request, template, context, status=status)


@roles.reads_only
@require_POST
def preview(request):
    infos = services.sources()
    try:
        canonical, version, changes, affected = services.preview(form_document(request.POST,
                                                                               infos))
    except PolicyInvalid as exc:
        return _fragment(request, "panel/policy_errors.html", {"errors": exc.fields}, 400)
    labels = services.ticket_labels(affected) if affected else {}
    return _fragment(request, "panel/policy_preview.html", {
        "version": version, "same": version == services.current().version,
        "changes": changes,
        "affected": [a.as_dict() | {"label": labels.get(a.ticket, f"Ticket {a.ticket}")}
                     for a in affected]})


@roles.operator_required
@require_POST
def save(request):
    infos = services.sources()
    base = request.POST.get("base_version") or None
    try:
        saved = services.save(form_document(request.POST, infos), base,
                              author=request.user.get_username(), origin="panel")
    except PolicyInvalid as exc:
        return _fragment(request, "panel/policy_errors.html", {"errors": exc.fields}, 400)
    except services.StaleBase as exc:
        return _fragment(request, "panel/policy_conflict.html",
                         {"base": exc.base, "current": exc.current}, 409)
    url = f"{reverse('panel-policy')}?saved={saved.version}"
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    response = HttpResponse(status=303)
    response["Location"] = url
    return response


@roles.read_page
def version_diff(request):
    ids = {}
    for key in ("from", "to"):
        value = request.GET.get(key) or ""
        ids[key] = int(value) if value.isdigit() else None
    entries = {e.id: e for e in PolicyVersion.objects.filter(id__in=[i for i in ids.values()
                                                                     if i])}
    docs, labels = {}, {}
    for key, entry_id in ids.items():
        entry = entries.get(entry_id) if entry_id else None
        if entry_id and entry is None:
            return _fragment(request, "panel/policy_errors.html",
                             {"errors": {key: "unknown version"}}, 400)
        docs[key] = entry.document if entry else {"acceptance": MANUAL, "sources": {}}
        labels[key] = entry.version[:12] if entry else "no policy"
    return _fragment(request, "panel/policy_diff.html", {
        "changes": diff(docs["from"], docs["to"]), "a": labels["from"], "b": labels["to"]})


@roles.reads_only
@require_POST
def try_gate(request):
    """Decide made-up facts with the policy as currently edited in the form."""
    infos = services.sources()
    post = request.POST
    slug, _, scope = (post.get("try_scope") or "").partition("|")
    info = infos.get(slug)
    if info is None or scope not in rows_of(info):
        return _fragment(request, "panel/policy_errors.html",
                         {"errors": {"try_scope": "choose a source and scope"}}, 400)
    scope, _, place = scope.partition(":")  # a group's own row: a message in that group
    try:
        canonical = services.check_document(form_document(post, infos))
    except PolicyInvalid as exc:
        return _fragment(request, "panel/policy_errors.html", {"errors": exc.fields}, 400)
    is_bot = "try_is_bot" in post
    facts = Facts(source=slug, kind=info.kind, scope=scope,
                  actor=(post.get("try_actor") or "").strip()[:200], is_bot=is_bot,
                  is_human=not is_bot, addressed="try_addressed" in post,
                  receives_all="try_receives_all" in post, is_self="try_is_self" in post,
                  place=place)
    verdict = gate(facts, services.compiled(canonical))
    cell = (verdict.rule or "").rsplit(".", 1)[-1] if verdict.rule else ""
    return _fragment(request, "panel/policy_try.html", {
        "verdict": verdict, "cell_label": CELL_LABELS.get(cell, "the bot list" if cell else ""),
        "reason_label": REASON_LABELS.get(verdict.reason or "", ""),
        "scope_label": row_label(f"{scope}:{place}" if place else scope)})
