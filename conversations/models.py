"""Bindings of Lark places to agent sessions, the one reply message per turn, and card
callbacks already taken (their idempotency)."""

from __future__ import annotations

from django.db import models


class Mode(models.TextChoices):
    TOPIC = "topic", "topic"          # each topic (or direct chat) has its own session
    SINGLETON = "singleton", "singleton"  # one bot-wide session shared across chats


class Conversation(models.Model):
    """One Lark place bound to one agent session.

    topic mode: `chat_id` + `thread_key` (the topic's thread id; "" for a direct chat, which
    is one conversation as a whole). singleton mode: one row per source, both keys "".
    `generation` is the output generation: it grows when the conversation is bound to a new
    session (its archived session replaced, ``actions``), and a card carrying an older
    generation controls nothing (``card_actions``). `goal set` does not raise it: a goal's
    cards are tied to their goal by ``goal_key`` (the card's ``request_id``), the replaced
    goal's cards go inert (``actions._goal_card_updated``) and a click on one is refused
    because its ``goal_key`` is no longer the session's goal (``goal_control``)."""

    source = models.ForeignKey("intake.Source", on_delete=models.PROTECT,
                               related_name="conversations")
    mode = models.CharField(max_length=10, choices=Mode.choices)
    chat_id = models.CharField(max_length=120, blank=True)
    thread_key = models.CharField(max_length=120, blank=True)
    session = models.ForeignKey("agent_sessions.Session", on_delete=models.PROTECT,
                                related_name="conversations")
    generation = models.PositiveIntegerField(default=1)
    started_by = models.CharField(max_length=120, blank=True,
                                  help_text="the Lark open_id whose message created it")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["source", "chat_id", "thread_key"],
                                               name="one_conversation_per_place")]

    def __str__(self):
        where = f"{self.chat_id}/{self.thread_key}" if self.chat_id else "singleton"
        return f"{self.source_id}:{where} → session {self.session_id}"


class TurnReply(models.Model):
    """The one Lark message that shows one turn: created when the turn starts, patched in
    place while it runs, final at its terminal event. `reply_to` is the message it answers
    (the turn's own Lark input, or the topic's last message for a web or goal turn)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE,
                                     related_name="replies")
    turn = models.OneToOneField("agent_sessions.Turn", on_delete=models.CASCADE,
                                related_name="lark_reply")
    chat_id = models.CharField(max_length=120)
    reply_to = models.CharField(max_length=120, blank=True)
    message_id = models.CharField(max_length=120, blank=True,
                                  help_text="the Lark message id, once sent")
    generation = models.PositiveIntegerField(default=1)
    rendered = models.CharField(max_length=64, blank=True,
                                help_text="hash of the card last sent (no patch when equal)")
    final = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]


class CardCallback(models.Model):
    """A card action already taken, by its Lark event id: a redelivered callback answers
    the first outcome and changes nothing."""

    source = models.ForeignKey("intake.Source", on_delete=models.CASCADE,
                               related_name="card_callbacks")
    event_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=40)
    operator = models.CharField(max_length=120, blank=True)
    outcome = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["source", "event_id"],
                                               name="one_card_callback_per_event")]


class EventCard(models.Model):
    """A card sent for one timeline event that asks something of a person (a question, a
    permission request) or reports a goal's state: kept so it can be patched when the
    request is answered or released, and so a click on it can be checked against the
    generation it was sent with."""

    class State(models.TextChoices):
        OPEN = "open", "open"
        ANSWERED = "answered", "answered"
        INERT = "inert", "inert"  # released, replaced or stale: its buttons do nothing

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE,
                                     related_name="event_cards")
    session_id = models.BigIntegerField()
    event_seq = models.PositiveIntegerField(help_text="the timeline event it shows")
    kind = models.CharField(max_length=40, help_text="question, permission or goal")
    request_id = models.CharField(max_length=200, blank=True)
    chat_id = models.CharField(max_length=120)
    message_id = models.CharField(max_length=120, blank=True,
                                  help_text="the Lark message id, once sent")
    generation = models.PositiveIntegerField(default=1)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["conversation", "event_seq"],
                                               name="one_card_per_event")]
        indexes = [models.Index(fields=["session_id", "request_id"], name="event_card_request")]
