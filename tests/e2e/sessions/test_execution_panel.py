"""The Sessions tab's experts, launch presets, tasks and instances pages in a real browser
(chromium) against a live server; the tasks run on a real Celery worker (runtime and
default queues) and real Codex against the scripted model server."""

from __future__ import annotations

import json

import pytest

from execution.models import AgentProfile, LaunchPreset, TaskRun
from tests.support.model_server import Text
from tests.support.workers import amux_workers, purge_queues, wait_for, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]

V2 = {"version": 2, "name": "Gardener", "description": "prunes code",
      "instructions": "Remove what is dead.", "skills": []}


def _tabs(page) -> list[str]:
    return page.eval_on_selector_all("nav.tabs a", "els => els.map(e => e.dataset.tab)")


def test_experts_are_created_and_edited_from_v2_manifests_only(logged_in_page):
    page = logged_in_page
    page.goto(f"{page.base_url}/panel/sessions/")
    tabs = _tabs(page)
    page.click("nav.subtabs >> text=Experts")
    assert _tabs(page) == tabs and len(tabs) == 6  # a sub-page, not a seventh tab
    rows = page.eval_on_selector_all("tr[data-profile]", "els => els.map(e => e.dataset.profile)")
    assert sorted(rows) == ["claude", "codex", "pi"]
    assert page.locator("[data-edit]").count() == 0  # built-ins cannot be edited
    page.fill("#manifest", json.dumps({**V2, "version": 1}))
    page.click("#new-profile button[type=submit]")
    assert "manifest.version" in page.inner_text("#manifest-error")
    page.fill("#manifest", json.dumps({**V2, "model": "gpt-5.5"}))
    page.click("#new-profile button[type=submit]")
    assert "manifest.model" in page.inner_text("#manifest-error")
    assert not AgentProfile.objects.filter(builtin=False).exists()
    page.fill("#manifest", json.dumps(V2))
    page.click("#new-profile button[type=submit]")
    page.wait_for_selector("text=Created the expert gardener.")
    page.click("[data-edit=gardener]")
    page.fill("#manifest", json.dumps({**V2, "instructions": "Remove only what is dead."}))
    page.click("#edit-profile button.primary")
    page.wait_for_selector("text=Saved the expert gardener.")
    saved = AgentProfile.objects.get(slug="gardener")
    assert (saved.instructions, saved.revision) == ("Remove only what is dead.", 2)


def test_an_operator_edits_a_launch_preset(logged_in_page, openai_provider):
    page = logged_in_page
    page.goto(f"{page.base_url}/panel/sessions/presets/")
    row = page.locator("tr[data-preset=pi]")
    row.locator("input[name=model]").fill("scripted-model")
    row.locator("select[name=provider]").select_option("scripted")
    row.locator("input[name=is_default]").check()
    row.locator("[data-save=pi]").click()
    page.wait_for_selector("text=Saved the preset pi.")
    pi = LaunchPreset.objects.get(slug="pi")
    assert (pi.model, pi.provider.slug, pi.is_default) == ("scripted-model", "scripted", True)
    assert LaunchPreset.objects.filter(is_default=True).count() == 1


def test_tasks_and_instances_run_from_the_panel(logged_in_page, openai_provider,
                                                session_dirs, model_server, tmp_path):
    page = logged_in_page
    purge_queues()
    model_server.script(Text("Task answer: forty-two."), Text("Instance answer: heron."))
    # threads as `amux run` has them: an awake session's host does not hold back the
    # outbox drain that settles its task
    workers = amux_workers("panel", worker_env(session_dirs), sessions=3, logs=tmp_path)
    try:
        page.goto(f"{page.base_url}/panel/sessions/tasks/")
        page.click("#submit-task button[type=submit]")  # no prompt
        assert "prompt" in page.inner_text("#task-error")
        page.fill("#task-prompt", "What is the answer?")
        page.click("#submit-task button[type=submit]")
        page.wait_for_selector("text=Submitted task")
        run = TaskRun.objects.get()
        assert run.execution["runtime"] == "codex"  # the default preset
        wait_for(lambda: TaskRun.objects.get(pk=run.pk).state == "succeeded", timeout=120)
        page.reload()
        row = page.locator(f"tr[data-task='{run.pk}']")
        assert row.locator("[data-state]").inner_text() == "succeeded"
        assert row.locator("[data-result]").inner_text() == "Task answer: forty-two."

        page.click("nav.subtabs >> text=Instances")
        page.fill("#instance-name", "keeper")
        page.select_option("#instance-runtime", "codex")
        page.fill("#instance-model", "gpt-5.5")
        page.click("#new-instance button[type=submit]")
        page.wait_for_selector("text=Created the instance keeper.")
        page.fill("[data-prompt=keeper]", "Name a bird.")
        page.click("[data-run=keeper]")
        page.wait_for_selector("text=queued on keeper")
        second = TaskRun.objects.get(instance__name="keeper")
        wait_for(lambda: TaskRun.objects.get(pk=second.pk).state == "succeeded", timeout=120)
        page.goto(f"{page.base_url}/panel/sessions/tasks/")
        row = page.locator(f"tr[data-task='{second.pk}']")
        assert row.locator("[data-result]").inner_text() == "Instance answer: heron."
        assert "keeper" in row.inner_text()
    finally:
        for worker in workers:
            worker.stop()
