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
    ("Main session", "The team's one router, when the agent settings name its runtime: it "
     "routes explicit requests to tickets with a routing note and hears follow-ups, which "
     "it may stop but never take. Without it amux routes explicit requests by code."),
    ("Routing note", "The main session's pointer for a worker, at most 30 words: where to "
     "look, never what to build. A longer one is refused, not cut."),
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
    ("Turn", "One input to a session and the agent's work on it, until exactly one end: "
     "completed, failed or cancelled. Its tool calls, messages, questions and token use "
     "belong to it."),
    ("Runtime", "The agent program a session runs: codex (Codex app-server), claude "
     "(Claude Code through its Agent SDK), pi (Pi's RPC mode) or an ACP agent. amux drives "
     "it over its own protocol in the session's work directory; it never holds a provider "
     "key."),
    ("Provider", "Where a runtime's model requests go: a base URL, a platform "
     "(OpenAI- or Anthropic-compatible), its models and a write-only API key. Requests pass "
     "amux's model gateway, which adds the key, the current prompt and the caps."),
    ("Expert", "Reusable content for an agent (an Agent Profile): instructions and skills "
     "its sessions carry in the system prompt. It never chooses the runtime, model, "
     "provider or permissions."),
    ("Launch preset", "amux's own launch settings for a shortcut (codex, claude, pi): "
     "runtime, model, provider and permission. The default preset is what a task that "
     "names no runtime runs with; what a caller sets explicitly wins."),
    ("Task", "One prompt given to an agent and run as one turn of its own new session (or "
     "of an instance's session); it ends queued → running → succeeded, failed or "
     "cancelled, as that turn ended, with the agent's answer as its result."),
    ("Instance", "A persistent agent: one name and one session kept, and woken, across "
     "the tasks given to it, so its conversation carries on. Tasks given while one runs "
     "wait behind it."),
    ("Schedule", "A prompt sent on a timer (cron in UTC, or every N seconds) to a session "
     "kept for it, a new session each time, or a bounded task; its runtime and model are "
     "fixed when it is defined."),
    ("Goal", "A piece of work with todos, registered materials, an optional check command "
     "and a quota (turns or tokens), worked by its agents."),
    ("Agent", "A goal's worker: managed (amux starts its session and runs bounded turns) "
     "or attached (an existing Codex app-server session), bound to at most one working "
     "session at a time."),
    ("Connector", "A goal agent's link to a place messages come from — a Lark group, a Lark "
     "document's comments or web chat — with how they reach the agent (live steering, "
     "the session's queue, or its async inbox) and whether it replies there."),
    ("Prompt revision", "One saved version of all prompt texts (team sections, skills, "
     "overrides). Every save makes a new one; a session's next model request reads the "
     "latest, also in the middle of a turn."),
    ("Default updated", "An upgrade changed a built-in prompt text that your team overrides. "
     "Your override stays in effect until you keep it or take the new default."),
]
