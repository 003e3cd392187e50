"""What makes two launches the same for a pre-started runtime (runtimes/warm.py): every
launch setting is in the key, nothing of one slot or one session is; a launch that carries
a credential a pre-started process cannot take is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runtimes import ProviderSpec, RuntimeConfig, warm
from runtimes.base import McpServer
from runtimes.codex import CodexAdapter
from runtimes.pi import PiAdapter

CREDENTIAL = "amux-session-credential"


def _cfg(**overrides):
    base = dict(workdir=Path("/srv/work/session-1"), state_dir=Path("/srv/runtime/session-1"),
                provider=ProviderSpec("openai-compat", "http://127.0.0.1:9/v1", CREDENTIAL),
                model="m", extra_env={"AMUX_API_URL": "http://127.0.0.1:8000/api/v1",
                                      "AMUX_ASSIGNMENT_TOKEN": CREDENTIAL},
                runtimes_dir=Path("/opt/runtimes"))
    return warm.pooled_form(RuntimeConfig(**{**base, **overrides}))


@pytest.mark.parametrize("change", [
    {"model": "other"}, {"effort": "high"}, {"extra_args": ("--x",)},
    {"permission_mode": "ask"}, {"native_permission": {"sandbox": "read-only"}},
    {"extra_env": {"AMUX_API_URL": "http://elsewhere"}}, {"extra_path": ["/opt/bin"]},
    {"isolation": "bwrap"}, {"sandbox_read_only": (Path("/srv/mirror"),)},
    {"mcp_servers": [McpServer("docs", "http://127.0.0.1:7/mcp")]},
    {"provider": ProviderSpec("openai-compat", "http://127.0.0.1:10/v1", CREDENTIAL)},
    {"role": "worker"}, {"memory": True}, {"ask_user": False},
    {"background_shell_after": 5.0}, {"loopback_fence": "off"},
    {"runtimes_dir": Path("/opt/other")},
])
def test_every_launch_setting_is_in_the_key(change):
    assert warm.launch_key("pi", _cfg(**change)) != warm.launch_key("pi", _cfg())


def test_the_runtime_is_in_the_key():
    assert warm.launch_key("pi", _cfg()) != warm.launch_key("codex", _cfg())


def test_nothing_of_one_slot_or_session_is_in_the_key():
    other = _cfg(workdir=Path("/srv/work/session-2"), state_dir=Path("/srv/runtime/x"),
                 runtime_user="amux-agent-9", system_prompt="be brief",
                 provider=ProviderSpec("openai-compat", "http://127.0.0.1:9/v1",
                                       "another-credential"),
                 extra_env={"AMUX_API_URL": "http://127.0.0.1:8000/api/v1",
                            "AMUX_ASSIGNMENT_TOKEN": "another-credential"})
    assert warm.launch_key("pi", other) == warm.launch_key("pi", _cfg())


def test_the_session_credential_reaches_the_process_only_as_its_key_file():
    cfg = _cfg()
    assert CREDENTIAL not in cfg.extra_env.values()
    slot = warm.slot_config(cfg, Path("/srv/work/warm-a"), Path("/srv/runtime/warm-a"),
                            "amux-agent-3")
    assert slot.provider.api_key == "" and slot.system_prompt is None
    assert slot.provider_key_file == Path("/srv/runtime/warm-a") / warm.KEY_FILE
    assert slot.extra_env[warm.TOKEN_FILE_ENV] == str(slot.provider_key_file)
    assert warm.not_poolable(PiAdapter, cfg) is None


@pytest.mark.parametrize("change,why", [
    ({"extra_env": {"AMUX_ASSIGNMENT_TOKEN": "a-token-of-another-kind"}}, "environment"),
    ({"extra_env": {"AMUX_ASSIGNMENT_TOKEN_FILE": "/srv/tokens/ticket-4"}}, "token file"),
    ({"extra_env": {"SOME_KEY": CREDENTIAL}}, "environment"),
    ({"mcp_servers": [McpServer("amux", "http://127.0.0.1:8000/mcp", bearer_token="t")]},
     "MCP"),
    ({"private_files": (Path("/srv/tokens/ticket-4"),)}, "own group"),
    ({"attach": {"url": "ws://127.0.0.1:1"}}, "attached"),
])
def test_a_launch_with_a_credential_of_another_kind_is_not_pre_started(change, why):
    assert why in (warm.not_poolable(PiAdapter, _cfg(**change)) or "")


def test_a_runtime_that_cannot_start_before_its_session_is_not_pre_started():
    assert "cannot be started" in warm.not_poolable(CodexAdapter, _cfg())


def test_the_adopted_configuration_is_the_sessions_on_the_slot():
    started = warm.slot_config(_cfg(), Path("/srv/work/warm-a"), Path("/srv/runtime/warm-a"),
                               "amux-agent-3")
    session = dataclasses.replace(_cfg(), system_prompt="current")
    adopted = warm.adopted_config(session, started)
    assert (adopted.workdir, adopted.state_dir, adopted.runtime_user) == (
        started.workdir, started.state_dir, "amux-agent-3")
    assert adopted.system_prompt == "current" and adopted.provider.api_key == CREDENTIAL
