"""Conversation fixtures: the session layer's (a provider pointed at the scripted model
server, private data directories)."""

from tests.support.sessions import (  # noqa: F401
    model_server,
    openai_provider,
    session_dirs,
)
