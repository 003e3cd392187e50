"""Provider profile templates: presets a provider is started from (the Providers form, the
REST ``provider-templates/``), each naming its route and the boundary its profile keeps.

A template is recognised by its route (platform and base URL), never by a name: a profile
on the Ark Agent Plan route is an Ark Agent Plan profile however it is called, and a
standard Ark route is not one. A template that keeps its own model list refuses every model
its profile does not list (no silent fallback to another model), and every use without
its key. The models themselves are the profile's (the plan's operator lists them or copies
them from the route's ``/models``): amux keeps no permanent model table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Template:
    id: str
    name: str
    platform: str
    base_url: str
    key_field: str = "api_key"
    own_models: bool = True  # a model outside the profile's list is refused
    note: str = ""

    def preset(self) -> dict:
        return {"id": self.id, "name": self.name, "platform": self.platform,
                "base_url": self.base_url, "key_field": self.key_field,
                "own_models": self.own_models, "models": [], "note": self.note}


ARK_AGENT_PLAN = Template(
    id="ark-agent-plan", name="Ark Agent Plan", platform="openai-compat",
    base_url="https://ark.cn-beijing.volces.com/api/coding/v3",
    note="Volcengine Ark Agent Plan (its coding route, OpenAI-compatible chat completions, "
         "bearer API key). Only the models this profile lists are used: list the models "
         "your plan includes; a model of the standard Ark route is not one of them.")

TEMPLATES: dict[str, Template] = {t.id: t for t in (ARK_AGENT_PLAN,)}


def of(platform: str, base_url: str) -> Template | None:
    """The template whose route this is, if any."""
    url = (base_url or "").rstrip("/")
    for template in TEMPLATES.values():
        if template.platform == platform and template.base_url == url:
            return template
    return None


def key_missing(platform: str, base_url: str, *, has_key: bool) -> str | None:
    """Why a profile on this route may not be saved as it is: a template's route needs the
    template's key from the start (the API and the panel form both ask here)."""
    template = of(platform, base_url)
    if template is None or has_key:
        return None
    return f"a {template.name} profile needs its {template.key_field}"


@dataclass(frozen=True)
class Refusal:
    field: str
    code: str
    message: str


def check_use(template: Template | None, *, slug: str, models: list[str], has_key: bool,
              model: str | None) -> Refusal | None:
    """Why a session may not use this profile with ``model``, or None. Fails closed: no key
    is refused before anything starts; so is a model the profile does not list."""
    if template is None:
        return None
    if not has_key:
        return Refusal(template.key_field, "provider_key_missing",
                       f"provider {slug!r} ({template.name}) has no {template.key_field}: "
                       "set the plan's key first")
    if template.own_models and model not in models:
        listed = ", ".join(models) or "none yet"
        return Refusal("model", "model_not_in_plan",
                       f"model {model!r} is not one of the models of provider {slug!r} "
                       f"({template.name}; listed: {listed})")
    return None
