"""A local HTTP server that records requests, standing in for api.github.com and
open.feishu.cn. The real SDKs (PyGithub, lark-oapi) are pointed at it.

It keeps just enough state to answer like the platform: GitHub issues and their comments,
an App installation and its access token; Lark's tenant token and messages, deduplicated
by the `uuid` request field as Lark does, a chat's history (paged, refused for a chat the
bot is not in, as im/v1 message list answers), document comments and their replies (paged as
the drive v1 API pages them; replies posted by the app are stored, with Lark's documented
refusals), and the long connection's endpoint discovery.

`hold(method, pattern)` stalls the answer to the next matching request after the server
has applied it (a comment is stored), until the test releases it: a deterministic point at
which the client has sent and not yet heard back, e.g. to kill it there.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from tests.support.loopback_http import LoopbackServer, QuietHandler


@dataclass
class Recorded:
    method: str
    path: str
    query: dict
    headers: dict
    body: object


@dataclass
class Hold:
    method: str
    pattern: str
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


@dataclass
class State:
    comments: dict = field(default_factory=dict)  # (repo, number) -> [comment]
    issues: dict = field(default_factory=dict)  # (repo, number) -> issue dict
    lark_messages: dict = field(default_factory=dict)  # uuid -> message
    # message_id -> every Lark message: people's (lark_message) and the app's, in order
    lark_store: dict = field(default_factory=dict)
    pulls: dict = field(default_factory=dict)  # (repo, number) -> pull request dict
    # What the catch-up reads: reviews and review comments per pull request, and CI per
    # commit — (repo, number) -> [review | comment]; (repo, sha) -> [check run | check
    # suite | status]. Missing fields are filled in as GitHub shows them (see _pull_view).
    reviews: dict = field(default_factory=dict)
    review_comments: dict = field(default_factory=dict)
    check_runs: dict = field(default_factory=dict)
    check_suites: dict = field(default_factory=dict)
    statuses: dict = field(default_factory=dict)
    # file_token -> [{"comment_id", "is_whole", "quote", "replies": [{"reply_id",
    #   "user_id", "create_time" (s), "text", "mention"?}]}], oldest first
    lark_comments: dict = field(default_factory=dict)
    lark_page_size: int = 2  # comments per page, and replies shown inline per comment
    # document_id -> {"title", "revision_id", "content"}: docx bodies (docx v1)
    lark_documents: dict = field(default_factory=dict)
    lark_app_open_id: str = "ou_bot"  # the author of replies the app posts
    lark_app_id: str = "cli_test"  # how message APIs name the app as a sender
    # Chats the bot is in besides those a stored message is in: a new message into any
    # other chat is refused as Lark refuses it (230002, the bot is not in the chat).
    lark_chats: set = field(default_factory=set)
    # When set, the app's messages are answered as sent and then lost (withdrawn at once):
    # GET …/messages/:id does not show them, as a reply that never landed.
    lark_lose_sends: bool = False
    # What /callback/ws/endpoint answers (a fake long connection); "{app_id}" is filled in.
    lark_ws_url: str = ""
    next_id: int = 1000
    fail_next: list = field(default_factory=list)  # [(method, path regex, status)]
    # When set, GitHub's REST routes answer as GitHub does to any other token (or none):
    # 401 {"message": "Bad credentials"}.
    github_token: str = ""


class RecordingServer(LoopbackServer):
    def __init__(self, prefix: str = ""):
        self.prefix = prefix.rstrip("/")
        self.requests: list[Recorded] = []
        self.holds: list[Hold] = []
        self.state = State()
        # A tests/support/git_server.GitServer: repositories answer its clone_url, and a
        # pull request whose head branch is not in its bare repository is refused (422).
        self.git = None
        self.lock = threading.Lock()
        # Lark issues each tenant token itself: one another server (an earlier stand-in)
        # issued is refused here as Lark refuses it (99991663)
        self.tenant_token = f"t-{secrets.token_hex(8)}"
        server = self

        class Handler(QuietHandler):
            def _handle(self):
                raw = self.read_body()
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                url = urlsplit(self.path)
                path = url.path
                if server.prefix and path.startswith(server.prefix):
                    path = path[len(server.prefix):]
                rec = Recorded(self.command, path, parse_qs(url.query),
                               {k.lower(): v for k, v in self.headers.items()}, body)
                with server.lock:
                    server.requests.append(rec)
                    status, payload = server.answer(rec)
                    hold = server._take_hold(rec)
                if hold is not None:
                    hold.released.wait(120)
                try:
                    self.reply(status, json.dumps(payload),
                               [("Content-Type", "application/json; charset=utf-8")])
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client died while held

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        self.listen(Handler)

    @property
    def url(self) -> str:
        return f"{self.origin}{self.prefix}"

    def __enter__(self):
        # lark-oapi keeps tenant tokens per app id for the whole process: a new stand-in Lark
        # issues its own, so one an earlier server issued must not skip this one's token call
        from lark_oapi.core.token.manager import TokenManager

        getattr(TokenManager.cache, "cache", {}).clear()
        return super().__enter__()

    def __exit__(self, *exc):
        for hold in self.holds:
            hold.release()
        super().__exit__(*exc)

    def hold(self, method: str, pattern: str) -> Hold:
        """Stall the answer to the next `method` request whose path matches `pattern` (after
        it is recorded and applied) until `hold.release()`; `hold.arrived` is set when it
        has arrived."""
        hold = Hold(method, pattern)
        with self.lock:
            self.holds.append(hold)
        return hold

    def _take_hold(self, r: Recorded) -> Hold | None:
        for hold in self.holds:
            if (not hold.arrived.is_set() and hold.method == r.method
                    and re.fullmatch(hold.pattern, r.path)):
                hold.arrived.set()
                return hold
        return None

    def matching(self, method: str, pattern: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and re.fullmatch(pattern, r.path)]

    def _id(self) -> int:
        self.state.next_id += 1
        return self.state.next_id

    # -- the platform's answers ------------------------------------------------------------
    def answer(self, r: Recorded):
        for i, (method, pattern, status) in enumerate(self.state.fail_next):
            if method == r.method and re.fullmatch(pattern, r.path):
                del self.state.fail_next[i]
                return status, {"message": "injected failure"}
        base = self.url
        if self.state.github_token and r.path.startswith("/repos/"):
            sent = r.headers.get("authorization", "").split(" ", 1)[-1]
            # the source's token, an installation token this server minted, or (only to
            # find an App's installation) the App's JWT
            app_jwt = sent.count(".") == 2 and r.path.endswith("/installation")
            if sent not in (self.state.github_token, "ghs_installation") and not app_jwt:
                return 401, {"message": "Bad credentials",
                             "documentation_url": "https://docs.github.com/rest"}
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)", r.path)
        if m and r.method == "GET":
            owner, name = m.group(1).split("/")
            repo = {"full_name": m.group(1), "name": name, "owner": {"login": owner},
                    "url": f"{base}/repos/{m.group(1)}", "default_branch": "main",
                    "clone_url": f"https://github.example/{m.group(1)}.git"}
            if self.git is not None:  # the git side is a real server (tests/support/git_server)
                repo["clone_url"] = self.git.clone_url(m.group(1))
            return 200, repo
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues", r.path)
        if m and r.method == "GET":
            since = (r.query.get("since") or [""])[0]
            out = []
            since = since.replace("+00:00", "Z")
            for (repo, number), issue in sorted(self.state.issues.items()):
                if repo != m.group(1) or (repo, number) in self.state.pulls:
                    continue
                if issue.get("updated_at", "2026-11-01T00:00:00Z") < since:
                    continue
                out.append({"id": 500 + number, "number": number, "title": issue.get("title"),
                            "body": issue.get("body"), "user": issue.get("user", {
                                "login": "octocat", "type": "User"}),
                            "state": issue.get("state", "open"),
                            "closed_at": issue.get("closed_at"),
                            "created_at": issue.get("created_at", "2026-11-01T00:00:00Z"),
                            "updated_at": issue.get("updated_at", "2026-11-01T00:00:00Z"),
                            "url": f"{base}/repos/{repo}/issues/{number}",
                            **({"pull_request": {"url": "x"}} if issue.get("is_pr") else {})})
            # Every pull request is an issue too, as GitHub lists them.
            for (repo, number), pull in sorted(self.state.pulls.items()):
                view = self._pull_view(repo, number, pull)
                if repo != m.group(1) or view["updated_at"] < since:
                    continue
                out.append({k: view[k] for k in ("number", "title", "body", "user", "state",
                                                   "closed_at", "created_at", "updated_at")}
                           | {"id": 500 + number, "url": f"{base}/repos/{repo}/issues/{number}",
                              "pull_request": {"url": view["url"]}})
            out.sort(key=lambda x: x["updated_at"])
            return 200, out
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/comments", r.path)
        if m and r.method == "GET":
            since = (r.query.get("since") or [""])[0].replace("+00:00", "Z")
            out = []
            for (repo, number), comments in sorted(self.state.comments.items()):
                for c in comments:
                    if repo == m.group(1) and c.get("updated_at", "") >= since:
                        out.append({"url": f"{base}/repos/{repo}/issues/comments/{c['id']}",
                                    **c, "issue_url": f"{base}/repos/{repo}/issues/{number}"})
            return 200, out
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls", r.path)
        if m and r.method == "GET":
            head = (r.query.get("head") or [""])[0]
            state = (r.query.get("state") or ["open"])[0]
            out = [self._pull_view(repo, n, p) for (repo, n), p in sorted(self.state.pulls.items())
                   if repo == m.group(1)]
            out = [p for p in out if (not head or p["head"]["label"] == head)
                   and state in ("all", p["state"])]
            if (r.query.get("sort") or [""])[0] == "updated":
                desc = (r.query.get("direction") or ["desc"])[0] == "desc"
                out.sort(key=lambda p: p["updated_at"], reverse=desc)
            return 200, out
        if m and r.method == "POST":
            repo = m.group(1)
            if self.git is not None and not self.git.has_branch(repo, r.body.get("head", "")):
                # What GitHub answers for a head branch the repository does not have.
                return 422, {"message": "Validation Failed", "errors": [
                    {"resource": "PullRequest", "field": "head", "code": "invalid"}],
                    "documentation_url": "https://docs.github.com/rest/pulls/pulls"
                                         "#create-a-pull-request"}
            number = max([n for (rp, n) in self.state.issues if rp == repo] +
                         [n for (rp, n) in self.state.pulls if rp == repo] + [0]) + 1
            owner = repo.split("/")[0]
            pull = {"id": 9000 + number, "number": number, "state": "open",
                    "title": r.body["title"], "body": r.body.get("body", ""),
                    "head": {"ref": r.body["head"], "label": f"{owner}:{r.body['head']}"},
                    "base": {"ref": r.body["base"]},
                    "html_url": f"https://github.example/{repo}/pull/{number}",
                    "url": f"{base}/repos/{repo}/pulls/{number}"}
            self.state.pulls[(repo, number)] = pull
            self.state.issues[(repo, number)] = {"title": r.body["title"], "is_pr": True}
            return 201, pull
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)", r.path)
        if m and r.method == "GET":
            key = (m.group(1), int(m.group(2)))
            if key not in self.state.pulls:
                return 404, {"message": "Not Found"}
            return 200, self._pull_view(*key, self.state.pulls[key])
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)/reviews", r.path)
        if m and r.method == "GET":
            key = (m.group(1), int(m.group(2)))
            if key not in self.state.pulls:
                return 404, {"message": "Not Found"}
            return 200, self.state.reviews.get(key, [])
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/comments", r.path)
        if m and r.method == "GET":
            since = (r.query.get("since") or [""])[0].replace("+00:00", "Z")
            out = []
            for (repo, number), comments in sorted(self.state.review_comments.items()):
                for c in comments:
                    if repo == m.group(1) and c.get("updated_at", "") >= since:
                        out.append({"pull_request_url": f"{base}/repos/{repo}/pulls/{number}",
                                    "url": f"{base}/repos/{repo}/pulls/comments/{c['id']}",
                                    **c})
            return 200, sorted(out, key=lambda c: c.get("updated_at", ""))
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/commits/([0-9a-f]+)/(check-runs|check-suites)",
                         r.path)
        if m and r.method == "GET":
            key = (m.group(1), m.group(2))
            if m.group(3) == "check-runs":
                runs = self.state.check_runs.get(key, [])
                return 200, {"total_count": len(runs), "check_runs": runs}
            suites = self.state.check_suites.get(key, [])
            return 200, {"total_count": len(suites), "check_suites": suites}
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/commits/([0-9a-f]+)/status", r.path)
        if m and r.method == "GET":
            statuses = self.state.statuses.get((m.group(1), m.group(2)), [])
            states = {x.get("state") for x in statuses}
            combined = ("failure" if states & {"failure", "error"} else
                        "pending" if "pending" in states or not states else "success")
            return 200, {"state": combined, "sha": m.group(2), "total_count": len(statuses),
                         "statuses": statuses,
                         "url": f"{base}/repos/{m.group(1)}/commits/{m.group(2)}/status"}
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)", r.path)
        if m and r.method == "GET":
            repo, number = m.group(1), int(m.group(2))
            issue = self.state.issues.get((repo, number))
            if issue is None:
                return 404, {"message": "Not Found"}
            return 200, {"url": f"{base}/repos/{repo}/issues/{number}", "number": number,
                         "id": 500 + number, "title": issue.get("title", ""),
                         "body": issue.get("body", ""), "user": {"login": "octocat"},
                         "created_at": "2026-11-01T00:00:00Z", "state": "open",
                         **({"pull_request": {"url": f"{base}/repos/{repo}/pulls/{number}"}}
                            if issue.get("is_pr") else {})}
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments", r.path)
        if m:
            key = (m.group(1), int(m.group(2)))
            if key not in self.state.issues:
                return 404, {"message": "Not Found"}
            comments = self.state.comments.setdefault(key, [])
            if r.method == "POST":
                comment = {"id": self._id(), "body": r.body["body"],
                           "user": {"login": "amux-bot", "type": "Bot"},
                           "created_at": "2026-11-30T00:00:00Z",
                           "updated_at": "2026-11-30T00:00:00Z",
                           "url": f"{base}/repos/{key[0]}/issues/comments/{self.state.next_id}"}
                comments.append(comment)
                return 201, comment
            return 200, comments
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/installation", r.path)
        if m:
            return 200, {"id": 42, "app_id": 7, "account": {"login": m.group(1).split("/")[0]}}
        if re.fullmatch(r"/app/installations/\d+/access_tokens", r.path):
            expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
            return 201, {"token": "ghs_installation", "expires_at": expires}
        if r.path == "/open-apis/auth/v3/tenant_access_token/internal":
            creds = r.body if isinstance(r.body, dict) else {}
            if not creds.get("app_id") or not creds.get("app_secret"):
                return 400, {"code": 10003, "msg": "invalid param"}
            return 200, {"code": 0, "msg": "ok", "tenant_access_token": self.tenant_token,
                         "expire": 7200}
        if r.path == "/open-apis/im/v1/messages" and r.method == "GET":
            return self._lark_list(r)
        m = re.fullmatch(r"/open-apis/docx/v1/documents/([^/]+)(/raw_content)?", r.path)
        if m and r.method == "GET":
            if r.headers.get("authorization") != f"Bearer {self.tenant_token}":
                return 401, {"code": 99991663, "msg": "invalid token"}
            doc = self.state.lark_documents.get(m.group(1))
            if doc is None:
                return 404, {"code": 1770002, "msg": "not found"}
            if m.group(2):
                return 200, {"code": 0, "msg": "success", "data": {"content": doc["content"]}}
            return 200, {"code": 0, "msg": "success", "data": {"document": {
                "document_id": m.group(1), "revision_id": doc["revision_id"],
                "title": doc["title"]}}}
        if r.path == "/open-apis/bot/v3/info" and r.method == "GET":
            # The bot's identity (docs "获取机器人信息"); a tenant token only.
            if r.headers.get("authorization") != f"Bearer {self.tenant_token}":
                return 401, {"code": 99991663, "msg": "invalid token"}
            return 200, {"code": 0, "msg": "ok", "bot": {
                "activate_status": 2, "app_name": "amux", "avatar_url": "",
                "ip_white_list": [], "open_id": self.state.lark_app_open_id}}
        m = re.fullmatch(r"/open-apis/drive/v1/files/([^/]+)/comments(?:/([^/]+)/replies)?",
                         r.path)
        if m and r.method == "GET":
            return self._lark_comments(r, m.group(1), m.group(2))
        if m and m.group(2) and r.method == "POST":
            return self._lark_reply_create(r, m.group(1), m.group(2))
        if r.path == "/callback/ws/endpoint" and r.method == "POST":
            if not self.state.lark_ws_url or not (r.body or {}).get("AppSecret"):
                return 200, {"code": 1000040344, "msg": "no credential"}
            return 200, {"code": 0, "msg": "ok", "data": {
                "URL": self.state.lark_ws_url.replace("{app_id}", r.body.get("AppID", "")),
                "ClientConfig": {"ReconnectCount": -1, "ReconnectInterval": 1,
                                 "ReconnectNonce": 0, "PingInterval": 120}}}
        m = re.fullmatch(r"/open-apis/im/v1/messages(?:/([^/]+)/reply)?", r.path)
        if m and r.method == "POST":
            return self._lark_send(r, m.group(1))
        m = re.fullmatch(r"/open-apis/im/v1/messages/([^/]+)", r.path)
        if m and r.method == "PATCH":
            return self._lark_patch(r, m.group(1))
        if m and r.method == "GET":
            return self._lark_get(r, m.group(1))
        return 404, {"message": "Not Found", "path": r.path}

    # -- Lark messages: every message kept, as a chat and its topics show them -------------
    def lark_message(self, message_id: str, *, chat_id: str, thread_id: str = "",
                     root_id: str = "", sender: str = "ou_alice", text: str = "",
                     mentions: tuple = (), create_time: int | None = None) -> dict:
        """A person's message the app can reply to (what an event told amux about), sent
        at `create_time` (ms; default now, after every stored message); `mentions` are
        (open_id, name) pairs, written `@_user_N` in `text` as Lark writes them."""
        msg = {"message_id": message_id, "chat_id": chat_id, "thread_id": thread_id,
               "root_id": root_id, "parent_id": root_id, "sender": sender,
               "msg_type": "text", "content": json.dumps({"text": text}), "updates": 0,
               "create_time": create_time or self._now_ms(),
               "mentions": [{"key": f"@_user_{i + 1}", "id": open_id, "id_type": "open_id",
                             "name": name, "tenant_key": "tk"}
                            for i, (open_id, name) in enumerate(mentions)]}
        with self.lock:
            self.state.lark_store[message_id] = msg
        return msg

    def _now_ms(self) -> int:
        """Now in ms, after every stored message (Lark's order is by create time)."""
        latest = max((m.get("create_time") or 0 for m in self.state.lark_store.values()),
                     default=0)
        return max(int(time.time() * 1000), latest + 1)

    def _lark_list(self, r: Recorded):
        """GET …/im/v1/messages — a chat's history (`container_id_type=chat`: its messages
        and the first message of each topic, not the replies inside topics) or one topic's
        (`thread`), as Lark answers it: `start_time`/`end_time` in seconds (inclusive; a
        topic's list takes no time range),
        `sort_type` ByCreateTimeAsc (the default) or ByCreateTimeDesc, `page_size` 1–50
        (default 20), paged by `page_token` with `has_more`. Refused as Lark refuses: a bad
        tenant token 99991663, a bad parameter 230001 / 99992402, a chat the bot is not in
        230002."""
        if r.headers.get("authorization") != f"Bearer {self.tenant_token}":
            return 401, {"code": 99991663, "msg": "Invalid access token for authorization."}

        def arg(name, default=""):
            return (r.query.get(name) or [default])[0]

        kind, container = arg("container_id_type"), arg("container_id")
        if kind not in ("chat", "thread") or not container:
            return 400, {"code": 230001, "msg": "invalid request parameter"}
        try:
            size = int(arg("page_size", "20"))
            start = int(arg("page_token", "0") or 0)
            since = int(arg("start_time", "0") or 0)
            until = int(arg("end_time", "0") or 0)
        except ValueError:
            return 400, {"code": 99992402, "msg": "field validation failed"}
        if not 1 <= size <= 50 or arg("sort_type", "ByCreateTimeAsc") not in (
                "ByCreateTimeAsc", "ByCreateTimeDesc"):
            return 400, {"code": 99992402, "msg": "field validation failed"}
        if kind == "chat":
            if not self.lark_knows_chat(container):
                return 400, {"code": 230002, "msg": "Bot/User can NOT be out of the chat."}
            shown = [m for m in self.state.lark_store.values() if m["chat_id"] == container
                     and (not m["thread_id"] or not m["root_id"])]
        else:
            shown = [m for m in self.state.lark_store.values() if m["thread_id"] == container]
        if kind == "thread":  # a topic takes no time range
            since = until = 0
        shown = sorted((m for m in shown
                        if m.get("create_time", 0) // 1000 >= since
                        and (not until or m.get("create_time", 0) // 1000 <= until)),
                       key=lambda m: m.get("create_time", 0),
                       reverse=arg("sort_type") == "ByCreateTimeDesc")
        chunk, more = shown[start:start + size], start + size < len(shown)
        return 200, {"code": 0, "msg": "success", "data": {
            "items": [self._lark_item(m) for m in chunk], "has_more": more,
            **({"page_token": str(start + size)} if more else {})}}

    def _lark_item(self, msg: dict) -> dict:
        """One stored message as Lark's message APIs show it."""
        sender = ({"id": self.state.lark_app_id, "id_type": "app_id", "sender_type": "app"}
                  if msg["sender"] == "app" else
                  {"id": msg["sender"], "id_type": "open_id", "sender_type": "user"})
        return {"message_id": msg["message_id"], "root_id": msg["root_id"],
                "parent_id": msg["parent_id"], "thread_id": msg["thread_id"],
                "msg_type": msg["msg_type"], "create_time": str(msg.get("create_time") or 0),
                "deleted": False, "updated": bool(msg["updates"]), "chat_id": msg["chat_id"],
                "sender": sender, "body": {"content": msg["content"]},
                "mentions": msg.get("mentions") or []}

    def lark_knows_chat(self, chat_id: str) -> bool:
        """The bot is in the chat: named in `lark_chats`, or a message of it is stored."""
        return chat_id in self.state.lark_chats or any(
            m["chat_id"] == chat_id for m in self.state.lark_store.values())

    def lark_chat(self, chat_id: str, thread_id: str | None = None) -> list[dict]:
        """The messages of a chat (or of one topic of it), oldest first."""
        return [m for m in self.state.lark_store.values() if m["chat_id"] == chat_id
                and (thread_id is None or m["thread_id"] == thread_id
                     or m["message_id"] == thread_id)]

    def lark_cards(self, chat_id: str | None = None) -> list[dict]:
        """The cards the app posted, oldest first, each with its current content parsed."""
        return [{**m, "card": json.loads(m["content"])} for m in self.state.lark_store.values()
                if m["sender"] == "app" and m["msg_type"] == "interactive"
                and (chat_id is None or m["chat_id"] == chat_id)]

    def _lark_send(self, r: Recorded, parent_id: str | None):
        """POST …/messages (a new message in a chat) and …/messages/:id/reply, as Lark
        answers them: a bad tenant token 99991663; a reply to a message it does not have
        (or withdrew) 230011; a new message into a chat the bot is not in (not in
        `lark_chats`, and no message of it stored) 230002; the `uuid` makes a retry
        answer the first message."""
        if r.headers.get("authorization") != f"Bearer {self.tenant_token}":
            return 401, {"code": 99991663, "msg": "Invalid access token for authorization."}
        body = r.body if isinstance(r.body, dict) else {}
        msg_type, content = body.get("msg_type"), body.get("content")
        if not isinstance(msg_type, str) or not isinstance(content, str):
            return 400, {"code": 230001, "msg": "invalid request parameter"}
        if msg_type == "interactive":
            try:
                card = json.loads(content)
            except ValueError:
                return 400, {"code": 230099, "msg": "Failed to create card content"}
            if not isinstance(card, dict):
                return 400, {"code": 230099, "msg": "Failed to create card content"}
        uuid = body.get("uuid")
        if uuid and uuid in self.state.lark_messages:
            return 200, {"code": 0, "msg": "success", "data": self.state.lark_messages[uuid]}
        parent = None
        if parent_id is not None:
            parent = self.state.lark_store.get(parent_id)
            if parent is None:
                return 400, {"code": 230011, "msg": "The message was withdrawn or does "
                                                    "not exist."}
        mid = f"om_{self._id()}"
        if parent is not None:
            chat = parent["chat_id"]
            root = parent["root_id"] or parent["message_id"]
            thread = parent["thread_id"]
            if body.get("reply_in_thread") and not thread:
                thread = f"omt_{self._id()}"  # the reply opens a topic on its root
                for m in self.state.lark_store.values():
                    if m["message_id"] == root or m["root_id"] == root:
                        m["thread_id"] = thread
        else:
            if r.query.get("receive_id_type") != ["chat_id"] or not body.get("receive_id"):
                return 400, {"code": 230001, "msg": "invalid request parameter"}
            if not self.lark_knows_chat(body["receive_id"]):
                return 400, {"code": 230002, "msg": "Bot/User can NOT be out of the chat."}
            chat, root, thread = body["receive_id"], "", ""
        stored = {"message_id": mid, "chat_id": chat, "thread_id": thread, "root_id": root,
                  "parent_id": parent_id or "", "sender": "app", "msg_type": msg_type,
                  "content": content, "updates": 0, "create_time": self._now_ms(),
                  "reply_in_thread": bool(body.get("reply_in_thread"))}
        if not self.state.lark_lose_sends:
            self.state.lark_store[mid] = stored
        msg = {"message_id": mid, "root_id": root, "parent_id": parent_id or "",
               "thread_id": thread, "chat_id": chat, "msg_type": msg_type,
               "body": {"content": content}}
        self.state.lark_messages[uuid or mid] = msg
        return 200, {"code": 0, "msg": "success", "data": msg}

    def _lark_get(self, r: Recorded, message_id: str):
        """GET …/messages/:id — one message as Lark shows it (`data.items`); a bad tenant
        token 99991663, a message it does not have (or withdrew) 230011. `lark_withdraw`
        takes a message away, as a person or an admin withdrawing it would."""
        if r.headers.get("authorization") != f"Bearer {self.tenant_token}":
            return 401, {"code": 99991663, "msg": "Invalid access token for authorization."}
        msg = self.state.lark_store.get(message_id)
        if msg is None:
            return 400, {"code": 230011, "msg": "The message was withdrawn or does not exist."}
        return 200, {"code": 0, "msg": "success", "data": {"items": [self._lark_item(msg)]}}

    def lark_withdraw(self, message_id: str) -> None:
        with self.lock:
            self.state.lark_store.pop(message_id, None)

    def _lark_patch(self, r: Recorded, message_id: str):
        """PATCH …/messages/:id — update a card: only an interactive card this app sent
        and shared (`config.update_multi`), as Lark refuses otherwise."""
        if r.headers.get("authorization") != f"Bearer {self.tenant_token}":
            return 401, {"code": 99991663, "msg": "Invalid access token for authorization."}
        msg = self.state.lark_store.get(message_id)
        if msg is None:
            return 400, {"code": 230011, "msg": "The message was withdrawn or does not exist."}
        if msg["sender"] != "app":
            return 400, {"code": 230026, "msg": "No permission to update this message: "
                                                "it was not sent by the app."}
        if msg["msg_type"] != "interactive":
            return 400, {"code": 230001, "msg": "Only interactive card messages can be "
                                                "updated."}
        content = (r.body or {}).get("content") if isinstance(r.body, dict) else None
        try:
            card = json.loads(content) if isinstance(content, str) else None
        except ValueError:
            card = None
        if not isinstance(card, dict):
            return 400, {"code": 230099, "msg": "Failed to create card content"}
        if not (json.loads(msg["content"]).get("config") or {}).get("update_multi"):
            return 400, {"code": 230031, "msg": "The card is not shared (update_multi) and "
                                                "cannot be updated."}
        msg["content"] = content
        msg["updates"] += 1
        return 200, {"code": 0, "msg": "success", "data": {}}

    def _pull_view(self, repo: str, number: int, pull: dict) -> dict:
        """A stored pull request as GitHub shows it: what the test left out filled in."""
        owner = repo.split("/")[0]
        head = {"ref": "topic", "sha": "0" * 40, **(pull.get("head") or {})}
        head.setdefault("label", f"{owner}:{head['ref']}")
        return {"id": 9000 + number, "number": number, "state": "open", "title": "",
                "body": "", "user": {"login": "octocat", "type": "User"},
                "base": {"ref": "main"}, "created_at": "2026-11-01T00:00:00Z",
                "updated_at": "2026-11-01T00:00:00Z", "closed_at": None, "merged_at": None,
                "html_url": f"https://github.example/{repo}/pull/{number}",
                "url": f"{self.url}/repos/{repo}/pulls/{number}", **pull, "head": head}

    def _lark_comments(self, r: Recorded, token: str, comment_id: str | None):
        """drive v1 file comments (GET …/comments) and one comment's replies (GET
        …/comments/:id/replies), paged by `page_token` as Lark pages them; a comment in
        the list shows its first replies only, with `has_more` when there are more."""
        if r.headers.get("authorization") != f"Bearer {self.tenant_token}":
            return 401, {"code": 99991663, "msg": "invalid token"}
        if not (r.query.get("file_type") or [""])[0]:
            return 400, {"code": 99992402, "msg": "file_type is required"}
        comments = self.state.lark_comments.get(token)
        if comments is None:
            return 400, {"code": 1069305, "msg": "docs not exist"}
        size = self.state.lark_page_size
        start = int((r.query.get("page_token") or ["0"])[0] or 0)

        def reply(x):
            elements = [{"type": "text_run", "text_run": {"text": x["text"]}}]
            if x.get("mention"):
                elements.append({"type": "person", "person": {"user_id": x["mention"]}})
            return {"reply_id": x["reply_id"], "user_id": x["user_id"],
                    "create_time": x["create_time"], "update_time": x["create_time"],
                    "content": {"elements": elements}}

        def page(items):
            chunk = items[start:start + size]
            more = start + size < len(items)
            return {"items": chunk, "has_more": more,
                    **({"page_token": str(start + size)} if more else {})}

        if comment_id is not None:
            found = next((c for c in comments if c["comment_id"] == comment_id), None)
            if found is None:
                return 404, {"code": 1069307, "msg": "not exist"}
            return 200, {"code": 0, "msg": "success",
                         "data": page([reply(x) for x in found["replies"]])}
        items = [{"comment_id": c["comment_id"], "user_id": c["replies"][0]["user_id"],
                  "create_time": c["replies"][0]["create_time"],
                  "is_whole": c.get("is_whole", False), "quote": c.get("quote", ""),
                  "is_solved": False, "has_more": len(c["replies"]) > size,
                  "reply_list": {"replies": [reply(x) for x in c["replies"][:size]]}}
                 for c in comments]
        return 200, {"code": 0, "msg": "success", "data": page(items)}

    def _lark_reply_create(self, r: Recorded, token: str, comment_id: str):
        """POST …/comments/:id/replies: stores a reply by the app (the list then shows it).
        Refused as Lark documents it (file-comment-reply/create): no such document 1069305,
        no such comment 404 1069307, a whole-document comment (it takes no replies) or a bad
        body 1069302 — text_run text over 10000 characters, or with a raw `<` or `>`."""
        if r.headers.get("authorization") != f"Bearer {self.tenant_token}":
            return 401, {"code": 99991663, "msg": "invalid token"}
        if not (r.query.get("file_type") or [""])[0]:
            return 400, {"code": 1069302, "msg": "param error"}
        comments = self.state.lark_comments.get(token)
        if comments is None:
            return 400, {"code": 1069305, "msg": "docs not exist"}
        found = next((c for c in comments if c["comment_id"] == comment_id), None)
        if found is None:
            return 404, {"code": 1069307, "msg": "not exist"}
        elements = ((r.body or {}).get("content") or {}).get("elements")
        if found.get("is_whole") or not isinstance(elements, list) or not elements:
            return 400, {"code": 1069302, "msg": "param error"}
        texts = []
        for el in elements:
            text = (el.get("text_run") or {}).get("text") if el.get("type") == "text_run" else None
            if not isinstance(text, str) or len(text) > 10000 or re.search(r"[<>]", text):
                return 400, {"code": 1069302, "msg": "param error"}
            texts.append(text)
        at = int(time.time())
        x = {"reply_id": f"r{self._id()}", "user_id": self.state.lark_app_open_id,
             "create_time": at, "text": "".join(texts)}
        found["replies"].append(x)
        return 200, {"code": 0, "msg": "success", "data": {
            "reply_id": x["reply_id"], "user_id": x["user_id"], "create_time": at,
            "update_time": at, "content": {"elements": elements}}}
