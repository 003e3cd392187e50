"""The documentation site (mkdocs.yml, docs/): it builds strictly, its generated pages say
what the code says, and its quick start names only commands, targets and settings that
exist, so the docs cannot drift from the code."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from html import escape as html_escape
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils.text import slugify

from amux_site.glossary import TERMS
from amux_site.management.commands.amux import Command as AmuxCommand

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MKDOCS = Path(sys.executable).with_name("mkdocs")
GETTING_STARTED = (DOCS / "getting-started.md").read_text()


def _docs_tree(tmp_path: Path) -> Path:
    """A copy of what `make docs` builds from, with the OpenAPI document `make openapi`
    writes: the build never touches the checkout (two test processes may build at once)."""
    tree = tmp_path / "tree"
    shutil.copytree(DOCS, tree / "docs", ignore=shutil.ignore_patterns("api"))
    for name in ("mkdocs.yml", "docs_hooks.py", "amux_site/glossary.py"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tree / name)
    (tree / "docs" / "api").mkdir()
    call_command("spectacular", file=str(tree / "docs" / "api" / "openapi.yaml"))
    return tree


def _build(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "-f", str(tree / "mkdocs.yml")],
        capture_output=True, text=True, timeout=180, cwd=tree,
        # the limits table reads each app's pure limits.py from the checkout
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tree = _docs_tree(tmp_path_factory.mktemp("docs"))
    result = _build(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    return tree / "site"


def test_the_site_builds_strictly_with_every_page_of_the_nav(built):
    for page in ("getting-started", "providers-and-runtimes", "github", "lark", "web-chat",
                 "panel", "how-work-flows", "policy-and-prompts", "sessions", "goals",
                 "operations", "security", "api", "api-reference", "glossary",
                 "contributors"):
        assert (built / page / "index.html").is_file(), page
    assert (built / "grafana-amux.json").is_file()  # the dashboard the operations page names


def test_a_broken_link_fails_the_build(tmp_path):
    tree = _docs_tree(tmp_path)
    page = tree / "docs" / "github.md"
    page.write_text(page.read_text() + "\nSee [the policy](policy-and-prompts.md#no-such).\n")
    result = _build(tree)
    assert result.returncode != 0
    assert "no-such" in result.stdout + result.stderr


def test_the_glossary_page_is_the_panels_glossary(built):
    html = (built / "glossary" / "index.html").read_text()
    for term, meaning in TERMS:
        # the anchor is the id the panel's glossary page gives the term
        assert f'id="{slugify(term)}"' in html, term
        assert html_escape(meaning.split(".")[0], quote=False) in html, term


def test_the_api_reference_is_rendered_from_the_openapi_document(built):
    html = (built / "api-reference" / "index.html").read_text()
    for operation in ("GET /api/v1/tickets/", "POST /api/v1/tickets/{id}/stop/",
                      "PUT /api/v1/policy/", "GET /api/v1/sessions/{id}/timeline/"):
        assert operation in html, operation
    assert 'id="schema-ticket"' in html


# The quick start cannot drift: every make target, `amux` subcommand and setting the
# getting-started page names exists.

def _code(text: str) -> list[str]:
    """Code spans and the lines of fenced code blocks."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return [line for block in blocks for line in block.splitlines()] + spans


def _make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):(?!=)", makefile, flags=re.M))


def test_every_make_target_the_getting_started_page_names_exists():
    named = {t for code in _code(GETTING_STARTED)
             for t in re.findall(r"\bmake ([a-z][\w-]*)", code)}
    assert {"run", "test"} <= named
    assert named <= _make_targets(), named - _make_targets()
    for target in sorted(named):  # make itself agrees, without running anything
        result = subprocess.run(["make", "-n", "-C", str(ROOT), target],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, (target, result.stderr)


def test_every_amux_command_the_getting_started_page_names_exists():
    parser = AmuxCommand().create_parser("manage.py", "amux")
    actions = next(a for a in parser._actions if a.dest == "action").choices
    named = {c for code in _code(GETTING_STARTED) for c in re.findall(r"\bamux ([a-z]+)", code)}
    assert named, "the page names no amux command"
    assert named <= set(actions), named - set(actions)
    for action in sorted(named):
        with pytest.raises(SystemExit) as done:
            parser.parse_args([action, "--help"])
        assert done.value.code == 0


def test_every_setting_the_getting_started_page_names_is_read():
    table = re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", GETTING_STARTED, flags=re.M)
    assert {"DATABASE_URL", "REDIS_URL", "AMUX_SECRET_KEY", "AMUX_DATA_DIR",
            "AMUX_ALLOWED_HOSTS", "AMUX_DEBUG"} <= set(table)
    settings = (ROOT / "amux_site" / "settings.py").read_text()
    # `make run`'s own port and first password are read by the command that runs it
    run_command = (ROOT / "amux_site" / "management" / "commands" / "amux.py").read_text()
    makefile = (ROOT / "Makefile").read_text()
    named = {n for code in _code(GETTING_STARTED)
             for n in re.findall(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)\b", code)}
    assert set(table) <= named
    unread = [n for n in sorted(named)
              if f'"{n}"' not in settings and f'"{n}"' not in run_command
              and f"$({n})" not in makefile]
    assert not unread


def test_the_readme_is_short_and_links_only_into_pages_that_exist():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "make run" in readme and "make test" in readme
    links = re.findall(r"\]\((docs/[^)#]+\.md)\)", readme)
    assert len(links) >= 10
    assert [link for link in links if not (ROOT / link).is_file()] == []
    nav = (ROOT / "mkdocs.yml").read_text()
    assert [link for link in links if link.removeprefix("docs/") not in nav] == []
