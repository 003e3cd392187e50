"""REST: ``profiles/`` (Agent Profiles from v2 manifests), ``bot-profiles/`` and
``launch-presets/`` (amux's own launch settings; operators edit them)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from amux_common.bounds import json_bounds, not_blank, one_line
from amux_common.fields import BodylessDestroy, JsonTyped, SlugRef, no_body
from execution import profiles
from execution.core.launch_rules import DIRECT_PERMISSIONS
from execution.models import AgentProfile, BotProfile, LaunchPreset
from sessions import limits, services
from sessions.api import RuntimeName, _refused, _valid


# ------------------------------------------------------------------------- profiles
class ProfileSerializer(serializers.ModelSerializer):
    manifest = serializers.SerializerMethodField()

    class Meta:
        model = AgentProfile
        fields = ["slug", "name", "description", "builtin", "revision", "manifest",
                  "created_at", "updated_at"]

    def get_manifest(self, obj: AgentProfile) -> dict[str, Any]:
        return profiles.manifest_of(obj)


class ProfileWrite(JsonTyped, serializers.Serializer):
    manifest = serializers.DictField(help_text="a v2 manifest: version, name, description, "
                                               "instructions, skills",
                                     validators=json_bounds(limits.MANIFEST_KEYS,
                                                            limits.MANIFEST_BYTES))
    # a slug as it is stored (slugify keeps it): letters, digits, '-' and '_', at least
    # one letter or digit (one of white space or dashes alone would be blank once made)
    slug = serializers.RegexField(r"^[-a-zA-Z0-9_]*[a-zA-Z0-9][-a-zA-Z0-9_]*\Z",
                                  required=False, max_length=limits.SLUG,
                                  error_messages={"invalid": "letters, digits, '-' or '_', "
                                                             "with a letter or digit"},
                                  help_text="default: from the manifest's name")


class ProfileUpdate(JsonTyped, serializers.Serializer):
    manifest = serializers.DictField(validators=json_bounds(limits.MANIFEST_KEYS,
                                                            limits.MANIFEST_BYTES))


class ProfileList(generics.ListAPIView):
    queryset = AgentProfile.objects.all()
    serializer_class = ProfileSerializer

    def list(self, request, *args, **kwargs):
        profiles.ensure_builtin()
        return super().list(request, *args, **kwargs)

    @extend_schema(request=ProfileWrite, responses={201: ProfileSerializer})
    def post(self, request):
        data = _valid(ProfileWrite, request)
        try:
            profile = profiles.create_profile(data["manifest"], data.get("slug"))
        except services.CommandError as exc:
            return _refused(exc)
        return Response(ProfileSerializer(profile).data, status=status.HTTP_201_CREATED)


class ProfileDetail(APIView):
    def _get(self, slug: str) -> AgentProfile:
        profiles.ensure_builtin()
        profile = AgentProfile.objects.filter(slug=slug).first()
        if profile is None:
            raise NotFound(f"unknown profile {slug!r}")
        return profile

    @extend_schema(responses=ProfileSerializer)
    def get(self, request, slug: str):
        return Response(ProfileSerializer(self._get(slug)).data)

    @extend_schema(request=ProfileUpdate, responses=ProfileSerializer)
    def put(self, request, slug: str):
        self._get(slug)
        data = _valid(ProfileUpdate, request)
        try:
            profile = profiles.update_profile(slug, data["manifest"])
        except services.CommandError as exc:
            return _refused(exc)
        return Response(ProfileSerializer(profile).data)

    @extend_schema(request=ProfileUpdate, responses=ProfileSerializer)
    def patch(self, request, slug: str):
        """The manifest is the one field: a PATCH without it changes nothing (as PATCH
        omits what stays)."""
        profile = self._get(slug)
        body = ProfileUpdate(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        if "manifest" in body.validated_data:
            return self.put(request, slug)
        if profile.builtin:  # refused as any change to it is
            return _refused(services.CommandError(
                f"{slug!r} is a built-in profile: it cannot be changed", code="builtin",
                status=403))
        return Response(ProfileSerializer(profile).data)

    @extend_schema(responses={204: None})
    @no_body
    def delete(self, request, slug: str):
        self._get(slug)
        try:
            profiles.delete_profile(slug)
        except services.CommandError as exc:
            return _refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


# ------------------------------------------------------------------------- presets
class PresetSerializer(serializers.ModelSerializer):
    provider = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = LaunchPreset
        fields = ["slug", "runtime", "model", "effort", "provider", "permission", "extra_args",
                  "is_default", "builtin", "updated_at"]


class PresetUpdate(JsonTyped, serializers.Serializer):
    runtime = RuntimeName(required=False, max_length=limits.RUNTIME)
    model = serializers.CharField(required=False, max_length=limits.MODEL,
                                  validators=[not_blank])
    effort = serializers.CharField(required=False, allow_blank=True, allow_null=True,
                                   max_length=limits.EFFORT)
    provider = serializers.CharField(required=False, allow_blank=True, allow_null=True,
                                     max_length=limits.SLUG,
                                     help_text="provider binding (slug); null: none")
    permission = serializers.ChoiceField(list(DIRECT_PERMISSIONS), required=False,
                                         allow_blank=True, allow_null=True,
                                         help_text="bypass or ask; empty: the native bypass")
    extra_args = serializers.ListField(child=serializers.CharField(
        max_length=limits.ARG, trim_whitespace=False, validators=[one_line]),
                                       required=False, max_length=limits.ARGS)
    is_default = serializers.BooleanField(required=False)


class PresetList(generics.ListAPIView):
    queryset = LaunchPreset.objects.select_related("provider")
    serializer_class = PresetSerializer

    def list(self, request, *args, **kwargs):
        profiles.ensure_builtin()
        return super().list(request, *args, **kwargs)


class PresetDetail(APIView):
    @extend_schema(responses=PresetSerializer)
    def get(self, request, slug: str):
        profiles.ensure_builtin()
        row = LaunchPreset.objects.select_related("provider").filter(slug=slug).first()
        if row is None:
            raise NotFound(f"unknown preset {slug!r}")
        return Response(PresetSerializer(row).data)

    @extend_schema(request=PresetUpdate, responses=PresetSerializer)
    def patch(self, request, slug: str):
        changes = _valid(PresetUpdate, request)
        try:
            row = profiles.update_preset(slug, changes)
        except services.CommandError as exc:
            return _refused(exc)
        return Response(PresetSerializer(row).data)

    put = patch


# ------------------------------------------------------------------------- bot profiles
class BotProfileSerializer(JsonTyped, serializers.ModelSerializer):
    agent_profile = SlugRef(
        max_length=limits.SLUG, queryset=AgentProfile.objects.all(), required=False,
        allow_null=True, help_text="the default expert (an Agent Profile slug)")
    launch_preset = SlugRef(
        max_length=limits.SLUG, queryset=LaunchPreset.objects.all(), required=False,
        allow_null=True, help_text="how the bot launches (a launch preset slug)")

    class Meta:
        model = BotProfile
        fields = ["slug", "name", "agent_profile", "launch_preset", "created_at"]
        read_only_fields = ["created_at"]

    def to_internal_value(self, data):
        profiles.ensure_builtin()  # the built-in experts and presets can be named at once
        return super().to_internal_value(data)


class BotProfileList(generics.ListCreateAPIView):
    queryset = BotProfile.objects.select_related("agent_profile", "launch_preset")
    serializer_class = BotProfileSerializer

    def perform_create(self, serializer):
        serializer.instance = profiles.create_bot(serializer.validated_data)


class BotProfileDetail(BodylessDestroy, generics.RetrieveUpdateDestroyAPIView):
    queryset = BotProfile.objects.select_related("agent_profile", "launch_preset")
    serializer_class = BotProfileSerializer
    lookup_field = "slug"

    # a bot deleted since it was read is not found, as it would have been a moment earlier
    def perform_update(self, serializer):
        try:
            serializer.instance = profiles.update_bot(serializer.instance.slug,
                                                      serializer.validated_data)
        except services.CommandError as exc:
            raise NotFound(str(exc)) from exc

    def perform_destroy(self, instance):
        try:
            profiles.delete_bot(instance.slug)
        except services.CommandError as exc:
            raise NotFound(str(exc)) from exc

