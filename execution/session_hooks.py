"""What sessions asks of the execution model (the ``sessions.hooks`` ports, provided from
execution/wiring.py): a direct session's launch settings, the expert a session carries and
its text as the profile reads now (each turn, and inside the model gateway's one statement
per request). A task run's start with its turn is told to its writer (task_runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection

from execution import launch, profiles
from execution.core.launch_rules import DIRECT, CallerSettings, ExecutionSettings
from execution.core.manifest import prompt_text
from execution.models import AgentProfile


def launch_settings(preset: str | None, **caller: Any) -> ExecutionSettings:
    """A direct session's settings: what the caller set, then ``preset`` (a shortcut)."""
    return launch.resolve(DIRECT, CallerSettings(**caller), preset)


def expert_snapshot(slug: str | None) -> dict[str, Any] | None:
    return profiles.profile_snapshot(profiles.get_profile(slug))


def _live_profile(recorded: dict[str, Any] | None) -> dict[str, Any] | None:
    if not recorded:
        return None

    return (AgentProfile.objects.filter(pk=recorded.get("id"), slug=recorded["slug"])
            .values("name", "instructions", "skills").first())


def expert_text(recorded: dict[str, Any] | None, live: dict[str, Any] | None) -> str | None:
    """The expert's instructions and skills, as the profile reads now (``live``: an edit
    reaches the next turn; the execution settings frozen at launch stay as they are). A
    profile deleted since launch leaves the content recorded then."""
    if not recorded:
        return None

    source = live if live is not None else recorded
    if not (source.get("instructions") or "").strip() and not source.get("skills"):
        return None  # a native expert as it comes (the built-in pack): nothing to add
    return prompt_text(source["name"], source.get("instructions") or "",
                       list(source.get("skills") or []))


def expert_text_now(recorded: dict[str, Any] | None) -> str | None:
    """A turn's expert text (sessions.hooks.expert_text)."""
    return expert_text(recorded, _live_profile(recorded))


@dataclass(frozen=True)
class ExpertReading:
    """The expert's profile read within the model gateway's one statement per request
    (sessions/request_prompts.py): its columns, the join that reads them by the profile id
    the session's snapshot recorded (checked by its slug), and the text made from them."""

    columns: tuple[str, ...] = ("p.slug", "p.name", "p.instructions", "p.skills")

    @property
    def width(self) -> int:
        return len(self.columns)

    def join(self, profile_id_sql: str) -> str:
        return f"LEFT JOIN {AgentProfile._meta.db_table} p ON p.id = {profile_id_sql}"

    def text(self, recorded: dict[str, Any] | None, values: list[Any]) -> str | None:
        slug, name, instructions, skills = values
        live = (None if not recorded or slug != recorded.get("slug") else
                {"name": name, "instructions": instructions,
                 "skills": AgentProfile._meta.get_field("skills").from_db_value(
                     skills, None, connection)})
        return expert_text(recorded, live)


READING = ExpertReading()


def expert_reading() -> ExpertReading:
    """What sessions.hooks.expert_reading asks: the one reading of a session's expert."""
    return READING
