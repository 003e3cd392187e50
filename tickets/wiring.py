"""Everything tickets plugs into the apps below it, in one place (called once from
TicketsConfig.ready): the handlers of the outbox effects it owns or consumes, the facts it
provides to the policy (policy.hooks ports), what it takes from intake (the consumer of
recorded triggers) and what it does when a policy version is saved.

This is the only way up: the lower apps declare ports, events and effect kinds; nothing
below tickets imports it.
"""

from __future__ import annotations

from effects import events, outbox
from effects.models import EffectKind
from intake import consumers
from policy import hooks
from sessions import hooks as session_hooks
from tickets import effect_handlers, guarding, main_session, policy_hooks, reply_handlers, worker
from tickets.actions import policy_changes
from tickets.consumer import TicketsConsumer

EFFECT_HANDLERS = {
    "assess": effect_handlers.assess_candidate,
    "dispatch": effect_handlers.dispatch_assignment,
    "deliver": effect_handlers.deliver_input,
    "relay": reply_handlers.relay,  # through the sources
    "notice": reply_handlers.notice,
    "main.notify": main_session.notify,  # the team's main session hears of it
}


def _policy_version_saved(old_version: str | None, new_version: str) -> None:
    policy_changes.policy_changed(old_version=old_version, new_version=new_version)


def wire() -> None:
    for kind, handler in EFFECT_HANDLERS.items():
        outbox.register(kind)(handler)
    # stated by sessions/timeline with the terminal event; ignored for non-worker sessions
    events.subscribe(EffectKind.TURN_ENDED, "tickets")(effect_handlers.worker_turn_ended)
    consumers.register(TicketsConsumer())  # what intake records, tickets takes
    hooks.sources.provide(policy_hooks.source_infos)
    hooks.sources_stamp.provide(policy_hooks.sources_stamp)
    hooks.live_mandates.provide(policy_hooks.live_mandates)
    hooks.worker_configured.provide(policy_hooks.worker_configured)
    session_hooks.worker_defaults.provide(policy_hooks.worker_defaults)
    session_hooks.session_cli.provide(worker.session_cli)
    session_hooks.model_request_caps.register(guarding.model_request_refusal,
                                              guarding.MODEL_REQUEST_PROBE)
    hooks.new_version.listen(_policy_version_saved)
