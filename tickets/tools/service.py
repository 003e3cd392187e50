"""The executor's tools, once: token resolution, input validation and the one engine call
of each tool. REST (tickets.tools.rest) and MCP (tickets.tools.mcp_server) only translate
their transport to these functions and ToolRefused back, so the two cannot diverge.

Every function is synchronous (Django ORM); the MCP side calls it through sync_to_async.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from intake.send import open_pull_request
from intake.sources.base import ConfigError
from sessions import memory as memories
from tickets import workspace
from tickets.actions import executor, pull_requests
from tickets.core import messages, tokens
from tickets.core.errors import CommandRefused
from tickets.models import Assignment, Input, Question
from tickets.read import assignment_for_token, stages

# Fixed text, shown to the model by MCP and printed by `amux --help`. Not editable prompts:
# they describe the contract of each tool, which only changes with the code.
DESCRIPTIONS = {
    "memory_search": (
        "Search amux's long-term memory for this session: titles and short snippets of the "
        "entries holding every word of query. Nothing of it is loaded otherwise."),
    "memory_read": "Read one memory entry whole, by the id memory_search gave.",
    "report": (
        "Report the state of your ticket to amux. status is one of progress, done, blocked, "
        "failed; text says what happened in a sentence or two. 'done' means the work is "
        "finished and (for code) a pull request is open; 'blocked' and 'failed' are posted "
        "on the ticket's thread so people can help. Free text never asks a person anything: "
        "use ask for that."
    ),
    "ask": (
        "Ask a person a structured question and wait for the answer (the ticket shows as "
        "waiting for a person until it is answered; the answer arrives as a new message). "
        "question is required; options are the choices if there are any; multi allows "
        "several choices; message_ref names the message the question is about "
        "(e.g. 'input:12' from context)."
    ),
    "hand_back": (
        "Hand back a message that asks for work outside this ticket's mandate. trigger is "
        "the message's trigger id (from context); reason says in a few words why it is "
        "outside the mandate. amux then decides separately whether to take it on."
    ),
    "pull_request": (
        "Open the pull request of your ticket on its GitHub repository, from your branch "
        "(head: your ticket's branch amux/<ticket short name>, no other) into base (the "
        "default branch when omitted), with a title and body. If the remote does not have "
        "the branch yet, amux pushes it from your work directory first. The body gets "
        "'Fixes #N' for the ticket's issue. "
        "Opening it again for the same branch returns the same pull request. The ticket "
        "then waits for review; it ends when the pull request is merged or closed."
    ),
    "reply": (
        "Post a short message on the ticket's thread (the GitHub issue/PR or chat it came "
        "from), through amux. Use it sparingly: the pull request speaks for itself."
    ),
    "context": (
        "Read your task: the ticket's title, stage, mandate (what was allowed and by whom), "
        "its thread, the messages it received (pending ones first) and open questions."
    ),
}

REF_INPUT = re.compile(r"^input:(\d+)$")
BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
RECENT_INPUTS = 20


@dataclass
class ToolRefused(Exception):
    """A tool call that does nothing; `status` is the HTTP status REST answers with."""

    status: int
    code: str
    message: str
    fields: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


def _invalid(name: str, message: str) -> ToolRefused:
    return ToolRefused(400, "invalid", f"{name}: {message}", {name: [message]})


def _refusal(refusal: CommandRefused) -> ToolRefused:
    return ToolRefused(refusal.status, refusal.code, refusal.message)


# --- who is calling ---------------------------------------------------------------------


def resolve_token(token: str | None) -> Assignment:
    """The live assignment this bearer token was issued for. Unknown token: 401; a token of
    an assignment that has ended (or whose ticket ended): 403."""
    if not token:
        raise ToolRefused(401, "not_authenticated", "an assignment bearer token is required")
    assignment = assignment_for_token(token)
    if assignment is not None:
        return assignment
    if tokens.looks_like_token(token) and Assignment.objects.filter(
        token_hash=tokens.token_hash(token)
    ).exists():
        raise ToolRefused(403, "assignment_ended", "this assignment has ended")
    raise ToolRefused(401, "not_authenticated", "unknown or replaced assignment token")


def check_named(assignment: Assignment, named) -> None:
    """A request that names an assignment must name the token's own: 403 otherwise."""
    if named in (None, ""):
        return
    try:
        named_id = int(named)
    except (TypeError, ValueError):
        raise _invalid("assignment", "must be an assignment id") from None
    if named_id != assignment.pk:
        raise ToolRefused(
            403, "permission_denied", "this token belongs to another assignment"
        )


# --- validation (field-named, before the engine sees anything) --------------------------


def _text(value, name: str, *, required: bool) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise _invalid(name, "must be a string")
    if required and not value.strip():
        raise _invalid(name, "must not be empty")
    if len(value) > messages.MAX_TEXT:
        raise _invalid(name, f"is longer than {messages.MAX_TEXT} characters")
    return value


def _status(value) -> str:
    if not isinstance(value, str) or value not in messages.REPORT_STATUSES:
        raise _invalid(
            "status",
            f"unknown report status {value!r}; use one of {', '.join(messages.REPORT_STATUSES)}",
        )
    return value


def _options(value) -> list[str]:
    if value in (None, ""):
        return []
    if not isinstance(value, list | tuple):
        raise _invalid("options", "must be a list of strings")
    if not all(isinstance(o, str) and o.strip() for o in value):
        raise _invalid("options", "each option must be a non-empty string")
    if len(value) > messages.MAX_OPTIONS:
        raise _invalid("options", f"at most {messages.MAX_OPTIONS} options")
    if len(set(value)) != len(value):
        raise _invalid("options", "options must be different from each other")
    return list(value)


def _bool(value, name: str) -> bool:
    if value in (None, ""):
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise _invalid(name, "must be true or false")


def _message_ref(assignment: Assignment, value) -> str:
    ref = _text(value, "message_ref", required=False).strip()
    if len(ref) > 300:
        raise _invalid("message_ref", "is longer than 300 characters")
    found = REF_INPUT.match(ref)
    if found and not Input.objects.filter(
        pk=int(found.group(1)), ticket_id=assignment.ticket_id
    ).exists():
        raise _invalid("message_ref", f"{ref} is not a message of this ticket")
    return ref


def _trigger_id(value) -> int:
    if isinstance(value, bool):
        raise _invalid("trigger", "must be a trigger id")
    try:
        trigger_id = int(value)
    except (TypeError, ValueError):
        raise _invalid("trigger", "must be a trigger id") from None
    if trigger_id <= 0:
        raise _invalid("trigger", "must be a trigger id")
    return trigger_id


def _ticket_open(assignment: Assignment) -> None:
    """Asking, replying and handing back need a ticket that has not ended; a report (a
    fact) is still recorded after the end."""
    ticket = assignment.ticket
    ticket.refresh_from_db(fields=["ended_at"])
    if ticket.ended_at is not None:
        raise ToolRefused(409, "ticket_ended", f"ticket {ticket.pk} has ended")


def _stage(assignment: Assignment) -> tuple[str, str]:
    ticket = assignment.ticket
    ticket.refresh_from_db()
    stage, label = stages([ticket])[ticket.pk]
    return str(stage), label


# --- the tools --------------------------------------------------------------------------


def report(assignment: Assignment, *, status, text=None) -> dict:
    status = _status(status)
    text = _text(text, "text", required=False)
    try:
        item = executor.report_received(assignment_id=assignment.pk, status=status, text=text)
    except CommandRefused as refusal:
        raise _refusal(refusal) from refusal
    stage, label = _stage(assignment)
    return {"report": item.pk, "ticket": assignment.ticket_id, "status": item.status,
            "stage": stage, "label": label}


def ask(assignment: Assignment, *, question, options=None, multi=None, message_ref=None) -> dict:
    question = _text(question, "question", required=True)
    options = _options(options)
    multi = _bool(multi, "multi")
    if multi and not options:
        raise _invalid("multi", "a multiple-choice question needs options")
    ref = _message_ref(assignment, message_ref)
    _ticket_open(assignment)
    try:
        item = executor.question_asked(
            assignment_id=assignment.pk, text=question, options=options, multi=multi,
            message_ref=ref,
        )
    except CommandRefused as refusal:
        raise _refusal(refusal) from refusal
    stage, label = _stage(assignment)
    return {"question": item.pk, "ticket": assignment.ticket_id, "stage": stage,
            "label": label}


def hand_back(assignment: Assignment, *, trigger, reason) -> dict:
    trigger_id = _trigger_id(trigger)
    reason = _text(reason, "reason", required=True)
    _ticket_open(assignment)
    try:
        item = executor.hand_back(assignment_id=assignment.pk, trigger_id=trigger_id,
                                reason=reason)
    except CommandRefused as refusal:
        raise _refusal(refusal) from refusal
    return {"trigger": item.pk, "ticket": assignment.ticket_id,
            "disposition": item.disposition}


def reply(assignment: Assignment, *, text) -> dict:
    text = _text(text, "text", required=True)
    _ticket_open(assignment)
    try:
        executor.reply_requested(assignment_id=assignment.pk, text=text)
    except CommandRefused as refusal:
        raise _refusal(refusal) from refusal
    return {"ticket": assignment.ticket_id, "queued": True}


def pull_request(assignment: Assignment, *, title, head, base=None, body=None) -> dict:
    """Open the ticket's pull request through its GitHub source (amux holds the
    credentials; the worker never does). The head branch is pushed from the worker's
    directory first when the remote does not have it yet. Once per head branch: a retry
    returns the same PR."""
    from github import GithubException  # PyGithub loads only where a PR is opened

    title = _text(title, "title", required=True)
    head = _text(head, "head", required=True).strip()
    body = _text(body, "body", required=False)
    if not BRANCH.fullmatch(head) or ".." in head or head.endswith((".lock", "/")):
        raise _invalid("head", f"{head!r} is not a branch name")
    _ticket_open(assignment)
    ticket = assignment.ticket
    own = workspace.branch_name(ticket)
    if head != own:
        # Another ticket's PR linked here would bring its reviews, CI and merge to this one.
        message = f"the pull request's head must be this ticket's branch {own}, not {head}"
        raise ToolRefused(409, "not_own_branch", f"head: {message}", {"head": [message]})
    try:
        found = workspace.repository_of(ticket)
    except workspace.WorkspaceError as exc:
        raise _invalid("head", str(exc)) from exc
    if found is None:
        raise _invalid("head", "this ticket has no GitHub repository; there is no pull request")
    source, repo = found
    try:
        origin = workspace.origin_for(source, repo)
        workspace.push_if_missing(ticket, head)
    except workspace.WorkspaceError as exc:
        raise ToolRefused(409, "not_pushed", f"head: {exc}", {"head": [str(exc)]}) from exc
    base = _text(base, "base", required=False) or origin.default_branch
    thread = ticket.thread
    closes = None
    number = thread.key.rpartition("#")[2]
    if thread.source_id == source.pk and "#" in thread.key and number.isdigit():
        closes = int(number)
    try:
        pr = open_pull_request(source, repo=repo, title=title, body=body, head=head,
                                      base=base, closes=closes)
    except ConfigError as exc:
        raise _invalid("head", f"the source cannot open it: {exc}") from exc
    except GithubException as exc:
        raise ToolRefused(503, "github_unavailable",
                          f"GitHub did not open it (HTTP {exc.status}); try again") from exc
    pull_requests.pr_opened(ticket_id=ticket.pk, thread_key=f"{repo}#{pr['number']}", url=pr["url"],
                     title=title)
    return {"ticket": ticket.pk, "number": pr["number"], "url": pr["url"],
            "created": pr["created"]}


def git_credential(assignment: Assignment, token: str, *, protocol, host, path) -> dict:
    """The worker's git credential, for its credential helper (git's `get` request:
    protocol, host, path): its own assignment token, for amux's git gateway and the
    ticket's repository there only. No upstream credential is ever given out: amux adds
    it inside the gateway. Any other host or path: 403 (the helper answers git nothing)."""
    protocol = _text(protocol, "protocol", required=True).strip().lower()
    host = _text(host, "host", required=True).strip().lower()
    path = _text(path, "path", required=False).strip()
    _ticket_open(assignment)
    try:
        found = workspace.repository_of(assignment.ticket)
    except workspace.WorkspaceError as exc:
        raise ToolRefused(503, "repository_unavailable", str(exc)) from exc
    if found is None:
        raise ToolRefused(403, "no_repository", "this ticket has no repository")
    gateway = workspace.gateway_url(found[1])
    if not workspace.same_repository(gateway, protocol, host, path):
        raise ToolRefused(403, "permission_denied",
                          f"credentials are given only for amux's git gateway, {gateway}")
    return {"protocol": protocol, "host": host, "username": "amux", "password": token}


def _input(item: Input) -> dict:
    return {"id": item.pk, "ref": f"input:{item.pk}", "kind": item.kind, "author": item.author,
            "text": item.text, "trigger": item.trigger_id,
            "delivered": item.delivered_at is not None, "at": item.created_at.isoformat()}


def context(assignment: Assignment) -> dict:
    ticket = assignment.ticket
    ticket.refresh_from_db()
    thread = ticket.thread
    mandate = getattr(ticket, "mandate", None)
    stage, label = stages([ticket])[ticket.pk]
    inputs = Input.objects.filter(ticket=ticket)
    pending = [_input(i) for i in inputs.filter(delivered_at__isnull=True).order_by("id")]
    recent = [_input(i) for i in reversed(inputs.order_by("-id")[:RECENT_INPUTS])]
    request = None
    if mandate is not None and mandate.trigger_id:
        trigger = mandate.trigger
        request = {"trigger": trigger.pk, "actor": trigger.actor, "text": trigger.text}
    return {
        "assignment": {"id": assignment.pk, "attempt": assignment.attempt,
                       "state": assignment.state},
        "ticket": {"id": ticket.pk, "short_name": ticket.short_name, "title": ticket.title,
                   "stage": str(stage), "label": label, "pr_url": ticket.pr_url,
                   "pr_state": ticket.pr_state},
        "mandate": None if mandate is None else {
            "id": mandate.pk, "policy_version": mandate.policy_version, "scope": mandate.scope,
            "strength": mandate.strength, "rule": mandate.rule,
            "requester": mandate.requester, "basis": mandate.basis,
        },
        "request": request,
        "thread": {"source": thread.source.slug, "kind": thread.source.kind, "key": thread.key,
                   "title": thread.title, "url": thread.url},
        "pending_inputs": pending,
        "recent_inputs": recent,
        "open_questions": [
            {"id": q.pk, "text": q.text, "options": q.options, "multi": q.multi,
             "message_ref": q.message_ref}
            for q in Question.objects.filter(ticket=ticket, answered_at__isnull=True)
        ],
    }


def memory(assignment: Assignment, *, query: str | None = None,
           entry_id: int | None = None) -> dict:
    """``memory_search`` (``query``) or ``memory_read`` (``entry_id``) for the worker's
    session: its frozen memory binding decides whose memory, if any."""
    session = assignment.ticket.session
    if session is None:
        raise ToolRefused(409, "no_session", "this assignment has no session")
    try:
        if entry_id is not None:
            try:
                entry_id = int(entry_id)
            except (TypeError, ValueError):
                raise _invalid("id", "must be a memory entry id") from None
            return memories.read(session, entry_id)
        if not isinstance(query, str):
            raise _invalid("query", "must be a string")
        return memories.search(session, query)
    except memories.MemoryUnavailable as exc:
        status = {"not_found": 404, "invalid": 400}.get(exc.code, 409)
        raise ToolRefused(status, exc.code, str(exc)) from None
