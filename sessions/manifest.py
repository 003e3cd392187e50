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
    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


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


def _text(data: dict[str, Any], key: str, where: str, limit: int, required: bool) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise ManifestError(f"{where}{key} must be a string", f"{where}{key}")
    value = value.strip()
    if required and not value:
        raise ManifestError(f"{where}{key} is required", f"{where}{key}")
    if len(value) > limit:
        raise ManifestError(f"{where}{key} is longer than {limit} characters", f"{where}{key}")
    return value


def parse(data: Any) -> Manifest:
    """The manifest, checked; ``ManifestError.field`` is the dotted path of the culprit
    (``manifest.`` prefixed by the caller)."""
    if not isinstance(data, dict):
        raise ManifestError("the manifest must be an object", "")
    for key in EXECUTION_FIELDS:
        if key in data:
            raise ManifestError(
                f"a v2 manifest cannot declare {key!r}: the runtime, model, provider and "
                "permissions are chosen by the caller and amux's launch presets", key)
    version = data.get("version")
    if version != VERSION or isinstance(version, bool):
        raise ManifestError(f"only manifest version {VERSION} is accepted (got {version!r})",
                            "version")
    unknown = sorted(set(data) - set(ALLOWED))
    if unknown:
        raise ManifestError(f"unknown manifest field {unknown[0]!r} (a v2 manifest has "
                            f"{', '.join(ALLOWED)})", unknown[0])
    name = _text(data, "name", "", MAX_NAME, True)
    description = _text(data, "description", "", MAX_DESCRIPTION, False)
    instructions = _text(data, "instructions", "", MAX_TEXT, False)
    raw = data.get("skills", [])
    if not isinstance(raw, list):
        raise ManifestError("skills must be a list", "skills")
    if len(raw) > MAX_SKILLS:
        raise ManifestError(f"at most {MAX_SKILLS} skills", "skills")
    skills, seen = [], set()
    for index, item in enumerate(raw):
        where = f"skills[{index}]."
        if not isinstance(item, dict):
            raise ManifestError(f"skills[{index}] must be an object", f"skills[{index}]")
        for key in EXECUTION_FIELDS:
            if key in item:
                raise ManifestError(f"a skill cannot declare {key!r}", f"{where}{key}")
        extra = sorted(set(item) - set(SKILL_FIELDS))
        if extra:
            raise ManifestError(f"unknown skill field {extra[0]!r}", f"{where}{extra[0]}")
        skill_name = _text(item, "name", where, 80, True)
        if not SKILL_NAME.match(skill_name) or skill_name.lower() in seen:
            raise ManifestError(f"skill name {skill_name!r} must be unique, letters, digits, "
                                "spaces, '.', '_' or '-'", f"{where}name")
        seen.add(skill_name.lower())
        skills.append(Skill(skill_name, _text(item, "description", where, MAX_DESCRIPTION,
                                              False),
                            _text(item, "content", where, MAX_TEXT, True)))
    return Manifest(name, description, instructions, tuple(skills))


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
