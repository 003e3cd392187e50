"""REST ``memory/``: each user's own memory entries (list, create, read, update, delete).
Another user's entry answers 404, as if it did not exist."""

from __future__ import annotations

from rest_framework import generics, serializers

from amux_common.fields import BodylessDestroy, JsonTyped
from sessions import limits
from sessions.models import MemoryEntry


class MemoryEntrySerializer(JsonTyped, serializers.ModelSerializer):
    title = serializers.CharField(max_length=limits.MEMORY_TITLE)
    text = serializers.CharField(max_length=limits.MEMORY_TEXT, trim_whitespace=False)

    class Meta:
        model = MemoryEntry
        fields = ["id", "title", "text", "created_at", "updated_at"]
        read_only_fields = ["id", "created_at", "updated_at"]


class _Owned:
    serializer_class = MemoryEntrySerializer


    def get_queryset(self):
        return MemoryEntry.objects.filter(owner=self.request.user)


class MemoryList(_Owned, generics.ListCreateAPIView):
    def perform_create(self, serializer):
        serializer.save(owner=self.request.user)


class MemoryDetail(_Owned, BodylessDestroy, generics.RetrieveUpdateDestroyAPIView):
    pass
