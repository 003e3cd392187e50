"""The Prompts tab: team sections, skills, fragments with their state and editor, version
history with diffs and restore, and a preview of the assembled prompt per role."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from amux_common import roles
from prompts_app import assembly, contract, core, service
from prompts_app.models import PromptVersion

STATE_LABELS = {
    "default": "Default",
    "overridden": "Overridden",
    "default_updated": "Default updated",
}


def _label(frag: dict) -> tuple[str, str]:
    """(label, badge class) a person reads: what the fragment's state means to them."""
    if frag["kind"] == "team":
        if frag["state"] == "default":
            return ("Not written yet", "warn" if frag["required"] else "")
        return ("Written", "ok")
    if frag["kind"] == "skill":
        return ("Skill", "ok") if frag["state"] != "default" else ("New skill", "warn")
    if frag["kind"] == "fixed":
        return ("In code", "")
    return (STATE_LABELS[frag["state"]],
            {"default": "", "overridden": "ok", "default_updated": "bad"}[frag["state"]])


def _decorate(frag: dict) -> dict:
    label, badge = _label(frag)
    return {**frag, "label": label, "badge": badge}


@roles.read_page
def prompts_tab(request):
    frags = [_decorate(f) for f in service.fragments()]
    by_kind = {kind: [f for f in frags if f["kind"] == kind]
               for kind in ("team", "skill", "builtin", "fixed")}
    return render(request, "panel/prompts.html", {
        "tab": "prompts", "sub": "fragments", "revision": service.latest_revision(),
        "team": by_kind["team"], "skills": by_kind["skill"], "builtins": by_kind["builtin"],
        "fixed": by_kind["fixed"],
        "updated": [f for f in by_kind["builtin"] if f["state"] == "default_updated"],
        "versions": PromptVersion.objects.select_related("predecessor")[:10],
    })


@roles.read_page
def new_skill(request):
    name = (request.GET.get("name") or "").strip().lower()
    return redirect("panel-prompt-edit", key=f"skill.{name}")


def _editor(request, key, *, draft=None, base=None, errors=None, conflict=None, status=200):
    try:
        frag = _decorate(service.fragment(key))
    except core.Invalid as exc:
        raise Http404(str(exc)) from None
    side_by_side = None
    if frag["state"] == "default_updated":
        side_by_side = {
            "old": frag["base_text"] or "", "new": frag["default_text"], "mine": frag["text"],
            "diff": core.diff_texts(frag["base_text"] or "", frag["default_text"], key,
                                    "old default", "new default"),
        }
    saved = request.GET.get("saved")
    return render(request, "panel/prompt_edit.html", {
        "tab": "prompts", "sub": "fragments", "frag": frag,
        "draft": frag["text"] if draft is None else draft,
        "base_revision": frag["revision"] if base is None else base,
        "errors": errors or {}, "conflict": conflict, "side_by_side": side_by_side,
        "saved": saved, "can_edit": roles.is_operator(request.user) and frag["editable"],
        "max_chars": core.MAX_TEXT_CHARS,
    }, status=status)


def _conflict(exc: service.Stale, key: str) -> dict:
    changes = service.changes_between(exc.base, exc.latest)
    mine = next((c for c in changes if c.key == key), None)
    newer = PromptVersion.objects.filter(revision__gt=exc.base).order_by("revision")
    return {"base": exc.base, "latest": exc.latest, "mine": mine,
            "others": [c.key for c in changes if c.key != key], "versions": list(newer)}


@roles.operator_to_change
@require_http_methods(["GET", "POST"])
def edit(request, key):
    if request.method == "GET":
        return _editor(request, key)
    action = request.POST.get("action", "save")
    text = request.POST.get("text", "")
    base = request.POST.get("base_revision")
    author = request.user.username
    try:
        if action == "save":
            saved = service.save(key, text, base, origin="panel", author=author)
        elif action in ("restore", "take"):
            saved = service.restore(key, base, origin="panel", author=author)
        elif action == "keep":
            saved = service.keep_mine(key, base, origin="panel", author=author)
        else:
            raise core.Invalid({"action": f"Unknown action {action!r}."})
    except core.Invalid as exc:
        return _editor(request, key, draft=text if action == "save" else None, base=base,
                       errors=exc.fields, status=400)
    except service.Stale as exc:
        return _editor(request, key, draft=text if action == "save" else None, base=exc.latest,
                       conflict=_conflict(exc, key), status=409)
    if key.startswith("skill.") and action == "restore":
        return redirect("panel-prompts")
    return redirect(reverse("panel-prompt-edit", kwargs={"key": key})
                    + f"?saved={saved.revision}")


@roles.read_page
def versions(request):
    return _versions(request)


def _versions(request, errors=None):
    history = list(PromptVersion.objects.select_related("predecessor")[:200])
    latest = history[0].revision if history else 0
    diff = None
    errors = dict(errors or {})
    a, b = request.GET.get("from"), request.GET.get("to")
    if a is not None and b is not None:
        try:
            a_rev, b_rev = int(a), int(b)
            diff = {"from": a_rev, "to": b_rev,
                    "changes": service.changes_between(a_rev, b_rev)}
        except ValueError:
            errors["from"] = "Choose two revisions."
        except core.Invalid as exc:
            errors = exc.fields
    return render(request, "panel/prompt_versions.html", {
        "tab": "prompts", "sub": "versions", "history": history, "latest": latest,
        "diff": diff, "errors": errors, "restored": request.GET.get("restored"),
        "conflict": request.GET.get("conflict"),
    }, status=400 if errors else 200)


@roles.operator_required
@require_POST
def restore_version(request, revision):
    try:
        saved = service.restore_version(revision, request.POST.get("base_revision"),
                                        origin="panel", author=request.user.username)
    except core.Invalid as exc:
        return _versions(request, errors=exc.fields)
    except service.Stale as exc:
        return redirect(reverse("panel-prompt-versions") + f"?conflict={exc.latest}")
    return redirect(reverse("panel-prompt-versions") + f"?restored={saved.revision}")


@roles.read_page
def preview(request, role):
    if role not in assembly.ORDER:
        raise Http404("unknown role")
    result, revision = service.preview(role)
    parts = [{"key": p.key, "title": p.title, "layer": p.layer, "layer_name": p.layer_name,
              "source": p.source, "text": p.text,
              "short_hash": p.hash[:12] if p.hash else ""} for p in result.parts]
    return render(request, "panel/prompt_preview.html", {
        "tab": "prompts", "sub": f"preview-{role}", "role": role, "revision": revision,
        "parts": parts, "text": result.text, "layers": assembly.LAYERS,
        "chars": len(result.text), "routing_limit": contract.ROUTING_NOTE_MAX_WORDS,
    })
