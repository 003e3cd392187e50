"""The Codex features probe's pure rules: what the listing declares, which native flags
count as explicit, and what amux decides from them."""

from __future__ import annotations

from runtimes import codex_features as cf

LISTING = """agent_message_board                      under development  false
default_mode_request_user_input          under development  false
goals                                    stable             true
send_async_message                       removed            false
WARNING: a stray line
"""


def test_the_listing_declares_features_but_not_removed_ones():
    found = cf.declared_features(LISTING)
    assert found[cf.FEATURE] == "under development" and found["goals"] == "stable"
    assert "send_async_message" not in found and "WARNING:" not in found


def test_explicit_flags_in_every_spelling():
    key = cf.THREAD_CONFIG_KEY
    assert cf.explicit_flag(["-c", f"{key}=true"]) is True
    assert cf.explicit_flag(["--config", f"{key}=false"]) is False
    assert cf.explicit_flag([f"--config={key}=true"]) is True
    assert cf.explicit_flag([f"-c{key}=false"]) is False
    assert cf.explicit_flag(["--enable", cf.FEATURE]) is True
    assert cf.explicit_flag([f"--disable={cf.FEATURE}"]) is False
    assert cf.explicit_flag(["-c", f"features={{{cf.FEATURE}=true, goals=true}}"]) is True
    assert cf.explicit_flag(["-c", "features.goals=true", "--enable", "goals"]) is None
    assert cf.explicit_flag([]) is None


def test_the_decision():
    declared = cf.ProbeResult(features={cf.FEATURE: "under development"})
    missing = cf.ProbeResult(features={"goals": "stable"})
    failed = cf.ProbeResult(error="no answer in 10 s")
    ua = "amux/0.171.0 (Linux)"

    def decide(**kw):
        args = {"ask_user": True, "flag": None, "probe": declared, "user_agent": ua, **kw}
        d = cf.decide(**args)
        return d.enabled, d.by

    assert decide() == (True, cf.BY_PROBE)
    assert decide(probe=missing) == (False, cf.NOT_DECLARED)
    assert decide(probe=failed) == (False, cf.PROBE_FAILED)
    assert decide(probe=None) == (False, cf.PROBE_FAILED)
    # a host whose handshake named no user agent does not adopt the probe's result
    assert decide(user_agent=None) == (False, cf.NO_USER_AGENT)
    assert decide(user_agent="  ") == (False, cf.NO_USER_AGENT)
    # an explicit flag wins over any probe
    assert decide(flag=False) == (False, cf.BY_FLAG)
    assert decide(flag=True, probe=missing) == (True, cf.BY_FLAG)
    assert decide(ask_user=False) == (False, cf.OFF)
    assert decide(ask_user=False, flag=True) == (True, cf.BY_FLAG)
