"""The model catalog of a runtime, as pure data (no Django, no I/O).

A catalog lists model references a person can pick, each with a display name (the ref when
none is given) and the reasoning efforts the catalog declares for it (empty: none declared,
the runtime checks an explicit effort itself). It comes either from the runtime itself
(Codex: the app-server's paged ``model/list`` under the runtime's own identity) or, with a
provider binding, from the provider's model list. A catalog that could not be read says why
(``status``) and lists nothing: a model is never guessed.

A provider's model list holds entries that are a bare name or
``{"name", "display_name"?, "efforts"?}``; the bare form is kept as it is (older data).

``@native-variant:`` references name a natively discovered backend variant: an opaque token
that carries the model and the variant identifier, restored at launch. A malformed one is
refused.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from amux_common import bounded_json

OK = "ok"
NOT_LOGGED_IN = "not_logged_in"
UNREACHABLE = "unreachable"
FAILED = "failed"
UNSUPPORTED = "unsupported"

NATIVE_VARIANT = "@native-variant:"
MAX_NAME = 120
MAX_EFFORTS = 16
MAX_EFFORT = 40   # LaunchPreset.effort and Session.effort are narrower; a model lists its own
MAX_MODELS = 500


@dataclass(frozen=True)
class ModelEntry:
    ref: str
    display_name: str = ""
    efforts: tuple[str, ...] = ()
    default_effort: str | None = None
    is_default: bool = False
    description: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "display_name": self.display_name or self.ref,
                "efforts": list(self.efforts), "default_effort": self.default_effort,
                "is_default": self.is_default, "description": self.description}


@dataclass(frozen=True)
class Catalog:
    status: str
    source: str  # "native" (the runtime's own list) or "provider"
    models: tuple[ModelEntry, ...] = ()
    message: str | None = None
    account: dict[str, Any] | None = field(default=None)

    @classmethod
    def unavailable(cls, status: str, message: str, source: str = "native") -> Catalog:
        return cls(status=status, source=source, models=(), message=message)

    def find(self, ref: str) -> ModelEntry | None:
        return next((m for m in self.models if m.ref == ref), None)

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "source": self.source, "message": self.message,
                "models": [m.as_dict() for m in self.models]}


# ------------------------------------------------------------------ provider model lists
def check_provider_models(raw: Any) -> tuple[list[Any], str | None]:
    """A provider's model list as stored (bare names stay bare; objects keep only the known
    keys), or the problem with it."""
    if raw is None:
        return [], None
    if not isinstance(raw, list):
        return [], "must be a list of model names or {name, display_name?, efforts?} objects"
    if len(raw) > MAX_MODELS:
        return [], f"Ensure this field has no more than {MAX_MODELS} elements."
    out: list[Any] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        where = f"entry {index + 1}"
        parsed = _entry(entry)
        if isinstance(parsed, str):
            return [], f"{where}: {parsed}"
        name, display, efforts = parsed
        if not name or len(name) > MAX_NAME:
            return [], f"{where}: name must be 1-{MAX_NAME} characters"
        if name.startswith(NATIVE_VARIANT):
            return [], f"{where}: {NATIVE_VARIANT} references come from native discovery"
        if name in seen:
            return [], f"{where}: {name!r} is listed twice"
        seen.add(name)
        if not display and not efforts:
            out.append(name)
        else:
            item: dict[str, Any] = {"name": name}
            if display:
                item["display_name"] = display
            if efforts:
                item["efforts"] = efforts
            out.append(item)
    return out, None


def _entry(entry: Any) -> tuple[str, str, list[str]] | str:
    """One entry's (name, display name, efforts), stripped, or what is wrong with it."""
    if isinstance(entry, str):
        return entry.strip(), "", []
    if not isinstance(entry, dict):
        return "must be a model name or an object"
    unknown = set(entry) - {"name", "display_name", "efforts"}
    if unknown:
        return f"unknown keys {', '.join(sorted(unknown))}"
    name, display, efforts = entry.get("name"), entry.get("display_name"), entry.get("efforts")
    if not isinstance(name, str):
        return "name must be a string"
    if display is not None and not isinstance(display, str):
        return "display_name must be a string"
    if display is not None and len(display.strip()) > MAX_NAME:
        return f"display_name must be at most {MAX_NAME} characters"
    if efforts is not None and not (
            isinstance(efforts, list) and len(efforts) <= MAX_EFFORTS
            and all(isinstance(e, str) and e.strip() and len(e) <= MAX_EFFORT
                    for e in efforts)):
        return "efforts must be a list of effort names"
    return name.strip(), (display or "").strip(), [e.strip() for e in efforts or []]


def provider_entries(stored: Any) -> tuple[ModelEntry, ...]:
    """The entries of a stored provider model list (unreadable entries are skipped: the
    list was checked when it was saved)."""
    out = []
    for entry in stored or []:
        if isinstance(entry, str) and entry.strip():
            out.append(ModelEntry(ref=entry.strip()))
        elif isinstance(entry, dict) and isinstance(entry.get("name"), str):
            out.append(ModelEntry(ref=entry["name"],
                                  display_name=str(entry.get("display_name") or ""),
                                  efforts=tuple(str(e) for e in entry.get("efforts") or ())))
    return tuple(out)


def provider_catalog(stored: Any) -> Catalog:
    return Catalog(status=OK, source="provider", models=provider_entries(stored))


def names(stored: Any) -> list[str]:
    """Just the model names of a stored provider model list."""
    return [m.ref for m in provider_entries(stored)]


# ------------------------------------------------------------------ native variants
def native_variant_ref(model: str, variant: str) -> str:
    token = json.dumps({"model": model, "variant": variant}, separators=(",", ":"))
    return NATIVE_VARIANT + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def parse_native_variant(ref: str) -> tuple[str, str]:
    """(model, variant) of a ``@native-variant:`` reference; ValueError names the problem."""
    body = ref[len(NATIVE_VARIANT):]
    if not body:
        raise ValueError("the @native-variant: reference is empty")
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        data = bounded_json.loads(raw.decode())
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise ValueError("the @native-variant: reference is not one amux issued") from None
    if not isinstance(data, dict) or set(data) != {"model", "variant"} or not all(
            isinstance(data[k], str) and data[k] and len(data[k]) <= MAX_NAME
            for k in ("model", "variant")):
        raise ValueError("the @native-variant: reference lacks its model or variant")
    return data["model"], data["variant"]


def is_native_variant(ref: str) -> bool:
    return ref.startswith(NATIVE_VARIANT)


def launch_model(ref: str) -> str:
    """The model name the runtime is started with for a stored reference."""
    return parse_native_variant(ref)[0] if is_native_variant(ref) else ref


# ------------------------------------------------------------------ Codex model/list
def codex_entry(model: dict[str, Any]) -> ModelEntry:
    """One ``Model`` of Codex's ``model/list``: a preset whose id differs from its model
    slug is a native variant (kept opaque, restored at launch)."""
    slug = str(model.get("model") or model.get("id"))
    preset = str(model.get("id") or slug)
    ref = slug if preset == slug else native_variant_ref(slug, preset)
    efforts = tuple(str(e.get("reasoningEffort")) for e in
                    model.get("supportedReasoningEfforts") or []
                    if isinstance(e, dict) and e.get("reasoningEffort"))
    return ModelEntry(ref=ref, display_name=str(model.get("displayName") or ""),
                      efforts=efforts,
                      default_effort=model.get("defaultReasoningEffort") or None,
                      is_default=bool(model.get("isDefault")),
                      description=str(model.get("description") or ""))


def logged_in(account_result: dict[str, Any]) -> bool:
    """From Codex's ``account/read``: an account, or a provider that needs no OpenAI auth."""
    return bool(account_result.get("account")) or not account_result.get(
        "requiresOpenaiAuth", True)
