"""REST ``settings/watchdog/``: the global watchdog limits (GET, PUT, PATCH).

Each limit is an integer or null (null: not set here, the default applies); 0 disables it,
a negative value means the built-in default, a value above the maximum is refused naming the
field. A session freezes its effective limits when it is created: session > provider >
global > default (sessions.new_session.effective_watchdog).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.api import error_response
from runtimes import watchdog as watchdogs
from sessions.models import WatchdogSettings


def _limit_fields(**kwargs: Any) -> dict[str, serializers.Field]:
    return {name: serializers.IntegerField(allow_null=True, max_value=maximum,
                                             min_value=watchdogs.MIN_LIMIT, **kwargs)
            for name, (_default, maximum) in watchdogs.LIMITS.items()}


WATCHDOG_BODY = {"application/json": {
    "type": "object", "additionalProperties": False,
    "properties": {name: {"type": ["integer", "null"], "maximum": maximum,
                          "minimum": watchdogs.MIN_LIMIT}
                   for name, (_default, maximum) in watchdogs.LIMITS.items()}}}
WATCHDOG_SETTINGS = inline_serializer("WatchdogSettings", {
    **_limit_fields(),
    "defaults": serializers.DictField(child=serializers.IntegerField()),
    "maximums": serializers.DictField(child=serializers.IntegerField()),
    "updated_at": serializers.DateTimeField(allow_null=True),
})


def _shown(row: WatchdogSettings) -> dict[str, Any]:
    limits = row.limits or {}
    return {**{name: limits.get(name) for name in watchdogs.LIMITS},
            "defaults": {n: d for n, (d, _m) in watchdogs.LIMITS.items()},
            "maximums": {n: m for n, (_d, m) in watchdogs.LIMITS.items()},
            "updated_at": row.updated_at}


class WatchdogSettingsView(APIView):
    """The global watchdog limits."""

    @extend_schema(responses=WATCHDOG_SETTINGS)
    def get(self, request):
        return Response(_shown(WatchdogSettings.current()))

    @extend_schema(request=WATCHDOG_BODY, responses=WATCHDOG_SETTINGS)
    def put(self, request):
        return self._save(request, replace=True)

    @extend_schema(request=WATCHDOG_BODY, responses=WATCHDOG_SETTINGS)
    def patch(self, request):
        return self._save(request, replace=False)

    def _save(self, request, *, replace: bool):
        body = request.data
        if not isinstance(body, dict):
            return error_response(400, "invalid", "the body must be an object of limits")
        clean, problems = watchdogs.check_limits(body)
        if problems:
            return error_response(400, "invalid", "; ".join(
                f"{k}: {v}" for k, v in problems.items()),
                {k: [v] for k, v in problems.items()})
        with transaction.atomic():
            row = WatchdogSettings.objects.select_for_update().filter(pk=1).first() \
                or WatchdogSettings.current()
            limits = {} if replace else dict(row.limits or {})
            limits.update(clean)
            row.limits = {k: v for k, v in limits.items() if v is not None}
            row.save()
        return Response(_shown(row))
