"""The escape scripts' shared part: a scripted model has the agent run a bash script in its
work directory whose ``try NAME COMMAND…`` lines each record one attempt (name, exit status,
the start of its output) in ``escapes.txt``; ``attempts`` reads them back."""

from __future__ import annotations

from pathlib import Path

PREAMBLE = r"""#!/bin/bash
out=escapes.txt; : > "$out"
try() {
  name=$1; shift
  res=$(timeout 8 "$@" 2>&1 </dev/null); rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(printf %s "$res" | head -c 400 | tr '\n\t' '  ')" >> "$out"
}
attach='import ctypes, sys; sys.exit(ctypes.CDLL(None).ptrace(16, int(sys.argv[1]), 0, 0) != 0)'
"""


def attempts(workdir: Path) -> dict[str, tuple[int, str]]:
    """{name: (exit status, output)} of the attempts the script recorded."""
    found = {}
    # one attempt a line: an output's carriage returns (an HTTP answer's) are not breaks
    text = (Path(workdir) / "escapes.txt").read_bytes().decode(errors="replace")
    for line in filter(None, text.split("\n")):
        name, rc, output = (line.split("\t", 2) + ["", ""])[:3]
        found[name] = (int(rc), output)
    return found
