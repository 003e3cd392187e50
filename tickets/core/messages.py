"""What the executor and the sources tell the actions: validation of tool input (pure)."""

from __future__ import annotations

from tickets.core.errors import InvalidCommand

REPORT_STATUSES = ("progress", "done", "blocked", "failed")
MAX_TEXT = 20_000
MAX_OPTIONS = 20


def check_report(status: str, text: str) -> None:
    if status not in REPORT_STATUSES:
        raise InvalidCommand(
            f"unknown report status {status!r}; use one of {', '.join(REPORT_STATUSES)}"
        )
    if len(text or "") > MAX_TEXT:
        raise InvalidCommand(f"report text is longer than {MAX_TEXT} characters")


def check_question(text: str, options: list | None) -> list[str]:
    if not text or not str(text).strip():
        raise InvalidCommand("an ask needs a question")
    if len(text) > MAX_TEXT:
        raise InvalidCommand(f"question is longer than {MAX_TEXT} characters")
    options = options or []
    if not isinstance(options, list) or not all(isinstance(o, str) and o for o in options):
        raise InvalidCommand("options must be a list of non-empty strings")
    if len(options) > MAX_OPTIONS:
        raise InvalidCommand(f"at most {MAX_OPTIONS} options")
    return options


def check_text(text: str, what: str) -> None:
    if not text or not str(text).strip():
        raise InvalidCommand(f"{what} must not be empty")
    if len(text) > MAX_TEXT:
        raise InvalidCommand(f"{what} is longer than {MAX_TEXT} characters")


def relayed(status: str, text: str) -> bool:
    """Blocked and failed reports are relayed to the thread; progress and done are not
    (the pull request speaks for itself)."""
    return status in ("blocked", "failed") and bool(text.strip())


def question_text(text: str, options: list[str]) -> str:
    """A structured question as posted on the thread, its options listed."""
    return text if not options else text + "\n" + "\n".join(f"- {o}" for o in options)
