"""amux's version: pyproject.toml's, the one place it is written (a checkout reads it there,
an installed package from its metadata). `manage.py amux --version`, `/healthz` and the
panel's footer show it; CHANGELOG.md says what each one changed."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@cache
def version() -> str:
    try:
        return tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        try:
            return metadata.version("amux")
        except metadata.PackageNotFoundError:
            return "unknown"
