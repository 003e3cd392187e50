"""Built-in fragments shipped as files: `<dir>/<key>.md`, each identified by its content
hash (no Django; the directory is passed in)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prompts_app.core import BUILTIN_KEYS, content_hash, normalise

PACKAGED = Path(__file__).resolve().parent / "defaults"


@dataclass(frozen=True)
class Default:
    key: str
    text: str
    hash: str

    @property
    def short(self) -> str:
        return self.hash[:12]


class MissingDefault(RuntimeError):
    pass


def load(directory: Path | str = PACKAGED) -> dict[str, Default]:
    """Every built-in fragment's text and hash. A missing file is an installation error."""
    directory = Path(directory)
    out = {}
    missing = []
    for key in BUILTIN_KEYS:
        path = directory / f"{key}.md"
        try:
            text = normalise(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            missing.append(str(path))
            continue
        out[key] = Default(key, text, content_hash(text))
    if missing:
        raise MissingDefault("built-in prompt fragments missing: " + ", ".join(missing))
    return out
