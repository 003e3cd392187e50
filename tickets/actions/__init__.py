"""The only writers of ticket-domain state (ARCHITECTURE.md "The engine"), one module per
concern, Zulip's `zerver/actions/` style:

- `commands`: what operators do to a ticket (open, stop, add input, retry, answer, bind);
- `executor`: what a worker's run reports (started, ended, turns, inputs, reports,
  questions, replies, hand-backs) and its token;
- `routing`: where a trigger goes once the gate decided, and the evals of candidates;
- `policy_changes`: what a new policy version does to running evals and live tickets;
- `pull_requests`: pull requests and issues reported by the sources;
- `guards`: what the caps hold and release.

Each public function is one command (imperative; may be refused with a typed error from
tickets.core.errors) or one fact (past tense; never refused). It runs in one durable
transaction, locks its aggregate root through tickets.locks (ordered by pk), lets a pure
function of tickets.core decide (`now` passed in), saves what it answered and enqueues the
effects as outbox rows in the same transaction. Callers make exactly one action call.
"""
