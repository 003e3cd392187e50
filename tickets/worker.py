"""A ticket's worker: one agent session named `worker-<ticket id>` working in one
directory, `<data dir>/work/<ticket short name>` (seed 002, 执行器) — a clone of the
ticket's repository on `amux/<short name>` when it has one (tickets.workspace).

The worker reaches amux only through its tools: the `amux` command first on its PATH and a
bearer token scoped to its assignment, kept in a file amux rewrites on every dispatch. Its
environment holds no GitHub or Lark credential: its clone's `origin` is amux's git gateway
(tickets/git_gateway.py), where its git authenticates with the assignment token that
`git-credential-amux` (set in the worker gitconfig that replaces the operator's) answers,
and `gh` is a shim that acts through amux.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from intake.models import Source
from intake.sources import plugin
from sessions import isolation, ownership
from sessions import services as sessions
from sessions.models import Session
from sessions.new_session import Launch, Prompting, SessionSpec
from tickets.models import AgentSettings, Assignment, Ticket
from tickets.tools import install_worker_bin, mcp_server_entry, worker_env
from tickets.tools.worker_bin import (
    GITCONFIG_MODE,
    REMOVED_ENV,
    install_session_bin,
    write_gitconfig,
)
from tickets.workspace import amux_url, work_dir

# The worker profile: a foreground shell command still running after this many seconds
# moves to the background (where the runtime allows it), so a slow build never keeps a
# person's new message waiting (seed 002, 执行器).
BACKGROUND_SHELL_AFTER = 5.0


class WorkerNotConfigured(RuntimeError):
    pass


def bin_dir() -> Path:
    return Path(settings.DATA_DIR) / "worker-bin"


def gitconfig_path() -> Path:
    return Path(settings.DATA_DIR) / "worker-gitconfig"


def setup() -> None:
    """Write the worker's commands and gitconfig (every dispatch: a changed source or a
    moved data directory is picked up). Raises WorkerSetupError on a file amux did not
    write in the command directory."""
    install_worker_bin(bin_dir(), disabled=AgentSettings.current().disabled_commands or [])
    isolation.share_tree_read_only(bin_dir())  # a linux-dac worker runs these commands
    hosts = []
    for source in Source.objects.filter(kind="github", enabled=True):
        api = (source.config or {}).get("api_url") or "https://api.github.com"
        host = urlsplit(api).hostname or ""
        # api.github.com serves github.com; an Enterprise API lives on its own host.
        hosts.append("github.com" if host == "api.github.com" else host)
    write_gitconfig(gitconfig_path(), bin_dir(), [h for h in hosts if h])


def session_bin_dir() -> Path:
    return Path(settings.DATA_DIR) / "session-bin"


def session_cli() -> str:
    """The `amux` command alone (no shims: a session that is no ticket's has no git
    gateway or thread), for sessions whose runtime takes no MCP (Pi): it reaches the memory
    tools with the session's own credential (sessions.hooks.session_cli)."""
    directory = session_bin_dir()
    install_session_bin(directory)
    isolation.share_tree_read_only(directory)
    return str(directory)


def tokens_dir() -> Path:
    return Path(settings.DATA_DIR) / "run" / "worker-tokens"


def token_file(ticket: Ticket) -> Path:
    return tokens_dir() / f"ticket-{ticket.pk}"


def shared_paths() -> list[Path]:
    """What a worker session reads from amux's data directory, kept open to the runtime
    user by the code that writes it (setup(), write_token()): amux's start-up permission
    pass leaves these as they are."""
    return [bin_dir(), gitconfig_path(), tokens_dir()]


def reshare() -> None:
    """Open again, on the files already there, what setup() and write_token() open to a
    linux-dac worker: an amux from before the start-up pass knew shared_paths() closed
    them on every restart, and a worker resumed after one — before any new dispatch —
    must find its commands, gitconfig and token."""
    if bin_dir().is_dir():
        isolation.share_tree_read_only(bin_dir())
    if gitconfig_path().is_file():
        gitconfig_path().chmod(GITCONFIG_MODE)
    if tokens_dir().is_dir():
        tokens = {f"ticket-{pk}": session for pk, session in
                  Ticket.objects.filter(session__isnull=False).values_list("pk", "session")}
        for token in tokens_dir().glob("ticket-*"):
            isolation.share_with_session(token, tokens.get(token.name))


def session_name(ticket: Ticket) -> str:
    return f"worker-{ticket.pk}"


def write_token(ticket: Ticket, token: str) -> Path:
    """The ticket's token file. A file already there is rewritten in place (its inode
    kept): a bwrap worker is shown this one file, bound into its sandbox, and a replaced
    file would leave it the former token (a token is one short write, so a reader sees
    the whole old or new one)."""
    path = token_file(ticket)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = None
    if fd is not None:
        try:
            data = token.encode()
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        isolation.share_with_session(path, ticket.session_id)
        return path
    partial = path.with_suffix(".partial")
    partial.write_text(token)
    partial.chmod(0o600)
    os.replace(partial, path)
    # the worker's `amux` reads it: its session's runtime user alone (linux-dac, bwrap)
    isolation.share_with_session(path, ticket.session_id)
    return path


def environment(ticket: Ticket) -> dict[str, str]:
    """The worker's variables: its tools, its ticket, its git configuration, and what the
    ticket's source plugin says about where the work lives (`AMUX_GITHUB_REPO`, …; never a
    credential — the plugin is built without the source's secrets). The operator's GitHub
    tokens are never among them."""
    source = ticket.thread.source
    env = {
        **plugin(source.kind, source.config).environment(),
        **worker_env(amux_url(), token_file=str(token_file(ticket)),
                     gitconfig=str(gitconfig_path())),
        "AMUX_TICKET": str(ticket.pk),
    }
    for name in REMOVED_ENV:
        env.pop(name, None)
    return env


def mcp_servers(ticket: Ticket) -> list[dict]:
    """amux's MCP server for the worker's runtime, authenticated by the assignment token."""
    return [mcp_server_entry(amux_url(), str(token_file(ticket)))]


def brief(ticket: Ticket, assignment: Assignment) -> str:
    """The first message of a run: where the work came from, in the source's own words.

    The worker derives requirements from the original source and standing policy, so the
    brief carries the original message, not a plan."""
    mandate = getattr(ticket, "mandate", None)
    thread = ticket.thread
    origin = mandate.trigger if mandate and mandate.trigger_id else None
    lines = [
        f"Ticket {ticket.short_name}: {ticket.title}",
        f"Source: {thread.source.name} ({thread.source.kind}), thread {thread.key}"
        + (f" — {thread.url}" if thread.url else ""),
    ]
    if mandate:
        lines.append(
            f"Requested by {mandate.requester} ({mandate.strength} request, scope "
            f"{mandate.scope})."
        )
    if origin is not None and origin.text:
        lines += ["", "The original message:", origin.text]
    if ticket.routing_note:
        # the main session's pointer, never a requirement: the source above is the request
        lines += ["", f"Routing note (where to look, not what to build): {ticket.routing_note}"]
    if assignment.attempt > 1:
        lines += ["", "This ticket was picked up again; read the new messages below and "
                  "the thread with `amux context`."]
    lines += [
        "",
        f"Work in {work_dir(ticket)}. Use the `amux` command to report progress, ask a "
        "person a structured question, hand back work outside this ticket, or reply on "
        "the thread.",
    ]
    if (work_dir(ticket) / ".git").exists():
        lines.append(
            f"It is a clone of the repository on the branch amux/{ticket.short_name}: "
            "commit there and `git push` (its remote is amux, which takes pushes of this "
            "branch only), then open "
            f"the pull request with `amux pr \"<title>\" --head amux/{ticket.short_name}`."
        )
    return "\n".join(lines)


def open_session(ticket: Ticket, config: AgentSettings) -> int:
    """The worker's session of ``ticket``: its own when it has one (a revived ticket, a
    replayed dispatch), else a new one written in the caller's transaction with the worker
    profile; its work directory is the ticket's clone (made by the run's start effect
    before its first message). Raises sessions' CommandError when the session layer
    refuses the settings."""
    found = ticket.session_id or Session.objects.filter(
        name=session_name(ticket)).values_list("pk", flat=True).first()
    if found is not None:
        return found
    mandate = getattr(ticket, "mandate", None)
    return sessions.create_session(
        Launch.direct(
            runtime=config.worker_runtime,
            provider=config.worker_provider.slug,
            model=config.worker_model,
            mcp_servers=mcp_servers(ticket),
            env=environment(ticket),
            path=[str(bin_dir())],
            ask_user=False,  # the worker profile: people are asked only through `amux ask`
            background_shell_after=BACKGROUND_SHELL_AFTER),
        Prompting(prompt_role="worker"),  # every turn reads the current worker prompt
        SessionSpec(
            workdir=str(work_dir(ticket)),
            name=session_name(ticket),
            # acts for nobody (its tools are the ticket's); reads its requester's memory
            scope=ownership.of_person("worker", mandate.requester if mandate else "",
                                      acts=False)),
    ).pk


def choose() -> AgentSettings:
    config = AgentSettings.current()
    if config.worker_provider is None or not config.worker_model:
        raise WorkerNotConfigured(
            "no worker provider and model are configured (Triage → agent settings)"
        )
    return config
