"""Provider profile templates: presets a provider is started from (the Providers form, the
REST ``provider-templates/``), each naming its route and the boundary its profile keeps.

A template is recognised by its route (platform and base URL), never by a name: a profile
on the Ark Agent Plan route is an Ark Agent Plan profile however it is called, and a
standard Ark route is not one. A template that keeps its own model list refuses every model
its profile does not list (no silent fallback to another model), and every use without
its key. The models themselves are the profile's (the plan's operator lists them or copies
them from the route's ``/models``): amux keeps no permanent model table.

Once the route has been probed (sessions.capabilities), the latest ok probe of the
profile's route is evidence too: a model it did not discover is refused even when the
operator lists it (``model_not_discovered``). Never probed, the route's models are unknown:
the operator's list alone decides, and a refusal says the route is unprobed.

``settings.PROVIDER_TEMPLATE_ROUTES`` (``{template id: base URL}``, empty by default) moves
a template's route, for a local stand-in of the provider."""

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

    @property
    def route_url(self) -> str:
        from django.conf import settings

        moved = getattr(settings, "PROVIDER_TEMPLATE_ROUTES", None) or {}
        return str(moved.get(self.id) or self.base_url).rstrip("/")

    def preset(self) -> dict:
        return {"id": self.id, "name": self.name, "platform": self.platform,
                "base_url": self.route_url, "key_field": self.key_field,
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
        if template.platform == platform and template.route_url == url:
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


@dataclass(frozen=True)
class Discovery:
    """The models the latest ok probe of a profile's route discovered."""
    revision: int
    models: tuple[str, ...]


def check_use(template: Template | None, *, slug: str, models: list[str], has_key: bool,
              model: str | None, discovered: Discovery | None = None) -> Refusal | None:
    """Why a session may not use this profile with ``model``, or None. Fails closed: no key
    is refused before anything starts; so is a model the profile does not list, and one the
    latest ok probe of its route did not discover (``discovered``; None: never probed, the
    route's models are unknown and the operator's list alone decides)."""
    if template is None:
        return None
    if not has_key:
        return Refusal(template.key_field, "provider_key_missing",
                       f"provider {slug!r} ({template.name}) has no {template.key_field}: "
                       "set the plan's key first")
    if not template.own_models:
        return None
    if model not in models:
        listed = ", ".join(models) or "none yet"
        evidence = (" The route's models are unknown (unprobed: no ok probe of it yet): "
                    "probe the provider to discover them." if discovered is None else
                    f" Probe revision {discovered.revision} discovered: "
                    f"{', '.join(discovered.models) or 'none'}.")
        return Refusal("model", "model_not_in_plan",
                       f"model {model!r} is not one of the models of provider {slug!r} "
                       f"({template.name}; listed: {listed}).{evidence}")
    if discovered is not None and model not in discovered.models:
        found = ", ".join(discovered.models) or "none"
        return Refusal("model", "model_not_discovered",
                       f"model {model!r} of provider {slug!r} ({template.name}) was not "
                       f"discovered on its route by probe revision {discovered.revision} "
                       f"(discovered: {found}): the plan does not serve it; probe again if "
                       "that changed")
    return None
