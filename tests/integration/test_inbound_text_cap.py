"""A huge comment is stored once: the raw delivery whole, the trigger and the ticket's input
cut to 65,536 characters with a marker; the ticket page stays small."""

from __future__ import annotations

import json

import pytest

from intake.models import Delivery, Source, Trigger
from intake.sources.github import GitHub
from intake.text_cap import MAX_TEXT
from tests.support.github_payloads import example, signed
from tests.support.intake import processed
from tickets.models import Input, Ticket

pytestmark = pytest.mark.django_db

SECRET = "It's a Secret to Everybody"


@pytest.fixture
def gh():
    from policy import services

    config = GitHub.validate_config({"repo": ["Codertocat/Hello-World"], "handle": "amux-bot"})
    source = Source(kind="github", slug="gh", name="GitHub", config=config)
    source.secrets = {"webhook_secret": SECRET, "token": "ghp_test"}
    source.save()
    services.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["Codertocat"],
        "rows": {"comment": {"addressed": True, "unaddressed_allowed": False,
                             "unaddressed_anyone": False}}}}}, None)
    return source


def _post(client, payload):
    body, headers = signed("issue_comment", payload, SECRET)
    response = client.post("/hooks/github/gh", data=body, content_type="application/json",
                           **headers)
    outcome = processed(response)
    assert outcome["outcome"] == "admitted", outcome
    return outcome


def _largest_stored_values(exclude: tuple) -> int:
    """The longest value of any column of any row, the raw deliveries aside."""
    from django.apps import apps

    longest = 0
    for model in apps.get_models():
        if model in exclude:
            continue
        columns = [f.attname for f in model._meta.concrete_fields]
        for row in model.objects.values_list(*columns):
            longest = max([longest, *(len(str(v)) for v in row)])
    return longest


def test_a_signed_one_megabyte_comment_is_cut_once_and_the_page_stays_small(
        client, operator, gh):
    request_text = "@amux-bot please fix the crash; the log follows\n"
    huge = request_text + ("0123456789abcdef" * 65_536)  # ≈ 1 MiB
    payload = example("issue_comment", "created")
    payload["comment"]["body"] = huge
    _post(client, payload)

    delivery = Delivery.objects.get()
    # The raw delivery is kept whole, once.
    assert json.loads(bytes(delivery.body))["comment"]["body"] == huge
    trigger = Trigger.objects.get()
    assert len(trigger.text) <= MAX_TEXT
    assert trigger.text.startswith(request_text)
    assert trigger.text.endswith("more characters]") and "cut by amux" in trigger.text
    ticket = Ticket.objects.get()

    # A follow-up as large on the same thread becomes the ticket's input, cut the same way.
    follow_up = example("issue_comment", "created")
    follow_up["comment"]["id"] += 1
    follow_up["comment"]["body"] = huge.replace("crash", "other crash")
    _post(client, follow_up)
    (item,) = Input.objects.filter(ticket=ticket)
    assert len(item.text) <= MAX_TEXT and "cut by amux" in item.text
    assert item.text.startswith("@amux-bot please fix the other crash")
    assert _largest_stored_values(exclude=(Delivery,)) <= MAX_TEXT

    client.force_login(operator)
    page = client.get(f"/panel/tickets/{ticket.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "data-folded" in html and "cut by amux" in html
    assert len(page.content) < 200_000  # a 25 MB comment once made a 25 MB page
