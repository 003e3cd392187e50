"""goals/core/agent_access: what an attached agent may do with its own token (pure)."""

from __future__ import annotations

from goals.core import agent_access as rules


def test_a_token_is_stored_only_as_its_digest():
    token = rules.new_token()
    assert rules.looks_like_agent_token(token) and token != rules.new_token()
    assert rules.digest(token) == rules.digest(token)
    assert token not in rules.digest(token) and len(rules.digest(token)) == 64


def test_a_token_works_only_while_its_binding_is_active_and_on_its_own_goal():
    assert rules.token_refusal(binding_active=True, token_goal="ship", goal="ship") is None
    ended = rules.token_refusal(binding_active=False, token_goal="ship", goal="ship")
    assert (ended.code, ended.status) == ("token_ended", 403)
    other = rules.token_refusal(binding_active=True, token_goal="ship", goal="docs")
    assert (other.code, other.status) == ("other_goal", 403)


def test_a_token_reaches_only_its_own_agents_inbox():
    def refused(agent):
        found = rules.token_refusal(binding_active=True, token_goal="ship", goal="ship",
                                    token_agent="builder", agent=agent)
        return found and (found.code, found.status)

    assert refused(None) is None  # a goal-wide path (todos)
    assert refused("builder") is None
    assert refused("runner") == ("other_agent", 403)


def test_an_agent_claims_only_for_itself_and_never_takes_or_drops_a_todo():
    def refused(**kw):
        base = {"agent": "builder", "claimed_by": None, "target_state": "claimed",
                "named_agent": None}
        found = rules.todo_change_refusal(**{**base, **kw})
        return found and (found.code, found.status)

    assert refused() is None
    assert refused(named_agent="builder", claimed_by="builder", target_state="done") is None
    assert refused(target_state=None) is None  # evidence only
    assert refused(named_agent="runner") == ("other_agent", 403)
    assert refused(claimed_by="runner", target_state="done") == ("claimed_elsewhere", 409)
    assert refused(target_state="dropped") == ("owner_decision", 403)
