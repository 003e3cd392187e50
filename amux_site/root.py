"""The API root and the glossary page."""

from django.shortcuts import render
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response
from rest_framework.reverse import reverse

from amux_common import roles
from amux_site.glossary import TERMS

RESOURCES = [
    "sources", "providers", "runtimes", "policy", "triggers", "evals", "tickets",
    "sessions", "prompts", "goals", "connectors", "ingress-receipts",
]


@extend_schema(responses=inline_serializer("ApiRoot", {
    "resources": serializers.DictField(child=serializers.URLField()),
    "schema": serializers.URLField(), "docs": serializers.URLField()}))
@api_view(["GET"])
def api_root(request, format=None):
    base = reverse("api-root", request=request)
    return Response(
        {
            "resources": {name: f"{base}{name}/" for name in RESOURCES},
            "schema": reverse("api-schema", request=request),
            "docs": reverse("api-docs", request=request),
        }
    )


@roles.read_page
def glossary(request):
    return render(request, "panel/glossary.html", {"terms": TERMS, "tab": "glossary"})
