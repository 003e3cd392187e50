"""The Sources tab's "Create a GitHub App": a form (where, whose account, which
repositories) → a page that POSTs the manifest to GitHub's new-app form → GitHub's
redirect back with the code (the callback) → "Install the app" until the installation
event arrives. The work is intake/github_app.py; these views only ask and show."""

from __future__ import annotations

import json

from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from amux_common import roles
from intake import github_app
from intake.models import GitHubAppSetup
from intake.sources import github_manifest as gm


def _amux_url(request) -> str:
    return request.build_absolute_uri("/").rstrip("/")


@roles.operator_required
def new(request):
    """GET: the form. POST (CSRF-checked): keep the request, then the auto-posting page."""
    form = {"host": "github.com", "owner": "personal"}
    errors: dict = {}
    if request.method == "POST":
        form = {k: v for k, v in request.POST.items() if k != "csrfmiddlewaretoken"}
        try:
            setup = github_app.setup_started(
                form, amux_url=_amux_url(request),
                callback_url=request.build_absolute_uri(reverse("panel-github-app-callback")),
                status_url=lambda pk: request.build_absolute_uri(
                    reverse("panel-github-app", args=[pk])),
                user=request.user)
        except gm.SetupInvalid as invalid:
            errors = invalid.fields
        else:
            target = github_app.form_url(setup)
            response = render(request, "panel/github_app_redirect.html", {
                "tab": "sources", "setup": setup, "target": target,
                "manifest": json.dumps(setup.manifest)})
            # this one page posts its form to GitHub (the CSP lets forms post only here)
            response._csp_update = {"form-action": [setup.web_url]}
            return response
    shown = ("host", "enterprise_url", "owner", "org", "repos", "slug", "app_name", "amux_url")
    return render(request, "panel/github_app_new.html", {
        "tab": "sources", "form": form, "errors": errors,
        "other_errors": sorted((k, v) for k, v in errors.items() if k not in shown),
        "amux_url": _amux_url(request),
        "unreachable": gm.unreachable_hint(_amux_url(request))}, status=400 if errors else 200)


@roles.operator_required
def callback(request):
    """GitHub's redirect with `?code=…&state=…`: the single-use state is the request's
    proof (it was handed only to GitHub, from this operator's form)."""
    if request.method != "GET":
        return render(request, "panel/github_app_error.html", {
            "tab": "sources", "message": "GitHub comes back here with GET.",
            "code": "method_not_allowed"}, status=405)
    try:
        setup = github_app.code_exchanged(state=request.GET.get("state", ""),
                                          code=request.GET.get("code", ""))
    except github_app.SetupRefused as refused:
        return render(request, "panel/github_app_error.html", {
            "tab": "sources", "message": refused.message, "code": refused.code},
            status=refused.status)
    return redirect("panel-github-app", pk=setup.pk)


@roles.read_page
def status(request, pk):
    """The app amux created and whether it is installed; GitHub sends the person here
    after the installation too (the manifest's setup_url)."""
    setup = get_object_or_404(GitHubAppSetup, pk=pk)
    return render(request, "panel/github_app.html", {
        "tab": "sources", **github_app.readiness(setup),
        "can_edit": roles.is_operator(request.user)})
