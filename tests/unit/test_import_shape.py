"""Imports of amux's own modules sit at the top of a module, where import-linter sees them
(issue 31): one inside a function hides a dependency from the layer and cycle contracts.
The few that must wait are an app's ``ready()`` wiring and the Celery process hooks that
run before Django is set up; each other one is named here with its reason, and the whole
tree holds at most 20."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAP = 20

# (path, function): why its import cannot be at the top of the module
ALLOWED = {
    ("amux_site/celery.py", "_fresh_database_connections"):
        "a Celery signal hook connected when the Celery app is imported, before Django is set up",
    ("amux_site/celery.py", "_freeze_loaded"):
        "a Celery signal hook connected when the Celery app is imported, before Django is set up",
    ("amux_site/logs.py", "periodic_task_names"):
        "logging is configured from settings, which the Celery app imports",
}


def _packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["root_packages"]


def _project_module(node: ast.Import | ast.ImportFrom, packages: set[str]) -> bool:
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").split(".")[0] in packages
    return any(alias.name.split(".")[0] in packages for alias in node.names)


def function_level_imports(root: Path, packages: set[str]) -> list[tuple[str, str, int]]:
    """(path, enclosing function, line) of every import of a project module in a body."""
    found = []
    for package in sorted(packages):
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for function in ast.walk(tree):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    if isinstance(node, ast.Import | ast.ImportFrom) and \
                            _project_module(node, packages):
                        found.append((str(path.relative_to(root)), function.name,
                                      node.lineno))
    return found


def test_project_imports_inside_functions_are_wiring_or_named_with_a_reason():
    found = function_level_imports(ROOT, set(_packages()))
    unexplained = [(path, name, line) for path, name, line in found
                   if not (path.endswith("/apps.py") and name == "ready")
                   and (path, name) not in ALLOWED]
    assert not unexplained, (
        "move these imports to the top of their module (or, if they must wait, name them "
        f"in ALLOWED with the reason): {unexplained}")
    assert len(found) <= CAP, f"{len(found)} function-level imports (at most {CAP}): {found}"


def test_the_count_sees_an_import_inside_a_function_and_not_at_the_top(tmp_path):
    package = tmp_path / "sessions"
    (package / "migrations").mkdir(parents=True)
    (package / "host.py").write_text(
        "from sessions import timeline\n\n\n"
        "def serve():\n    import json\n    from . import locks\n\n\n"
        "class Host:\n    async def run(self):\n        from sessions.models import Session\n")
    (package / "migrations" / "0001_initial.py").write_text(
        "def forwards():\n    from sessions import models\n")
    assert function_level_imports(tmp_path, {"sessions"}) == [
        ("sessions/host.py", "serve", 6), ("sessions/host.py", "run", 11)]
