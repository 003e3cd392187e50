"""OpenAPI descriptions of the policy endpoints (documentation only; validation lives in
policy/document.py and policy/services.py so the API and the panel share it)."""

from rest_framework import serializers

from amux_common.bounds import MaxKeys
from policy import limits
from policy.gate import PLACED_SCOPES, SCOPES


class CellsSerializer(serializers.Serializer):
    addressed = serializers.BooleanField(required=False)
    unaddressed_allowed = serializers.BooleanField(required=False)
    unaddressed_anyone = serializers.BooleanField(required=False)


class SourcePartSerializer(serializers.Serializer):
    allowed = serializers.ListField(child=serializers.CharField(max_length=limits.MAX_NAME),
                                    required=False, max_length=limits.MAX_LIST)
    bots = serializers.ListField(child=serializers.CharField(max_length=limits.MAX_NAME),
                                 required=False, max_length=limits.MAX_LIST)
    rows = serializers.DictField(child=CellsSerializer(), required=False,
                                 validators=[MaxKeys(limits.MAX_ROWS)], help_text="scope → cells")


class PolicyDocumentSerializer(serializers.Serializer):
    version = serializers.CharField(read_only=True, allow_null=True)
    base_version = serializers.CharField(allow_null=True, max_length=limits.VERSION,
                                         help_text="the version this edit is based on")
    acceptance = serializers.ChoiceField(choices=["manual", "auto"])
    sources = serializers.DictField(child=SourcePartSerializer(), help_text="slug → part",
                                    validators=[MaxKeys(limits.MAX_SOURCES)])


class PolicyDraftSerializer(serializers.Serializer):
    """A document not (yet) saved: previewing needs no base version."""

    acceptance = serializers.ChoiceField(choices=["manual", "auto"])
    sources = serializers.DictField(child=SourcePartSerializer(), help_text="slug → part",
                                    validators=[MaxKeys(limits.MAX_SOURCES)])


class VersionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    version = serializers.CharField()
    base_version = serializers.CharField(allow_null=True)
    author = serializers.CharField()
    origin = serializers.CharField()
    created_at = serializers.DateTimeField()
    current = serializers.BooleanField()


class CheckFactsSerializer(serializers.Serializer):
    # a place is the configured Lark group of a group_configured message, nothing else's
    openapi_request_rules = {"anyOf": [
        {"not": {"required": ["place"]}},
        {"required": ["scope"], "properties": {"scope": {"enum": sorted(PLACED_SCOPES)}}}]}

    source = serializers.CharField(max_length=limits.SOURCE)
    scope = serializers.ChoiceField(
        sorted({scope for scopes in SCOPES.values() for scope in scopes}),
        help_text="one of the named source's kind: github issue_new, pr_new, comment, "
                  "ci_default_branch; lark group_configured, group_other, direct, "
                  "doc_comment; webchat direct")
    actor = serializers.CharField(required=False, max_length=limits.ACTOR)
    is_bot = serializers.BooleanField(required=False)
    is_human = serializers.BooleanField(required=False)
    addressed = serializers.BooleanField(required=False)
    receives_all = serializers.BooleanField(required=False,
                                            help_text="default: from the source's config")
    is_self = serializers.BooleanField(required=False)
    place = serializers.CharField(
        required=False, max_length=200,
        help_text="the configured Lark group of a group_configured message: its own row "
                  "decides when the policy keeps one")
    version = serializers.CharField(required=False, max_length=limits.VERSION,
                                    help_text="default: the current version")


class CheckResponseSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["explicit", "inferred", "ignore"])
    strength = serializers.CharField(allow_null=True)
    rule = serializers.CharField(allow_null=True)
    reason = serializers.CharField(allow_null=True)
    version = serializers.CharField(allow_null=True)


class ChangeSerializer(serializers.Serializer):
    path = serializers.CharField()
    text = serializers.CharField()


class DiffSerializer(serializers.Serializer):
    changes = ChangeSerializer(many=True)


class AffectedSerializer(serializers.Serializer):
    ticket = serializers.IntegerField()
    reasons = serializers.ListField(child=serializers.CharField())
    text = serializers.CharField()


class PreviewSerializer(PolicyDraftSerializer):
    version = serializers.CharField()
    changes = ChangeSerializer(many=True)
    affected = AffectedSerializer(many=True)
