"""The kept database's Lark work (tests/support/kept_work.py), against the recording Lark
server: a topic bound to a conversation session with its cards, and a goal agent's Lark Bot
connection with its async inbox, catch-up cursor and reply."""

from __future__ import annotations

from tests.support.kept_work_api import Work, drain

LARK_TOKEN, LARK_KEY, BOT, ALICE = "kept-v-token", "kept-encrypt-key", "ou_bot", "ou_alice"


def lark_event(slug: str, event: dict) -> dict:
    """A Lark event, encrypted and signed as Lark sends it, through the real hook."""
    from django.test import Client

    from tests.support.intake import processed
    from tests.support.lark_events import sealed

    body, headers = sealed(event, encrypt_key=LARK_KEY)
    response = Client(SERVER_NAME="127.0.0.1").post(
        f"/hooks/lark/{slug}", data=body, content_type="application/json", **headers)
    if event["header"]["event_type"] == "card.action.trigger":
        if response.status_code != 200:
            raise RuntimeError(f"card callback: {response.status_code} {response.content!r}")
        return response.json()
    return processed(response)


def mention(lark, slug: str, app: str, *, chat: str, text: str, message_id: str,
            thread_id: str = "") -> dict:
    from tests.support.lark_events import message_event

    lark.lark_message(message_id, chat_id=chat, thread_id=thread_id, sender=ALICE, text=text)
    return lark_event(slug, message_event(
        token=LARK_TOKEN, chat_id=chat, text=f"@_user_1 {text}", sender=ALICE,
        mentions=[(BOT, "amux")], message_id=message_id, thread_id=thread_id, app_id=app))


def lark(w: Work) -> None:
    """Lark, against the recording Lark server: a topic bound to a conversation session
    (its turn's reply card, a question card answered by a click), and a goal agent's Lark
    Bot connection whose mention waits in the async inbox, is drained, settled and replied."""
    import time

    from conversations.models import Conversation, EventCard
    from intake import poll
    from intake.models import Source
    from runtimes import events as rt
    from sessions import timeline
    from sessions.models import Turn
    from tests.support.lark_events import card_action_event
    from tests.support.recording_server import RecordingServer

    secrets = {"verification_token": LARK_TOKEN, "encrypt_key": LARK_KEY,
               "app_secret": "kept-app-secret"}
    with RecordingServer() as server:
        server.state.lark_chats.update({"oc_team", "oc_work"})
        w.call("post", "/sources/", {"kind": "lark", "slug": "lk", "name": "Lark topics",
                                     "secrets": secrets, "config": {
                                         "app_id": "cli_kept_topics", "bot_open_id": BOT,
                                         "domain": server.url, "groups": ["oc_team"],
                                         "receive_all": ["oc_team"],
                                         "conversation": "topic", "language": "en"}})
        w.call("post", "/sources/", {"kind": "lark", "slug": "lm", "name": "Lark goals",
                                     "secrets": secrets, "config": {
                                         "app_id": "cli_kept_goals", "bot_open_id": BOT,
                                         "domain": server.url, "groups": ["oc_work"]}})
        current = w.call("get", "/policy")
        document = {k: current[k] for k in ("acceptance", "sources")}
        rows = {"group_configured": {"addressed": True}}
        document["sources"].update({"lk": {"allowed": [ALICE], "rows": rows},
                                    "lm": {"allowed": [ALICE], "rows": rows}})
        w.call("put", "/policy", {"base_version": current["version"], **document})

        mention(server, "lk", "cli_kept_topics", chat="oc_team", text="help me cut the release",
                message_id="om_kept_1", thread_id="omt_kept_1")
        conversation = Conversation.objects.get()
        sid = conversation.session_id
        turn = Turn.objects.get(session_id=sid)
        timeline.start_turn(sid, turn.pk)
        timeline.record(sid, turn.pk, [
            rt.MessageCompleted(text="Which branch do we cut from?"),
            rt.QuestionAsked(request_id="q-kept", questions=(
                rt.Question(text="Which branch?", options=("main", "dev"), id="branch"),))])
        drain_until(lambda: EventCard.objects.exclude(message_id="").exists())
        lark_event("lk", card_action_event(
            token=LARK_TOKEN, app_id="cli_kept_topics", chat_id="oc_team",
            value={"amux": "question.answer", "conversation": conversation.pk,
                   "session": sid, "gen": conversation.generation, "request": "q-kept",
                   "question": "branch", "option": 0}))

        w.call("post", "/connectors/", {"goal": "ship", "agent": "builder",
                                        "source_kind": "lark_group_message", "source": "lm",
                                        "source_ref": "oc_work", "ingress_mode": "async_inbox",
                                        "reply_mode": "source_thread"})
        mention(server, "lm", "cli_kept_goals", chat="oc_work", text="when is the cut?",
                message_id="om_kept_2")
        # the chat's catch-up poll (what beat runs): the first sets its cursor, the next
        # reads a message whose event never came and acknowledges it past the cursor
        poll.poll(Source.objects.get(slug="lm"))
        server.lark_message("om_kept_3", chat_id="oc_work", sender=ALICE,
                            create_time=(int(time.time()) + 1) * 1000,
                            text="@_user_1 and the changelog?", mentions=[(BOT, "amux")])
        time.sleep(1.1)
        poll.poll(Source.objects.get(slug="lm"))
        drained = w.call("post", "/goals/ship/agents/builder/inbox/drain/", {"limit": 5})
        first = drained["events"][0]
        w.call("post", f"/goals/ship/agents/builder/inbox/{first['id']}/settle/", {
            "key": drained["key"], "reply": "Cut at noon.",
            "effect": {"kind": "no_follow_up", "rationale": "answered"}})
        drain()


def drain_until(done, seconds: float = 60) -> None:
    import time

    from effects import outbox

    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError("the outbox did not get there in time")
        outbox.drain(seconds=2)
