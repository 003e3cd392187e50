"""The one pagination of every list in the API: `limit`/`offset`, bounded.

A list answers at most `MAX_LIMIT` rows per page, and a `limit` or `offset` that is not a
number in range is refused with a 400 naming the parameter — never silently replaced by the
default (the client would believe it got what it asked for) and never passed to the database
(a 24-digit offset overflows an SQL integer: that was a 500).
"""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
# Far beyond any table amux keeps, and far below every database's integer limit.
MAX_OFFSET = 1_000_000_000


def _bounded(request, name: str, default: int, low: int, high: int) -> int:
    values = request.query_params.getlist(name)
    if not values:
        return default
    if len(values) > 1:
        raise ValidationError({name: [f"give {name} once"]})
    raw = values[0].strip()
    if not (raw.isascii() and raw.isdigit()):
        raise ValidationError({name: [f"must be a whole number from {low} to {high}"]})
    value = int(raw) if len(raw) <= 12 else high + 1
    if not low <= value <= high:
        raise ValidationError({name: [f"must be a whole number from {low} to {high}"]})
    return value


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT

    def get_limit(self, request):
        return _bounded(request, self.limit_query_param, self.default_limit, 1, self.max_limit)

    def get_offset(self, request):
        return _bounded(request, self.offset_query_param, 0, 0, MAX_OFFSET)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        bounds = {self.limit_query_param: (1, self.max_limit),
                  self.offset_query_param: (0, MAX_OFFSET)}
        for parameter in parameters:
            low, high = bounds[parameter["name"]]
            parameter["schema"] = {"type": "integer", "minimum": low, "maximum": high}
        return parameters


def paginate(request, view, queryset, serialize):
    """A paginated response for views that are not generic list views (one rule for all)."""
    paginator = BoundedLimitOffsetPagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serialize(page))
