"""``mcp_app.wsgi.route``: the endpoint served straight from WSGI, driven as a WSGI server does.

What it keeps of Django's handler as the ASGI route does (Host and Origin checks, authentication,
failures reported, 4xx logged) is checked for both routes in ``tests.test_asgi``, with this
module's ``mcp_call``.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.urls import get_script_prefix, path
from django.utils import timezone, translation

import mcp_app
import mcp_app.wsgi
from mcp_app.protocol.context import RequestContext
from mcp_app.wsgi import Route, route
from project.urls import urlpatterns as site_patterns
from tests.conftest import data_messages, modern_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

JSON = dict[str, Any]


# -- a server of this module, beside the demo site's --------------------------------------------

extra = mcp_app.Server("wsgi-tests", rows=False)


@extra.tool(name="prefix")
def prefix(arguments: JSON, context: RequestContext) -> str:
    return get_script_prefix()


@extra.tool(name="locale")
def locale(arguments: JSON, context: RequestContext) -> str:
    return f"{translation.get_language()} {timezone.get_current_timezone_name()}"


#: Whether "ticking" was cancelled while it waited, once it returned.
ticking_saw: list[bool] = []


@extra.tool(name="ticking")
def ticking(arguments: JSON, context: RequestContext) -> str:
    """Reports progress, then waits up to 5 s unless cancelled."""
    context.report_progress(1, total=2)
    ticking_saw.append(context.cancelled.wait(5))
    return "done"


@extra.tool(name="not-a-number", output_schema=None)
def not_a_number(arguments: JSON, context: RequestContext) -> Any:
    """A handler bug: a result JSON cannot carry."""
    return {"ratio": float("nan")}


urlpatterns = [
    *site_patterns,
    path("extra/mcp", extra.urls),
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
        return data_messages(self.body)


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


def start_request(
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
    status, headers, result = start_request(application, method, path_, **kw)
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


# -- a call ----------------------------------------------------------------------------------------


def test_a_tool_call_is_answered_as_plain_json_without_the_sites_middleware(app: Route) -> None:
    done = mcp_call(app, "tools/call", {"name": "add", "arguments": {"numbers": [1, 2]}})
    assert done.status == 200
    assert done.headers["content-type"] == "application/json"
    assert int(done.headers["content-length"]) == len(done.body)
    assert done.json()["result"]["structuredContent"] == {"sum": 3}
    # The site lists SecurityMiddleware: it did not run.
    assert "x-content-type-options" not in done.headers


@pytest.mark.parametrize("meta", [None, {"progressToken": 7}])
def test_an_answer_json_cannot_carry_is_a_500_internal_error(
    app: Route, caplog: pytest.LogCaptureFixture, meta: JSON | None
) -> None:
    # With a progress token too: the call reports none, so its answer is plain JSON.
    done = mcp_call(app, "tools/call", {"name": "not-a-number"}, path_="/extra/mcp", meta=meta)
    assert done.status == 500
    # Logged as Django logs a 500.
    [logged] = [r for r in caplog.records if r.name == "django.request"]
    assert (logged.levelname, logged.getMessage()) == ("ERROR", "Internal Server Error: /extra/mcp")
    assert int(done.headers["content-length"]) == len(done.body)
    assert done.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32603, "message": "Internal error"},
    }
    assert "held NaN, Infinity or a lone surrogate" in caplog.text


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
    monkeypatch.setattr(
        mcp_app.wsgi, "close_old_connections", lambda: closes.append(2) or original()
    )
    body, wire = modern_request("tools/list", None)
    headers = {"Content-Type": "application/json", **wire}
    try:
        status, _, result = start_request(app, body=json.dumps(body).encode(), headers=headers)
        # Before the answer is sent; after it, once the server closes what it sent, as
        # Django's request_finished does.
        assert closes == [1]
        assert status == "200 OK"
        b"".join(result)
        assert closes == [1]
        result.close()
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
    assert sent == []
    assert closes == [1, 2]


@pytest.fixture
def let_go(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each time the route lets go of the request's connections once it has answered."""
    closes: list[str] = []
    original = mcp_app.wsgi.close_old_connections
    monkeypatch.setattr(
        mcp_app.wsgi, "close_old_connections", lambda: closes.append("let go") or original()
    )
    return closes


def start_ticking(app: Route) -> tuple[str, dict[str, str], Any]:
    """Call "ticking", which streams its progress; the stream unread."""
    ticking_saw.clear()
    body, headers = modern_request(
        "tools/call", {"name": "ticking", "arguments": {}}, meta={"progressToken": "t"}
    )
    headers = {"Content-Type": "application/json", **headers}
    return start_request(app, path_="/extra/mcp", body=json.dumps(body).encode(), headers=headers)


def test_a_stream_does_not_hold_the_requests_connections(app: Route, let_go: list[str]) -> None:
    # A call's stream may last minutes (waiting for the client's answers): the request's
    # connections are let go of before it begins, and again as it ends.
    status, names, result = start_ticking(app)
    assert (status, names["content-type"]) == ("200 OK", "text/event-stream")
    assert let_go == ["let go"]
    result.close()
    assert let_go == ["let go", "let go"]
    # Closed unread, as a server does whose client left before the first chunk: the call,
    # and its thread's connections, are let go of too.
    deadline = time.monotonic() + 3
    while not ticking_saw and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ticking_saw == [True]


def test_an_answer_the_server_refuses_to_start_is_closed(app: Route, let_go: list[str]) -> None:
    def refusing(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        raise ValueError("a header the server will not send")

    body, wire = modern_request("tools/list", None)
    request = environ(
        "POST", "/mcp", json.dumps(body).encode(), {**wire, "Content-Type": "application/json"}
    )
    with pytest.raises(ValueError, match="will not send"):
        app(request, refusing)
    assert let_go == ["let go"]


def test_the_script_name_is_the_script_prefix_in_handlers(app: Route) -> None:
    params = {"name": "prefix", "arguments": {}}
    done = mcp_call(app, "tools/call", params, path_="/extra/mcp", script_name="/site")
    assert done.status == 200, done.body
    assert done.json()["result"]["content"][0]["text"] == "/site/"
    # The next request on the thread has its own prefix.
    done = mcp_call(app, "tools/call", params, path_="/extra/mcp")
    assert done.json()["result"]["content"][0]["text"] == "/"


def test_a_language_or_time_zone_left_active_on_the_thread_is_not_the_endpoints(
    app: Route, settings: Any
) -> None:
    params = {"name": "locale", "arguments": {}}
    defaults = mcp_call(app, "tools/call", params, path_="/extra/mcp").json()
    expected = f"{translation.to_language(settings.LANGUAGE_CODE)} {settings.TIME_ZONE}"
    assert defaults["result"]["content"][0]["text"] == expected
    # What a request through the site's LocaleMiddleware leaves on the server's thread.
    translation.activate("fr")
    timezone.activate("Asia/Tokyo")
    try:
        done = mcp_call(app, "tools/call", params, path_="/extra/mcp")
    finally:
        translation.deactivate()
        timezone.deactivate()
    assert done.json()["result"]["content"][0]["text"] == expected


# -- what the route keeps ------------------------------------------------------------------------


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


# -- streams -------------------------------------------------------------------------------------


def test_a_call_streams_its_progress_and_closing_the_stream_cancels_it(app: Route) -> None:
    status, names, result = start_ticking(app)
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


def test_streams_one_after_another_under_runserver(app: Route) -> None:
    import http.client

    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    # runserver's own server, which adds "Connection: close" to the headers it is given.
    server = ThreadedWSGIServer(("127.0.0.1", 0), WSGIRequestHandler)
    server.set_app(app)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    body, headers = modern_request(
        "tools/call",
        {"name": "test_tool_with_progress", "arguments": {}},
        meta={"progressToken": 1},
    )
    headers = {"Content-Type": "application/json", **headers}
    try:
        for _ in range(3):
            connection = http.client.HTTPConnection(
                "127.0.0.1", server.server_address[1], timeout=10
            )
            connection.request("POST", "/mcp", json.dumps(body), headers)
            response = connection.getresponse()
            assert response.status == 200, response.read()
            assert response.getheader("Content-Type") == "text/event-stream"
            # Read to its end, so that no request of the server's outlives the test.
            assert b"Progress test completed" in response.read()
            connection.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_listen_stream_opens_and_ends_when_closed(app: Route) -> None:
    body, headers = modern_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
    )
    headers = {"Content-Type": "application/json", **headers}
    status, names, result = start_request(app, body=json.dumps(body).encode(), headers=headers)
    assert status == "200 OK"
    assert names["content-type"] == "text/event-stream"
    chunks = iter(result)
    assert next(chunks)  # its opening
    closed = threading.Event()
    threading.Thread(target=lambda: (result.close(), closed.set()), daemon=True).start()
    assert closed.wait(5)
    with pytest.raises(StopIteration):
        next(chunks)


def test_a_failure_while_streaming_is_logged_and_cuts_the_stream(
    app: Route, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_app.transport import views

    def start(self: Any, backlog: Any) -> list[bytes]:
        raise RuntimeError("the backlog is unreadable")

    monkeypatch.setattr(views._ListenRelay, "start", start)
    body, headers = modern_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
    )
    headers = {"Content-Type": "application/json", **headers}
    status, _, result = start_request(app, body=json.dumps(body).encode(), headers=headers)
    assert status == "200 OK"
    with caplog.at_level(logging.ERROR, logger="django.request"):
        with pytest.raises(RuntimeError, match="unreadable"):
            list(result)
        result.close()
    record = next(r for r in caplog.records if r.name == "django.request")
    assert record.getMessage() == "Error streaming /mcp"
    assert record.exc_info is not None


def test_a_wsgi_route_module_of_the_demo_site_applies_the_route() -> None:
    import project.wsgi

    assert isinstance(project.wsgi.application, mcp_app.wsgi.Route)
