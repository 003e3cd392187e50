"""Reading and saving the policy (the only writer of policy/ models).

``save`` validates against the sources the tickets app reports, compares-and-swaps the head
so a stale base writes nothing, appends one immutable version and, in the same transaction,
writes its application as an outbox effect (``policy.apply``, keyed by the version): the
drainer tells the listeners (the engine's ``policy_changed``) so running evals are discarded
and affected live tickets get one input each.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from django.db import transaction

from effects import outbox
from effects.models import EffectKind
from policy import hooks
from policy.document import (
    PolicyInvalid,
    SourceInfo,
    compile_policy,
    diff,
    empty_document,
    validate,
    version_of,
)
from policy.effects import Affected, policy_effects
from policy.gate import PLACED_SCOPES, SCOPES, Facts, Policy, Verdict, gate, placed
from policy.models import PolicyHead, PolicyVersion
from policy.prompt import describe
from prompts_app.service import Reading


class StaleBase(Exception):  # noqa: N818 - reads as "the base is stale"
    def __init__(self, base: str | None, current: str | None):
        self.base, self.current = base, current
        super().__init__(f"the policy changed since {base or 'none'}: "
                         f"the current version is {current or 'none'}")


@dataclass(frozen=True)
class Current:
    version: str | None
    base_version: str | None
    document: dict
    entry: PolicyVersion | None

    def as_dict(self) -> dict:
        out = {"version": self.version, "base_version": self.base_version,
               "acceptance": self.document["acceptance"], "sources": self.document["sources"]}
        if self.entry is not None:
            out.update(saved_at=self.entry.created_at.isoformat(), author=self.entry.author,
                       origin=self.entry.origin)
        return out


def _head() -> PolicyHead:
    # Two first readers may race to create the one row: the loser's insert does nothing
    # (ON CONFLICT DO NOTHING), so there is no integrity error to tell apart.
    PolicyHead.objects.bulk_create([PolicyHead(pk=1)], ignore_conflicts=True)
    return PolicyHead.objects.get(pk=1)


def current() -> Current:
    head = PolicyHead.objects.select_related("entry").filter(pk=1).first()
    if head is None or head.entry is None:
        return Current(None, None, empty_document(), None)
    entry = head.entry
    return Current(entry.version, entry.base_version or None, entry.document, entry)


def document_of(version: str | None) -> dict:
    """The canonical document of a version hash (the empty policy for None)."""
    if not version:
        return empty_document()
    entry = PolicyVersion.objects.filter(version=version).order_by("-id").first()
    if entry is None:
        raise KeyError(version)
    return entry.document


def sources() -> dict[str, SourceInfo]:
    return hooks.sources()


def check_document(document) -> dict:
    """Validate and return the canonical form (raises PolicyInvalid)."""
    return validate(document, sources())


def save(document, base_version: str | None, author: str = "", origin: str = "api") -> Current:
    """Store a new version on top of ``base_version`` (None: on top of no policy).

    Raises PolicyInvalid (nothing written) or StaleBase (nothing written). Equal content to
    the current version is not a new version: the current one is answered.
    """
    canonical = check_document(document)
    new_version = version_of(canonical)
    base = base_version or ""
    _head()
    with transaction.atomic(durable=True):
        head = PolicyHead.objects.select_for_update(no_key=True).get(pk=1)
        if head.version != base:
            raise StaleBase(base_version, head.version or None)
        if head.version == new_version:
            return current()
        entry = PolicyVersion.objects.create(
            version=new_version, base_version=base, document=canonical,
            author=author[:150], origin=origin)
        swapped = PolicyHead.objects.filter(pk=1, version=base).update(
            version=new_version, entry=entry)
        if swapped != 1:  # lost a race the row lock did not prevent (SQLite): write nothing
            raise StaleBase(base_version, PolicyHead.objects.get(pk=1).version or None)
        old = base or None
        outbox.enqueue(EffectKind.POLICY_APPLY, f"version:{new_version}", {})
    return Current(new_version, old, canonical, entry)


class NotApplied(Exception):  # noqa: N818 - reads as "the version was not applied"
    pass


def apply_pending() -> tuple[str | None, str] | None:
    """Apply the effects of the current version on live work if not done yet. Effects are
    computed from the last applied version to the current one (a version saved over one not
    yet applied is applied with it); the engine's policy_changed is idempotent. Returns
    (old, new) when it ran; raises NotApplied when a listener failed, so the outbox tries
    the version again after its backoff."""
    head = PolicyHead.objects.filter(pk=1).first()
    if head is None or not head.version or head.version == head.applied_version:
        return None
    old, new = head.applied_version or None, head.version
    if not hooks.new_version_saved(old, new):
        raise NotApplied(f"a listener failed to apply policy version {new}")
    PolicyHead.objects.filter(pk=1, applied_version=head.applied_version).update(
        applied_version=new)
    return old, new


def apply_effect(effect_id: int, payload: dict) -> None:
    """The outbox handler of ``policy.apply`` (registered in policy/apps.py)."""
    apply_pending()


def preview(document) -> tuple[dict, str, list[dict], list[Affected]]:
    """What saving ``document`` would do: (canonical, version, changes, affected tickets)."""
    canonical = check_document(document)
    cur = current()
    infos = sources()
    affected = policy_effects(cur.document, canonical, hooks.live_mandates(), infos,
                              cur.version, version_of(canonical))
    return canonical, version_of(canonical), diff(cur.document, canonical), affected


def ticket_labels(affected: list[Affected]) -> dict:
    """Readable names of affected tickets (short name and title) for the preview."""
    wanted = {a.ticket for a in affected}
    return {m["ticket"]: " — ".join(x for x in (m.get("short_name"), m.get("title")) if x)
            for m in hooks.live_mandates() if m.get("ticket") in wanted}


def compiled(document: dict | None = None, version: str | None = None) -> Policy:
    if document is None:
        return current_policy()
    return compile_policy(document, sources(), version=version)


_COMPILED: dict[tuple, Policy] = {}


def current_version_query():
    """The current version's hash as a subquery ('' before the first save), so a caller
    can read it in a query it makes anyway (intake: with the source) and pass it to
    `current_policy`."""
    from django.db.models import Subquery

    return Subquery(PolicyHead.objects.filter(pk=1).values("version")[:1])


def current_version() -> str:
    """The current version's hash ('' before the first save): one small read, for a
    caller that decides a batch under one version (intake's drainer)."""
    return PolicyHead.objects.filter(pk=1).values_list("version", flat=True).first() or ""


def current_policy(kinds: dict[str, str] | None = None, version: str | None = None) -> Policy:
    """The current version, compiled once per (version, source kinds) and reused: what
    intake calls before each `gate(facts, policy)`; ``policy.version`` is the hash to store
    on the trigger.

    ``kinds`` (slug → kind) names the sources the caller will ask about; the gate reads only
    the part of the trigger's own source, so intake passes that one and saves reading every
    source on each delivery. None: all sources. ``version``: the current version's hash when
    the caller has read it already ('' for no policy yet; versions are immutable, so its
    compiled form is reused without reading the head again)."""
    if kinds is None:
        kinds = {slug: info.kind for slug, info in sources().items()}
    if version is not None:
        found = _COMPILED.get((version or None, tuple(sorted(kinds.items()))))
        if found is not None:
            return found
        document = document_of(version) if version else empty_document()
        return _compiled(version or None, document, kinds)
    cur = current()
    return _compiled(cur.version, cur.document, kinds)


def _compiled(version: str | None, document: dict, kinds: dict[str, str]) -> Policy:
    key = (version, tuple(sorted(kinds.items())))
    found = _COMPILED.get(key)
    if found is None:
        if len(_COMPILED) > 64:
            _COMPILED.clear()
        found = _COMPILED[key] = Policy(document, kinds, version=version, scopes=SCOPES)
    return found


class BadFacts(ValueError):
    def __init__(self, fields: dict[str, str]):
        self.fields = fields
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))


BOOL_FACTS = ("is_bot", "is_human", "addressed", "receives_all", "is_self")


def facts_from(data) -> Facts:
    """Trigger facts from request data (the `policy/check` body); raises BadFacts."""
    if not isinstance(data, dict):
        raise BadFacts({"body": "must be a JSON object"})
    errors: dict[str, str] = {}
    infos = sources()
    slug = data.get("source")
    info = infos.get(slug) if isinstance(slug, str) else None
    if not isinstance(slug, str) or not slug:
        errors["source"] = "required: a source slug"
    elif info is None:
        errors["source"] = "unknown source"
    scope = data.get("scope")
    if not isinstance(scope, str) or not scope:
        errors["scope"] = "required"
    elif info is not None and scope not in SCOPES.get(info.kind, ()):
        errors["scope"] = (f"unknown scope for a {info.kind} source "
                           f"(known: {', '.join(SCOPES.get(info.kind, ()))})")
    place = data.get("place", "")
    if place is None:
        place = ""
    if not isinstance(place, str):
        errors["place"] = "must be a string"
    elif place and info is not None and not (scope in PLACED_SCOPES
                                             and place in info.places):
        errors["place"] = ("must be one of the source's configured groups "
                           f"({', '.join(info.places) or 'none'}) with scope "
                           f"{' or '.join(sorted(PLACED_SCOPES))}")
    actor = data.get("actor", "")
    if actor is None:
        actor = ""
    if not isinstance(actor, str) or len(actor) > 200:
        errors["actor"] = "must be a string of at most 200 characters"
    flags = {}
    for name in BOOL_FACTS:
        value = data.get(name)
        if value is not None and not isinstance(value, bool):
            errors[name] = "must be true or false"
        flags[name] = value
    for key in data:
        if key not in ("source", "scope", "actor", "place", "version", *BOOL_FACTS):
            errors[str(key)] = "unknown field"
    if errors:
        raise BadFacts(errors)
    is_bot = bool(flags["is_bot"])
    receives_all = flags["receives_all"]
    if receives_all is None:
        receives_all = (placed(scope, place) if place else scope) in info.receives_all
    return Facts(source=slug, kind=info.kind, scope=scope, actor=actor.strip(),
                 is_human=(not is_bot) if flags["is_human"] is None else flags["is_human"],
                 is_bot=is_bot, addressed=bool(flags["addressed"]),
                 receives_all=bool(receives_all), is_self=bool(flags["is_self"]),
                 place=place)


def check(facts: Facts, document: dict | None = None) -> tuple[Verdict, str | None]:
    """The gate's decision for ``facts`` under the current version (or ``document``)."""
    if document is None:
        policy = current_policy()
        return gate(facts, policy), policy.version
    return gate(facts, compile_policy(document, sources())), version_of(document)


def prompt_part(role: str = "main", **context) -> str:
    """The policy part of a system prompt, from the current version (prompts_app calls it
    for every model request)."""
    cur = current()
    kinds = {slug: info.kind for slug, info in sources().items()}
    return describe(cur.document, cur.version, kinds, role)


def prompt_reading() -> Reading:
    """`prompt_part` for one model request, from values read in the statement the model
    gateway makes anyway (prompts_app.service.policy_reading): the head's version, then the
    sources' stamp."""
    return Reading((_HEAD_VERSION_SQL, *hooks.sources_stamp()), _part_read)


_HEAD_VERSION_SQL = f"(SELECT version FROM {PolicyHead._meta.db_table} WHERE id = 1)"
_KINDS: dict[tuple, dict[str, str]] = {}


def _part_read(values: tuple, role: str = "main", **context) -> str:
    version, *stamp = values
    version = version or None
    return describe(_document(version), version, _kinds(tuple(stamp)), role)


@lru_cache(maxsize=16)
def _document(version: str | None) -> dict:
    """A version's document by its hash (content-addressed: never stale)."""
    return document_of(version)


def _kinds(stamp: tuple) -> dict[str, str]:
    """The sources' kinds, kept by the stamp read with the request (a stamp names one state
    of the sources: any change gives a new one)."""
    found = _KINDS.get(stamp) if stamp else None
    if found is None:
        found = {slug: info.kind for slug, info in sources().items()}
        if stamp:
            if len(_KINDS) > 8:
                _KINDS.clear()
            _KINDS[stamp] = found
    return found


__all__ = ["BadFacts", "PolicyInvalid", "StaleBase", "check", "current", "facts_from",
           "preview", "save"]
