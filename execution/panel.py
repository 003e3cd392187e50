"""Pages under the Sessions tab for the execution model: experts (Agent Profiles, created and
edited from v2 manifests), launch presets (amux's; operators edit them), tasks (listed with
state and result, submitted) and persistent instances (created, given tasks). Every role
reads; operators change. Operators see every owner's tasks and instances here; the REST API
shows a caller only its own."""

from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render

from amux_common import bounded_json, roles
from amux_common.pager import paged
from execution import instances, profiles, task_runs
from execution.core import launch_rules as execution
from execution.models import AgentInstance, AgentProfile, LaunchPreset, TaskRun
from runtimes import registered
from sessions import services
from sessions.models import ProviderProfile

TAB = "sessions"
EXAMPLE = {"version": 2, "name": "Reviewer", "description": "Reviews a change before merge",
           "instructions": "Read the diff twice; say what would break.",
           "skills": [{"name": "checklist", "description": "what to look at",
                       "content": "Tests, error paths, names."}]}


def _page(request, template: str, sub: str, status: int = 200, **context):
    return render(request, template, {"tab": TAB, "sub": sub,
                                      "can_edit": roles.is_operator(request.user),
                                      **context}, status=status)


def _refusal(exc: services.CommandError) -> str:
    return "; ".join(_faults(exc))


def _faults(exc: services.CommandError) -> list[str]:
    """Every fault the command named, each with its field (a manifest names them all)."""
    return [f"{field}: {message}" for field, said in exc.fields.items() for message in said
            ] or [str(exc)]


def _options() -> dict:
    profiles.ensure_builtin()
    return {"all_profiles": AgentProfile.objects.all(), "runtimes": sorted(registered()),
            "policies": execution.TASK_POLICIES,
            "providers": ProviderProfile.objects.values_list("slug", flat=True)}


# ------------------------------------------------------------------------ profiles
@roles.operator_to_change
def profile_list(request):
    """The experts; a POST creates one from the v2 manifest in the text box."""
    text, error, status = json.dumps(EXAMPLE, indent=2), None, 200
    if request.method == "POST":
        text = request.POST.get("manifest", "")
        try:
            created = profiles.create_profile(_json(text), request.POST.get("slug") or None)
        except services.CommandError as exc:
            error, status = _faults(exc), 400
        else:
            messages.success(request, f"Created the expert {created.slug}.")
            return redirect("panel-profiles")
    profiles.ensure_builtin()  # the built-in experts are listed from the first look on
    return _page(request, "panel/exec_profiles.html", "profiles", status,
                 rows=AgentProfile.objects.all(), manifest_text=text, error=error)


def _json(text: str):
    try:
        return bounded_json.loads(text)
    except ValueError as exc:
        raise services.CommandError(f"the manifest is not JSON: {exc}",
                                    field="manifest") from exc


@roles.operator_to_change
def profile_edit(request, slug: str):
    profile = get_object_or_404(AgentProfile, slug=slug)
    text = json.dumps(profiles.manifest_of(profile), indent=2)
    error, status = None, 200
    if request.method == "POST":
        text = request.POST.get("manifest", "")
        try:
            if request.POST.get("delete"):
                profiles.delete_profile(slug)
                messages.success(request, f"Deleted the expert {slug}.")
                return redirect("panel-profiles")
            profiles.update_profile(slug, _json(text))
        except services.CommandError as exc:
            error, status = _faults(exc), (403 if exc.status == 403 else 400)
        else:
            messages.success(request, f"Saved the expert {slug}.")
            return redirect("panel-profiles")
    return _page(request, "panel/exec_profile_edit.html", "profiles", status,
                 profile=profile, manifest_text=text, error=error)


# ------------------------------------------------------------------------ presets
@roles.operator_to_change
def preset_list(request):
    error, status = None, 200
    if request.method == "POST":
        slug = request.POST.get("slug", "")
        changes = {key: request.POST.get(key, "") for key in
                   ("runtime", "model", "effort", "permission", "provider")}
        changes["extra_args"] = request.POST.get("extra_args", "").split()
        if request.POST.get("is_default"):
            changes["is_default"] = True
        try:
            profiles.update_preset(slug, changes)
        except services.CommandError as exc:
            error, status = f"{slug}: {_refusal(exc)}", 400
        else:
            messages.success(request, f"Saved the preset {slug}.")
            return redirect("panel-presets")
    return _page(request, "panel/exec_presets.html", "presets", status, error=error,
                 rows=LaunchPreset.objects.select_related("provider"),
                 permissions=execution.DIRECT_PERMISSIONS, **_options())


# ------------------------------------------------------------------------ tasks
EXECUTION_FIELDS = ("profile", "runtime", "model", "provider", "permission_policy")


def _given(request, *keys: str) -> dict:
    return {k: request.POST.get(k).strip() for k in keys if (request.POST.get(k) or "").strip()}


def _start_from_form(request, start, done) -> tuple[str | None, int, object]:
    """A POSTed task or instance form: ``start(**execution fields)`` makes it; a refusal is
    shown on the page (400), a success redirects with ``done(made)`` as the notice."""
    if request.method != "POST":
        return None, 200, None
    try:
        made = start(**_given(request, *EXECUTION_FIELDS))
    except services.CommandError as exc:
        return _refusal(exc), 400, None
    messages.success(request, done(made))
    return None, 200, made


@roles.operator_to_change
def task_list(request):
    error, status, run = _start_from_form(
        request,
        lambda **fields: task_runs.submit_task(owner=request.user,
                                               prompt=request.POST.get("prompt", ""), **fields),
        lambda run: f"Submitted task {run.pk}.")
    if run is not None:
        return redirect("panel-tasks")
    runs = paged(request, TaskRun.objects.select_related("owner", "profile", "instance")
                 .order_by("-id"))
    return _page(request, "panel/exec_tasks.html", "tasks", status, runs=runs, error=error,
                 **_options())


# ------------------------------------------------------------------------ instances
@roles.operator_to_change
def instance_list(request):
    error, status, agent = _start_from_form(
        request,
        lambda **fields: instances.create_instance(owner=request.user,
                                                   name=request.POST.get("name", ""), **fields),
        lambda agent: f"Created the instance {agent.name}.")
    if agent is not None:
        return redirect("panel-instances")
    rows = AgentInstance.objects.select_related("owner", "profile", "session").order_by("-id")
    return _page(request, "panel/exec_instances.html", "instances", status, rows=rows,
                 error=error, **_options())


@roles.operator_required
def instance_task(request, pk: int):
    """Give an instance a task: any operator may here, and the run belongs to the
    instance's owner (who then sees it through the REST API)."""
    agent = get_object_or_404(AgentInstance, pk=pk)
    if request.method == "POST":
        try:
            run = task_runs.submit_task(owner=agent.owner,
                                        prompt=request.POST.get("prompt", ""), instance=agent)
        except services.CommandError as exc:
            messages.error(request, f"{agent.name}: {_refusal(exc)}")
        else:
            messages.success(request, f"Task {run.pk} queued on {agent.name}.")
    return redirect("panel-instances")
