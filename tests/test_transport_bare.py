"""What the ASGI and WSGI routes share: finding the endpoint, the hooks, the log."""

from __future__ import annotations

import logging
import sys
import threading
import types
from typing import Any

import pytest
from asgiref.local import Local
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_not_required, login_required, permission_required
from django.test import RequestFactory, override_settings
from django.urls import clear_url_caches, path
from django.utils import timezone, translation
from django.utils.translation import trans_real
from django.views.decorators.cache import cache_page

import mcp_app
from mcp_app.transport.bare import BareHooks, endpoint, log_status
from mcp_app.transport.http import Reply


def test_the_endpoint_is_found_by_path_and_other_paths_are_not_its() -> None:
    found = endpoint("/mcp")
    assert found is not None
    server, _match = found
    assert server is mcp_app.site
    slashed = endpoint("/mcp/")  # with or without a slash
    assert slashed is not None and slashed[0] is mcp_app.site
    assert endpoint("/admin/login/") is None
    assert endpoint("/no/such/path") is None


def test_a_urlconf_that_does_not_load_is_left_to_djangos_handler() -> None:
    with override_settings(ROOT_URLCONF="tests.no_such_urlconf"):
        assert endpoint("/mcp") is None


def test_4xx_and_5xx_are_logged_as_django_logs_them(caplog: pytest.LogCaptureFixture) -> None:
    request = RequestFactory().post("/mcp")
    with caplog.at_level(logging.WARNING, logger="django.request"):
        log_status(404, request)
        log_status(503, None, "/elsewhere")
    records = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "django.request"]
    assert records == [("WARNING", "Not Found: /mcp"), ("ERROR", "Service Unavailable: /elsewhere")]


@pytest.mark.django_db
def test_the_hooks_log_a_refusal_but_leave_a_calls_answer_to_its_sender(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request: Any = RequestFactory().post("/mcp")
    hooks = BareHooks()
    with caplog.at_level(logging.WARNING, logger="django.request"):
        hooks.end(request, Reply(403))
        hooks.end(request, Reply(400, call=object()))  # type: ignore[arg-type]
        hooks.end(request, Reply(200))
    assert [r.getMessage() for r in caplog.records if r.name == "django.request"] == [
        "Forbidden: /mcp"
    ]


def test_an_endpoint_added_to_the_urlconf_is_found_once_url_caches_are_cleared() -> None:
    module = types.ModuleType("tests.urlconf_that_grows")
    module.urlpatterns = []  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        with override_settings(ROOT_URLCONF=module.__name__):
            assert endpoint("/grown/mcp") is None
            module.urlpatterns = [path("grown/mcp", mcp_app.site.urls)]  # type: ignore[attr-defined]
            clear_url_caches()
            found = endpoint("/grown/mcp")
            assert found is not None and found[0] is mcp_app.site
    finally:
        del sys.modules[module.__name__]
        clear_url_caches()


@pytest.mark.parametrize(
    "wrap",
    [login_required, staff_member_required, permission_required("auth.view_user"), cache_page(5)],
    ids=["login_required", "staff_member_required", "permission_required", "cache_page"],
)
def test_a_view_wrapped_around_the_endpoint_is_left_to_djangos_handler(wrap: Any) -> None:
    # functools.wraps copies the view's attributes, the server's mark with them, onto the
    # wrapper: the routes must not take it for the endpoint and skip the decorator's check.
    patterns, _app, _name = mcp_app.site.urls
    plain = patterns[0].callback
    module = types.ModuleType("tests.urlconf_with_wrapped_endpoint")
    module.urlpatterns = [  # type: ignore[attr-defined]
        path("plain/mcp", plain),
        path("wrapped/mcp", wrap(plain)),
        path("not-required/mcp", login_not_required(plain)),  # marks the view itself
    ]
    sys.modules[module.__name__] = module
    try:
        with override_settings(ROOT_URLCONF=module.__name__):
            clear_url_caches()
            assert endpoint("/wrapped/mcp") is None
            for served in ("/plain/mcp", "/not-required/mcp"):
                found = endpoint(served)
                assert found is not None and found[0] is mcp_app.site
    finally:
        del sys.modules[module.__name__]
        clear_url_caches()


@pytest.mark.parametrize("replaced", [False, True])
def test_a_language_and_time_zone_left_on_the_thread_are_undone(
    replaced: bool, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    if replaced:
        # As Django does when LANGUAGE_CODE, LANGUAGES or LOCALE_PATHS change.
        monkeypatch.setattr(trans_real, "_active", Local())
    seen: list[tuple[str | None, str]] = []

    def serve() -> None:
        # A fresh thread: nothing is left on it but what this request's site activated.
        translation.activate("fr")
        timezone.activate("Asia/Tokyo")
        BareHooks().site_defaults()
        seen.append((translation.get_language(), timezone.get_current_timezone_name()))

    thread = threading.Thread(target=serve)
    thread.start()
    thread.join(5)
    assert seen == [(translation.to_language(settings.LANGUAGE_CODE), settings.TIME_ZONE)]
