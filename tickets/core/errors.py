"""Typed refusals of commands (tickets/actions). Facts are never refused."""


class CommandRefused(Exception):
    """A command that cannot be carried out in the current state."""

    code = "refused"
    status = 409

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFound(CommandRefused):
    code = "not_found"
    status = 404


class TicketEnded(CommandRefused):
    code = "ticket_ended"


class ThreadAlreadyBound(CommandRefused):
    code = "thread_bound"


class InvalidCommand(CommandRefused):
    code = "invalid"
    status = 400
