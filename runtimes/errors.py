"""Stable runtime error classes; each has a ``code`` the timeline and API can show."""

from __future__ import annotations


class RuntimeAdapterError(Exception):
    code = "runtime_error"

    def __init__(self, message: str = "", *, code: str | None = None):
        super().__init__(message or self.__class__.__doc__ or self.code)
        if code:
            self.code = code


class UnknownRuntime(RuntimeAdapterError):
    """No adapter is registered under this name."""

    code = "unknown_runtime"


class RuntimeNotInstalled(RuntimeAdapterError):
    """The runtime's executable was not found (run `make runtimes`)."""

    code = "not_installed"


class ProviderUnsupported(RuntimeAdapterError):
    """The provider profile's platform or wire mode is not usable with this runtime."""

    code = "provider_unsupported"


class RuntimeStartFailed(RuntimeAdapterError):
    """The runtime process did not start or failed its handshake."""

    code = "start_failed"


class NativeSessionNotFound(RuntimeAdapterError):
    """The runtime reports that the saved native conversation does not exist."""

    code = "native_session_not_found"


class TurnInProgress(RuntimeAdapterError):
    """A turn is already in flight in this session."""

    code = "turn_in_progress"


class NoTurnInFlight(RuntimeAdapterError):
    """There is no turn in flight to interrupt."""

    code = "no_turn_in_flight"


class UnknownRequest(RuntimeAdapterError):
    """No pending permission request or question has this id (already answered?)."""

    code = "unknown_request"


class ProtocolError(RuntimeAdapterError):
    """The runtime answered something the protocol does not allow."""

    code = "protocol_error"


class RuntimeExited(RuntimeAdapterError):
    """The runtime process exited unexpectedly."""

    code = "runtime_exited"


class RuntimeTimeout(RuntimeAdapterError):
    """The runtime did not answer in time."""

    code = "timeout"


class ConfigRejected(RuntimeAdapterError):
    """A requested model/effort is not among the options the runtime advertises."""

    code = "config_rejected"


class AppServerLost(RuntimeAdapterError):
    """The shared app-server a session's thread ran in stopped during a turn: amux's
    fault, not the agent's (the host ends the turn as a lost host's and resumes)."""

    code = "app_server_lost"
