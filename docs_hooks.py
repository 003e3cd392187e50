"""MkDocs hooks (mkdocs.yml `hooks:`): pages generated from the code, so they cannot drift.

- `docs/glossary.md` holds `<!-- glossary -->`; it becomes `amux_site/glossary.py`'s terms,
  each a heading whose anchor is the id the panel's glossary gives it (`launch-preset`).
- `docs/api.md` holds `<!-- limits -->`; it becomes the table of input bounds, read from
  each app's `limits.py` (pure modules: no Django is started).
- `docs/api-reference.md` holds `<!-- openapi -->`; it becomes the operations and schemas
  of `docs/api/openapi.yaml`, which `make docs` writes with
  `manage.py spectacular --file docs/api/openapi.yaml` before it builds.

Loaded by MkDocs outside Django: it reads the glossary module by its path (importing the
`amux_site` package would start the Celery app) and the schema as YAML.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent
GLOSSARY_MARK = "<!-- glossary -->"
OPENAPI_MARK = "<!-- openapi -->"
LIMITS_MARK = "<!-- limits -->"
OPENAPI_FILE = ROOT / "docs" / "api" / "openapi.yaml"
METHODS = ("get", "post", "put", "patch", "delete")


def glossary_terms() -> list[tuple[str, str]]:
    spec = importlib.util.spec_from_file_location(
        "amux_glossary", ROOT / "amux_site" / "glossary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.TERMS)


def term_id(term: str) -> str:
    """The id Django's `slugify` gives the term on the panel's glossary page."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", term.lower())).strip("-_")


def glossary_markdown() -> str:
    return "\n\n".join(f"## {term} {{#{term_id(term)}}}\n\n{meaning}"
                       for term, meaning in glossary_terms())


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _schema_name(schema: dict | None) -> str:
    if not schema:
        return ""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#schema-{name.lower()})"
    if schema.get("type") == "array":
        return f"list of {_schema_name(schema.get('items'))}"
    if "allOf" in schema or "oneOf" in schema or "anyOf" in schema:
        parts = schema.get("allOf") or schema.get("oneOf") or schema.get("anyOf")
        return " or ".join(_schema_name(p) for p in parts)
    kind = schema.get("type", "object")
    if "enum" in schema:
        return f"{kind}: " + ", ".join(f"`{v}`" for v in schema["enum"] if v is not None)
    return f"{kind} ({schema['format']})" if "format" in schema else kind


def _operation(path: str, method: str, op: dict) -> list[str]:
    out = [f"### `{method.upper()} {path}`", ""]
    if op.get("description"):
        out += [op["description"].strip(), ""]
    params = op.get("parameters") or []
    if params:
        out += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
        out += [f"| `{p['name']}` | {p['in']} | {_cell(_schema_name(p.get('schema')))} | "
                f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
                for p in params]
        out.append("")
    body = (op.get("requestBody") or {}).get("content") or {}
    if body:
        media, content = next(iter(body.items()))
        out += [f"Body (`{media}`): {_schema_name(content.get('schema'))}", ""]
    out += ["| status | answer |", "|---|---|"]
    for status, answer in (op.get("responses") or {}).items():
        content = answer.get("content") or {}
        schema = _schema_name(next(iter(content.values())).get("schema")) if content else ""
        meaning = _cell(answer.get("description") or "")
        out.append(f"| {status} | {' — '.join(x for x in (schema, meaning) if x)} |")
    return out + [""]


def _schema(name: str, schema: dict) -> list[str]:
    out = [f"### {name} {{#schema-{name.lower()}}}", ""]
    if schema.get("description"):
        out += [schema["description"].strip(), ""]
    props = schema.get("properties") or {}
    if not props:
        return out + [_schema_name(schema), ""]
    required = set(schema.get("required") or ())
    out += ["| field | type | required | meaning |", "|---|---|---|---|"]
    for field, prop in props.items():
        notes = [word for key, word in (("readOnly", "read-only"), ("writeOnly", "write-only"),
                                        ("nullable", "may be null")) if prop.get(key)]
        meaning = _cell(" ".join([*(f"({n})" for n in notes), prop.get("description", "")]))
        out.append(f"| `{field}` | {_cell(_schema_name(prop))} | "
                   f"{'yes' if field in required else 'no'} | {meaning} |")
    return out + [""]


def openapi_markdown(document: dict) -> str:
    info = document.get("info", {})
    out = [f"OpenAPI {document.get('openapi')} document “{info.get('title')}”, version "
           f"{info.get('version')}. Every operation below authenticates with "
           "`Authorization: Token <token>`.", ""]
    tagged: dict[str, list[tuple[str, str, dict]]] = {}
    for path, operations in document.get("paths", {}).items():
        for method in METHODS:
            if method in operations:
                op = operations[method]
                tag = (op.get("tags") or ["root"])[0]
                tagged.setdefault(tag, []).append((path, method, op))
    for tag in sorted(tagged):
        out += [f"## {tag}", ""]
        for path, method, op in tagged[tag]:
            out += _operation(path, method, op)
    out += ["## Schemas", ""]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        out += _schema(name, schema)
    return "\n".join(out)


# What is bounded, in words, and the constant that bounds it (module, name, unit).
LIMIT_ROWS = [
    ("A slug: source, provider, goal, agent, expert, preset, bot", "amux_common.limits",
     "SLUG", "characters"),
    ("An idempotency key, a turn or material key", "amux_common.limits", "KEY", "characters"),
    ("A goal's title", "goals.limits", "GOAL_TITLE", "characters"),
    ("A goal's description", "goals.limits", "GOAL_DESCRIPTION", "characters"),
    ("A todo's evidence", "goals.limits", "TODO_EVIDENCE", "characters"),
    ("A material's body", "goals.limits", "MATERIAL_BODY", "characters"),
    ("A message to an agent", "goals.limits", "MESSAGE_TEXT", "characters"),
    ("A quota, a material's max age", "goals.limits", "POSITIVE_INT_MAX", "(largest value)"),
    ("A prompt fragment or team text", "prompts_app.limits", "TEXT", "characters"),
    ("A prompt `base_revision`", "prompts_app.limits", "REVISION_MAX", "(largest value)"),
    ("A task's or schedule's prompt", "sessions.limits", "PROMPT", "characters"),
    ("A model name", "sessions.limits", "MODEL", "characters"),
    ("Extra command-line arguments", "amux_common.limits", "ARGS", "items"),
    ("One extra argument", "amux_common.limits", "ARG", "characters"),
    ("A provider's API key", "sessions.limits", "API_KEY", "characters"),
    ("A provider's models", "runtimes.catalog", "MAX_MODELS", "items"),
    ("A memory entry's text", "sessions.limits", "MEMORY_TEXT", "characters"),
    ("An expert's manifest", "sessions.limits", "MANIFEST_KEYS", "keys"),
    ("An expert's manifest, as JSON", "sessions.limits", "MANIFEST_BYTES", "bytes"),
    ("A session's `watchdog`, as JSON", "sessions.limits", "WATCHDOG_BYTES", "bytes"),
    ("A message's content part, as JSON", "sessions.limits", "CONTENT_PART_BYTES", "bytes"),
    ("A source's `config`", "intake.limits", "CONFIG_KEYS", "keys"),
    ("A source's `config`, as JSON", "intake.limits", "CONFIG_BYTES", "bytes"),
    ("A source's `secrets`", "intake.limits", "SECRET_KEYS", "keys"),
    ("Sources in a policy document", "policy.limits", "MAX_SOURCES", "keys"),
    ("Names in a policy `allowed` or `bots` list", "policy.limits", "MAX_LIST", "items"),
    ("One policy name", "policy.limits", "MAX_NAME", "characters"),
    ("A worker tool's text (report, question, reply, PR body)", "tickets.limits",
     "REPORT_TEXT", "characters"),
    ("A question's options", "tickets.limits", "QUESTION_OPTIONS", "items"),
    ("A pull request title", "tickets.limits", "PR_TITLE", "characters"),
    ("An id in a path or body", "amux_common.limits", "ID_MAX", "(largest value)"),
]


def limits_markdown() -> str:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    lines = ["| Input | Bound | Constant |", "|---|---|---|"]
    for what, module, name, unit in LIMIT_ROWS:
        value = getattr(importlib.import_module(module), name)
        lines.append(f"| {what} | {value:,} {unit} | `{module}.{name}` |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if LIMITS_MARK in markdown:
        markdown = markdown.replace(LIMITS_MARK, limits_markdown())
    if GLOSSARY_MARK in markdown:
        markdown = markdown.replace(GLOSSARY_MARK, glossary_markdown())
    if OPENAPI_MARK in markdown:
        if not OPENAPI_FILE.exists():
            raise FileNotFoundError(
                f"{OPENAPI_FILE} is missing: `make docs` writes it with "
                "`manage.py spectacular --file docs/api/openapi.yaml`")
        document = yaml.safe_load(OPENAPI_FILE.read_text())
        markdown = markdown.replace(OPENAPI_MARK, openapi_markdown(document))
    return markdown
