"""Session-layer fixtures (tests/support/sessions.py)."""

from tests.support.sessions import model_server, openai_provider, session_dirs  # noqa: F401
