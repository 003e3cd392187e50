"""System-prompt assembly (pure, no Django, no I/O).

Fixed order, the same for every request of a role:

    1. how to read these instructions (code)       layer 2 contract
    2. the attention principle                     layer 3 role and rules
    3. the role's fragments                        layer 3
    4. shared rules                                layer 3
    5. the role's tools (code)                     layer 2
    6. team sections (about, then the role's own)  layer 4 team
    7. team skills, by name                        layer 5 skills
    8. the policy, regenerated per request         layer 1 policy   <- always last

Everything before the policy depends only on the prompt version, so a policy change leaves
that prefix byte-for-byte unchanged (cacheable, reviewable).

Five-layer precedence when texts conflict: policy > contract > role and rules > team >
skills. Assembly applies it where it can structurally — a team override replaces the
built-in text of the same key (the built-in is not emitted at all); nothing a team writes
can remove or replace a policy or contract part; a team section or skill cannot take a
built-in's place — and states it in part 1 for the model to apply to meaning. Every part
carries the layer it came from and its source, for the panel's preview.
"""

from __future__ import annotations

from dataclasses import dataclass

from prompts_app import contract, core

LAYERS = {
    1: "policy",
    2: "contract",
    3: "role and rules",
    4: "team",
    5: "skills",
}
LAYER_OF = {"policy": 1, "code": 2, "builtin": 3, "override": 3, "team": 4, "skill": 5}

ORDER = {
    "main": ("contract.precedence", "shared.attention", "main.role", "main.triage",
             "shared.rules", "tools.main", "team.about", "team.main"),
    "worker": ("contract.precedence", "shared.attention", "worker.role",
               "worker.pull_requests", "shared.rules", "tools.worker", "team.about",
               "team.worker"),
    # One structured model call per inferred candidate; its answer format stays in the
    # caller's code (tickets/triage.py) and is appended after this prompt.
    "triage": ("contract.precedence", "shared.attention", "triage.role", "shared.rules",
               "team.about", "team.main"),
}

NO_POLICY = ("No policy part was supplied with this request. Take on no new work on your "
             "own initiative.")


@dataclass(frozen=True)
class Part:
    key: str
    title: str
    source: str  # policy, code, builtin, override, team, skill
    text: str
    hash: str = ""  # the built-in's content hash for builtin/override parts

    @property
    def layer(self) -> int:
        return LAYER_OF[self.source]

    @property
    def layer_name(self) -> str:
        return LAYERS[self.layer]


@dataclass(frozen=True)
class Assembled:
    role: str
    text: str
    parts: tuple[Part, ...]
    prefix_hash: str  # hash of everything before the policy part


class UnknownRole(ValueError):
    pass


def assemble(role: str, config: dict, defaults: dict, policy: str | None = None) -> Assembled:
    """The system prompt of `role` ("main", "worker" or "triage") from one configuration."""
    if role not in ORDER:
        raise UnknownRole(f"unknown role {role!r}; expected one of {', '.join(ORDER)}")
    config = core.as_config(config)
    parts: list[Part] = []
    for key in ORDER[role]:
        part = _part(key, config, defaults)
        if part is not None:
            parts.append(part)
    for slug in sorted(config["skills"]):
        text = config["skills"][slug].strip()
        if text:
            parts.append(Part(f"skill.{slug}", f"Skill: {slug}", "skill",
                              f"# Skill: {slug} (layer 5, reference)\n\n{text}"))
    prefix = "\n\n".join(p.text.strip() for p in parts)
    policy_text = (policy or "").strip() or NO_POLICY
    parts.append(Part("policy", "Policy", "policy",
                      "# Policy (layer 1, regenerated for every request)\n\n" + policy_text))
    text = "\n\n".join(p.text.strip() for p in parts) + "\n"
    return Assembled(role, text, tuple(parts), core.content_hash(prefix))


def _part(key: str, config: dict, defaults: dict) -> Part | None:
    fixed = contract.get(key)
    if fixed is not None:
        return Part(key, fixed.title, "code", fixed.text)
    if key in core.BUILTIN_KEYS:
        builtin = next(b for b in core.BUILTINS if b.key == key)
        override = config["fragments"].get(key)
        if override:
            return Part(key, builtin.title, "override", override["text"], defaults[key].hash)
        return Part(key, builtin.title, "builtin", defaults[key].text, defaults[key].hash)
    section = next(s for s in core.TEAM_SECTIONS if s.key == key)
    text = (config["team"].get(key) or "").strip()
    if not text:
        return None
    heading = section.title.replace("Team: ", "")
    return Part(key, section.title, "team", f"# Team: {heading} (layer 4)\n\n{text}")
