#!/usr/bin/env python3
"""amux — the worker's command for talking to amux about its one ticket.

Standard library only: it is copied into the worker's bin directory and runs with whatever
python3 the worker has. It reads from its environment:

  AMUX_API_URL                amux's API root, e.g. http://127.0.0.1:8000/api/v1
  AMUX_ASSIGNMENT_TOKEN       the bearer token of this worker's assignment, or
  AMUX_ASSIGNMENT_TOKEN_FILE  a file holding it (amux rewrites it when it re-dispatches)
  AMUX_RETRY_SECONDS          how long to wait for amux while it restarts (default 60)

Exit status: 0 done, 1 refused by amux, 2 wrong usage or configuration, 3 amux unreachable.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT = 60
RETRY_SECONDS = 60  # how long a call waits for amux to come back (a restart takes seconds)
REPEATABLE = {"reply", "pull_request"}  # tools amux answers once per content, however often

EPILOG = """\
examples:
  amux context
  amux report progress "tests written, fixing the parser"
  amux report done "PR opened: fixes the login crash"
  amux ask "Which branch should the fix target?" --option main --option release-2.x
  amux ask "Is dropping Python 3.9 acceptable?" --answers input:12
  amux hand-back 42 "asks for a new feature, not this bug"
  amux reply "Reproduced; a fix is on its way."
  amux pr "Fix the login crash" --head amux/t12-login --body "Fixes #12"

Commit and `git push` as usual: your remote is amux's git gateway, which takes pushes
of your ticket's branch (amux/<ticket short name>) only. `amux pr` pushes your branch
first when the remote does not have it.
"""


class Failure(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.message = message
        self.code = code


def api_root() -> str:
    url = os.environ.get("AMUX_API_URL", "").strip()
    if not url:
        raise Failure("AMUX_API_URL is not set (amux's API root, e.g. "
                      "http://127.0.0.1:8000/api/v1)", 2)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Failure(f"AMUX_API_URL is not an http(s) URL: {url!r}", 2)
    path = parts.path.rstrip("/")
    if not path.endswith("/api/v1"):
        path += "/api/v1"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def token() -> str:
    value = os.environ.get("AMUX_ASSIGNMENT_TOKEN", "").strip()
    path = os.environ.get("AMUX_ASSIGNMENT_TOKEN_FILE", "").strip()
    if not value and path:
        try:
            with open(path, encoding="utf-8") as fh:
                value = fh.read().strip()
        except OSError as exc:
            raise Failure(f"AMUX_ASSIGNMENT_TOKEN_FILE cannot be read: {exc}", 2) from exc
    if not value:
        raise Failure("neither AMUX_ASSIGNMENT_TOKEN nor AMUX_ASSIGNMENT_TOKEN_FILE is set", 2)
    return value


def call(method: str, tool: str, body: dict | None = None) -> dict:
    """One call, tried again while amux restarts: always when the connection was refused
    (nothing reached amux), and for tools amux answers idempotently (the same reply text,
    the same PR head) also when the connection broke after the request was sent."""
    url = f"{api_root()}/tools/{tool}/"
    data = None if body is None else json.dumps(body).encode()
    deadline = time.monotonic() + float(os.environ.get("AMUX_RETRY_SECONDS") or RETRY_SECONDS)
    while True:
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token()}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            if error.code in (502, 503, 504) and time.monotonic() < deadline:
                time.sleep(1)
                continue
            raise Failure(_refusal(error), 1) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            refused = isinstance(reason, ConnectionRefusedError)
            if (refused or method == "GET" or tool in REPEATABLE) and (
                    time.monotonic() < deadline):
                time.sleep(1)
                continue
            raise Failure(f"cannot reach amux at {url}: {reason}", 3) from None


def _refusal(error: urllib.error.HTTPError) -> str:
    try:
        payload = json.loads(error.read() or b"{}")
        detail = payload["error"]
        message = detail.get("message") or error.reason
        code = detail.get("code") or "error"
    except (ValueError, KeyError, TypeError, AttributeError):
        message, code = error.reason, "error"
    return f"refused ({error.code} {code}): {message}"


def _print_context(ctx: dict) -> None:
    ticket, thread, mandate = ctx["ticket"], ctx["thread"], ctx.get("mandate") or {}
    print(f"Ticket {ticket['id']} ({ticket['short_name']}): {ticket['title']}")
    print(f"Stage: {ticket['label']}")
    if ticket.get("pr_url"):
        print(f"Pull request: {ticket['pr_url']} ({ticket.get('pr_state') or 'unknown'})")
    where = thread.get("url") or thread["key"]
    print(f"Thread: {thread['source']} {where} — {thread.get('title') or ''}".rstrip(" —"))
    if mandate:
        print(f"Mandate: {mandate['strength']} request by {mandate['requester']} "
              f"({mandate['scope']}, rule {mandate.get('rule') or '-'}, "
              f"policy {mandate['policy_version'][:12]})")
    request = ctx.get("request")
    if request:
        print(f"\nRequest (trigger {request['trigger']}, from {request['actor']}):")
        print(_indent(request["text"]))
    for title, items in (("Pending messages", ctx["pending_inputs"]),
                         ("Recent messages", ctx["recent_inputs"])):
        if items:
            print(f"\n{title}:")
            for item in items:
                trigger = f", trigger {item['trigger']}" if item.get("trigger") else ""
                print(f"- {item['ref']} {item['kind']} from {item['author'] or '?'}{trigger}:")
                print(_indent(item["text"], "    "))
    if ctx["open_questions"]:
        print("\nOpen questions (waiting for a person):")
        for q in ctx["open_questions"]:
            options = f" [{' | '.join(q['options'])}]" if q["options"] else ""
            print(f"- {q['text']}{options}")


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in (text or "").splitlines() or [""])


def _text_arg(value: str) -> str:
    """`-` reads the text from standard input (for long texts)."""
    return sys.stdin.read() if value == "-" else value


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="amux", description="Tell amux about your ticket: report, ask, hand back, reply.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    root.add_argument("--json", action="store_true", help="print amux's answer as JSON")
    # `--json` also after the command; SUPPRESS keeps a flag given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print amux's answer as JSON")
    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    report = sub.add_parser("report", parents=[common],
                            help="report progress, done, blocked or failed")
    report.add_argument("status", help="progress, done, blocked or failed")
    report.add_argument("text", nargs="?", default="", help="what happened ('-' reads stdin)")

    ask = sub.add_parser("ask", parents=[common], help="ask a person a structured question")
    ask.add_argument("question", help="the question ('-' reads stdin)")
    ask.add_argument("--option", action="append", dest="options", default=[],
                     metavar="TEXT", help="one choice (repeat for more)")
    ask.add_argument("--multi", action="store_true", help="several options may be chosen")
    ask.add_argument("--answers", dest="message_ref", default="", metavar="MESSAGE_REF",
                     help="the message this question is about, e.g. input:12")

    hand = sub.add_parser("hand-back", parents=[common], aliases=["hand_back"],
                          help="hand back a message that is outside this ticket's mandate")
    hand.add_argument("trigger", metavar="TRIGGER_ID", help="the message's trigger id")
    hand.add_argument("reason", help="why it is outside the mandate")

    reply = sub.add_parser("reply", parents=[common], help="post a message on the ticket's thread")
    reply.add_argument("text", help="the message ('-' reads stdin)")

    pr = sub.add_parser("pr", parents=[common], aliases=["pull-request"],
                        help="open the ticket's pull request from a pushed branch")
    pr.add_argument("title", help="the pull request's title")
    pr.add_argument("--head", required=True,
                    help="your branch (amux pushes it if the remote does not have it)")
    pr.add_argument("--base", default=None, help="target branch (default: the default branch)")
    pr.add_argument("--body", default="", help="the description ('-' reads stdin)")

    sub.add_parser("context", parents=[common], aliases=["whoami"],
                   help="show your ticket, mandate and messages")

    mem = sub.add_parser("memory", parents=[common],
                         help="search or read amux's long-term memory for this session")
    mem.add_argument("action", choices=["search", "read"])
    mem.add_argument("what", help="search: a few words; read: the entry's id")
    return root


def run(args: argparse.Namespace) -> dict:
    command = args.command
    if command == "report":
        result = call("POST", "report", {"status": args.status, "text": _text_arg(args.text)})
        summary = f"reported {result['status']} on ticket {result['ticket']} ({result['label']})"
    elif command == "ask":
        body = {"question": _text_arg(args.question), "options": args.options,
                "multi": args.multi, "message_ref": args.message_ref}
        result = call("POST", "ask", body)
        summary = (f"question {result['question']} asked on ticket {result['ticket']}; "
                   "the answer will arrive as a new message")
    elif command in ("hand-back", "hand_back"):
        result = call("POST", "hand_back", {"trigger": args.trigger, "reason": args.reason})
        summary = f"trigger {result['trigger']} handed back ({result['disposition']})"
    elif command == "reply":
        result = call("POST", "reply", {"text": _text_arg(args.text)})
        summary = f"reply queued on the thread of ticket {result['ticket']}"
    elif command in ("pr", "pull-request"):
        body = {"title": args.title, "head": args.head, "base": args.base,
                "body": _text_arg(args.body) if args.body else ""}
        result = call("POST", "pull_request", body)
        summary = f"pull request #{result['number']} is open: {result['url']}"
    elif command == "memory":
        if args.action == "search":
            result = call("POST", "memory_search", {"query": args.what})
            summary = "\n".join(f"{r['id']}: {r['title']} — {r['snippet']}"
                                 for r in result["results"]) or "nothing found"
        else:
            result = call("POST", "memory_read", {"id": args.what})
            summary = f"{result['title']}\n\n{result['text']}"
    else:
        result = call("GET", "context")
        summary = None
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    elif summary is None:
        _print_context(result)
    else:
        print(summary)
    return result


# --- git's credential helper (git-credential-amux) ---------------------------------------


def credential_main(argv: list[str]) -> int:
    """git's credential-helper protocol: on `get`, read protocol/host/path from stdin and
    answer what amux gives: for its own git gateway, this assignment's token; for any
    other host nothing (the refusal goes to stderr). Nothing is stored."""
    request = {}
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line:
            break
        key, _, value = line.partition("=")
        request[key] = value
    if not argv or argv[0] != "get":
        return 0  # `store` and `erase`: amux keeps nothing to store or erase
    try:
        answer = call("POST", "git_credential", {
            "protocol": request.get("protocol", ""), "host": request.get("host", ""),
            "path": request.get("path", "")})
    except Failure as failure:
        print(f"git-credential-amux: {failure.message}", file=sys.stderr)
        return 1
    sys.stdout.write(f"username={answer['username']}\npassword={answer['password']}\n")
    return 0


# --- the `gh` shim ------------------------------------------------------------------------

GH_REFUSAL = ("gh is not available to amux workers; use `amux …` instead "
              "(`amux pr` opens the pull request, `amux reply` comments on the thread, "
              "`amux context` shows the ticket)")


def gh_main(argv: list[str]) -> int:
    """`gh pr create` acts through amux (`amux pr`); anything else fails with a clear
    message: the worker holds no GitHub credential for gh to use."""
    if argv[:2] != ["pr", "create"]:
        print(GH_REFUSAL, file=sys.stderr)
        return 1
    opts = argparse.ArgumentParser(prog="gh pr create", add_help=False,
                                   description="opens the pull request through amux")
    opts.add_argument("-t", "--title")
    opts.add_argument("-b", "--body", default="")
    opts.add_argument("-F", "--body-file")
    opts.add_argument("-H", "--head")
    opts.add_argument("-B", "--base")
    opts.add_argument("-f", "--fill", action="store_true")
    args, unknown = opts.parse_known_args(argv[2:])
    if unknown:
        print(f"gh pr create (through amux) does not take {' '.join(unknown)}; "
              "use --title, --body/--body-file, --head, --base or --fill", file=sys.stderr)
        return 2
    body = args.body
    if args.body_file == "-":
        body = sys.stdin.read()
    elif args.body_file:
        with open(args.body_file, encoding="utf-8") as fh:
            body = fh.read()
    head = args.head or _git_out("rev-parse", "--abbrev-ref", "HEAD")
    title = args.title or (_git_out("log", "-1", "--format=%s") if args.fill else "")
    if not title:
        print("gh pr create: --title is required (or --fill)", file=sys.stderr)
        return 2
    try:
        result = call("POST", "pull_request", {"title": title, "head": head,
                                               "base": args.base, "body": body})
    except Failure as failure:
        print(f"gh: {failure.message}", file=sys.stderr)
        return 1
    print(result["url"])
    return 0


# --- the `lark-cli` shim ------------------------------------------------------------------

LARK_USAGE = ("lark-cli (through amux) posts on this ticket's Lark thread only, as the bot:\n"
              "  lark-cli im +messages-send --chat-id <the ticket's chat> --text TEXT\n"
              "  lark-cli im +messages-reply --message-id <the thread's first message> "
              "--markdown TEXT\n"
              "(--text/--markdown take - for standard input or @FILE); `amux context` shows "
              "the thread. The worker holds no Lark credential for anything else.")
LARK_SENDS = {"+messages-send": "--chat-id", "+messages-reply": "--message-id"}


def _lark_text(value: str) -> str:
    if value == "-":
        return sys.stdin.read()
    if value.startswith("@"):
        with open(value[1:], encoding="utf-8") as fh:
            return fh.read()
    return value


def lark_main(argv: list[str]) -> int:
    """Lark's own CLI's two sending shortcuts, acted through amux (`amux reply`) on the
    ticket's thread, which must be the chat or message they name: the bot's credential
    stays in amux. Anything else fails saying what works."""
    shortcut = argv[1] if argv[:1] == ["im"] and len(argv) > 1 else ""
    if shortcut not in LARK_SENDS:
        print(LARK_USAGE, file=sys.stderr)
        return 1
    target = LARK_SENDS[shortcut]
    opts = argparse.ArgumentParser(prog=f"lark-cli im {shortcut}", add_help=False)
    opts.add_argument(target, dest="target", required=True)
    content = opts.add_mutually_exclusive_group(required=True)
    content.add_argument("--text")
    content.add_argument("--markdown")
    opts.add_argument("--reply-in-thread", action="store_true")
    opts.add_argument("--idempotency-key")
    try:
        args, unknown = opts.parse_known_args(argv[2:])
    except SystemExit:
        print(LARK_USAGE, file=sys.stderr)
        return 2
    if unknown:
        print(f"lark-cli im {shortcut} (through amux) does not take {' '.join(unknown)}; "
              f"use {target}, --text or --markdown", file=sys.stderr)
        return 2
    try:
        thread = call("GET", "context")["thread"]
        if thread.get("kind") != "lark":
            raise Failure(f"this ticket's thread is on {thread.get('kind')}, not Lark: use "
                          "`amux reply`", 1)
        chat, _, root = thread["key"].partition(":")
        own = chat if target == "--chat-id" else root
        if not own or args.target != own:
            where = f"chat {chat}" + (f", first message {root}" if root else "")
            raise Failure(f"{target} {args.target} is not this ticket's thread ({where})", 1)
        text = _lark_text(args.text if args.text is not None else args.markdown)
        result = call("POST", "reply", {"text": text})
    except Failure as failure:
        print(f"lark-cli: {failure.message}", file=sys.stderr)
        return failure.code
    except OSError as error:
        print(f"lark-cli: {error}", file=sys.stderr)
        return 2
    # Queued in amux's outbox: Lark gives the message id when it is sent, not now.
    print(json.dumps({"ok": True, "queued": True, "ticket": result.get("ticket"),
                      "chat_id": chat}))
    return 0


def without_directory(path: str, directory: str) -> str:
    """PATH with `directory` left out, so what a shim runs is never a shim again."""
    keep = [p for p in path.split(os.pathsep)
            if p and os.path.realpath(p) != os.path.realpath(directory)]
    return os.pathsep.join(keep)


def _git_out(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    os.environ["PATH"] = without_directory(os.environ.get("PATH", ""),
                                           os.path.dirname(os.path.abspath(__file__)))
    if argv[:1] == ["lark-cli"]:
        return lark_main(argv[1:])
    if argv[:1] == ["git-credential"]:
        return credential_main(argv[1:])
    if argv[:1] == ["gh"]:
        return gh_main(argv[1:])
    args = parser().parse_args(argv)
    try:
        run(args)
    except Failure as failure:
        print(f"amux: {failure.message}", file=sys.stderr)
        return failure.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
