"""How a conversation's session starts (seed 000 产品身份: the assistant in chat is a Bot
Profile; its launch preset chooses runtime, model and permissions). Through sessions' own
create path: the Bot Profile's preset (the source's `bot_profile`, else the first one),
or — while no Bot Profile exists — the agent settings' worker runtime, provider and model."""

from __future__ import annotations

from execution.models import BotProfile
from sessions import hooks, ownership, services
from sessions.models import Session
from sessions.new_session import Launch, Prompting, SessionSpec
from sessions.services import CommandError


def bot_profile(config: dict) -> BotProfile | None:
    """The source's Bot Profile (`bot_profile` slug), else the only/first one; None when
    there is none. A slug that names no profile is refused, naming the setting."""
    rows = BotProfile.objects.select_related("launch_preset", "agent_profile")
    slug = (config or {}).get("bot_profile")
    if slug:
        found = rows.filter(slug=slug).first()
        if found is None:
            raise CommandError(f"no Bot Profile {slug!r} (source config bot_profile)",
                               code="unknown_bot_profile", field="config.bot_profile")
        return found
    return rows.order_by("pk").first()


def start_session(config: dict, *, name: str, person: str = "", shared: bool = True
                  ) -> Session:
    """A new session for a conversation; CommandError when nothing says how to run one.
    ``person``: the Lark open id of who started it. In a direct chat (``shared`` false) the
    session acts for, and reads the memory of, the amux user they map to; in a place many
    people write in it acts for nobody and reads the team's memory (sessions.ownership)."""
    bot = bot_profile(config)
    scope = (ownership.of_shared_place("lark") if shared
             else ownership.of_person("lark", person, acts=True))
    expert = bot.agent_profile.slug if bot and bot.agent_profile_id else None
    if bot is not None and bot.launch_preset_id:
        return services.create_session(Launch.direct(preset=bot.launch_preset.slug),
                                       Prompting(profile=expert),
                                       SessionSpec(name=name, scope=scope))
    worker = hooks.worker_defaults()
    if not worker:
        raise CommandError("no Bot Profile with a launch preset and no worker runtime, "
                           "provider and model in the agent settings", code="no_agent")
    return services.create_session(Launch.direct(runtime=worker["runtime"],
                                                 provider=worker["provider"],
                                                 model=worker["model"]),
                                   Prompting(profile=expert), SessionSpec(name=name, scope=scope))
