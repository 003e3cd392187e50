"""Steers a generated schemathesis case to the stored rows of `api_world`: a path parameter
names the stored row of the collection it follows, a reference field in a body or query
names a stored row of its kind. Only parts generated as valid data are steered (a part
generated to violate the schema keeps its violation); schemathesis re-reads what changed
and judges the case by what is sent."""

from __future__ import annotations

from schemathesis.core.parameters import ParameterLocation

from amux_common import limits
from tests.support.api_world import LARK_GROUP, MANIFEST, World

# path parameter -> world entry, by the collection segment before it
_BY_COLLECTION = {
    "sources": "source", "providers": "provider", "profiles": "expert",
    "bot-profiles": "bot_profile", "launch-presets": "preset", "goals": "goal",
    "agents": "agent", "connectors": "connector", "todos": "todo", "memory": "memory",
    "schedules": "schedule", "instances": "instance", "tasks": "task", "sessions": "session",
    "tickets": "ticket", "triggers": "trigger", "prompts": "prompt", "versions": None,
    "runtimes": "runtime",
}
# (path, parameter) the segment rule cannot say
_BY_PATH = {
    ("/api/v1/policy/versions/{version}/", "version"): "policy_version",
    ("/api/v1/prompts/versions/{revision}/", "revision"): "prompt_revision",
    ("/api/v1/prompts/versions/{revision}/restore/", "revision"): "prompt_revision_first",
    ("/api/v1/prompts/versions/{a}/diff/{b}/", "a"): "prompt_revision_first",
    ("/api/v1/prompts/versions/{a}/diff/{b}/", "b"): "prompt_revision",
    # only a web chat source takes messages; only an override can be kept or restored
    ("/api/v1/sources/{slug}/messages/", "slug"): "webchat_source",
    ("/api/v1/prompts/{key}/keep/", "key"): "prompt_overridden",
    ("/api/v1/prompts/{key}/restore/", "key"): "prompt_overridden",
}
# a work directory: one no session holds yet, under the data directory's work/
_WORKDIRS = {"workdir", "workspace"}
# body or query field -> world entry; the same name means the same kind of row everywhere
_BY_FIELD = {
    "provider": "provider", "triage_provider": "provider", "worker_provider": "provider",
    "main_provider": "provider",
    "source": "source", "goal": "goal", "agent": "agent",
    "agent_profile": "expert", "profile": "expert", "expert": "expert",
    "launch_preset": "preset", "preset": "preset", "runtime": "runtime",
    "base_version": "policy_version", "base_revision": "prompt_revision",
    "from": "policy_version_first", "to": "policy_version",
}


def path_value(path: str, name: str, world: World):
    if (path, name) in _BY_PATH:
        return world.get(_BY_PATH[(path, name)])
    segments = path.strip("/").split("/")
    at = segments.index("{" + name + "}")
    kind = _BY_COLLECTION.get(segments[at - 1])
    return world.get(kind) if kind else None


def steer(case, world: World, *, paths: bool = True) -> None:
    meta = case.meta
    def generated_valid(location):
        return meta is None or not meta.is_negative_at(location)

    if paths and case.path_parameters and generated_valid(ParameterLocation.PATH):
        steered = dict(case.path_parameters)
        for name in steered:
            value = path_value(case.operation.path, name, world)
            if value is not None:
                steered[name] = str(value)
        case.path_parameters = steered
    if isinstance(case.query, dict) and case.query and generated_valid(ParameterLocation.QUERY):
        case.query = _steer_fields(case.query, world)
    if isinstance(case.body, dict) and generated_valid(ParameterLocation.BODY):
        case.body = _steer_fields(case.body, world)
        if case.operation.path in _BY_OPERATION:
            case.body = _BY_OPERATION[case.operation.path](
                case.body, world, case.path_parameters or {})
        if case.method.upper() == "POST" and isinstance(case.body.get("slug"), str):
            case.body["slug"] = world.fresh_slug(case.body["slug"], limits.SLUG)


def _steer_fields(data: dict, world: World) -> dict:
    steered = dict(data)
    for name in data:
        value = world.get(_BY_FIELD[name]) if name in _BY_FIELD else None
        if value is not None:
            steered[name] = value
    if "manifest" in steered:
        steered["manifest"] = MANIFEST
    if isinstance(steered.get("content"), list):
        steered["content"] = _with_images(steered["content"], world)
    for name in _WORKDIRS & set(steered):
        if steered[name] is not None:
            steered[name] = world.fresh_workdir()
    return steered


def _with_images(parts: list, world: World) -> list:
    """A message's image parts given real images: their data must decode as the declared
    format, and a message takes at most MAX_IMAGES of them (sessions.content), rules no
    OpenAPI 3.0 schema can state. The world has that many images to give; a part past
    them says so in text."""
    from sessions.content import MAX_IMAGES

    out, images = [], 0
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "image" \
                and world.image(part.get("mime")):
            images += 1
            part = ({**part, "data": world.image(part["mime"])} if images <= MAX_IMAGES
                    else {"type": "text", "text": "one image too many"})
        out.append(part)
    return out


def _facts(body: dict, world: World, path: dict) -> dict:
    """Trigger facts name a source of the kind whose scope they give (a Lark scope a Lark
    source, its place one of that source's groups) and a stored policy version."""
    from policy.gate import SCOPES

    kind = next((k for k, scopes in SCOPES.items() if body.get("scope") in scopes), None)
    steered = dict(body)
    entry = {"github": "source", "lark": "lark_source", "webchat": "webchat_source"}.get(kind)
    if entry:
        steered["source"] = world[entry]
    if isinstance(steered.get("place"), str) and kind == "lark":
        steered["place"] = LARK_GROUP
    if isinstance(steered.get("version"), str):
        steered["version"] = world["policy_version"]
    return steered


def _own_slug(body: dict, world: World, path: dict) -> dict:
    """A provider's slug is fixed once made (sessions/provider_actions.py): a change gives
    the provider's own slug, which the path names, or none."""
    return {**body, "slug": path["slug"]} if "slug" in body and "slug" in path else body


# a path's own rules for its body, past what a field's name says
_BY_OPERATION = {"/api/v1/policy/check/": _facts, "/api/v1/providers/{slug}/": _own_slug}
