"""Probing a provider in a real browser: the Providers page says the route is unprobed,
Probe asks the scripted model server's /models over real HTTP and shows the revision, the
time, ok and the discovered models; the operator's list changes only through "Use discovered
models"; a failed probe shows as failed. The key is never on the page."""

from __future__ import annotations

import pytest

from sessions.models import ProviderProbe, ProviderProfile
from tests.support.model_server import ModelServer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

KEY = "sk-browser-probe-0123456789"


def test_probe_shows_the_discovered_models_and_uses_them_on_request(logged_in_page):
    page = logged_in_page
    with ModelServer(api_key=KEY) as server:
        server.models = ["model-one", {"id": "model-two", "context_length": 32000}]
        provider = ProviderProfile.objects.create(slug="scripted", platform="openai-compat",
                                                  base_url=server.base_url,
                                                  model_names=["model-one"])
        provider.secrets = {"api_key": KEY}
        provider.save()
        page.goto(f"{page.base_url}/panel/providers/")
        row = page.locator("tr[data-provider=scripted]")
        assert "not probed" in row.locator("[data-unprobed=scripted]").inner_text()
        assert row.locator("button[data-use-discovered=scripted]").count() == 0

        row.locator("button[data-probe=scripted]").click()
        page.wait_for_url(f"{page.base_url}/panel/providers/")
        assert "probe revision 1: 200: 2 models listed" in page.locator(".notice").inner_text()
        cell = page.locator("td[data-capabilities=scripted]")
        assert cell.locator("[data-revision]").inner_text() == "revision 1"
        assert cell.locator(".badge").inner_text() == "ok"
        assert cell.locator("time").get_attribute("datetime")
        assert "2 models" in cell.inner_text()
        cell.locator("summary").click()
        assert cell.locator("ul.discovered li").all_inner_texts() == ["model-one",
                                                                      "model-two"]
        assert ProviderProfile.objects.get().model_names == ["model-one"]  # unchanged

        page.locator("button[data-use-discovered=scripted]").click()
        page.wait_for_url(f"{page.base_url}/panel/providers/")
        assert "now lists the 2 discovered models" in page.locator(".notice").inner_text()
        assert ProviderProfile.objects.get().model_names == ["model-one", "model-two"]

        server.api_key = "sk-rotated-on-the-server"
        page.locator("button[data-probe=scripted]").click()
        page.wait_for_url(f"{page.base_url}/panel/providers/")
        assert "probe revision 2 failed (not_authenticated)" in page.locator(
            ".notice").inner_text()
        cell = page.locator("td[data-capabilities=scripted]")
        assert cell.locator(".badge").inner_text() == "not authenticated"
        assert "last ok: revision 1, 2 models" in cell.inner_text()
        assert KEY not in page.content()
    assert list(ProviderProbe.objects.values_list("revision", "ok")) == [(2, False),
                                                                        (1, True)]
