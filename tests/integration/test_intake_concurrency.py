"""50 concurrent identical deliveries on PostgreSQL make one delivery and one trigger; drainers
running at once process each stored delivery once, in order per mailbox."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.test import Client

from intake import process
from intake.models import Delivery, Source, Trigger
from intake.sources.github import GitHub
from tests.support.github_payloads import example, signed

SECRET = "s3cret"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="a race of 50 connections needs PostgreSQL: SQLite takes one writer at a time, "
        "so nothing races (set DATABASE_URL to run it; CI does)"),
]


def _source():
    source = Source(kind="github", slug="gh", name="GitHub",
                    config=GitHub.validate_config({"repo": ["Codertocat/Hello-World"]}))
    source.secrets = {"webhook_secret": SECRET, "token": "t"}
    source.save()
    return source


def _together(n, work):
    """`work(i)` in `n` threads started at once, each on its own connection."""
    barrier = threading.Barrier(n)
    results = [None] * n

    def run(i):
        try:
            barrier.wait()
            results[i] = work(i)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _storm(requests):
    barrier = threading.Barrier(len(requests))
    results = [None] * len(requests)

    def run(i, body, headers):
        try:
            barrier.wait()
            response = Client().post("/hooks/github/gh", data=body,
                                     content_type="application/json", **headers)
            results[i] = response.status_code
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, *req)) for i, req in enumerate(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_fifty_concurrent_identical_deliveries_make_one_trigger():
    _source()
    body, headers = signed("issue_comment", example("issue_comment", "created"), SECRET, "same")
    results = _storm([(body, headers)] * 50)
    assert sorted(results) == [200] * 49 + [202]
    assert Delivery.objects.count() == 1 and not Trigger.objects.exists()  # answered first
    assert process.drain() == 1
    assert Trigger.objects.count() == 1


def test_fifty_concurrent_deliveries_of_one_comment_under_new_ids_make_one_trigger():
    _source()
    payload = example("issue_comment", "created")
    results = _storm([signed("issue_comment", payload, SECRET) for _ in range(50)])
    assert results == [202] * 50  # each a new delivery id: stored, answered at once
    assert not Trigger.objects.exists()
    # Four drainers at once on the one mailbox: one trigger, the rest seen before.
    done = _together(4, lambda i: process.drain())
    assert sum(done) == 50 and Trigger.objects.count() == 1
    assert not Delivery.objects.filter(processed_at__isnull=True).exists()
    outcomes = sorted(Delivery.objects.values_list("outcome", flat=True))
    assert outcomes == ["duplicate"] * 49 + ["ignored"]


def test_drainers_at_once_process_every_mailbox_once_and_each_in_order():
    source = _source()
    for issue in range(20):
        for n in range(3):
            payload = example("issue_comment", "created")
            payload["issue"]["number"] = issue
            payload["comment"]["id"] = issue * 10 + n
            body, headers = signed("issue_comment", payload, SECRET, f"d-{issue}-{n}")
            assert Client().post("/hooks/github/gh", data=body,
                                 content_type="application/json", **headers).status_code == 202
    done = _together(3, lambda i: process.drain())
    assert sum(done) == 60 and Trigger.objects.filter(source=source).count() == 60
    for issue in range(20):
        order = list(Trigger.objects.filter(thread__key__endswith=f"#{issue}")
                     .order_by("pk").values_list("external_id", flat=True))
        assert order == [f"issue_comment:{issue * 10 + n}" for n in range(3)]
