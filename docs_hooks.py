"""MkDocs hooks (mkdocs.yml `hooks:`): pages generated from the code, so they cannot drift.

- `docs/glossary.md` holds `<!-- glossary -->`; it becomes `amux_site/glossary.py`'s terms,
  each a heading whose anchor is the id the panel's glossary gives it (`launch-preset`).
- `docs/api-reference.md` holds `<!-- openapi -->`; it becomes the operations and schemas
  of `docs/api/openapi.yaml`, which `make docs` writes with
  `manage.py spectacular --file docs/api/openapi.yaml` before it builds.

Loaded by MkDocs outside Django: it reads the glossary module by its path (importing the
`amux_site` package would start the Celery app) and the schema as YAML.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent
GLOSSARY_MARK = "<!-- glossary -->"
OPENAPI_MARK = "<!-- openapi -->"
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


def on_page_markdown(markdown: str, page, config, files) -> str:
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
