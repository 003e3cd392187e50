"""Panel pages of the orchestrator: Tickets, Triage and Sources tabs."""

import re
import uuid
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from amux_common import roles
from amux_common.clock import now as clock
from amux_common.pager import paged
from intake import source_actions
from intake.api import chat_messages, send_test_event, webhook_url
from intake.health_view import health as source_health
from intake.models import Source, Thread, Trigger
from intake.receive import post_chat_message
from intake.source_actions import has_events
from intake.source_rules import SLUG_FIXED
from intake.sources import KINDS
from tickets import first_run, guarding, main_config
from tickets.actions import commands as ticket_commands
from tickets.api import WORKER_RUNTIMES
from tickets.core.errors import CommandRefused
from tickets.core.stage import MOVING, NEEDS_ME, Stage
from tickets.models import AgentSettings, Eval, Question, Ticket
from tickets.read import failures, stages
from tickets.tools.worker_bin import check_disabled


@roles.read_page
def tickets_tab(request):
    live = list(Ticket.objects.filter(ended_at__isnull=True).select_related("thread__source"))
    labelled = stages(live)
    rows = [(t, *labelled[t.pk]) for t in live]
    ended = Ticket.objects.filter(ended_at__isnull=False).select_related("thread__source")
    context = {
        "tab": "tickets",
        # an empty tab guides a new install through set-up until every step is done
        "checklist": None if live or ended.exists() else first_run.checklist(),
        "needs_me": [r for r in rows if r[1] in NEEDS_ME],
        "moving": [r for r in rows if r[1] in MOVING],
        "ended": paged(request, ended.order_by("-ended_at", "-id"), param="ended"),
    }
    return render(request, "panel/tickets.html", context)


@roles.read_page
def ticket_page(request, pk):
    ticket = get_object_or_404(
        Ticket.objects.select_related("thread__source", "mandate__trigger", "session"), pk=pk
    )
    mandate = getattr(ticket, "mandate", None)
    stage, label = stages([ticket])[ticket.pk]
    context = {
        "tab": "tickets",
        "ticket": ticket,
        "stage": stage,
        "label": label,
        "ended": stage == Stage.ENDED,
        "failure": failures([ticket])[ticket.pk],
        "cap": guarding.reached([ticket], clock())[ticket.pk],
        "held_messages": ticket.messages.filter(released_at__isnull=True),
        "mandate": mandate,
        # the words that asked for the work, as they came (what `amux context` gives the
        # worker as its request)
        "request": mandate.trigger if mandate and mandate.trigger_id else None,
        "inputs": ticket.inputs.all(),
        "reports": ticket.reports.all(),
        "questions": ticket.questions.all(),
        "threads": [s.thread for s in ticket.subscriptions.select_related("thread__source")],
    }
    return render(request, "panel/ticket.html", context)


@roles.operator_required
@require_POST
def ticket_stop(request, pk):
    try:
        ticket_commands.stop_ticket(ticket_id=pk, by=request.user.username)
    except CommandRefused as refusal:
        messages.error(request, refusal.message)
    return redirect("panel-ticket", pk=pk)


@roles.operator_required
@require_POST
def ticket_retry(request, pk):
    """Dispatch a failed ticket again, or let a ticket a cap blocked go on (the page's
    Retry button)."""
    try:
        ticket_commands.retry_ticket(ticket_id=pk)
    except CommandRefused as refusal:
        messages.error(request, refusal.message)
    return redirect("panel-ticket", pk=pk)


@roles.operator_required
@require_POST
def ticket_input(request, pk):
    try:
        ticket_commands.add_input(
            ticket_id=pk, text=request.POST.get("text", ""), author=request.user.username
        )
    except CommandRefused as refusal:
        messages.error(request, refusal.message)
    return redirect("panel-ticket", pk=pk)


class CommandNamesField(forms.CharField):
    """Command names, one per line (or separated by spaces), as the sorted list the
    worker's setup writes shims for; every name that cannot be disabled is named."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value):
        names = (value or "").split()
        try:
            return check_disabled(names)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None


class AgentSettingsForm(forms.ModelForm):
    disabled_commands = CommandNamesField(
        required=False, label="Disabled commands",
        help_text="Commands a worker may not run, one per line: each fails saying so "
                  "(for example curl or ssh). gh and lark-cli always act through amux.")

    class Meta:
        model = AgentSettings
        fields = ["triage_provider", "triage_model", "worker_runtime", "worker_provider",
                  "worker_model", "main_runtime", "main_provider", "main_model",
                  "ticket_token_cap", "daily_token_cap",
                  "messages_per_ticket_hour", "disabled_commands"]
        labels = {
            "ticket_token_cap": "Token cap per ticket",
            "daily_token_cap": "Token cap per day (UTC)",
            "messages_per_ticket_hour": "Messages per ticket per hour",
            "triage_provider": "Triage provider",
            "triage_model": "Triage model",
            "worker_runtime": "Worker runtime",
            "worker_provider": "Worker provider",
            "worker_model": "Worker model",
            "main_runtime": "Main session runtime",
            "main_provider": "Main session provider",
            "main_model": "Main session model",
        }
        widgets = {"worker_runtime": forms.Select(choices=[(r, r) for r in WORKER_RUNTIMES]),
                   "main_runtime": forms.Select(choices=[("", "none: amux routes by code"),
                                                        *((r, r) for r in
                                                          main_config.MAIN_RUNTIMES)]),
                   # suggestions from the runtime's model catalog (sessions.catalog_panel)
                   "worker_model": forms.TextInput(attrs={"list": "worker-model-options"})}
        help_texts = {
            "main_runtime": "With a runtime, provider and model, the team's main session "
                            "routes explicit requests with a routing note and hears "
                            "follow-ups; without, amux routes them by code.",
            "ticket_token_cap": "Tokens one ticket's worker may spend; 0: no cap.",
            "daily_token_cap": "Tokens all agent sessions may spend per day (UTC); 0: no cap.",
            "messages_per_ticket_hour": "Replies and notices sent for one ticket per clock "
                                        "hour; more are held and sent next hour. 0: no cap.",
        }

    CAPS = ("ticket_token_cap", "daily_token_cap", "messages_per_ticket_hour")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in self.CAPS:  # left empty: the cap stays as it is
            self.fields[name].required = False

    def clean(self):
        data = super().clean()
        for name in self.CAPS:
            if data.get(name) is None and name not in self.errors:
                data[name] = getattr(self.instance, name)
        return data


@roles.operator_to_change
def agent_settings(request):
    """Who triages candidates and which runtime and model run each ticket's worker."""
    form = AgentSettingsForm(instance=AgentSettings.current())
    if request.method == "POST":
        form = AgentSettingsForm(request.POST, instance=AgentSettings.current())
        if form.is_valid():
            again = ticket_commands.save_agent_settings(
                {name: form.cleaned_data[name] for name in AgentSettingsForm.Meta.fields})
            messages.success(request, "Saved. New work uses these settings." + (
                f" {len(again)} failed ticket(s) dispatched again." if again else ""))
            return redirect("panel-agent-settings")
    return render(request, "panel/agent_settings.html", {"tab": "triage", "form": form,
                                                          "router": main_config.describe()})


@roles.operator_required
@require_POST
def question_answer(request, pk):
    """An operator answers the agent's structured question; it reaches the worker as input."""
    question = get_object_or_404(Question, pk=pk)
    chosen = [a for a in request.POST.getlist("answer") if a in (question.options or [])]
    custom = request.POST.get("custom", "").strip()
    answer = chosen + ([custom] if custom else [])
    try:
        ticket_commands.answer_question(
            question_id=pk,
            answer=answer[0] if len(answer) == 1 else answer,
            by=request.user.username,
        )
    except CommandRefused as refusal:
        messages.error(request, refusal.message)
    return redirect("panel-ticket", pk=question.ticket_id)


@roles.read_page
def triage_tab(request):
    triggers = paged(request, Trigger.objects.select_related("source", "thread")
                     .order_by("-id"), param="triggers")
    evals = paged(request, Eval.objects.select_related("trigger").order_by("-id"),
                  param="evals")
    handed_back = paged(request, Trigger.objects.filter(disposition="handed_back")
                        .select_related("source").order_by("-id"), param="handed_back")
    return render(
        request,
        "panel/triage.html",
        {"tab": "triage", "triggers": triggers, "evals": evals, "handed_back": handed_back},
    )


# --- Sources tab ------------------------------------------------------------------------------

def _source_rows(request):
    rows = []
    for source in Source.objects.all():
        health = source_health(source)
        rows.append({"source": source, "health": health,
                     "webhook_url": webhook_url(request, source),
                     "rejected": sorted(health["rejected"].items(), key=lambda kv: -kv[1]),
                     "cursors": sorted(health["cursors"].items())})
    return rows


@roles.read_page
def sources_tab(request):
    return render(request, "panel/sources.html", {
        "tab": "sources", "rows": _source_rows(request), "sources": Source.objects.all(),
        "kinds": [(k, cls.label) for k, cls in KINDS.items()],
        "can_edit": roles.is_operator(request.user),
    })


def _form_values(plug_cls, post) -> dict:
    config = {}
    for f in plug_cls.fields:
        if f.type == "bool":
            config[f.name] = f.name in post
        elif f.name in post:
            value = post.get(f.name, "")
            if f.type == "int" and not value.strip() and not f.required:
                continue  # a number left empty is not set: its default holds
            config[f.name] = value
    return config


def _form_context(plug_cls, source, config, errors, secrets_set):
    fields = []
    for f in plug_cls.fields:
        value = config.get(f.name, f.default)
        if f.type == "list" and isinstance(value, list):
            value = "\n".join(value)
        fields.append({"f": f, "value": "" if value is None else value,
                       "error": errors.get(f"config.{f.name}")})
    secrets = [{"f": f, "set": bool(secrets_set.get(f.name)),
                "error": errors.get(f"secrets.{f.name}")} for f in plug_cls.secret_fields]
    return {"fields": fields, "secret_fields": secrets}


@roles.operator_required
def source_form(request, kind=None, slug=None):
    source = Source.objects.filter(slug=slug).first() if slug else None
    if slug and source is None:
        raise Http404("no such source")
    kind = source.kind if source else kind
    if kind not in KINDS:
        raise Http404("no such kind")
    plug_cls = KINDS[kind]
    errors: dict = {}
    config = dict(source.config) if source else plug_cls.defaults()
    meta = {"slug": source.slug if source else "", "name": source.name if source else "",
            "enabled": source.enabled if source else True}
    # Once events arrived, the webhook URL and the policy name the source by its slug.
    slug_fixed = bool(source) and has_events(source)
    if request.method == "POST":
        config = _form_values(plug_cls, request.POST)
        meta = {"slug": (request.POST.get("slug") or "").strip(),
                "name": (request.POST.get("name") or "").strip(),
                "enabled": "enabled" in request.POST}
        if source and not meta["slug"]:
            meta["slug"] = source.slug  # a fixed slug is shown, not posted
        secrets = {f.name: None for f in plug_cls.secret_fields
                   if request.POST.get(f"clear_{f.name}")}
        secrets.update({f.name: request.POST[f"secret_{f.name}"] for f in plug_cls.secret_fields
                        if request.POST.get(f"secret_{f.name}") and f.name not in secrets})
        try:
            source_actions.save(source, kind=kind, slug=meta["slug"], name=meta["name"],
                                enabled=meta["enabled"], config=config, secrets=secrets)
        except source_actions.SourceRefused as refused:
            errors = refused.fields
        else:
            return redirect("panel-sources")
    ctx = _form_context(plug_cls, source, config, errors,
                        (source.secrets if source else {}) or {})
    return render(request, "panel/sources_form.html", {
        "tab": "sources", "kind": kind, "label": plug_cls.label, "source": source,
        "meta": meta, "errors": errors, "slug_fixed": slug_fixed,
        "slug_fixed_why": SLUG_FIXED, **ctx,
    }, status=400 if errors else 200)


@roles.operator_required
@require_POST
def source_toggle(request, slug):
    source = get_object_or_404(Source, slug=slug)
    source_actions.switch(source, not source.enabled)
    return redirect("panel-sources")


@roles.operator_required
@require_POST
def source_test(request, slug):
    source = get_object_or_404(Source, slug=slug)
    status, body = send_test_event(source)
    return render(request, "panel/sources_test_result.html",
                  {"status": status, "ok": status < 300, "body": body})


@roles.operator_to_change
def source_chat(request, slug):
    """Read a web chat source's threads (every role) and post to it (operators, as in REST)."""
    source = get_object_or_404(Source, slug=slug, kind="webchat")
    thread = request.GET.get("thread") or request.POST.get("thread") or ""
    error = ""
    if request.method == "POST":
        text = request.POST.get("text", "")
        if not text.strip():
            error = "Write a message first."
        elif not source.enabled:
            error = "This source is disabled."
        else:
            if thread and not re.fullmatch(r"[A-Za-z0-9_.:-]{1,200}", thread):
                thread = ""
            mid = uuid.uuid4().hex
            thread = thread or f"chat-{mid[:12]}"
            post_chat_message(source, author=request.user.get_username(), text=text,
                                     thread=thread, message_id=mid)
            return redirect(f"{request.path}?{urlencode({'thread': thread})}")
    threads = list(Thread.objects.filter(source=source).order_by("-id").values_list(
        "key", flat=True)[:50])
    return render(request, "panel/sources_chat.html", {
        "tab": "sources", "source": source, "thread": thread, "threads": threads,
        "messages_": chat_messages(source, thread) if thread else [], "error": error,
    }, status=400 if error else 200)
