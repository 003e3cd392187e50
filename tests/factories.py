"""factory_boy factories for the rows tests start from: one place that knows what a valid
source, thread, trigger, ticket, run, input, session, provider and effect look like.

    trigger = f.TriggerFactory(thread__key="octo/app#12")      # a source and thread with it
    ticket = f.TicketFactory(thread=trigger.thread)             # + its Mandate, Subscription

Each factory makes the smallest valid row; pass what the test is about. Sources and
threads are looked up before they are made (`django_get_or_create`), so two triggers on
`thread__key="octo/app#12"` of one source share the thread, as real intake would.
"""

from __future__ import annotations

from pathlib import Path

import factory
from django.conf import settings
from django.utils import timezone

from effects import models as effects
from intake import models as intake
from sessions import models as sessions
from tickets import models as tickets


class SourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = intake.Source
        django_get_or_create = ("slug",)

    kind = "github"
    slug = "gh"
    name = factory.LazyAttribute(lambda o: {"github": "GitHub"}.get(o.kind, o.slug))


class ThreadFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = intake.Thread
        django_get_or_create = ("source", "key")

    source = factory.SubFactory(SourceFactory)
    key = factory.Sequence(lambda n: f"octo/app#{n + 1}")
    title = ""


class TriggerFactory(factory.django.DjangoModelFactory):
    """An addressed, explicit request on a thread, as the gate passes it."""

    class Meta:
        model = intake.Trigger

    class Params:
        source = factory.SubFactory(SourceFactory)

    thread = factory.SubFactory(ThreadFactory, source=factory.SelfAttribute("..source"))
    external_id = factory.Sequence(lambda n: f"e{n + 1}")
    scope = "comment"
    actor = "octocat"
    is_bot = False
    is_human = factory.LazyAttribute(lambda o: not o.is_bot)
    addressed = True
    text = "@amux please fix the crash"
    decision = "explicit"
    strength = factory.LazyAttribute(lambda o: "" if o.decision == "ignore" else o.decision)
    rule = "gh.comment.addressed"
    policy_version = "v1"

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        kwargs.setdefault("source", kwargs["thread"].source)
        return super()._create(model_class, *args, **kwargs)


class TicketFactory(factory.django.DjangoModelFactory):
    """A ticket row with its Mandate and the Subscription of its thread (what opening one
    writes), without a run: tests of the engine open theirs with the engine instead."""

    class Meta:
        model = tickets.Ticket
        skip_postgeneration_save = True

    short_name = factory.Sequence(lambda n: f"fix-{n + 1}")
    title = "Fix the crash"
    thread = factory.SubFactory(ThreadFactory)
    mandate = factory.RelatedFactory("tests.factories.MandateFactory", "ticket")
    subscription = factory.RelatedFactory(
        "tests.factories.SubscriptionFactory", "ticket",
        thread=factory.SelfAttribute("..thread"),
    )


class MandateFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = tickets.Mandate

    ticket = factory.SubFactory(TicketFactory, mandate=None)
    policy_version = "v1"
    scope = "comment"
    strength = "explicit"
    rule = "gh.comment.addressed"
    requester = "octocat"


class SubscriptionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = tickets.Subscription

    ticket = factory.SubFactory(TicketFactory, subscription=None)
    thread = factory.SelfAttribute("ticket.thread")


class AssignmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = tickets.Assignment

    ticket = factory.SubFactory(TicketFactory)


class InputFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = tickets.Input

    ticket = factory.SubFactory(TicketFactory)
    text = "Please also check the logout page."
    author = "octocat"


class ProviderProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = sessions.ProviderProfile
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"provider-{n + 1}")
    platform = "openai-compat"
    base_url = "http://127.0.0.1:9/v1"


class SessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = sessions.Session

    runtime = "pi"
    # a session works only under the data directory's work/ (sessions.workdirs)
    workdir = factory.Sequence(lambda n: str(Path(settings.WORK_DIR) / f"w{n + 1}"))


class EffectFactory(factory.django.DjangoModelFactory):
    """A pending effect due now (write through effects.outbox.enqueue to test the outbox)."""

    class Meta:
        model = effects.Effect

    kind = "deliver"
    key = factory.Sequence(lambda n: f"input-{n + 1}")
    due_at = factory.LazyFunction(timezone.now)
