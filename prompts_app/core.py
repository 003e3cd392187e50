"""The prompt configuration as data: keys, validation, fragment state, edits (pure, no Django).

A configuration (what one version holds) is a plain dict:

    {"fragments": {key: {"text", "base_hash", "base_text"}},   # overrides of built-ins
     "team": {key: text},                                      # the three team sections
     "skills": {slug: text},                                   # team skills
     "defaults": {key: hash}}                                  # built-ins in effect when saved

Built-in defaults are `{key: Default(text, hash)}`, loaded from files by `library`.
Every edit is a function from (config, defaults) to a new config; none mutates its input.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import re
from dataclasses import dataclass

from prompts_app import contract

MAX_TEXT_CHARS = 20_000
MAX_SKILLS = 40
MAX_TOTAL_CHARS = 120_000  # everything a team writes, together (it all goes into prompts)
SKILL_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")

ROLES = ("main", "worker", "triage")


@dataclass(frozen=True)
class Builtin:
    key: str
    title: str
    roles: tuple[str, ...]
    help: str


# The built-in fragments, in assembly order. Their texts live in files (defaults/<key>.md).
BUILTINS: tuple[Builtin, ...] = (
    Builtin("shared.attention", "Attention principle", ROLES,
            "The axiom: act more than talk, silence by default."),
    Builtin("main.role", "Main session: role", ("main",),
            "Routes work, never plans it; routing notes of at most 30 words."),
    Builtin("main.triage", "Main session: explicit, inferred, follow-ups", ("main",),
            "How the main session treats explicit requests, inferred candidates, follow-ups."),
    Builtin("worker.role", "Worker: role", ("worker",),
            "One ticket, one work directory; report, ask, hand_back, reply."),
    Builtin("worker.pull_requests", "Worker: pull requests and reports", ("worker",),
            "What a worker's pull requests and reports look like."),
    Builtin("triage.role", "Triage: role", ("triage",),
            "How an inferred candidate is judged: accept, decline or needs a person."),
    Builtin("shared.rules", "Shared rules", ROLES,
            "Mandate, requirements from the original source, context is not authority."),
)
BUILTIN_KEYS = tuple(b.key for b in BUILTINS)


@dataclass(frozen=True)
class TeamSection:
    key: str
    title: str
    roles: tuple[str, ...]
    required: bool
    help: str


TEAM_SECTIONS: tuple[TeamSection, ...] = (
    TeamSection("team.about", "Team: who we are", ROLES, True,
                "Who the team is, what it builds, where things live, who decides what. "
                "Both roles read it."),
    TeamSection("team.main", "Team: notes for the main session", ("main", "triage"), False,
                "Routing preferences: which requests matter, who owns which area."),
    TeamSection("team.worker", "Team: notes for workers", ("worker",), False,
                "Engineering conventions: how to build and test, branches, commits, review."),
)
TEAM_KEYS = tuple(s.key for s in TEAM_SECTIONS)


class Invalid(Exception):
    """Bad input; `fields` maps each offending field to a message."""

    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalise(text: str) -> str:
    """Line endings to \\n, no trailing whitespace at the end; what we store and hash."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip("\n").rstrip() + (
        "\n" if text.strip() else ""
    )


def empty_config() -> dict:
    return {"fragments": {}, "team": {}, "skills": {}, "defaults": {}}


def as_config(raw: dict | None) -> dict:
    config = empty_config()
    for part in config:
        config[part] = copy.deepcopy((raw or {}).get(part) or {})
    return config


def kind_of(key: str) -> str:
    """'builtin', 'team', 'skill' or 'fixed'; raises Invalid(key) for anything else."""
    if not isinstance(key, str) or not key:
        raise Invalid({"key": "A fragment key is required."})
    if key in BUILTIN_KEYS:
        return "builtin"
    if key in TEAM_KEYS:
        return "team"
    if contract.get(key) is not None:
        return "fixed"
    if key.startswith("skill."):
        if SKILL_SLUG.match(key[len("skill."):]):
            return "skill"
        raise Invalid({"key": "A skill key is skill.<name>, where the name is 1-40 lowercase "
                              "letters, digits or hyphens."})
    raise Invalid({"key": f"Unknown fragment {key!r}."})


def check_editable(key: str) -> str:
    kind = kind_of(key)
    if kind == "fixed":
        raise Invalid({"key": f"{key} is part of amux's code contract (a tool description, "
                              "notice or card format) and cannot be overridden."})
    return kind


def clean_text(key: str, kind: str, text) -> str:
    if not isinstance(text, str):
        raise Invalid({"text": "The text must be a string."})
    if "\x00" in text:
        raise Invalid({"text": "The text may not contain NUL characters."})
    if len(text) > MAX_TEXT_CHARS:
        raise Invalid({"text": f"At most {MAX_TEXT_CHARS} characters; this text has "
                               f"{len(text)}."})
    text = normalise(text)
    if not text:
        if kind == "builtin":
            raise Invalid({"text": f"{key} cannot be empty; restore the default instead of "
                                   "saving an empty override."})
        if kind == "team" and _team(key).required:
            raise Invalid({"text": f"{key} is a required section and cannot be empty."})
        if kind == "skill":
            raise Invalid({"text": "A skill cannot be empty; remove it instead."})
    return text


def _team(key: str) -> TeamSection:
    return next(s for s in TEAM_SECTIONS if s.key == key)


def with_text(config: dict, key: str, text, defaults: dict) -> dict:
    """The configuration with `key` set to `text` (validated). An override records the hash
    (and the text) of the built-in it was written against."""
    kind = check_editable(key)
    text = clean_text(key, kind, text)
    new = as_config(config)
    if kind == "builtin":
        default = defaults[key]
        if text == default.text:
            new["fragments"].pop(key, None)
        else:
            new["fragments"][key] = {"text": text, "base_hash": default.hash,
                                     "base_text": default.text}
    elif kind == "team":
        if text:
            new["team"][key] = text
        else:
            new["team"].pop(key, None)
    else:
        slug = key[len("skill."):]
        if slug not in new["skills"] and len(new["skills"]) >= MAX_SKILLS:
            raise Invalid({"key": f"At most {MAX_SKILLS} skills."})
        new["skills"][slug] = text
    return stamped(check_total(new), defaults)


def restored(config: dict, key: str, defaults: dict) -> dict:
    """The configuration with `key` back at its default: a built-in follows its default
    again, a team section is cleared, a skill is removed."""
    kind = check_editable(key)
    if kind == "team" and _team(key).required:
        raise Invalid({"key": f"{key} is a required section; it cannot be cleared, only "
                              "rewritten."})
    new = as_config(config)
    if kind == "builtin":
        new["fragments"].pop(key, None)
    elif kind == "team":
        new["team"].pop(key, None)
    else:
        new["skills"].pop(key[len("skill."):], None)
    return stamped(new, defaults)


def kept(config: dict, key: str, defaults: dict) -> dict:
    """"Keep mine": the override stays as written, now recorded against the current
    default (so it is no longer "default updated")."""
    kind = check_editable(key)
    if kind != "builtin" or key not in (config.get("fragments") or {}):
        raise Invalid({"key": f"{key} has no override to keep."})
    new = as_config(config)
    default = defaults[key]
    new["fragments"][key] = {**new["fragments"][key], "base_hash": default.hash,
                             "base_text": default.text}
    return stamped(new, defaults)


def written_chars(config: dict) -> int:
    config = as_config(config)
    return (sum(len(o["text"]) for o in config["fragments"].values())
            + sum(len(t) for t in config["team"].values())
            + sum(len(t) for t in config["skills"].values()))


def check_total(config: dict, field: str = "text") -> dict:
    total = written_chars(config)
    if total > MAX_TOTAL_CHARS:
        raise Invalid({field: f"All team texts, skills and overrides together may have at most "
                              f"{MAX_TOTAL_CHARS} characters; this save would make {total}."})
    return config


def stamped(config: dict, defaults: dict) -> dict:
    config["defaults"] = {key: defaults[key].hash for key in BUILTIN_KEYS if key in defaults}
    return config


def state(config: dict, key: str, defaults: dict) -> str:
    """'default', 'overridden' or 'default_updated' (the built-in changed under an override)."""
    kind = kind_of(key)
    if kind == "builtin":
        override = (config.get("fragments") or {}).get(key)
        if not override:
            return "default"
        if override.get("base_hash") != defaults[key].hash:
            return "default_updated"
        return "overridden"
    if kind == "team":
        return "overridden" if (config.get("team") or {}).get(key) else "default"
    if kind == "skill":
        return "overridden" if key[len("skill."):] in (config.get("skills") or {}) else "default"
    return "default"


def text_in_effect(config: dict, key: str, defaults: dict) -> str:
    kind = kind_of(key)
    if kind == "builtin":
        override = (config.get("fragments") or {}).get(key)
        return override["text"] if override else defaults[key].text
    if kind == "team":
        return (config.get("team") or {}).get(key, "")
    if kind == "skill":
        return (config.get("skills") or {}).get(key[len("skill."):], "")
    return contract.get(key).text


def keys_of(config: dict) -> list[str]:
    """Every editable key this configuration knows, in panel order."""
    skills = sorted(f"skill.{s}" for s in (config.get("skills") or {}))
    return [*TEAM_KEYS, *skills, *BUILTIN_KEYS]


def comparable(config: dict) -> dict:
    """The part of a configuration that a save changes (for no-op detection)."""
    return {k: as_config(config)[k] for k in ("fragments", "team", "skills")}


@dataclass(frozen=True)
class Change:
    key: str
    before: str
    after: str
    diff: str


def diff_texts(before: str, after: str, key: str, a: str, b: str) -> str:
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"{key} @ {a}", tofile=f"{key} @ {b}", n=2,
    ))


def changes(old: dict, new: dict, old_defaults: dict, new_defaults: dict,
            a: str = "a", b: str = "b") -> list[Change]:
    """Per key, what differs in effect between two configurations (each read with its own
    built-in defaults)."""
    out = []
    keys = list(dict.fromkeys([*keys_of(old), *keys_of(new)]))
    for key in keys:
        before = text_in_effect(old, key, old_defaults)
        after = text_in_effect(new, key, new_defaults)
        if before != after:
            out.append(Change(key, before, after, diff_texts(before, after, key, a, b)))
    return out
