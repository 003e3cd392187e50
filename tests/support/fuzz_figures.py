"""The API fuzz's figures: operations run, requests sent, and what the answers broke
(server errors, schema violations, undocumented status codes, bodies with an undocumented
field and whether each was refused). Written as JSON to the file AMUX_FUZZ_REPORT names,
so a long run leaves its measurement behind (docs/contributors.md, "Fuzzing the API")."""

from __future__ import annotations

import json
import os
from collections import Counter
from contextlib import contextmanager

from schemathesis.core.failures import FailureGroup

_operations: set[str] = set()
_counts: Counter = Counter()
_failures: set[tuple[str, str]] = set()

# a check's failure class -> the figure it counts towards
_KINDS = {"ServerError": "server_errors", "JsonSchemaError": "schema_violations",
          "UndefinedStatusCode": "undocumented_status_codes",
          "UndefinedContentType": "undocumented_content_types",
          "MissingContentType": "undocumented_content_types",
          "RejectedPositiveData": "valid_data_refused",
          "AcceptedNegativeData": "invalid_data_accepted"}


def _request_properties(case, document: dict) -> set[str] | None:
    content = ((case.operation.definition.raw.get("requestBody") or {})
               .get("content", {}).get("application/json") or {})
    schema = content.get("schema") or {}
    ref = schema.get("$ref", "")
    if ref:
        schema = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    if schema.get("type") != "object":
        return None
    return set(schema.get("properties") or {})


def record(case, response, document: dict) -> None:
    _operations.add(case.operation.label)
    _counts["cases"] += 1
    _counts[f"status_{response.status_code // 100}xx"] += 1
    known = _request_properties(case, document) if isinstance(case.body, dict) else None
    if known is not None and set(case.body) - known:
        _counts["unknown_field_bodies"] += 1
        if response.status_code == 400:
            _counts["unknown_field_bodies_refused"] += 1
        else:  # what answered instead (a 404 for a path naming nothing comes first)
            _counts[f"unknown_field_bodies_answered_{response.status_code}"] += 1


@contextmanager
def failures_recorded(case):
    try:
        yield
    except FailureGroup as group:
        for failure in group.exceptions:
            kind = _KINDS.get(type(failure).__name__, type(failure).__name__)
            _failures.add((case.operation.label, kind))
        raise


def write() -> None:
    path = os.environ.get("AMUX_FUZZ_REPORT")
    if not path or not _operations:
        return
    found = Counter(kind for _, kind in _failures)
    figures = {"operations": len(_operations), **_counts,
               **{kind: found.get(kind, 0) for kind in sorted(set(_KINDS.values()))},
               "failing": sorted(f"{kind}: {label}" for label, kind in _failures)}
    with open(path, "w") as out:
        json.dump(figures, out, indent=1)
