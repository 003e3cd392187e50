from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from conversations import models


@admin.register(models.Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ["id", "source", "mode", "chat_id", "thread_key", "session", "generation",
                    "created_at"]
    list_filter = ["mode", "source"]


@admin.register(models.TurnReply)
class TurnReplyAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation", "turn", "chat_id", "message_id", "final",
                    "updated_at"]


@admin.register(models.EventCard)
class EventCardAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation", "session_id", "event_seq", "kind", "state",
                    "message_id"]
