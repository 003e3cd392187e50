"""Session-layer fixtures (tests/support/sessions.py)."""

from tests.support.sessions import (  # noqa: F401
    anthropic_provider,
    model_server,
    openai_provider,
    session_dirs,
)
