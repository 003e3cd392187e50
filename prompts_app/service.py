"""The prompt configuration's only writer and the per-request reader other apps call.

Writes: `save`, `restore`, `keep_mine`, `restore_version`. Each takes the revision it is
based on; a stale base raises `Stale` and writes nothing; bad input raises `core.Invalid`
and writes nothing; otherwise it creates exactly one new immutable `PromptVersion`.
Saving touches nothing outside this app: it never restarts, cancels or wakes a session.

Reads: `current(role)` for every model request (amux's model gateway puts it in place of
the marked prompt block of each request, sessions/request_prompts.py, so a save reaches a
running turn's next request): the assembled system prompt of the latest version, the
revision it came from, and its parts.
Sessions record the revisions each turn used (`note_revision`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, transaction

from amux_common.integrity import violates
from amux_common.ports import Port
from prompts_app import assembly, contract, core, library
from prompts_app.core import Invalid
from prompts_app.models import ONE_PER_REVISION, BuiltinText, PromptVersion

ORIGINS = ("panel", "api", "tool")

__all__ = ["Invalid", "Stale", "current", "for_turn", "save", "restore", "keep_mine",
           "restore_version", "fragments", "fragment", "note_revision", "policy_part",
           "policy_reading", "request_sql", "for_request"]


class Stale(Exception):
    """The save was based on an older revision than the latest; nothing was written."""

    def __init__(self, latest: int, base: int):
        super().__init__(f"revision {latest} was saved after base revision {base}")
        self.latest = latest
        self.base = base


class Saved(NamedTuple):
    revision: int
    created: bool


class Current(NamedTuple):
    text: str
    revision: int
    parts: tuple[assembly.Part, ...]


# --- built-in defaults -------------------------------------------------------------------

def defaults_dir() -> Path:
    """Where the built-in fragment files are read from (`PROMPTS_DEFAULTS_DIR`, for tests
    and for installations that ship their own)."""
    return Path(getattr(settings, "PROMPTS_DEFAULTS_DIR", None) or library.PACKAGED)


def defaults() -> dict[str, library.Default]:
    directory = defaults_dir()
    if directory == library.PACKAGED:
        return _packaged()
    return library.load(directory)


@cache
def _packaged() -> dict[str, library.Default]:
    """The packaged files are part of the installed code: read once per process (a
    `PROMPTS_DEFAULTS_DIR` is read every time: tests and installations change its files)."""
    return library.load(library.PACKAGED)


def _remember(defs: dict[str, library.Default]) -> None:
    BuiltinText.objects.bulk_create(
        [BuiltinText(hash=d.hash, key=d.key, text=d.text) for d in defs.values()],
        ignore_conflicts=True,
    )


def defaults_of(version: PromptVersion | None) -> dict[str, library.Default]:
    """The built-in texts as they were when `version` was saved (current ones otherwise)."""
    now = defaults()
    if version is None:
        return now
    hashes = (version.config or {}).get("defaults") or {}
    known = {b.hash: b.text for b in BuiltinText.objects.filter(hash__in=hashes.values())}
    out = dict(now)
    for key, digest in hashes.items():
        if key in out and digest in known:
            out[key] = library.Default(key, known[digest], digest)
    return out


# --- reading -----------------------------------------------------------------------------

def latest() -> PromptVersion | None:
    return PromptVersion.objects.order_by("-revision").first()


def latest_revision() -> int:
    head = latest()
    return head.revision if head else 0


def version(revision: int) -> PromptVersion | None:
    if revision == 0:
        return None
    return PromptVersion.objects.filter(revision=revision).first()


def _view(key: str, config: dict, defs: dict, revision: int) -> dict:
    kind = core.kind_of(key)
    view = {"key": key, "kind": kind, "revision": revision, "base_hash": None,
            "base_text": None, "default_hash": None}
    if kind == "fixed":
        fixed = contract.get(key)
        return {**view, "category": fixed.kind, "title": fixed.title, "help": "In code; part "
                "of amux's contract.", "roles": list(fixed.roles), "required": True,
                "editable": False, "state": "default", "text": fixed.text,
                "default_text": fixed.text}
    if kind == "builtin":
        meta = next(b for b in core.BUILTINS if b.key == key)
        override = config["fragments"].get(key) or {}
        view.update(title=meta.title, help=meta.help, roles=list(meta.roles), required=True,
                    default_text=defs[key].text, default_hash=defs[key].hash,
                    base_hash=override.get("base_hash"))
    elif kind == "team":
        meta = next(s for s in core.TEAM_SECTIONS if s.key == key)
        view.update(title=meta.title, help=meta.help, roles=list(meta.roles),
                    required=meta.required, default_text="")
    else:
        slug = key[len("skill."):]
        view.update(title=f"Skill: {slug}", help="Team reference material, read when relevant.",
                    roles=list(core.ROLES), required=False, default_text="")
    state = core.state(config, key, defs)
    if state == "default_updated":
        view["base_text"] = config["fragments"][key].get("base_text")
    return {**view, "category": kind, "editable": True, "state": state,
            "text": core.text_in_effect(config, key, defs)}


def fragments(revision: int | None = None) -> list[dict]:
    """Every fragment (team sections, skills, built-ins, then texts in code) with its state,
    as of `revision` (default: the latest)."""
    head = latest() if revision is None else version(revision)
    rev = head.revision if head else 0
    config = core.as_config(head.config if head else None)
    defs = defaults()
    keys = [*core.keys_of(config), *contract.fixed_texts()]
    return [_view(key, config, defs, rev) for key in keys]


def fragment(key: str) -> dict:
    """One fragment as of the latest revision. Unknown keys raise Invalid; a well-formed
    skill key that does not exist yet reads as an empty skill in state "default"."""
    core.kind_of(key)
    head = latest()
    return _view(key, core.as_config(head.config if head else None), defaults(),
                 head.revision if head else 0)


PREVIEW_POLICY = ("(The policy part is generated from the current policy for every request; "
                  "no request is being made here.)")

# `provider(role=..., **context) -> str`, called on every request to regenerate the policy
# part; the policy app provides it (prompts_app cannot import policy).
policy_part: Port[Callable[..., str]] = Port("prompts.policy_part")


def current(role: str, policy: str | None = None, **context) -> Current:
    """The system prompt for one model request of `role` ("main", "worker" or "triage"), from the
    latest version: (text, revision, parts). Call it for every request, never cache it
    across requests; record `revision` on the turn (see `note_revision`)."""
    head = latest()
    if policy is None and policy_part.provided:
        policy = policy_part(role=role, **context)
    result = assembly.assemble(role, head.config if head else {}, defaults(), policy)
    return Current(result.text, head.revision if head else 0, result.parts)


def for_turn(role: str, **context) -> tuple[str, list[int]]:
    """The system prompt of one agent turn of `role`, assembled from the latest version, and
    the revisions it came from (the session records them on the turn). This is how the text
    first reaches the runtime; the model gateway replaces it with the latest version in
    each model request, so a save mid-turn reaches the turn's next request (a session whose
    requests bypass the gateway, an attached app-server, gets it with its next turn)."""
    cur = current(role, **context)
    return cur.text, note_revision(None, cur.revision)


def preview(role: str, revision: int | None = None, policy: str | None = None):
    head = latest() if revision is None else version(revision)
    defs = defaults() if revision is None else defaults_of(head)
    if policy is None and policy_part.provided:
        try:
            policy = policy_part(role=role)
        except Exception:  # noqa: BLE001 - a preview must render even without context
            policy = None
    if policy is None:
        policy = PREVIEW_POLICY
    result = assembly.assemble(role, head.config if head else {}, defs, policy)
    return result, head.revision if head else 0


class Reading(NamedTuple):
    """The per-request form of a part of the prompt: `sql`, scalar SQL expressions reading
    what the part depends on (the model gateway reads them in the one statement it makes
    per request), and `part(values, role=..., **context)`, the part made from exactly the
    values read (what it caches is cached by those values, so it is never stale)."""

    sql: tuple[str, ...]
    part: Callable[..., str]


# `provider() -> Reading` of the policy part; the policy app provides it (without it a
# request asks `policy_part`).
policy_reading: Port[Callable[[], Reading]] = Port("prompts.policy_reading")

_TABLE = PromptVersion._meta.db_table
# the latest revision and when it was saved: a revision number alone may name another
# version after a database is reset or restored (a test's rollback), its time does not
_LATEST_SQL = (f"(SELECT MAX(revision) FROM {_TABLE})",
               f"(SELECT at FROM {_TABLE} ORDER BY revision DESC LIMIT 1)")


def request_sql() -> tuple[str, ...]:
    """Scalar SQL expressions whose values (read at one model request, in one statement)
    `for_request` makes that request's prompt from: the latest version's, then what the
    policy part depends on."""
    return (*_LATEST_SQL, *(policy_reading().sql if policy_reading.provided else ()))


def for_request(role: str, values, **context) -> tuple[str, list[int]]:
    """`for_turn` for one model request, from the `request_sql()` values read for it: the
    prompt as it reads at that moment, without an ORM query (the model gateway's budget)."""
    revision, saved_at, *policy_values = values
    revision = revision or 0
    if policy_reading.provided:
        policy = policy_reading().part(tuple(policy_values), role=role, **context)
    else:
        policy = policy_part(role=role, **context) if policy_part.provided else None
    result = assembly.assemble(role, _config(revision, saved_at), defaults(), policy)
    return result.text, note_revision(None, revision)


@lru_cache(maxsize=16)
def _config(revision: int, saved_at) -> dict:
    """A version's configuration (versions are immutable), by its revision and the time
    it was saved."""
    found = version(revision)
    return found.config if found else {}


def note_revision(revisions: list | None, revision: int) -> list[int]:
    """The list of prompt revisions a turn used, with `revision` added if it is new; a turn
    whose requests straddle a save lists both."""
    out = list(revisions or [])
    if revision not in out:
        out.append(revision)
    return out


# --- writing -----------------------------------------------------------------------------

def base_of(base_revision) -> int:
    if isinstance(base_revision, bool) or base_revision is None:
        raise Invalid({"base_revision": "The revision this save is based on is required "
                                        "(0 when nothing has been saved yet)."})
    try:
        value = int(base_revision)
    except (TypeError, ValueError):
        raise Invalid({"base_revision": "Must be a whole number."}) from None
    if value < 0 or (isinstance(base_revision, float) and base_revision != value):
        raise Invalid({"base_revision": "Must be a whole number of at least 0."})
    return value


def _commit(base_revision, make, *, origin: str, author: str, summary: str) -> Saved:
    base = base_of(base_revision)
    if origin not in ORIGINS:
        raise Invalid({"origin": f"One of {', '.join(ORIGINS)}."})
    defs = defaults()
    try:
        with transaction.atomic(durable=True):
            head = (PromptVersion.objects.select_for_update(no_key=True)
                    .order_by("-revision").first())
            head_rev = head.revision if head else 0
            if base > head_rev:
                raise Invalid({"base_revision": f"There is no revision {base}; the latest is "
                                                f"{head_rev}."})
            if base != head_rev:
                raise Stale(head_rev, base)
            old = core.as_config(head.config if head else None)
            new = make(old, defs)
            if core.comparable(new) == core.comparable(old):
                return Saved(head_rev, False)
            _remember(defs)
            created = PromptVersion(revision=head_rev + 1, predecessor=head, config=new,
                                    origin=origin, author=author[:150], summary=summary[:300])
            created.save(force_insert=True)
    except IntegrityError as exc:
        if not violates(exc, ONE_PER_REVISION):
            raise
        raise Stale(latest_revision(), base) from None
    return Saved(created.revision, True)


def save(key: str, text, base_revision, *, origin: str = "api", author: str = "") -> Saved:
    core.check_editable(key)
    return _commit(base_revision, lambda config, defs: core.with_text(config, key, text, defs),
                   origin=origin, author=author, summary=f"{key}: saved")


def restore(key: str, base_revision, *, origin: str = "api", author: str = "") -> Saved:
    """Back to the default ("take the new default" for a default-updated fragment)."""
    kind = core.check_editable(key)
    what = {"builtin": "default restored", "team": "cleared", "skill": "removed"}[kind]
    return _commit(base_revision, lambda config, defs: core.restored(config, key, defs),
                   origin=origin, author=author, summary=f"{key}: {what}")


def keep_mine(key: str, base_revision, *, origin: str = "api", author: str = "") -> Saved:
    """Keep the override of a default-updated fragment, now against the new default."""
    core.check_editable(key)
    return _commit(base_revision, lambda config, defs: core.kept(config, key, defs),
                   origin=origin, author=author, summary=f"{key}: kept over the new default")


def restore_version(revision, base_revision, *, origin: str = "api",
                    author: str = "") -> Saved:
    """A new version holding the configuration of an older one."""
    try:
        wanted = int(revision)
    except (TypeError, ValueError):
        raise Invalid({"revision": "Must be a whole number."}) from None
    old = version(wanted)
    if wanted != 0 and old is None:
        raise Invalid({"revision": f"There is no revision {wanted}."})
    source = core.as_config(old.config if old else None)

    def make(config, defs):
        new = core.as_config(config)
        for part in ("fragments", "team", "skills"):
            new[part] = source[part]
        return core.stamped(new, defs)

    return _commit(base_revision, make, origin=origin, author=author,
                   summary=f"revision {wanted} restored")


def changes_between(a: int, b: int) -> list[core.Change]:
    """What differs in effect between revisions a and b (0 = built-ins only, as now)."""
    va, vb = version(a), version(b)
    for rev, v, field in ((a, va, "from"), (b, vb, "to")):
        if rev != 0 and v is None:
            raise Invalid({field: f"There is no revision {rev}."})
    return core.changes(core.as_config(va.config if va else None),
                        core.as_config(vb.config if vb else None),
                        defaults_of(va), defaults_of(vb), f"r{a}", f"r{b}")
