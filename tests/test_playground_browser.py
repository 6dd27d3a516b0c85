"""The admin playground in a real headless Chromium, against the demo site under uvicorn.

Chromium is Debian's (``apt-get install chromium``), driven by Playwright; the test is skipped
where either is missing. Each page is saved as a PNG, in light and in dark mode, to
``$SCREENSHOTS_DIR`` (for instance ``docs/screenshots``) or else to a temporary directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, DemoServer

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Browser, Page, expect, sync_playwright

pytestmark = pytest.mark.e2e

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "playground-e2e-password"
#: The longest any one step may take; every wait below is bounded by it.
TIMEOUT_MS = 15_000

# The demo site's settings and URLs with the playground installed. Installing is idempotent,
# so these stay right once mcp_app/admin.py installs it too.
SETTINGS = 'from project.settings import *  # noqa: F403\n\nROOT_URLCONF = "playground_urls"\n'
URLS = (
    "from django.contrib import admin\n\n"
    "from mcp_app import playground\n\n"
    "playground.install(admin.site)\n\n"
    "from project.urls import urlpatterns  # noqa: E402, F401\n"
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """The demo site under uvicorn, with a superuser created before it starts."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    tmp = tmp_path_factory.mktemp("playground")
    (tmp / "playground_settings.py").write_text(SETTINGS)
    (tmp / "playground_urls.py").write_text(URLS)
    env = {
        "DJANGO_SETTINGS_MODULE": "playground_settings",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(tmp), str(ROOT), os.environ.get("PYTHONPATH")])
        ),
        # DEBUG makes the demo's ASGI app serve the static files (admin CSS, the playground's).
        "DEBUG": "true",
    }
    environment = {
        **os.environ,
        **env,
        "DATABASE_URL": f"sqlite:///{tmp / 'demo.sqlite3'}",
        "SECRET_KEY": "e2e-secret-key",
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
    }
    manage = [sys.executable, "manage.py"]
    for command in (
        ["migrate", "--noinput", "-v", "0"],
        ["createsuperuser", "--noinput", "--username", "admin", "--email", "admin@example.com"],
    ):
        subprocess.run(manage + command, cwd=ROOT, env=environment, check=True, timeout=120)
    server = DemoServer(tmp, env=env)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=TIMEOUT_MS
        )
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get("SCREENSHOTS_DIR")
    folder = Path(wanted) if wanted else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Admin:
    """A logged-in admin tab in one colour scheme, that saves screenshots by name."""

    def __init__(self, page: Page, base: str, scheme: str, shots: Path) -> None:
        self.page = page
        self.base = base
        self.scheme = scheme
        self.shots = shots

    def open(self, path: str) -> None:
        self.page.goto(self.base + path, wait_until="load")

    def shot(self, name: str) -> Path:
        target = self.shots / f"playground-{name}-{self.scheme}.png"
        # From the top: the page scrolls to a response, and the admin's sidebar sticks there.
        self.page.evaluate("window.scrollTo(0, 0)")
        self.page.screenshot(path=str(target), full_page=True)
        return target


@pytest.fixture(params=["light", "dark"])
def admin(
    request: pytest.FixtureRequest, site: DemoServer, chromium: Browser, shots: Path
) -> Iterator[Admin]:
    """A tab logged in through the admin's own login page."""
    base = f"http://localhost:{site.port}"
    context = chromium.new_context(
        color_scheme=request.param, viewport={"width": 1200, "height": 860}
    )
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{base}/admin/login/?next=/admin/mcp_app/playground/", wait_until="load")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/mcp_app/playground/")
    yield Admin(page, base, request.param, shots)
    context.close()


def test_the_index_and_a_servers_catalog(admin: Admin) -> None:
    page = admin.page
    # The way in from the admin: the MCP app's page links to the playground.
    admin.open("/admin/mcp_app/")
    page.locator("#mcp-playground-module").get_by_role("link", name="Open").click()
    page.wait_for_url(f"{admin.base}/admin/mcp_app/playground/")
    expect(page.get_by_role("link", name="default")).to_be_visible()
    admin.shot("index")
    admin.open("/admin/mcp_app/playground/default/")
    expect(page.locator(".mcp-generation")).to_contain_text("Catalog generation")
    expect(page.get_by_role("link", name="add", exact=True)).to_be_visible()
    admin.shot("catalog")


def test_add_gives_the_sum(admin: Admin) -> None:
    page = admin.page
    admin.open("/admin/mcp_app/playground/default/tool/add/")
    page.fill("textarea[name='arg:numbers']", "1\n2\n3.5")
    page.click("input[type=submit][value=Call]")
    expect(page.locator(".mcp-structured")).to_contain_text('"sum": 6.5')
    admin.shot("add")


def test_bad_input_is_refused_in_the_browser_and_by_the_server(admin: Admin) -> None:
    page = admin.page
    admin.open("/admin/mcp_app/playground/default/tool/add/")
    numbers = page.locator("textarea[name='arg:numbers']")
    # Empty, the required field stops the form in the browser: nothing is sent.
    page.click("input[type=submit][value=Call]")
    assert numbers.evaluate("element => element.validity.valueMissing") is True
    expect(page.locator("#mcp-response")).to_have_count(0)
    numbers.fill("x\n2")
    page.click("input[type=submit][value=Call]")
    error = page.locator(".mcp-widget-lines .errorlist")
    expect(error).to_have_text("at /numbers/0: expected number, got string")
    expect(page.locator(".errornote")).to_contain_text(
        "Invalid arguments at /numbers/0: expected number, got string"
    )
    admin.shot("validation-error")


def test_greet_through_its_form(admin: Admin) -> None:
    page = admin.page
    admin.open("/admin/mcp_app/playground/default/tool/greet/")
    page.click("input[type=submit][value=Call]")
    expect(page.locator(".mcp-ask-message")).to_have_text("Who should I greet?")
    admin.shot("greet-form")
    page.fill("input[name='in:name:name']", "Ada")
    page.get_by_role("button", name="Accept").click()
    expect(page.locator(".mcp-response .mcp-text")).to_have_text("Hello, Ada!")
    admin.shot("greet-result")
    # Declining needs no name: the button skips the browser's required check.
    admin.open("/admin/mcp_app/playground/default/tool/greet/")
    page.click("input[type=submit][value=Call]")
    page.get_by_role("button", name="Decline").click()
    expect(page.locator(".mcp-is-error")).to_be_visible()
    expect(page.locator(".mcp-response .mcp-text")).to_have_text("No name given")


def test_logo_shows_its_image(admin: Admin) -> None:
    page = admin.page
    admin.open("/admin/mcp_app/playground/default/tool/logo/")
    page.click("input[type=submit][value=Call]")
    image = page.locator("img.mcp-image")
    expect(image).to_be_visible()
    # The PNG decoded (one pixel), and is drawn large enough to be seen.
    page.wait_for_function(
        "() => document.querySelector('img.mcp-image').complete", timeout=TIMEOUT_MS
    )
    assert image.evaluate("element => element.naturalWidth") == 1
    box = image.bounding_box()
    assert box is not None and box["width"] >= 48 and box["height"] >= 48
    admin.shot("logo")


def test_a_multi_input_round(admin: Admin) -> None:
    page = admin.page
    admin.open("/admin/mcp_app/playground/default/tool/test_input_required_result_multiple_inputs/")
    page.click("input[type=submit][value=Call]")
    name = page.locator("input[name='in:user_name:name']")
    # Declining sends no content, so the form's fields are disabled until it is accepted again.
    page.get_by_role("radio", name="Decline").check()
    expect(name).to_be_disabled()
    page.get_by_role("radio", name="Accept").check()
    expect(name).to_be_enabled()
    name.fill("Ada")
    page.fill("textarea[name='answer:greeting']", "Good morning")
    page.fill("textarea[name='answer:client_roots']", "file:///srv/one\nfile:///srv/two")
    admin.shot("input-requests")
    page.click("input[type=submit][value='Send the answers']")
    expect(page.locator(".mcp-response .mcp-text")).to_have_text(
        "Hello, Ada! Model said: Good morning Client exposed 2 root(s)."
    )
