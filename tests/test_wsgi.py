"""``mcp_app.wsgi.route``: the endpoint served straight from WSGI, driven as a WSGI server does."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_not_required
from django.core.signals import got_request_exception, request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.test import Client, override_settings
from django.urls import get_script_prefix, path
from rest_framework.authtoken.models import Token

import mcp_app
import mcp_app.wsgi
from mcp_app.protocol.context import RequestContext
from mcp_app.server import SERVER_ATTRIBUTE
from mcp_app.transport.views import sync_view
from mcp_app.wsgi import Route, route
from project.urls import urlpatterns as site_patterns
from tests.conftest import modern_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

JSON = dict[str, Any]
BEARER = "mcp_app.auth.BearerTokenAuthentication"
AUTHENTICATED = "rest_framework.permissions.IsAuthenticated"


# -- a server of this module, beside the demo site's --------------------------------------------

extra = mcp_app.Server("wsgi-tests", rows=False)


@extra.resource("test://broken", name="broken", mime_type="text/plain")
def broken(context: RequestContext) -> str:
    raise RuntimeError("the disk is on fire")


@extra.tool(name="whoami")
def whoami(arguments: JSON, context: RequestContext) -> str:
    user = context.user
    return user.get_username() if user.is_authenticated else "anonymous"


@extra.tool(name="prefix")
def prefix(arguments: JSON, context: RequestContext) -> str:
    return get_script_prefix()


#: Whether "ticking" was cancelled while it waited, once it returned.
ticking_saw: list[bool] = []


@extra.tool(name="ticking")
def ticking(arguments: JSON, context: RequestContext) -> str:
    """Reports progress, then waits up to 5 s unless cancelled."""
    context.report_progress(1, total=2)
    ticking_saw.append(context.cancelled.wait(5))
    return "done"


def _login_not_required_view() -> Any:
    view = sync_view(extra)
    setattr(view, SERVER_ATTRIBUTE, extra)
    return login_not_required(view)


urlpatterns = [
    *site_patterns,
    path("extra/mcp", extra.urls),
    path("exempt/mcp", _login_not_required_view()),
]


# -- driving the application ---------------------------------------------------------------------


@dataclass
class Answered:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def messages(self) -> list[JSON]:
        lines = self.body.decode().splitlines()
        return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


def environ(
    method: str,
    path_: str,
    body: bytes,
    headers: dict[str, str],
    *,
    host: str = "localhost",
    script_name: str = "",
    chunked: bool = False,
) -> JSON:
    """What a WSGI server hands the application for one request."""
    found: JSON = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": script_name,
        "PATH_INFO": path_,
        "QUERY_STRING": "",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": host,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    if chunked:
        found["wsgi.input_terminated"] = True  # as gunicorn says of a chunked body
    elif method == "POST":
        found["CONTENT_LENGTH"] = str(len(body))
    for name, value in headers.items():
        key = name.upper().replace("-", "_")
        found[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}"] = value
    return found


def start(
    application: Any, method: str = "POST", path_: str = "/mcp", body: bytes = b"", **kw: Any
) -> tuple[str, dict[str, str], Any]:
    """Call the application; its status line, headers and (unread) body iterable."""
    started: JSON = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        started["status"], started["headers"] = status, headers

    headers = kw.pop("headers", {})
    result = application(environ(method, path_, body, headers, **kw), start_response)
    names = {name.lower(): value for name, value in started["headers"]}
    return started["status"], names, result


def call(application: Any, method: str = "POST", path_: str = "/mcp", **kw: Any) -> Answered:
    """One request, its body read to the end and closed, as a WSGI server does."""
    status, headers, result = start(application, method, path_, **kw)
    try:
        body = b"".join(result)
    finally:
        if hasattr(result, "close"):
            result.close()
    return Answered(int(status.split()[0]), headers, body)


def mcp_call(
    application: Any,
    method: str,
    params: JSON | None = None,
    *,
    headers: dict[str, str] | None = None,
    meta: JSON | None = None,
    **kw: Any,
) -> Answered:
    """A 2026-07-28 request with the headers the wire requires."""
    body, wire = modern_request(method, params, meta=meta)
    wire = {"Content-Type": "application/json", **wire, **(headers or {})}
    return call(application, body=json.dumps(body).encode(), headers=wire, **kw)


@pytest.fixture(scope="module")
def app() -> Route:
    return route(get_wsgi_application())


@pytest.fixture
def mcp(settings: Any) -> Any:
    def configure(**values: Any) -> None:
        settings.MCP_APP = {**settings.MCP_APP, **values}

    return configure


@pytest.fixture
def exceptions() -> Iterator[list[Any]]:
    """The requests ``got_request_exception`` was sent for."""
    found: list[Any] = []

    def receiver(sender: Any, request: Any = None, **kwargs: Any) -> None:
        found.append(request)

    got_request_exception.connect(receiver)
    yield found
    got_request_exception.disconnect(receiver)


# -- a call ----------------------------------------------------------------------------------------


def test_a_tool_call_is_answered_as_plain_json_without_the_sites_middleware(app: Route) -> None:
    done = mcp_call(app, "tools/call", {"name": "add", "arguments": {"numbers": [1, 2]}})
    assert done.status == 200
    assert done.headers["content-type"] == "application/json"
    assert int(done.headers["content-length"]) == len(done.body)
    assert done.json()["result"]["structuredContent"] == {"sum": 3}
    # The site lists SecurityMiddleware: it did not run.
    assert "x-content-type-options" not in done.headers


def test_every_other_path_goes_to_the_wrapped_application(app: Route) -> None:
    done = call(app, "GET", "/admin/login/")
    assert done.status == 200
    assert b"<form" in done.body
    assert done.headers["x-content-type-options"] == "nosniff"  # SecurityMiddleware ran


def test_the_request_signals_are_not_sent_but_connections_are_let_go_of(
    app: Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_app.transport import bare

    sent: list[str] = []
    closes: list[int] = []
    started = lambda **kw: sent.append("started")  # noqa: E731
    finished = lambda **kw: sent.append("finished")  # noqa: E731
    request_started.connect(started)
    request_finished.connect(finished)
    original = bare.close_old_connections
    monkeypatch.setattr(bare, "close_old_connections", lambda: closes.append(1) or original())
    try:
        done = mcp_call(app, "tools/list")
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
    assert done.status == 200
    assert sent == []
    assert len(closes) == 2  # before and after


def test_the_script_name_is_the_script_prefix_in_handlers(app: Route) -> None:
    params = {"name": "prefix", "arguments": {}}
    done = mcp_call(app, "tools/call", params, path_="/extra/mcp", script_name="/site")
    assert done.status == 200, done.body
    assert done.json()["result"]["content"][0]["text"] == "/site/"
    # The next request on the thread has its own prefix.
    done = mcp_call(app, "tools/call", params, path_="/extra/mcp")
    assert done.json()["result"]["content"][0]["text"] == "/"


# -- what the route keeps ------------------------------------------------------------------------


def test_a_disallowed_host_is_refused_with_a_json_rpc_403(
    app: Route, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("ERROR", logger="django.security.DisallowedHost"):
        done = mcp_call(app, "tools/list", host="evil.example.com")
    assert done.status == 403
    assert [r.name for r in caplog.records] == ["django.security.DisallowedHost"]
    assert done.json() == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Host not allowed"},
    }


def test_a_body_over_the_limit_is_413_declared_or_chunked(app: Route, mcp: Any) -> None:
    mcp(MAX_BODY_BYTES=1000)
    body, headers = modern_request("tools/list")
    padded = json.dumps({**body, "padding": "x" * 2000}).encode()
    for chunked in (False, True):
        done = call(app, body=padded, headers=headers, chunked=chunked)
        assert done.status == 413, chunked
        assert done.json()["error"] == {"code": -32600, "message": "Request body over 1000 bytes"}
    # Within the limit, a chunked body is read to its end.
    done = call(app, body=json.dumps(body).encode(), headers=headers, chunked=True)
    assert done.status == 200, done.body


def test_drf_token_authentication_admits_a_token_and_refuses_its_absence(
    app: Route, mcp: Any
) -> None:
    mcp(AUTHENTICATION_CLASSES=[BEARER], PERMISSION_CLASSES=[AUTHENTICATED])
    ada = get_user_model().objects.create_user("ada", "ada@example.com", None)
    key = Token.objects.create(user=ada).key
    admitted = mcp_call(
        app,
        "tools/call",
        {"name": "whoami", "arguments": {}},
        path_="/extra/mcp",
        headers={"Authorization": f"Bearer {key}"},
    )
    assert admitted.status == 200
    assert admitted.json()["result"]["content"][0]["text"] == "ada"
    refused = mcp_call(app, "tools/list", path_="/extra/mcp")
    assert refused.status == 401
    assert refused.headers["www-authenticate"].startswith("Bearer resource_metadata=")


def test_the_session_user_counts_without_authentication_classes(app: Route) -> None:
    params = {"name": "whoami", "arguments": {}}
    anonymous = mcp_call(app, "tools/call", params, path_="/extra/mcp")
    assert anonymous.json()["result"]["content"][0]["text"] == "anonymous"
    grace = get_user_model().objects.create_user("grace", "grace@example.com", None)
    browser = Client()
    browser.force_login(grace)
    cookie = {"Cookie": f"sessionid={browser.cookies['sessionid'].value}"}
    signed_in = mcp_call(app, "tools/call", params, path_="/extra/mcp", headers=cookie)
    assert signed_in.json()["result"]["content"][0]["text"] == "grace"


def test_login_required_middleware_turns_an_anonymous_caller_away() -> None:
    login_required = [
        *settings.MIDDLEWARE,
        "django.contrib.auth.middleware.LoginRequiredMiddleware",
    ]
    with override_settings(MIDDLEWARE=login_required, LOGIN_URL="/login/"):
        application = route(get_wsgi_application())
        anonymous = mcp_call(application, "tools/list", path_="/extra/mcp")
        assert anonymous.status == 302
        assert anonymous.headers["location"] == "/login/?next=/extra/mcp"
        assert mcp_call(application, "tools/list", path_="/exempt/mcp").status == 200


# -- failures --------------------------------------------------------------------------------------


def test_a_failing_handler_is_a_json_rpc_500_and_reported(
    app: Route, exceptions: list[Any]
) -> None:
    done = mcp_call(app, "resources/read", {"uri": "test://broken"}, path_="/extra/mcp")
    assert done.status == 500
    assert done.json()["error"] == {"code": -32603, "message": "Internal error"}
    assert b"disk is on fire" not in done.body
    assert [request.path for request in exceptions] == ["/extra/mcp"]


def test_an_exception_outside_any_handler_is_reported_as_django_reports_one(
    app: Route,
    exceptions: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def handle(incoming: Any) -> Any:
        raise RuntimeError("the catalog is gone")

    monkeypatch.setattr(extra.endpoint, "handle", handle)
    with caplog.at_level(logging.ERROR, logger="django.request"):
        done = mcp_call(app, "tools/list", path_="/extra/mcp")
    assert done.status == 500
    assert done.json() == {"jsonrpc": "2.0", "error": {"code": -32603, "message": "Internal error"}}
    assert b"catalog is gone" not in done.body
    assert len(exceptions) == 1
    record = next(r for r in caplog.records if r.name == "django.request")
    assert record.getMessage() == "Internal Server Error: /extra/mcp"


@pytest.mark.parametrize("meta", [None, {"progressToken": "p"}])
def test_a_4xx_answer_is_logged_whether_or_not_the_call_could_have_streamed(
    app: Route, caplog: pytest.LogCaptureFixture, meta: JSON | None
) -> None:
    with caplog.at_level(logging.WARNING, logger="django.request"):
        done = mcp_call(app, "tools/call", {"name": "test_missing_capability"}, meta=meta)
        refused = mcp_call(app, "tools/list", headers={"Origin": "http://evil.example.com"})
    assert (done.status, refused.status) == (400, 403)
    assert [r.getMessage() for r in caplog.records if r.name == "django.request"] == [
        "Bad Request: /mcp",
        "Forbidden: /mcp",
    ]


# -- streams -------------------------------------------------------------------------------------


def test_a_call_streams_its_progress_and_closing_the_stream_cancels_it(app: Route) -> None:
    ticking_saw.clear()
    body, headers = modern_request(
        "tools/call", {"name": "ticking", "arguments": {}}, meta={"progressToken": "t"}
    )
    headers = {"Content-Type": "application/json", **headers}
    status, names, result = start(
        app, path_="/extra/mcp", body=json.dumps(body).encode(), headers=headers
    )
    assert status == "200 OK"
    assert names["content-type"] == "text/event-stream"
    first = next(iter(result))
    assert b'"notifications/progress"' in first
    began = time.monotonic()
    result.close()  # the client went away
    deadline = time.monotonic() + 5
    while not ticking_saw and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ticking_saw == [True]
    assert time.monotonic() - began < 2


def test_a_listen_stream_opens_and_ends_when_closed(app: Route) -> None:
    body, headers = modern_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
    )
    headers = {"Content-Type": "application/json", **headers}
    status, names, result = start(app, body=json.dumps(body).encode(), headers=headers)
    assert status == "200 OK"
    assert names["content-type"] == "text/event-stream"
    chunks = iter(result)
    assert next(chunks)  # its opening
    closed = threading.Event()
    threading.Thread(target=lambda: (result.close(), closed.set()), daemon=True).start()
    assert closed.wait(5)
    with pytest.raises(StopIteration):
        next(chunks)


def test_a_wsgi_route_module_of_the_demo_site_applies_the_route() -> None:
    import project.wsgi

    assert isinstance(project.wsgi.application, mcp_app.wsgi.Route)
