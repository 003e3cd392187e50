"""The gate (pure): given a trigger's facts and a policy, the decision and the rule that matched.

Seed 002's admission table ("准入表"): per source, one row per scope; each row has up to
three cells —

- ``addressed``: an allowed person @mentions the agent → an explicit request;
- ``unaddressed_allowed``: an allowed person writes without @ → an inferred candidate;
- ``unaddressed_anyone``: anyone writes without @ → an inferred candidate.

The two unaddressed cells admit only where the source receives every message of that scope
(the trigger's ``receives_all`` fact). A CI result has no sender, so the CI row has only the
last cell. Bots never use the cells, only the source's bot list (a listed bot is at most an
inferred candidate). Under acceptance mode ``manual`` an inferred candidate keeps its
decision but carries the reason ``acceptance_manual``: it never becomes work (the router
records it as not accepted); under ``auto`` it goes to triage.

No Django, no I/O, no clock: nothing here depends on time. A ``Policy`` is compiled once from
a canonical document (see policy/document.py) so that one decision is a handful of dict and
set lookups; the verdicts themselves are precomputed and shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

EXPLICIT = "explicit"
INFERRED = "inferred"
IGNORE = "ignore"

ADDRESSED = "addressed"
UNADDRESSED_ALLOWED = "unaddressed_allowed"
UNADDRESSED_ANYONE = "unaddressed_anyone"
CELLS = (ADDRESSED, UNADDRESSED_ALLOWED, UNADDRESSED_ANYONE)
UNADDRESSED_CELLS = (UNADDRESSED_ALLOWED, UNADDRESSED_ANYONE)
BOTS = "bots"

MANUAL = "manual"
AUTO = "auto"
ACCEPTANCE_MODES = (MANUAL, AUTO)

# Scope rows per source kind, in the order shown in the panel: the policy's vocabulary,
# declared here (not filled in at start-up), so the gate is pure data and functions. Each
# source plugin takes its scopes from this table (intake/sources/<kind>.py: `scopes =
# SCOPES[kind]`), so a scope a plugin emits is always a row the policy knows.
SCOPES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "github": ("issue_new", "pr_new", "comment", "ci_default_branch"),
    "lark": ("group_configured", "group_other", "direct", "doc_comment"),
    "webchat": ("direct",),
})
# Rows a policy may also keep per place (seed 002: one row per configured Lark group):
# ``group_configured:<chat id>`` decides for that chat; a configured group without a row
# of its own is decided by the ``group_configured`` row.
PLACED_SCOPES: frozenset[str] = frozenset({"group_configured"})
# Rows whose events have no sender (a CI result): only the "anyone, unaddressed" cell.
NO_SENDER_SCOPES: frozenset[str] = frozenset({"ci_default_branch"})
# Kinds whose identities compare case-insensitively (GitHub logins).
CASE_INSENSITIVE_KINDS = frozenset({"github"})

# Content-free reasons.
SELF_MESSAGE = "self_message"
SOURCE_NOT_IN_POLICY = "source_not_in_policy"
UNKNOWN_SCOPE = "unknown_scope"
SCOPE_DISABLED = "scope_disabled"
BOT_NOT_LISTED = "bot_not_listed"
NOT_ADDRESSED = "not_addressed"
NOT_ALLOWED = "not_allowed"
CELL_CLOSED = "cell_closed"
NOT_RECEIVING_ALL = "not_receiving_all"
ACCEPTANCE_MANUAL = "acceptance_manual"
REASONS = (
    SELF_MESSAGE, SOURCE_NOT_IN_POLICY, UNKNOWN_SCOPE, SCOPE_DISABLED, BOT_NOT_LISTED,
    NOT_ADDRESSED, NOT_ALLOWED, CELL_CLOSED, NOT_RECEIVING_ALL, ACCEPTANCE_MANUAL,
)


def cells_of(scope: str) -> tuple[str, ...]:
    """The cells a scope row has: all three, or only the last one for sender-less rows."""
    return (UNADDRESSED_ANYONE,) if scope in NO_SENDER_SCOPES else CELLS


def placed(scope: str, place: str) -> str:
    """The row key of one place's own row: ``group_configured:oc_…``."""
    return f"{scope}:{place}"


def base_scope(row_key: str) -> str:
    """The scope a row key belongs to (a placed row's scope, or the key itself)."""
    return row_key.partition(":")[0]


def rule_id(source: str, scope: str, cell: str) -> str:
    """The id of one cell, as stored in a mandate's ``rule``: ``<source>.<scope>.<cell>``."""
    return f"{source}.{scope}.{cell}"


def bot_rule_id(source: str, scope: str) -> str:
    return f"{source}.{scope}.{BOTS}"


@dataclass(frozen=True, slots=True)
class Facts:
    """What the gate may know about a trigger. No text: the gate never reads content.

    ``actor`` is in the source's own identity terms (a GitHub login, a Lark open id).
    ``addressed`` means the event mentions the agent by its platform id. ``receives_all``
    says whether the source receives every message of this scope where the event happened.
    """

    source: str
    kind: str
    scope: str
    actor: str = ""
    is_human: bool = True
    is_bot: bool = False
    addressed: bool = False
    receives_all: bool = False
    is_self: bool = False
    place: str = ""  # the chat of a PLACED_SCOPES row (its own row may decide)

    @classmethod
    def of(cls, source: str, kind: str, trigger) -> Facts:
        """The gate's view of a trigger (amux_common.trigger_facts.TriggerFacts, or a
        stored Trigger, which has the same fields): the one place it is derived."""
        meta = trigger.meta or {}
        place = str(meta.get("chat_id") or "") if trigger.scope in PLACED_SCOPES else ""
        return cls(source=source, kind=kind, scope=trigger.scope, actor=trigger.actor or "",
                   is_human=trigger.is_human, is_bot=trigger.is_bot,
                   addressed=trigger.addressed, receives_all=trigger.receives_all,
                   is_self=bool(meta.get("own_message")), place=place)


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: str  # explicit | inferred | ignore
    strength: str | None  # explicit | inferred | None when ignored
    rule: str | None  # the cell that matched (also when acceptance_manual ignores it)
    reason: str | None  # content-free; None when admitted (acceptance_manual: not as work)

    @property
    def admitted(self) -> bool:
        return self.decision != IGNORE

    @property
    def becomes_work(self) -> bool:
        """Explicit, or inferred under automatic acceptance (then through triage)."""
        return self.decision != IGNORE and self.reason is None

    def as_dict(self) -> dict:
        return {"decision": self.decision, "strength": self.strength, "rule": self.rule,
                "reason": self.reason}


_IGNORED = {reason: Verdict(IGNORE, None, None, reason) for reason in REASONS}


class _Row:
    __slots__ = ("open", "no_sender", "addressed", "allowed", "anyone", "bot")

    def __init__(self, source: str, scope: str, cells: Mapping[str, bool], auto: bool):
        def verdict(cell: str, strength: str) -> Verdict | None:
            if not cells.get(cell):
                return None
            rule = rule_id(source, scope, cell)
            if strength == INFERRED and not auto:
                return Verdict(INFERRED, INFERRED, rule, ACCEPTANCE_MANUAL)
            return Verdict(strength, strength, rule, None)

        self.no_sender = base_scope(scope) in NO_SENDER_SCOPES
        self.addressed = None if self.no_sender else verdict(ADDRESSED, EXPLICIT)
        self.allowed = None if self.no_sender else verdict(UNADDRESSED_ALLOWED, INFERRED)
        self.anyone = verdict(UNADDRESSED_ANYONE, INFERRED)
        self.open = bool(self.addressed or self.allowed or self.anyone)
        bot_rule = bot_rule_id(source, scope)
        self.bot = Verdict(INFERRED, INFERRED, bot_rule, None if auto else ACCEPTANCE_MANUAL)


class _Part:
    __slots__ = ("fold", "allowed", "bots", "rows")

    def __init__(self, fold: bool, allowed, bots, rows: dict[str, _Row]):
        self.fold = fold
        self.allowed = frozenset(a.casefold() if fold else a for a in allowed)
        self.bots = frozenset(b.casefold() if fold else b for b in bots)
        self.rows = rows


class Policy:
    """A compiled policy document (canonical form, see policy/document.py).

    ``kinds`` maps each source slug to its kind (needed to know its rows and whether its
    identities are case-insensitive). Sources in the document whose kind is unknown are
    compiled with the rows the document names. ``scopes`` is the vocabulary the policy is
    read against (the scope rows each kind declares, normally ``SCOPES``): given, not read
    from a global, so the gate decides from its inputs alone.
    """

    __slots__ = ("acceptance", "auto", "parts", "scopes", "version")

    def __init__(self, document: Mapping, kinds: Mapping[str, str] | None = None,
                 version: str | None = None, acceptance: str | None = None, *,
                 scopes: Mapping[str, tuple[str, ...]]):
        kinds = kinds or {}
        self.scopes = scopes
        self.version = version
        self.acceptance = acceptance or document.get("acceptance", MANUAL)
        self.auto = self.acceptance == AUTO
        self.parts: dict[str, _Part] = {}
        for slug, part in (document.get("sources") or {}).items():
            kind = kinds.get(slug, "")
            rows = {scope: _Row(slug, scope, cells or {}, self.auto)
                    for scope, cells in (part.get("rows") or {}).items()}
            self.parts[slug] = _Part(kind in CASE_INSENSITIVE_KINDS, part.get("allowed") or (),
                                     part.get("bots") or (), rows)


def gate(f: Facts, policy: Policy) -> Verdict:
    """Decide one trigger. First match wins; the order is the seed's."""
    if f.is_self:
        return _IGNORED[SELF_MESSAGE]
    part = policy.parts.get(f.source)
    if part is None:
        return _IGNORED[SOURCE_NOT_IN_POLICY]
    row = part.rows.get(placed(f.scope, f.place)) if f.place else None
    if row is None:
        row = part.rows.get(f.scope)
    if row is None:  # a row the kind declares but the policy left out is a closed row
        declared = f.scope in policy.scopes.get(f.kind, ())
        return _IGNORED[SCOPE_DISABLED if declared else UNKNOWN_SCOPE]
    if not row.open:
        return _IGNORED[SCOPE_DISABLED]
    if row.no_sender:  # a CI result: no sender, only the "anyone, unaddressed" cell
        if not f.receives_all:
            return _IGNORED[NOT_RECEIVING_ALL]
        return row.anyone or _IGNORED[CELL_CLOSED]
    actor = f.actor.casefold() if part.fold else f.actor
    if f.is_bot or not f.is_human:  # bots never use the cells, only the bot list
        if actor and actor in part.bots:
            return row.bot
        return _IGNORED[BOT_NOT_LISTED]
    allowed = bool(actor) and actor in part.allowed
    if f.addressed and allowed and row.addressed is not None:
        return row.addressed
    if f.receives_all:
        if allowed and row.allowed is not None:
            return row.allowed
        if row.anyone is not None:
            return row.anyone
        if not allowed and (row.addressed is not None or row.allowed is not None):
            return _IGNORED[NOT_ALLOWED]
        return _IGNORED[CELL_CLOSED] if f.addressed else _IGNORED[NOT_ADDRESSED]
    if f.addressed:
        return _IGNORED[NOT_ALLOWED] if not allowed else _IGNORED[CELL_CLOSED]
    return _IGNORED[NOT_ADDRESSED]
