"""Pure rules of goals (no Django): lifecycle and todo transitions, connector capabilities,
ingress mode selection with fallback, the session queue's bounds, urgency projection and
quota arithmetic. goals/actions.py loads, locks, calls these and saves."""
