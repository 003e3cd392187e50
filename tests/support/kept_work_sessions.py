"""The kept database's sessions and goals (tests/support/kept_work.py): a session's turns
as its host records them, experts, presets, instances, tasks, schedules, memory, an
app-server, and a goal with todos, a managed agent, a connector and a goal turn."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from tests.support.kept_work_api import Work


def host_turn(session_id: int, turn_id: int, reply: str, tokens: int) -> None:
    """What a session host records of a turn the runtime ran: its start, the agent's
    message, the usage it reported and the end (sessions/timeline.py, as the host calls it)."""
    from runtimes import events as rt
    from sessions import model_credentials, timeline

    timeline.start_turn(session_id, turn_id, native_turn_id=f"native-{turn_id}")
    timeline.record(session_id, turn_id, [
        rt.MessageCompleted(text=reply),
        rt.UsageObserved(last={"input_tokens": tokens - 40, "output_tokens": 40}),
        rt.TurnCompleted()])
    # what the model gateway counts of the turn's model request
    model_credentials.usage_counted(session_id, tokens)


def sessions(w: Work) -> None:
    """A session with two turns (the canonical timeline, usage by day, its gateway
    credential), memory, experts and presets, an instance, a task and a schedule."""
    from execution import schedules
    from sessions import native_goals, services
    from sessions.models import Session, Turn

    made = w.call("post", "/sessions/", {"runtime": "pi", "provider": "openai",
                                         "model": "gpt-5.5", "name": "kept session"})
    sid = made["id"]
    # the host's launch: the runtime's configuration, with the session's gateway credential
    services.runtime_config(Session.objects.get(pk=sid))
    for n, (text, reply) in enumerate((("What does the login view do?",
                                        "It checks the password, then sets the cookie."),
                                       ("And the logout view?", "It clears the cookie.")), 1):
        w.call("post", f"/sessions/{sid}/messages/", {"text": text})
        turn = Turn.objects.filter(session_id=sid).order_by("-seq").first()
        host_turn(sid, turn.pk, reply, 100 * n)
    w.facts["session"] = sid
    # the runtime reports a native goal (Codex's thread goal), as the host records it
    native_goals.record(sid, {"objective": "ship the login fix", "status": "active",
                              "token_budget": None, "tokens_used": 0,
                              "time_used_seconds": 0}, command="create",
                        native_thread="native-thread-1")
    w.call("post", "/providers/openai/probe/")  # the provider is not there: a failed probe
    # a Codex app-server amux started for attaching, then stopped (its row is kept)
    spawned = w.call("post", "/attachable-sessions/", {"provider": "openai", "model": "gpt-5.5",
                                                       "name": "kept app-server"})
    w.call("delete", f"/attachable-sessions/{spawned['id']}/")
    w.call("post", "/memory/", {"title": "Deploys", "text": "Never deploy on a Friday."})
    w.call("post", "/profiles/", {"manifest": {
        "version": 2, "name": "Reviewer", "description": "reviews diffs",
        "instructions": "Review the diff for bugs.", "skills": []}})
    w.call("get", "/launch-presets/")  # the built-in presets, as the panel lists them
    w.call("post", "/bot-profiles/", {"slug": "helper", "name": "Helper",
                                      "agent_profile": "reviewer", "launch_preset": "pi"})
    instance = w.call("post", "/instances/", {"name": "solo", "runtime": "pi",
                                              "provider": "openai", "model": "gpt-5.5"})
    w.call("post", f"/instances/{instance['id']}/tasks/", {"prompt": "Summarise the README."})
    w.call("post", "/tasks/", {"prompt": "List the open TODOs.", "runtime": "pi",
                               "provider": "openai", "model": "gpt-5.5"})
    w.call("post", "/schedules/", {
        "name": "nightly", "prompt": "Check the nightly build.", "mode": "subtask",
        "runtime": "pi", "provider": "openai", "model": "gpt-5.5", "every_seconds": 86400})
    schedules.fire_due(now=timezone.now() + timedelta(days=1, minutes=1))  # a day later


def goals(w: Work) -> None:
    """A goal with todos, a material, a managed agent started on its working session, a web
    chat connector and a message through it, and a goal turn asked for."""
    w.call("post", "/goals/", {"slug": "ship", "title": "Ship the release",
                               "check_command": "make test",
                               "quota": {"unit": "turns", "limit": 5}})
    first = w.call("post", "/goals/ship/todos/", {"title": "Write the release notes"})
    w.call("post", "/goals/ship/todos/", {"title": "Tag the release"})
    w.call("post", "/goals/ship/materials/", {"key": "spec", "title": "Release spec",
                                              "body": "Version 0.2.0, no breaking changes."})
    w.call("post", "/goals/ship/agents/", {"slug": "builder", "mode": "managed_agent_runtime",
                                           "provider": "openai", "model": "gpt-5.5"})
    w.call("post", "/goals/ship/agents/builder/start/")
    w.call("patch", f"/goals/ship/todos/{first['id']}/", {"state": "claimed",
                                                          "agent": "builder"})
    w.call("patch", f"/goals/ship/todos/{first['id']}/", {"state": "done",
                                                          "evidence": "notes.md written"})
    w.call("post", "/connectors/", {"goal": "ship", "agent": "builder",
                                    "source_kind": "web_chat",
                                    "ingress_mode": "session_queue"})
    w.call("post", "/goals/ship/agents/builder/messages/", {"text": "How far along are we?"})
    w.call("post", "/goals/ship/agents/builder/turns/", {"key": "kept-turn-1"})
