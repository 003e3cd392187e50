"""The seed's terms, in the words the panel's (?) links use."""

TERMS = [
    ("Source", "Where events come from and replies go: a GitHub repository, a Lark app, "
     "or web chat. Each source decides what it receives and keeps its own allowlist."),
    ("Thread", "One conversation in a source: an issue or pull request, a Lark thread or "
     "chat. Follow-ups on a thread flow to the ticket subscribed to it."),
    ("Trigger", "One event the policy looked at: who said what, where, and whether it was "
     "addressed to the agent."),
    ("Eval", "Triage of an inferred candidate: accept, decline, or needs a person, with a "
     "short routing note. Discarded when the policy changes."),
    ("Mandate", "What the agent was allowed to do for a ticket, fixed when the ticket was "
     "opened: policy version, scope, strength, matched rule, requester and how the request "
     "arrived. It never changes."),
    ("Subscription", "The link from a thread to its ticket. Later messages on the thread "
     "reach the ticket as context; they bring no new authority."),
    ("Ticket", "Accepted work, carried out by one agent session in its own work directory. "
     "Its stage is derived from facts, never set by hand."),
    ("Assignment", "One run of a ticket's worker session: dispatched, started, ended."),
    ("Channel", "Where notices go: the chat or thread that should hear about a result."),
    ("Policy", "The versioned rules that decide who may ask for what and whether the agent "
     "may take work on by itself."),
    ("Strength", "explicit: a person on the allowlist asked the agent directly. inferred: "
     "the agent may take it on, but only after triage."),
    ("Acceptance mode", "manual: inferred candidates never become work. auto: they go to "
     "triage and may become tickets."),
    ("Effect", "Something amux decided to do to the outside world, stored before it is done "
     "so that a crash loses nothing and a retry sends nothing twice."),
    ("Session", "One conversation with an agent runtime, made of turns. It sleeps when idle "
     "and wakes on the next input."),
    ("Prompt revision", "One saved version of all prompt texts (team sections, skills, "
     "overrides). Every save makes a new one; sessions read the latest on every request."),
    ("Default updated", "An upgrade changed a built-in prompt text that your team overrides. "
     "Your override stays in effect until you keep it or take the new default."),
]
