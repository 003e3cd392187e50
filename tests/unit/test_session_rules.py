"""Pure session rules: the auto-sleep condition and the ACP image capability rule."""

from types import SimpleNamespace as NS

from runtimes.acp import accepts_images, explicit_input


def test_acp_images_only_when_the_capability_is_exactly_true():
    def init(image):
        return NS(agent_capabilities=NS(prompt_capabilities=NS(image=image)))

    assert accepts_images(init(True))
    for value in (False, None, "true", 1, {}):
        assert not accepts_images(init(value))
    assert not accepts_images(NS(agent_capabilities=None))
    assert not accepts_images(NS(agent_capabilities=NS(prompt_capabilities=None)))


def test_repeat_signature_ignores_call_identifiers_and_clocks():
    a = {"call_id": "1", "process_id": "9", "started_at_ms": 5, "command": ["ls"]}
    b = {"call_id": "2", "process_id": "7", "started_at_ms": 6, "command": ["ls"]}
    assert explicit_input(a) == explicit_input(b) == {"command": ["ls"]}


def test_auto_sleep_rule():
    import importlib

    should_sleep = importlib.import_module("sessions.host").should_sleep
    base = dict(now=1000.0, last_active=900.0, idle_timeout=60, queue_empty=True,
                turn_in_flight=False, pending_permission=False)
    assert should_sleep(**base)
    assert not should_sleep(**{**base, "queue_empty": False})
    assert not should_sleep(**{**base, "turn_in_flight": True})
    assert not should_sleep(**{**base, "pending_permission": True})
    assert not should_sleep(**{**base, "last_active": 950.0})
    # an idle timeout below the 60 s floor still waits 60 s
    assert not should_sleep(**{**base, "idle_timeout": 5, "last_active": 945.0})
    assert should_sleep(**{**base, "idle_timeout": 5, "last_active": 940.0})


def test_a_worker_session_has_no_native_ask_the_user_tool():
    from runtimes import codex_features
    from runtimes.codex import render_config

    # amux's config.toml never switches the feature on: only the probe's per-thread
    # override does, and a worker (no native asking) never gets it
    assert "request_user_input" not in render_config("m", "http://x/v1", "never",
                                                     "danger-full-access")
    declared = codex_features.ProbeResult(features={codex_features.FEATURE: "beta"})
    assert codex_features.decide(ask_user=False, flag=None, probe=declared,
                                 user_agent="codex/1").enabled is False
