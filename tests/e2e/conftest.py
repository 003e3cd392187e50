"""Browser harness: Debian's chromium driven by Playwright against a live server.

Playwright never downloads a browser here: it launches /usr/bin/chromium (installed by
`make browser`). The live server is pytest-django's, in a thread of this process, so the
test's database is the server's.
"""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = os.environ.get("AMUX_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-gpu",
                 "--disable-dev-shm-usage", "--no-first-run", "--disable-component-update",
                 "--disable-sync"]

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# between browser steps are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="module")
def browser():
    """One Chromium per module. Playwright's sync API keeps its event loop marked running in
    this thread until it stops: held for the whole session, every later test on the worker
    would find a running loop (asyncio.run refuses, code that checks for a loop takes its
    threaded path) — a test's outcome would depend on which tests ran before it."""
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (Debian package chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def logged_in_page(page, live_server, operator):
    """A page logged in to the panel as an operator; `page.base_url` is the live server."""
    page.goto(f"{live_server.url}/panel/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "operator-pass-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/panel/tickets/")
    page.base_url = live_server.url
    return page
