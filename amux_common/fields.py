"""Serializer fields that take JSON as it is typed.

DRF's CharField turns a number into a string ("models": [0] would store "0"); the API
documents strings, so a number where a string belongs is refused (400) instead.
"""

from rest_framework import serializers


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)
