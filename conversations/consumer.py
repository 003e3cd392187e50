"""Conversations as intake's consumer of the Lark sources in a conversation mode
(intake/consumers.py): such a source feeds sessions, never tickets. Registered in
ConversationsConfig.ready(); each method is one call into conversations/actions.py, in
intake's transaction."""

from __future__ import annotations

import dataclasses

from conversations import actions, rules
from intake import rules as intake_rules
from intake.models import Source, Thread, Trigger


def claims(source) -> bool:
    """A Lark source whose `conversation` is topic or singleton."""
    return source.kind == "lark" and rules.mode_of(source.config) is not None


class ConversationsConsumer:
    def locate(self, source: Source, result):
        """A chat message stays where it is; in a topic bound to a session, where the
        source receives every message, it needs no new mention: it counts as addressed
        (the gate still decides who may speak). Anything else — a document comment — is
        no conversation."""
        if not intake_rules.is_trigger(result):
            return result
        meta = result.meta or {}
        if not meta.get("message_id"):
            return intake_rules.ignored(rules.NOT_A_MESSAGE)
        if (rules.mode_of(source.config) == rules.TOPIC and result.receives_all
                and not result.addressed and actions.bound(source, meta) is not None):
            return dataclasses.replace(result, addressed=True,
                                       meta={**meta, "addressed_by": "bound_topic"})
        return result

    def thread_state_reported(self, source: Source, thread: Thread, facts: dict) -> None:
        """A chat thread has no state of its own that a conversation follows."""

    def route_new(self, trigger: Trigger, acceptance: str | None) -> str:
        return actions.message_routed(trigger)

    def followed_pull_requests(self, source: Source) -> list[dict]:
        return []



