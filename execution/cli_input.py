"""The structured input of an `amux` subcommand (`task submit`, `schedule add`) held to the
REST API's rule: given as options or as one JSON object (`--json FILE`, `-` for standard
input), it is checked by the operation's own request serializer, so a field the API does not
document is refused naming it, and every faulty field is named at once."""

from __future__ import annotations

import sys
from typing import Any

from amux_common import bounded_json
from amux_common.api import flat_fields


class InputRefused(Exception):
    """Bad input: ``fields`` maps each faulty field to its messages."""

    def __init__(self, fields: dict[str, list[str]]):
        self.fields = fields
        super().__init__("\n".join(f"{name}: {message}" for name, said in fields.items()
                                   for message in said))


def add_json_argument(parser) -> None:
    parser.add_argument("--json", dest="json_file", metavar="FILE|-",
                        help="the fields as one JSON object, as the REST API takes them "
                             "(- reads standard input); not with the field options")


def given(options: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The input: the JSON object of ``--json``, or the field options that were given."""
    path = options.get("json_file")
    from_options = {name: options[name] for name in fields if options.get(name) is not None}
    if path is None:
        return from_options
    if from_options:
        raise InputRefused({name: ["give it in --json or as an option, not both"]
                            for name in from_options})
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()  # noqa: SIM115
    except OSError as exc:
        raise InputRefused({"json": [f"cannot read {path}: {exc.strerror}"]}) from None
    try:
        data = bounded_json.loads(text)
    except ValueError as exc:
        raise InputRefused({"json": [f"not JSON: {exc}"]}) from None
    if not isinstance(data, dict):
        raise InputRefused({"json": ["must be a JSON object"]})
    return data


def validated(serializer_class, data: dict[str, Any]) -> dict[str, Any]:
    body = serializer_class(data=data)
    if not body.is_valid():
        raise InputRefused(flat_fields(body.errors))
    return dict(body.validated_data)
