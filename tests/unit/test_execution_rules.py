"""Resolution of a launch's execution settings (execution/core/launch_rules.py) and v2 manifests
(execution/core/manifest.py): pure rules, one test per rule a user would name."""

from __future__ import annotations

import pytest

from execution.core import manifest
from execution.core.launch_rules import (
    DIRECT,
    TASK,
    CallerSettings,
    ExecutionError,
    Preset,
    from_snapshot,
    resolve,
)

DEFAULT = Preset(slug="codex", runtime="codex", model="gpt-5.5", effort="high",
                 provider="bound", permission="ask", extra_args=("-c", "x=1"))


def _task(**caller):
    return resolve(launch=TASK, caller=CallerSettings(**caller), isolation="private-home",
                   default_preset=DEFAULT)


def test_a_task_without_runtime_takes_only_runtime_and_model_from_the_default_preset():
    got = _task()
    assert (got.runtime, got.model, got.provider, got.preset) == ("codex", "gpt-5.5", "bound",
                                                                   "codex")
    # never the preset's permission, effort or native arguments
    assert got.effort is None and got.extra_args == ()
    assert (got.permission.mode, got.permission.source) == ("policy-allow", "policy")


def test_explicit_caller_settings_win():
    got = _task(runtime="pi", model="m", provider="p", extra_args=("--tools", "read"))
    assert (got.runtime, got.model, got.provider, got.extra_args, got.preset) == \
        ("pi", "m", "p", ("--tools", "read"), None)
    assert _task(model="gpt-5.5-mini").model == "gpt-5.5-mini"  # model alone: preset runtime


def test_a_direct_session_without_permission_uses_the_native_bypass():
    got = resolve(launch=DIRECT, caller=CallerSettings(runtime="codex", model="m"),
                  isolation="private-home")
    assert (got.permission.mode, got.permission.source) == ("bypass", "native-default")
    assert got.permission.native == {"approval_policy": "never",
                                     "sandbox_mode": "danger-full-access"}
    assert got.sandbox == "danger-full-access"
    explicit = resolve(launch=DIRECT, caller=CallerSettings(runtime="claude", model="m",
                                                            permission="ask"),
                       isolation="private-home")
    assert explicit.permission.native == {"permission_mode": "default"}


def test_a_shortcut_keeps_its_permission_unless_the_caller_names_one():
    shortcut = resolve(launch=DIRECT, caller=CallerSettings(), isolation="private-home",
                       preset=DEFAULT)
    assert (shortcut.permission.mode, shortcut.permission.source) == ("ask", "preset")
    assert shortcut.extra_args == ("-c", "x=1") and shortcut.effort == "high"
    mine = resolve(launch=DIRECT, caller=CallerSettings(permission="bypass"),
                   isolation="private-home", preset=DEFAULT)
    assert mine.permission.source == "explicit"


def test_a_task_s_permission_follows_its_policy_whatever_the_preset():
    task = resolve(launch=TASK, caller=CallerSettings(permission_policy="policy-deny"),
                   isolation="private-home", preset=DEFAULT)
    assert (task.permission.mode, task.permission.policy) == ("policy-deny", "policy-deny")
    with pytest.raises(ExecutionError) as refused:
        _task(permission_policy="anything")
    assert refused.value.field == "permission_policy"


@pytest.mark.parametrize("caller, field", [
    ({"runtime": "pi", "model": "m", "extra_args": "--x"}, "extra_args"),
    ({"runtime": "pi", "model": "m", "extra_args": ["a\nb"]}, "extra_args"),
    ({"runtime": "pi", "model": "m", "extra_args": [""]}, "extra_args"),
    ({"runtime": "pi"}, "model"), ({"model": "m"}, "runtime"),
])
def test_bad_settings_name_the_field(caller, field):
    with pytest.raises(ExecutionError) as refused:
        resolve(launch=DIRECT, caller=CallerSettings(**caller), isolation="private-home")
    assert refused.value.field == field


def test_a_runtime_without_command_line_settings_refuses_extra_args():
    with pytest.raises(ExecutionError, match="claude"):
        resolve(launch=TASK, caller=CallerSettings(runtime="claude", model="m",
                                                   extra_args=("--x",)),
                isolation="private-home", runtime_takes_extra_args=False)


def test_the_frozen_settings_read_back_the_same():
    got = _task(runtime="acp", model="m")
    assert got.permission.native["mode"] == "auto"
    assert from_snapshot(got.as_snapshot()) == got


def test_only_v2_manifests_without_execution_fields_are_experts():
    good = {"version": 2, "name": "X", "skills": [{"name": "a", "content": "b"}]}
    assert manifest.parse(good).skills[0].content == "b"
    for bad, field in [({**good, "version": 1}, "version"), ({**good, "version": "2"},
                                                            "version"),
                       ({**good, "version": True}, "version"), ({**good, "engine": "x"},
                                                               "engine"),
                       ({**good, "models": []}, "models"), ({**good, "endpoint": "u"},
                                                           "endpoint"),
                       ({**good, "name": ""}, "name"),
                       ({**good, "skills": [{"name": "a"}]}, "skills.0.content"),
                       ({**good, "skills": [{"name": "a", "content": "b"}] * 2},
                        "skills.1.name")]:
        with pytest.raises(manifest.ManifestError) as refused:
            manifest.parse(bad)
        assert refused.value.field == field, bad


def test_the_expert_text_carries_instructions_and_each_skill():
    text = manifest.prompt_text("Heron", "Be brief.", [
        {"name": "tides", "description": "reads tides", "content": "Twice a day."}])
    assert text.index("Be brief.") < text.index("### tides") < text.index("Twice a day.")


def test_a_runtime_named_without_a_model_takes_only_the_model_of_its_own_shortcut():
    pi = Preset(slug="pi", runtime="pi", model="gpt-5.5", effort="high", provider="bound",
                permission="ask", extra_args=("--tools", "read"))
    got = resolve(launch=TASK, caller=CallerSettings(runtime="pi"), isolation="private-home",
                  default_preset=DEFAULT, runtime_preset=pi)
    assert (got.runtime, got.model, got.provider) == ("pi", "gpt-5.5", "bound")
    # nothing else of the shortcut: not its permission, effort or native arguments
    assert got.effort is None and got.extra_args == () and got.preset is None
    assert got.permission.mode == "policy-allow"
    # an explicit model still wins, and another runtime's shortcut is never used
    assert resolve(launch=TASK, caller=CallerSettings(runtime="pi", model="m"),
                   isolation="private-home", runtime_preset=pi).model == "m"
    with pytest.raises(ExecutionError, match="model is required"):
        resolve(launch=DIRECT, caller=CallerSettings(runtime="codex"),
                isolation="private-home", runtime_preset=pi)


def test_the_native_sandbox_follows_the_isolation_backend():
    from execution.core.launch_rules import native_permission

    # approvals on: the same native settings under both; the sandbox in force is named
    assert native_permission("codex", "ask", "linux-dac") == (
        {"approval_policy": "on-request", "sandbox_mode": "workspace-write"},
        "workspace-write")
    assert native_permission("codex", "ask", "bwrap") == (
        {"approval_policy": "on-request", "sandbox_mode": "workspace-write"}, "bwrap")
    assert native_permission("acp", "policy-allow", "bwrap")[0]["mode"] == "auto"
    assert native_permission("claude", "bypass", "bwrap") == (
        {"permission_mode": "bypassPermissions"}, "bwrap")
    assert native_permission("pi", "ask", "bwrap") == ({}, "bwrap")
    assert native_permission("pi", "ask", "private-home") == ({}, "none")
