"""Agent Profile manifests, version 2 only (seed 000, 产品身份). Pure.

A v2 manifest is expert content: a name, a description, instructions and skills. It never
chooses how it runs — the runtime, model, provider and permissions belong to the caller
and to amux's launch presets — so a manifest that declares any of them is refused, naming
the field, rather than having the field ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sessions import limits

VERSION = 2
EXECUTION_FIELDS = ("engine", "runtime", "model", "models", "model_allowlist", "provider",
                    "permissions", "permission_mode")
ALLOWED = ("version", "name", "description", "instructions", "skills")
SKILL_FIELDS = ("name", "description", "content")
MAX_NAME = 120
MAX_DESCRIPTION = limits.PROFILE_DESCRIPTION
MAX_TEXT = limits.PROFILE_INSTRUCTIONS
MAX_SKILLS = limits.PROFILE_SKILLS
SKILL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,79}$")


class ManifestError(ValueError):
    """Every fault of a manifest: ``faults`` maps each culprit's dotted path (``name``,
    ``skills.0.content``; "" for the manifest itself) to what is wrong with it; ``field``
    is the first."""

    def __init__(self, faults: dict[str, str]):
        super().__init__("; ".join(faults.values()))
        self.faults = dict(faults)
        self.field = next(iter(self.faults))


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    content: str


@dataclass(frozen=True)
class Manifest:
    name: str
    description: str
    instructions: str
    skills: tuple[Skill, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"version": VERSION, "name": self.name, "description": self.description,
                "instructions": self.instructions,
                "skills": [{"name": s.name, "description": s.description,
                            "content": s.content} for s in self.skills]}


def _text(data: dict[str, Any], key: str, where: str, limit: int, required: bool,
          faults: dict[str, str]) -> str:
    path = f"{where}{key}"
    value = data.get(key, "")
    if not isinstance(value, str):
        faults[path] = f"{path} must be a string"
        return ""
    value = value.strip()
    if required and not value:
        faults[path] = f"{path} is required"
    elif len(value) > limit:
        faults[path] = f"{path} is longer than {limit} characters"
    return value


def parse(data: Any) -> Manifest:
    """The manifest, checked; ``ManifestError`` names every fault at once, each by its
    dotted path (``manifest.`` prefixed by the caller)."""
    if not isinstance(data, dict):
        raise ManifestError({"": "the manifest must be an object"})
    faults: dict[str, str] = {}
    for key in EXECUTION_FIELDS:
        if key in data:
            faults[key] = (f"a v2 manifest cannot declare {key!r}: the runtime, model, "
                           "provider and permissions are chosen by the caller and amux's "
                           "launch presets")
    version = data.get("version")
    if version != VERSION or isinstance(version, bool):
        faults["version"] = f"only manifest version {VERSION} is accepted (got {version!r})"
    for key in sorted(set(data) - set(ALLOWED) - set(EXECUTION_FIELDS)):
        faults[str(key)] = (f"unknown field {key!r} (a v2 manifest has "
                            f"{', '.join(ALLOWED)})")
    name = _text(data, "name", "", MAX_NAME, True, faults)
    description = _text(data, "description", "", MAX_DESCRIPTION, False, faults)
    instructions = _text(data, "instructions", "", MAX_TEXT, False, faults)
    raw = data.get("skills", [])
    if not isinstance(raw, list):
        faults["skills"] = "skills must be a list"
        raw = []
    elif len(raw) > MAX_SKILLS:
        faults["skills"] = f"at most {MAX_SKILLS} skills"
    skills = [_skill(index, item, faults) for index, item in enumerate(raw[:MAX_SKILLS])]
    seen: set[str] = set()
    for index, skill in enumerate(skills):
        if skill is None or f"skills.{index}.name" in faults:
            continue
        if not SKILL_NAME.match(skill.name) or skill.name.lower() in seen:
            faults[f"skills.{index}.name"] = (f"skill name {skill.name!r} must be unique, "
                                              "letters, digits, spaces, '.', '_' or '-'")
        seen.add(skill.name.lower())
    if faults:
        raise ManifestError(faults)
    return Manifest(name, description, instructions, tuple(s for s in skills if s))


def _skill(index: int, item: Any, faults: dict[str, str]) -> Skill | None:
    where = f"skills.{index}."
    if not isinstance(item, dict):
        faults[f"skills.{index}"] = f"skills.{index} must be an object"
        return None
    for key in EXECUTION_FIELDS:
        if key in item:
            faults[f"{where}{key}"] = f"a skill cannot declare {key!r}"
    for key in sorted(set(item) - set(SKILL_FIELDS) - set(EXECUTION_FIELDS)):
        faults[f"{where}{key}"] = f"unknown skill field {key!r}"
    return Skill(_text(item, "name", where, 80, True, faults),
                 _text(item, "description", where, MAX_DESCRIPTION, False, faults),
                 _text(item, "content", where, MAX_TEXT, True, faults))


def prompt_text(name: str, instructions: str, skills: list[dict[str, str]]) -> str:
    """The expert's part of a session's system prompt: its instructions, then each skill."""
    parts = [f"# Expert: {name}"]
    if instructions.strip():
        parts.append(instructions.strip())
    if skills:
        parts.append("## Skills")
        for skill in skills:
            head = f"### {skill['name']}"
            if skill.get("description"):
                head += f"\n{skill['description'].strip()}"
            parts.append(f"{head}\n\n{skill['content'].strip()}")
    return "\n\n".join(parts)
