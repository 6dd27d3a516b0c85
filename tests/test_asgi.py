"""``mcp_app.asgi.route``: the endpoint served straight from ASGI, everything else by Django.

The tests taking ``routed`` run through ``mcp_app.wsgi.route`` too (driven as a WSGI server
would, by ``tests.test_wsgi``): what both routes keep of Django's handler is checked once.

Each test drives the application by hand, as an ASGI server would: a scope, ``receive``
giving the body (then, once the test says so, ``http.disconnect``) and ``send`` collecting
what goes out, so event streams are read as they are sent. Each exchange runs in a loop of
its own (``asyncio.run``), whose pool threads have finished when it returns; every wait is
bounded.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_not_required
from django.contrib.sessions.backends.db import SessionStore
from django.core.asgi import get_asgi_application
from django.core.exceptions import SuspiciousOperation
from django.core.signals import got_request_exception
from django.core.wsgi import get_wsgi_application
from django.db import connection
from django.test import Client, override_settings
from django.urls import get_script_prefix, get_urlconf, path, set_script_prefix, set_urlconf
from django.utils import timezone, translation
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import APIException
from rest_framework.permissions import BasePermission

import mcp_app
import mcp_app.asgi
import mcp_app.wsgi
from mcp_app.asgi import Route, route
from mcp_app.conf import conf
from mcp_app.delivery import backend
from mcp_app.protocol.context import RequestContext
from mcp_app.transport import views
from mcp_app.transport.http import Call
from mcp_app.transport.views import DRAIN_BYTES, async_view, sync_view
from mcp_app.transport.workers import workers
from project.urls import urlpatterns as site_patterns
from tests.conftest import data_messages, modern_request, stream_bytes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

WAIT = 10.0  # seconds any exchange may take
EXTRA = "/extra/mcp"
JSON = dict[str, Any]
BEARER = "mcp_app.auth.BearerTokenAuthentication"
AUTHENTICATED = "rest_framework.permissions.IsAuthenticated"
LEGACY = "2025-11-25"

#: What a call that failed in the server is answered.
INTERNAL_ERROR = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Internal error"}}


# -- a server of this module, beside the demo site's --------------------------------------------

extra = mcp_app.Server("asgi-tests", rows=False)


@extra.resource("test://broken", name="broken", mime_type="text/plain")
def broken(context: RequestContext) -> str:
    raise RuntimeError("the disk is on fire")


@extra.tool(name="whoami")
def whoami(arguments: JSON, context: RequestContext) -> str:
    user = context.user
    if user is None:
        return "no user"  # no authentication middleware, and no AUTHENTICATION_CLASSES
    return user.get_username() if user.is_authenticated else "anonymous"


@extra.tool(name="not-a-number", output_schema=None)
def not_a_number(arguments: JSON, context: RequestContext) -> Any:
    # A handler bug JSON cannot carry; progress first, so the answer can be streamed.
    context.report_progress(0.5, total=1)
    return {"ratio": float("nan")}


@extra.tool(name="a-set", output_schema=None)
def a_set(arguments: JSON, context: RequestContext) -> Any:
    # A handler bug JSON has no form for; progress first, so the answer can be streamed.
    context.report_progress(1, total=2)
    return {"tags": {"a"}}


@extra.tool(name="price", output_schema=None)
def price(arguments: JSON, context: RequestContext) -> Any:
    context.report_progress(1, total=2)
    return {"price": Decimal("9.99"), "on": datetime.date(2026, 11, 30)}


@extra.tool(
    name="payroll",
    permission=lambda user: bool(user is not None and user.is_staff),
    input_schema={
        "type": "object",
        "properties": {"employee": {"type": "string", "x-mcp-header": "Employee"}},
    },
)
def payroll(arguments: JSON, context: RequestContext) -> str:
    return "secret"


permission_checks: list[Any] = []


def counted_permission(user: Any) -> bool:
    permission_checks.append(user)
    return True


@extra.tool(name="counted", permission=counted_permission)
def counted(arguments: JSON, context: RequestContext) -> str:
    return "counted"


class Calm(APIException):
    status_code = 420
    default_detail = "Enhance your calm"


class CalmDown(BasePermission):
    """Refuses every call with a status ``http.HTTPStatus`` has no name for."""

    def has_permission(self, request: Any, view: Any) -> bool:
        raise Calm


#: Whether "patient" was cancelled while it waited, once it returned.
patient_saw: list[bool] = []


@extra.tool(name="patient")
def patient(arguments: JSON, context: RequestContext) -> str:
    """Waits 0.8 s, unless cancelled."""
    patient_saw.append(context.cancelled.wait(0.8))
    return "done"


#: How long "quiet" took, once it returned.
quiet_took: list[float] = []


@extra.tool(name="quiet")
def quiet(arguments: JSON, context: RequestContext) -> str:
    """Says nothing for up to 3 s, unless cancelled."""
    started = time.monotonic()
    context.cancelled.wait(3)
    quiet_took.append(time.monotonic() - started)
    return "done"


@extra.tool(name="activates")
def activates(arguments: JSON, context: RequestContext) -> str:
    # What a handler, or a middleware before it, may leave active on its thread.
    translation.activate("fr")
    timezone.activate("Asia/Tokyo")
    return str(threading.get_ident())


@extra.tool(name="prefix")
def prefix(arguments: JSON, context: RequestContext) -> str:
    return get_script_prefix()


@extra.tool(name="body")
def body_tool(arguments: JSON, context: RequestContext) -> str:
    # What Django's request API gives a handler: the body, and the same bytes read again.
    request = context.request
    return json.dumps([request.body.decode(), request.read().decode(), request.method])


@extra.tool(name="locale")
def locale(arguments: JSON, context: RequestContext) -> str:
    language = translation.get_language()
    return f"{threading.get_ident()} {language} {timezone.get_current_timezone_name()}"


def where() -> str:
    """The language, time zone, script prefix and URLconf the code running now sees."""
    language, zone = translation.get_language(), timezone.get_current_timezone_name()
    return f"{language} {zone} {get_script_prefix()} {get_urlconf()}"


@extra.tool(name="where-async")
async def where_async(arguments: JSON, context: RequestContext) -> str:
    return where()


@extra.tool(name="where-everywhere")
def where_everywhere(arguments: JSON, context: RequestContext) -> str:
    # Before, inside and after async_to_sync (which moves the context's Local data to the
    # thread it runs on), and in a task handed to the pool as task rounds are.
    async def inside() -> str:
        return where()

    seen = [where(), async_to_sync(inside)(), where()]
    nested: Future[str] = Future()
    workers.run(lambda: nested.set_result(where()))
    return json.dumps([*seen, nested.result(5)])


@extra.tool(name="reports-then-waits")
def reports_then_waits(arguments: JSON, context: RequestContext) -> str:
    """Reports progress once, then waits up to 10 s to be cancelled."""
    context.report_progress(1, 2)
    context.cancelled.wait(10)
    return "done"


def _login_not_required_view() -> Any:
    # A view of its own: login_not_required marks the function it is given.
    patterns, _app, _name = extra.urls
    return login_not_required(patterns[0].callback)


def _staff_only_view() -> Any:
    # A decorator that wraps the view (and copies its attributes onto the wrapper).
    patterns, _app, _name = extra.urls
    return staff_member_required(patterns[0].callback)


urlpatterns = [
    *site_patterns,
    path("extra/mcp", extra.urls),
    path("exempt/mcp", _login_not_required_view()),
    path("staff/mcp", _staff_only_view()),
    # The async view whatever MCP_VIEW says, for what only it does under Django's handler.
    path("extra-async/mcp", async_view(extra)),
    path("extra-sync/mcp", sync_view(extra)),
]


# -- driving the application ---------------------------------------------------------------------


@dataclass
class Exchange:
    """One request through the application: what it was sent, what it sent back."""

    chunks: list[bytes]
    sent: list[JSON] = field(default_factory=list)
    reads: int = 0
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    body_sent: asyncio.Event = field(default_factory=asyncio.Event)

    #: The client goes away after the last chunk, which announced more.
    truncated: bool = False
    #: ``http.disconnect`` is handed out once, then ``receive`` waits for ever (as a server
    #: whose messages come from a queue does), rather than again and again (as uvicorn does).
    disconnect_once: bool = False
    disconnects: int = 0

    async def receive(self) -> JSON:
        if self.reads < len(self.chunks):
            self.reads += 1
            more = self.truncated or self.reads < len(self.chunks)
            return {"type": "http.request", "body": self.chunks[self.reads - 1], "more_body": more}
        if not self.truncated:
            await self.gone.wait()
        self.disconnects += 1
        if self.disconnect_once and self.disconnects > 1:
            await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(self, message: JSON) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body":
            self.body_sent.set()
            if not message.get("more_body", False):
                # As a server does once the response is complete.
                self.gone.set()

    def disconnect(self) -> None:
        self.gone.set()

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def headers(self) -> dict[str, str]:
        return {k.decode().lower(): v.decode() for k, v in self.sent[0].get("headers", [])}

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    def json(self) -> Any:
        return json.loads(self.body)

    def messages(self) -> list[JSON]:
        """The JSON-RPC messages of an event stream, in order."""
        return data_messages(self.body)


def scope(
    method: str,
    path_: str,
    headers: dict[str, str],
    *,
    host: str = "localhost",
    root_path: str = "",
    kind: str = "http",
) -> JSON:
    raw = [(b"host", host.encode())] + [
        (k.lower().encode(), v.encode()) for k, v in headers.items()
    ]
    return {
        "type": kind,
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": root_path + path_,
        "raw_path": (root_path + path_).encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": raw,
        "client": ("127.0.0.1", 50000),
        "server": ("localhost", 80),
    }


@pytest.fixture(scope="module")
def app() -> Route:
    return route(get_asgi_application())


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def routed(request: pytest.FixtureRequest) -> Any:
    """Either route, in front of Django's handler of its kind; ``mcp_call`` drives both."""
    if request.param == "asgi":
        return route(get_asgi_application())
    return mcp_app.wsgi.route(get_wsgi_application())


Driver = Callable[..., Exchange]


def exchange(
    application: Any,
    method: str = "POST",
    path_: str = "/mcp",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    chunks: list[bytes] | None = None,
    content_length: bool = True,
    during: Callable[[Exchange], Any] | None = None,
    **scope_kw: Any,
) -> Exchange:
    """Send one request; ``during(exchange)`` (a coroutine function) runs alongside it."""
    headers = dict(headers or {})
    if content_length and chunks is None and method == "POST":
        headers["Content-Length"] = str(len(body))
    done = Exchange(chunks if chunks is not None else [body])

    async def main() -> None:
        served = application(scope(method, path_, headers, **scope_kw), done.receive, done.send)
        if during is None:
            await asyncio.wait_for(served, WAIT)
        else:
            await asyncio.wait_for(asyncio.gather(served, during(done)), WAIT)

    asyncio.run(main())
    return done


def mcp_call(
    application: Any,
    method: str,
    params: JSON | None = None,
    *,
    path_: str = "/mcp",
    headers: dict[str, str] | None = None,
    meta: JSON | None = None,
    **kw: Any,
) -> Exchange:
    """A 2026-07-28 request with the headers the wire requires (through a WSGI route too)."""
    if isinstance(application, mcp_app.wsgi.Route):
        from tests import test_wsgi

        answered: Any = test_wsgi.mcp_call(
            application, method, params, headers=headers, meta=meta, path_=path_, **kw
        )
        return answered  # the same status, headers, body, json() and messages()
    body, wire = modern_request(method, params, meta=meta)
    wire = {"Content-Type": "application/json", **wire, **(headers or {})}
    return exchange(application, "POST", path_, json.dumps(body).encode(), wire, **kw)


@pytest.fixture
def mcp(settings: Any) -> Callable[..., None]:
    """Set ``MCP_APP`` keys for one test."""

    def configure(**values: Any) -> None:
        settings.MCP_APP = {**settings.MCP_APP, **values}

    return configure


@pytest.fixture
def exceptions() -> Iterator[list[Any]]:
    """The requests ``got_request_exception`` was sent for."""
    found: list[Any] = []

    def receiver(sender: Any, request: Any = None, **kwargs: Any) -> None:
        found.append((sender, request))

    got_request_exception.connect(receiver)
    yield found
    got_request_exception.disconnect(receiver)


# -- a call ----------------------------------------------------------------------------------------


def test_a_tool_call_is_answered_as_plain_json(app: Route) -> None:
    done = mcp_call(app, "tools/call", {"name": "add", "arguments": {"numbers": [1, 2]}})
    assert done.status == 200
    assert done.headers["content-type"] == "application/json"
    assert int(done.headers["content-length"]) == len(done.body)
    answer = done.json()
    assert answer["id"] == 1
    assert answer["result"]["structuredContent"] == {"sum": 3}
    # The site's middleware did not run: no SecurityMiddleware or XFrameOptions headers.
    assert "x-frame-options" not in done.headers
    assert "x-content-type-options" not in done.headers


class Hops:
    """Counts thread hops: tasks given to the call pool, and asgiref's sync_to_async calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pool: list[Any] = []
        self.asgiref: list[str] = []
        run, call = workers.run, SyncToAsync.__call__

        def pool_run(fn: Any, **kwargs: Any) -> None:
            self.pool.append(fn)
            run(fn, **kwargs)

        async def counted(this: SyncToAsync[Any, Any], *args: Any, **kwargs: Any) -> Any:
            self.asgiref.append(getattr(this.func, "__module__", ""))
            return await call(this, *args, **kwargs)

        monkeypatch.setattr(workers, "run", pool_run)
        monkeypatch.setattr(SyncToAsync, "__call__", counted)


def test_a_plain_call_makes_exactly_one_thread_hop(
    app: Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    hops = Hops(monkeypatch)
    done = mcp_call(app, "tools/call", {"name": "add", "arguments": {"numbers": [4, 5]}})
    assert done.json()["result"]["structuredContent"] == {"sum": 9}
    assert len(hops.pool) == 1, hops.pool
    assert hops.asgiref == []


def test_a_language_or_time_zone_a_request_activated_is_not_the_next_ones(
    app: Route, settings: Any
) -> None:
    expected = f"{translation.to_language(settings.LANGUAGE_CODE)} {settings.TIME_ZONE}"
    same_thread = 0
    for _ in range(3):
        done = mcp_call(app, "tools/call", {"name": "activates", "arguments": {}}, path_=EXTRA)
        activated_on = done.json()["result"]["content"][0]["text"]
        # The answer is sent before its thread is back in the pool.
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and not any(
            str(worker.thread.ident) == activated_on for worker in workers._free
        ):
            time.sleep(0.001)
        done = mcp_call(app, "tools/call", {"name": "locale", "arguments": {}}, path_=EXTRA)
        thread, seen = done.json()["result"]["content"][0]["text"].split(" ", 1)
        assert seen == expected
        same_thread += thread == activated_on
    # The pool hands out the thread freed last: what was activated was left on that thread.
    assert same_thread


def activating(application: Any) -> Any:
    """``application``, behind a layer that activates a language, a time zone, a script
    prefix and a URLconf in the request's own context, as the site's middleware does under
    Django's handler (and as a request pipelined behind such a one inherits them)."""

    async def app(scope: JSON, receive: Any, send: Any) -> None:
        await sync_to_async(translation.activate)("fr")
        await sync_to_async(timezone.activate)("Asia/Tokyo")
        await sync_to_async(set_script_prefix)("/elsewhere/")
        await sync_to_async(set_urlconf)("project.urls")
        await application(scope, receive, send)

    return app


def text_of(done: Exchange) -> str:
    text: str = done.json()["result"]["content"][0]["text"]
    return text


def test_the_route_runs_handlers_in_the_sites_defaults_whatever_the_context_holds(
    app: Route, settings: Any
) -> None:
    language = translation.to_language(settings.LANGUAGE_CODE)
    expected = f"{language} {settings.TIME_ZONE} / None"
    done = mcp_call(activating(app), "tools/call", {"name": "locale", "arguments": {}}, path_=EXTRA)
    assert text_of(done).split(" ", 1)[1] == f"{language} {settings.TIME_ZONE}"
    done = mcp_call(activating(app), "tools/call", {"name": "where-async"}, path_=EXTRA)
    assert text_of(done) == expected
    done = mcp_call(activating(app), "tools/call", {"name": "where-everywhere"}, path_=EXTRA)
    assert json.loads(text_of(done)) == [expected] * 4


def test_the_async_view_runs_handlers_in_the_language_and_time_zone_of_the_request() -> None:
    done = mcp_call(
        activating(get_asgi_application()),
        "tools/call",
        {"name": "locale", "arguments": {}},
        path_="/extra-async/mcp",
    )
    assert text_of(done).split(" ", 1)[1] == "fr Asia/Tokyo"


def test_the_async_view_runs_handlers_in_the_language_localemiddleware_chose(
    settings: Any,
) -> None:
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "django.middleware.locale.LocaleMiddleware"]
    done = mcp_call(
        get_asgi_application(),
        "tools/call",
        {"name": "locale", "arguments": {}},
        path_="/extra-async/mcp",
        headers={"Accept-Language": "fr"},
    )
    assert text_of(done).split(" ")[1] == "fr"


@pytest.mark.parametrize("through", ["route", "async view"])
def test_a_handler_reverses_urls_under_the_root_path(app: Route, through: str) -> None:
    application, path_ = (
        (app, EXTRA) if through == "route" else (get_asgi_application(), "/extra-async/mcp")
    )
    params = {"name": "prefix", "arguments": {}}
    done = mcp_call(application, "tools/call", params, path_=path_, root_path="/site")
    assert text_of(done) == "/site/"
    # The next request, on the same thread, has its own.
    assert text_of(mcp_call(application, "tools/call", params, path_=path_)) == "/"


@pytest.mark.parametrize("through", ["route", "async view"])
def test_a_handler_reads_the_body_through_djangos_request(app: Route, through: str) -> None:
    application, path_ = (
        (app, EXTRA) if through == "route" else (get_asgi_application(), "/extra-async/mcp")
    )
    done = mcp_call(application, "tools/call", {"name": "body", "arguments": {}}, path_=path_)
    body, again, method = json.loads(text_of(done))
    assert json.loads(body)["params"]["name"] == "body"
    assert again == body
    assert method == "POST"


def test_the_django_view_makes_one_hop_of_its_own_too(monkeypatch: pytest.MonkeyPatch) -> None:
    hops = Hops(monkeypatch)
    # Django's own handler, without the route: it makes hops of its own besides the view's.
    done = mcp_call(
        get_asgi_application(), "tools/call", {"name": "add", "arguments": {"numbers": [1]}}
    )
    assert done.json()["result"]["structuredContent"] == {"sum": 1}
    assert "x-content-type-options" in done.headers  # the site's middleware ran
    assert len(hops.pool) == 1, hops.pool
    if conf.VIEW == "async":
        assert "mcp_app.transport.views" not in hops.asgiref
    else:
        # Django's handler runs the sync view in a thread of its own, which hands the request
        # back to the loop (a sync stream would be read whole): the async view's hop follows.
        assert hops.asgiref.count("mcp_app.transport.views") == 1, hops.asgiref


def test_an_async_handler_runs_on_the_requests_event_loop(app: Route) -> None:
    loops: list[Any] = []

    async def where(arguments: dict[str, Any], ctx: Any) -> str:
        loops.append(("handler", asyncio.get_running_loop()))
        return "here"

    async def beside(done: Exchange) -> None:
        loops.append(("request", asyncio.get_running_loop()))

    mcp_app.site.add_tool(where, name="where-am-i")
    try:
        done = mcp_call(app, "tools/call", {"name": "where-am-i", "arguments": {}}, during=beside)
    finally:
        mcp_app.site.remove_tool("where-am-i")
    assert done.json()["result"]["content"][0]["text"] == "here"
    found = dict(loops)
    assert found["handler"] is found["request"]


def test_the_endpoint_path_resolves_with_or_without_a_slash_and_under_a_root_path(
    app: Route,
) -> None:
    for path_, root_path in (("/mcp/", ""), ("/mcp", "/prefix")):
        done = mcp_call(app, "tools/list", path_=path_, root_path=root_path)
        assert done.status == 200, (path_, root_path, done.body)
        assert "x-content-type-options" not in done.headers  # served by the route, not Django


def test_force_script_name_is_taken_off_the_path(app: Route, settings: Any) -> None:
    settings.FORCE_SCRIPT_NAME = "/prefix"
    for path_ in ("/prefix/mcp", "/mcp"):
        done = mcp_call(app, "tools/list", path_=path_)
        assert done.status == 200, (path_, done.body)
        assert "x-content-type-options" not in done.headers


def test_a_second_server_is_served_at_its_own_path(app: Route) -> None:
    done = mcp_call(app, "tools/call", {"name": "whoami", "arguments": {}}, path_="/extra/mcp")
    assert done.json()["result"]["content"][0]["text"] == "anonymous"


# -- refusals --------------------------------------------------------------------------------------


def test_a_disallowed_host_is_refused_with_a_json_rpc_400_as_django_does(
    routed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("ERROR", logger="django.security.DisallowedHost"):
        done = mcp_call(routed, "tools/list", host="evil.example.com")
    assert done.status == 400
    # Logged as Django logs it, for a site's alerting.
    assert [r.name for r in caplog.records] == ["django.security.DisallowedHost"]
    assert "evil.example.com" in caplog.records[0].getMessage()
    assert done.json() == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Host not allowed"},
    }


def test_a_foreign_origin_is_refused_with_a_json_rpc_403(routed: Any) -> None:
    done = mcp_call(routed, "tools/list", headers={"Origin": "http://evil.example.com"})
    assert done.status == 403
    assert done.json()["error"] == {"code": -32600, "message": "Origin not allowed"}


def test_a_body_declared_too_large_is_refused_and_read_to_its_end(app: Route, mcp: Any) -> None:
    # Read and dropped, so that the client reads the 413 and may go on on the connection.
    mcp(MAX_BODY_BYTES=1000)
    done = exchange(app, body=b"x" * 5000, headers={"Content-Type": "application/json"})
    assert done.status == 413
    assert done.json()["error"] == {"code": -32600, "message": "Request body over 1000 bytes"}
    assert done.reads == 1
    assert "connection" not in done.headers


def test_a_body_declared_larger_than_can_be_drained_is_refused_unread(app: Route, mcp: Any) -> None:
    mcp(MAX_BODY_BYTES=1000)
    done = exchange(
        app,
        body=b"x" * 5000,
        headers={"Content-Type": "application/json", "Content-Length": str(DRAIN_BYTES + 1)},
        content_length=False,
    )
    assert done.status == 413
    assert done.reads == 0
    assert done.headers["connection"] == "close"


def test_a_refused_body_the_client_would_send_only_if_invited_is_not_read(
    app: Route, mcp: Any
) -> None:
    # Reading it would have the server send 100 Continue: an invitation to upload it.
    mcp(MAX_BODY_BYTES=1000)
    headers = {"Content-Type": "application/json", "Expect": "100-continue"}
    done = exchange(app, body=b"x" * 5000, headers=headers)
    assert done.status == 413
    assert done.reads == 0
    assert done.headers["connection"] == "close"


def test_a_refused_body_that_stops_coming_is_waited_for_only_so_long(
    app: Route, mcp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mcp(MAX_BODY_BYTES=1000)
    monkeypatch.setattr(mcp_app.asgi, "DRAIN_SECONDS", 0.2)
    sent: list[JSON] = []

    async def receive() -> JSON:
        if not sent and not getattr(receive, "read", False):
            receive.read = True  # type: ignore[attr-defined]
            return {"type": "http.request", "body": b"x" * 600, "more_body": True}
        await asyncio.Event().wait()  # the client sends no more, and stays
        raise AssertionError

    async def send(message: JSON) -> None:
        sent.append(message)

    headers = {"Content-Type": "application/json", "Content-Length": "5000"}
    started = time.monotonic()
    asyncio.run(asyncio.wait_for(app(scope("POST", "/mcp", headers), receive, send), WAIT))
    assert time.monotonic() - started < WAIT
    assert sent[0]["status"] == 413
    assert (b"connection", b"close") in sent[0]["headers"]


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", "\u00b2"])
def test_a_content_length_that_is_no_number_is_a_json_rpc_400(app: Route, length: str) -> None:
    done = exchange(
        app,
        body=b"{}",
        headers={"Content-Type": "application/json", "Content-Length": length},
        content_length=False,
    )
    assert done.status == 400
    assert done.json()["error"] == {
        "code": -32600,
        "message": "Bad Request: invalid Content-Length header",
    }
    assert done.reads == 0


def test_djangos_smaller_upload_limit_counts_too(app: Route, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 500
    done = exchange(app, body=b"x" * 600, headers={"Content-Type": "application/json"})
    assert done.status == 413
    assert done.json()["error"]["message"] == "Request body over 500 bytes"
    assert done.reads == 1


def test_a_streamed_body_is_refused_once_it_passes_the_limit(app: Route, mcp: Any) -> None:
    mcp(MAX_BODY_BYTES=1000)
    chunks = [b"x" * 600] * 3
    done = exchange(app, chunks=chunks, headers={"Content-Type": "application/json"})
    assert done.status == 413
    assert done.json()["error"]["message"] == "Request body over 1000 bytes"
    assert done.reads == 3  # the third chunk read and dropped
    assert "connection" not in done.headers


def test_a_client_gone_before_its_body_ended_gets_nothing(app: Route) -> None:
    done = Exchange([b'{"jsonrpc": '])
    done.truncated = True
    headers = {"Content-Type": "application/json", "Content-Length": "100"}

    async def main() -> None:
        await asyncio.wait_for(app(scope("POST", "/mcp", headers), done.receive, done.send), WAIT)

    asyncio.run(main())
    assert done.sent == []


# -- authentication --------------------------------------------------------------------------------


def test_drf_token_authentication_admits_a_token_and_refuses_its_absence(
    routed: Any, mcp: Any
) -> None:
    mcp(AUTHENTICATION_CLASSES=[BEARER], PERMISSION_CLASSES=[AUTHENTICATED])
    ada = get_user_model().objects.create_user("ada", "ada@example.com", None)
    key = Token.objects.create(user=ada).key
    admitted = mcp_call(
        routed,
        "tools/call",
        {"name": "whoami", "arguments": {}},
        path_="/extra/mcp",
        headers={"Authorization": f"Bearer {key}"},
    )
    assert admitted.status == 200
    assert admitted.json()["result"]["content"][0]["text"] == "ada"

    refused = mcp_call(routed, "tools/list", path_="/extra/mcp")
    assert refused.status == 401
    assert refused.headers["www-authenticate"] == (
        'Bearer resource_metadata="http://localhost/.well-known/oauth-protected-resource/extra/mcp"'
    )
    assert refused.json()["error"]["message"] == "Authentication credentials were not provided"

    forged = mcp_call(
        routed, "tools/list", path_="/extra/mcp", headers={"Authorization": "Bearer x"}
    )
    assert forged.status == 401
    assert 'error="invalid_token"' in forged.headers["www-authenticate"]


def test_without_authentication_classes_the_session_user_counts(
    routed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[Any] = []
    original = SessionStore.load

    def load(self: SessionStore) -> Any:
        loads.append(self.session_key)
        return original(self)

    monkeypatch.setattr(SessionStore, "load", load)

    def caller(cookie: str | None = None) -> str:
        headers = {"Cookie": cookie} if cookie else {}
        done = mcp_call(
            routed,
            "tools/call",
            {"name": "whoami", "arguments": {}},
            path_="/extra/mcp",
            headers=headers,
        )
        return str(done.json()["result"]["content"][0]["text"])

    # No session cookie: the lazy user is anonymous, and no session was read.
    assert caller() == "anonymous"
    assert loads == []

    grace = get_user_model().objects.create_user("grace", "grace@example.com", None)
    cookie = _signed_in(grace)["Cookie"]
    loads.clear()
    assert caller(cookie) == "grace"
    assert len(loads) == 1

    # The middleware is looked up again when the site's MIDDLEWARE changes.
    without_auth = [
        path for path in settings.MIDDLEWARE if not path.endswith("AuthenticationMiddleware")
    ]
    # Without it, handlers and permission rules still get a user: an anonymous one.
    with override_settings(MIDDLEWARE=without_auth):
        assert caller(cookie) == "anonymous"
    assert caller(cookie) == "grace"


@pytest.mark.parametrize("through", ["route", "django", "wsgi-route"])
def test_login_required_middleware_turns_an_anonymous_caller_away_as_django_does(
    through: str,
) -> None:
    login_required = [
        *settings.MIDDLEWARE,
        "django.contrib.auth.middleware.LoginRequiredMiddleware",
    ]
    with override_settings(MIDDLEWARE=login_required, LOGIN_URL="/login/"):
        # Django's handler reads MIDDLEWARE when it is made.
        application = _entry(through)
        anonymous = mcp_call(application, "tools/list", path_="/extra/mcp")
        assert anonymous.status == 302
        assert anonymous.headers["location"] == "/login/?next=/extra/mcp"
        exempt = mcp_call(application, "tools/list", path_="/exempt/mcp")
        assert exempt.status == 200

        grace = get_user_model().objects.create_user("grace", "grace@example.com", None)
        cookie = _signed_in(grace)
        signed_in = mcp_call(application, "tools/list", path_="/extra/mcp", headers=cookie)
        assert signed_in.status == 200


def _entry(through: str) -> Any:
    """The site's application through the ASGI route, Django's ASGI handler or the WSGI route."""
    if through == "wsgi-route":
        return mcp_app.wsgi.route(get_wsgi_application())
    django = get_asgi_application()
    return route(django) if through == "route" else django


def _signed_in(user: Any) -> dict[str, str]:
    """The Cookie header of a session ``user`` is logged in to."""
    browser = Client()
    browser.force_login(user)
    return {"Cookie": f"sessionid={browser.cookies['sessionid'].value}"}


@pytest.mark.parametrize("through", ["route", "django", "wsgi-route"])
def test_a_decorator_around_the_endpoint_view_runs_through_the_routes_too(through: str) -> None:
    application = _entry(through)
    anonymous = mcp_call(application, "tools/list", path_="/staff/mcp")
    assert anonymous.status == 302
    assert anonymous.headers["location"].startswith("/admin/login/?next=/staff/mcp")
    staff = get_user_model().objects.create_user("ada", "ada@example.com", None, is_staff=True)
    cookie = _signed_in(staff)
    assert mcp_call(application, "tools/list", path_="/staff/mcp", headers=cookie).status == 200


@pytest.mark.parametrize("view", ["extra-async", "extra-sync"])
@pytest.mark.parametrize("through", ["asgi", "wsgi"])
def test_either_view_serves_a_site_with_atomic_requests(
    monkeypatch: pytest.MonkeyPatch, view: str, through: str
) -> None:
    # Django refuses ATOMIC_REQUESTS for an async view; the handler's own transaction
    # (ATOMIC follows ATOMIC_REQUESTS) is taken where it runs.
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    params = {"name": "whoami", "arguments": {}}
    if through == "asgi":
        done = mcp_call(get_asgi_application(), "tools/call", params, path_=f"/{view}/mcp")
        status, answer = done.status, done.json()
    else:
        body, headers = modern_request("tools/call", params)
        response = Client().post(
            f"/{view}/mcp", data=json.dumps(body), content_type="application/json", headers=headers
        )
        status, answer = response.status_code, response.json()
    assert status == 200, answer
    assert answer["result"]["content"][0]["text"] == "anonymous"


# -- failures --------------------------------------------------------------------------------------


def test_a_failing_handler_is_a_json_rpc_500_and_reported(
    routed: Any, exceptions: list[Any], settings: Any
) -> None:
    done = mcp_call(routed, "resources/read", {"uri": "test://broken"}, path_="/extra/mcp")
    assert done.status == 500
    # Its message, as a tool's isError result has it, unless TOOL_ERROR_DETAILS is off.
    assert done.json()["error"] == {"code": -32603, "message": "the disk is on fire"}
    assert len(exceptions) == 1 and exceptions[0][1].path == "/extra/mcp"
    settings.MCP_APP = {**settings.MCP_APP, "TOOL_ERROR_DETAILS": False}
    done = mcp_call(routed, "resources/read", {"uri": "test://broken"}, path_="/extra/mcp")
    assert done.status == 500
    assert done.json() == INTERNAL_ERROR
    assert b"disk is on fire" not in done.body
    assert len(exceptions) == 2


def test_a_disallowed_host_is_refused_before_login_required_middleware_redirects(
    routed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    login_required = [
        *settings.MIDDLEWARE,
        "django.contrib.auth.middleware.LoginRequiredMiddleware",
    ]
    with override_settings(MIDDLEWARE=login_required), caplog.at_level("ERROR"):
        done = mcp_call(routed, "tools/list", path_="/extra/mcp", host="evil.example.com")
    assert done.status == 400
    assert done.json()["error"] == {"code": -32600, "message": "Host not allowed"}
    assert [r.name for r in caplog.records] == ["django.security.DisallowedHost"]


def test_a_status_without_a_standard_name_is_answered_and_logged(
    routed: Any, mcp: Any, caplog: pytest.LogCaptureFixture
) -> None:
    mcp(PERMISSION_CLASSES=[f"{__name__}.CalmDown"])
    with caplog.at_level(logging.WARNING, logger="django.request"):
        done = mcp_call(routed, "tools/list", path_="/extra/mcp")
    assert done.status == 420
    assert done.json()["error"]["message"] == "Enhance your calm"
    assert [r.getMessage() for r in caplog.records if r.name == "django.request"] == [
        "Unknown Status Code: /extra/mcp"
    ]


def test_a_content_type_django_cannot_read_is_a_json_rpc_400(routed: Any) -> None:
    done = mcp_call(
        routed, "tools/list", headers={"Content-Type": "application/json; charset*=nope''abc"}
    )
    assert done.status == 400
    error = done.json()["error"]
    assert error["code"] == -32600
    assert error["message"].startswith("Bad Request: the request's headers cannot be read")


def handling_raises(monkeypatch: pytest.MonkeyPatch, exc: Exception) -> None:
    """Make the extra server's endpoint raise ``exc`` outside any handler."""

    def handle(incoming: Any) -> Any:
        raise exc

    monkeypatch.setattr(extra.endpoint, "handle", handle)


def test_a_suspicious_operation_outside_any_handler_is_a_json_rpc_400(
    routed: Any,
    exceptions: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    handling_raises(monkeypatch, SuspiciousOperation("a header no one should send"))
    with caplog.at_level(logging.ERROR):
        done = mcp_call(routed, "tools/list", path_="/extra/mcp")
    assert done.status == 400
    assert done.json()["error"] == {
        "code": -32600,
        "message": "Bad Request: a header no one should send",
    }
    assert exceptions == []
    assert [r.name for r in caplog.records] == ["django.security.SuspiciousOperation"]


def test_an_exception_outside_any_handler_is_reported_as_django_reports_one(
    routed: Any,
    exceptions: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    handling_raises(monkeypatch, RuntimeError("the catalog is gone"))
    with caplog.at_level(logging.ERROR, logger="django.request"):
        done = mcp_call(routed, "tools/list", path_="/extra/mcp")
    assert done.status == 500
    assert done.json() == {"jsonrpc": "2.0", "error": {"code": -32603, "message": "Internal error"}}
    assert b"Traceback" not in done.body and b"catalog is gone" not in done.body
    assert exceptions == [(None, exceptions[0][1])]
    record = next(r for r in caplog.records if r.name == "django.request")
    assert record.getMessage() == "Internal Server Error: /extra/mcp"
    assert record.exc_info is not None and str(record.exc_info[1]) == "the catalog is gone"
    assert record.status_code == 500  # type: ignore[attr-defined]


def test_refusals_are_logged_as_django_logs_4xx(
    routed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="django.request"):
        mcp_call(routed, "tools/list", headers={"Origin": "http://evil.example.com"})
    assert [r.getMessage() for r in caplog.records if r.name == "django.request"] == [
        "Forbidden: /mcp"
    ]


def test_refusals_are_logged_outside_the_event_loop_as_django_logs(
    app: Route, mcp: Any, routed: Any
) -> None:
    # A site's handler may block or query the database, which the event loop must not do.
    seen: list[tuple[str, bool]] = []

    class Where(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                asyncio.get_running_loop()
                in_loop = True
            except RuntimeError:
                in_loop = False
            seen.append((record.getMessage(), in_loop))

    where = Where(logging.WARNING)
    request_log = logging.getLogger("django.request")
    request_log.addHandler(where)
    try:
        mcp(MAX_BODY_BYTES=1000)
        exchange(app, body=b"x" * 5000, headers={"Content-Type": "application/json"})
        mcp_call(routed, "tools/call", {"name": "test_missing_capability"})
    finally:
        request_log.removeHandler(where)
    assert seen == [("Request Entity Too Large: /mcp", False), ("Bad Request: /mcp", False)]


@pytest.mark.parametrize("meta", [None, {"progressToken": "p"}])
def test_a_call_answered_4xx_is_logged_whether_or_not_it_could_have_streamed(
    routed: Any, caplog: pytest.LogCaptureFixture, meta: JSON | None
) -> None:
    with caplog.at_level(logging.WARNING, logger="django.request"):
        done = mcp_call(routed, "tools/call", {"name": "test_missing_capability"}, meta=meta)
    assert done.status == 400
    assert [r.getMessage() for r in caplog.records if r.name == "django.request"] == [
        "Bad Request: /mcp"
    ]


def test_a_streamed_call_is_not_logged_as_a_failure(
    app: Route, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="django.request"):
        done = mcp_call(
            app, "tools/call", {"name": "a-set"}, path_="/extra/mcp", meta={"progressToken": 1}
        )
    assert done.status == 200  # the error went out inside the stream
    assert [r for r in caplog.records if r.name == "django.request"] == []


# -- streams ---------------------------------------------------------------------------------------


def test_an_answer_holding_nan_is_an_internal_error_not_invalid_json(
    app: Route, caplog: pytest.LogCaptureFixture
) -> None:
    done = mcp_call(app, "tools/call", {"name": "not-a-number"}, path_="/extra/mcp")
    # As for any other -32603 on this revision, and logged as Django logs a 500.
    assert done.status == 500
    assert done.json() == INTERNAL_ERROR
    assert "held NaN, Infinity or a lone surrogate" in caplog.text
    [logged] = [r for r in caplog.records if r.name == "django.request"]
    assert logged.getMessage() == "Internal Server Error: /extra/mcp"


def test_a_streamed_answer_holding_nan_ends_with_an_internal_error(app: Route) -> None:
    done = mcp_call(
        app, "tools/call", {"name": "not-a-number"}, path_="/extra/mcp", meta={"progressToken": 3}
    )
    assert done.headers["content-type"] == "text/event-stream"
    progress, final = done.messages()
    assert progress["params"]["progress"] == 0.5
    assert final == INTERNAL_ERROR


@pytest.mark.parametrize("meta", [None, {"progressToken": 4}])
def test_an_answer_holding_a_value_json_has_no_form_for_is_an_internal_error(
    app: Route, caplog: pytest.LogCaptureFixture, meta: JSON | None
) -> None:
    done = mcp_call(app, "tools/call", {"name": "a-set"}, path_="/extra/mcp", meta=meta)
    # A stream has begun with 200 by the time its last message is written.
    assert done.status == (200 if meta else 500)
    assert (done.messages()[-1] if meta else done.json()) == INTERNAL_ERROR
    assert "held a value JSON cannot carry" in caplog.text


@pytest.mark.parametrize("meta", [None, {"progressToken": 6}])
def test_the_django_view_answers_a_value_json_has_no_form_for_as_an_internal_error(
    meta: JSON | None,
) -> None:
    body, headers = modern_request("tools/call", {"name": "a-set"}, meta=meta)
    response = Client(raise_request_exception=False).post(
        "/extra/mcp", data=json.dumps(body), content_type="application/json", headers=headers
    )
    assert response.status_code == (200 if meta else 500)
    if meta:
        assert json.loads(stream_bytes(response).decode().splitlines()[-2][6:]) == INTERNAL_ERROR
    else:
        assert response.json() == INTERNAL_ERROR


@pytest.mark.parametrize("meta", [None, {"progressToken": 5}])
def test_dates_and_decimals_are_answered_alike_plain_or_streamed(
    routed: Any, meta: JSON | None
) -> None:
    done = mcp_call(routed, "tools/call", {"name": "price"}, path_="/extra/mcp", meta=meta)
    final = done.messages()[-1] if meta else done.json()
    assert final["result"]["structuredContent"] == {"price": "9.99", "on": "2026-11-30"}


def test_a_hidden_tool_is_unknown_whatever_the_headers_say(routed: Any) -> None:
    done = mcp_call(
        routed,
        "tools/call",
        {"name": "payroll", "arguments": {"employee": "alice"}},
        path_="/extra/mcp",
    )
    # Not -32020 for the missing Mcp-Param-Employee header: that would tell the tool exists.
    assert done.json()["error"]["code"] == -32602
    assert done.json()["error"]["message"] == "Unknown tool: payroll"


def test_a_tool_call_checks_the_permission_once(routed: Any) -> None:
    permission_checks.clear()
    done = mcp_call(routed, "tools/call", {"name": "counted"}, path_="/extra/mcp")
    assert done.json()["result"]["content"][0]["text"] == "counted"
    assert len(permission_checks) == 1


def test_a_call_with_progress_streams_its_events(app: Route) -> None:
    done = mcp_call(
        app, "tools/call", {"name": "test_tool_with_progress"}, meta={"progressToken": "p1"}
    )
    assert done.status == 200
    assert done.headers["content-type"] == "text/event-stream"
    assert done.headers["x-accel-buffering"] == "no"
    messages = done.messages()
    progress = [m["params"]["progress"] for m in messages if m.get("method")]
    assert progress == [0, 50, 100]
    assert messages[-1]["id"] == 1
    assert messages[-1]["result"]["content"][0]["text"].startswith("Progress test completed")
    assert done.sent[-1] == {"type": "http.response.body", "body": b""}


def test_a_client_that_goes_away_cancels_its_call(
    app: Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    cancelled: list[Call] = []
    original_cancel, original_run = Call.cancel, Call.run
    # The handler goes on until it returns; the test ends only after it has, so its
    # transaction is not still open while the next test runs.
    finished = threading.Event()

    def cancel(self: Call) -> None:
        cancelled.append(self)
        original_cancel(self)

    def run(self: Call, emit: Any) -> Any:
        try:
            return original_run(self, emit)
        finally:
            finished.set()

    monkeypatch.setattr(Call, "cancel", cancel)
    monkeypatch.setattr(Call, "run", run)

    async def leave_after_the_first_event(done: Exchange) -> None:
        await done.body_sent.wait()
        done.disconnect()

    started = time.monotonic()
    done = mcp_call(
        app,
        "tools/call",
        {"name": "reports-then-waits"},
        path_="/extra/mcp",
        meta={"progressToken": "p2"},
        during=leave_after_the_first_event,
    )
    assert done.headers["content-type"] == "text/event-stream"
    assert [m.get("method") for m in done.messages()] == ["notifications/progress"]
    assert len(cancelled) == 1 and cancelled[0].ctx.cancelled.is_set()
    assert finished.wait(10)
    assert time.monotonic() - started < 8  # cancelled, not timed out


def call_quiet_and_leave(
    application: Any,
    *,
    after: float,
    progress: bool,
    disconnect_once: bool = False,
    path_: str = "/extra/mcp",
) -> Exchange:
    """Call "quiet" (streamed with a progress token, else plain), and leave ``after`` seconds."""
    quiet_took.clear()

    async def leave_soon(done: Exchange) -> None:
        done.disconnect_once = disconnect_once
        await asyncio.sleep(after)
        done.disconnect()

    return mcp_call(
        application,
        "tools/call",
        {"name": "quiet"},
        path_=path_,
        meta={"progressToken": "q"} if progress else None,
        during=leave_soon,
    )


def quiet_ended_soon() -> bool:
    """Whether "quiet" returned, cancelled, well before its 3 s; once its audit row is written
    (after the handler returned), so that no row of this test's lands in the next one's."""
    from mcp_app import audit
    from mcp_app.models import ToolCall

    deadline = time.monotonic() + 5
    while not quiet_took and time.monotonic() < deadline:
        time.sleep(0.01)
    while not ToolCall.objects.filter(name="quiet").exists() and time.monotonic() < deadline:
        audit.flush()
        time.sleep(0.01)
    return bool(quiet_took) and quiet_took[0] < 1.5


def test_a_client_that_goes_away_before_the_first_event_cancels_its_call(app: Route) -> None:

    done = call_quiet_and_leave(app, after=0.2, progress=True)
    assert done.sent == []  # nothing was sent to a client that had gone
    assert quiet_ended_soon()


@pytest.mark.parametrize("through", ["route", "django"])
def test_a_client_that_goes_away_cancels_a_request_answered_in_one_piece(
    app: Route, through: str
) -> None:
    from mcp_app.models import ToolCall

    # No progress token: the answer is plain JSON, and no stream to close. Leaving cancels
    # it all the same (2026-07-28), under the route and Django's own handler alike (which
    # cancels an async view; the sync view cannot hear the client leave).
    if through == "route":
        done = call_quiet_and_leave(app, after=0.3, progress=False)
    else:
        done = call_quiet_and_leave(
            get_asgi_application(), after=0.3, progress=False, path_="/extra-async/mcp"
        )
    assert quiet_ended_soon()
    if through == "route":
        assert done.sent == []  # nothing was sent to a client that had gone
    assert ToolCall.objects.get(name="quiet").outcome == "cancelled"


@pytest.mark.parametrize("progress", [True, False], ids=["streamed", "plain"])
def test_a_disconnect_heard_once_while_the_request_was_prepared_still_cancels_it(
    app: Route, monkeypatch: pytest.MonkeyPatch, progress: bool
) -> None:
    from mcp_app import asgi

    begin = asgi._BareHooks.begin

    def slowly(self: Any, request: Any) -> None:
        time.sleep(0.3)  # as slow authentication would: the client is watched meanwhile
        begin(self, request)

    monkeypatch.setattr(asgi._BareHooks, "begin", slowly)

    done = call_quiet_and_leave(app, after=0.1, progress=progress, disconnect_once=True)
    assert quiet_ended_soon()
    assert done.sent == []


def test_a_listen_stream_stays_open_until_the_client_goes_away(app: Route, mcp: Any) -> None:
    mcp(KEEPALIVE_SECONDS=0.05)
    channel = mcp_app.site.channel("lists")
    seen: list[int] = []

    async def leave_once_kept_alive(done: Exchange) -> None:
        while b": keep-alive" not in done.body:
            await asyncio.sleep(0.01)
        seen.append(backend().subscriber_count(channel))  # type: ignore[attr-defined]
        done.disconnect()

    done = mcp_call(
        app,
        "subscriptions/listen",
        {"notifications": {"toolsListChanged": True}},
        during=leave_once_kept_alive,
    )
    assert done.status == 200 and done.headers["content-type"] == "text/event-stream"
    assert done.messages()[0]["method"] == "notifications/subscriptions/acknowledged"
    assert seen == [1]
    assert backend().subscriber_count(channel) == 0  # type: ignore[attr-defined]


def open_session(app: Route, path_: str = "/mcp") -> dict[str, str]:
    """Initialize an initialize-era session; the headers its requests carry."""
    accept = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "asgi-tests", "version": "1"},
        },
    }
    opened = exchange(app, "POST", path_, json.dumps(initialize).encode(), accept)
    assert opened.status == 200, opened.body
    assert opened.json()["result"]["protocolVersion"] == LEGACY
    session = {**accept, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    session["MCP-Protocol-Version"] = LEGACY
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = exchange(app, "POST", path_, json.dumps(initialized).encode(), session)
    assert done.status == 202
    return session


def test_a_client_that_goes_away_does_not_cancel_an_initialize_era_call(app: Route) -> None:
    patient_saw.clear()
    session = open_session(app, "/extra/mcp")

    async def leave_soon(done: Exchange) -> None:
        await asyncio.sleep(0.2)
        done.disconnect()

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "patient"}}
    body = json.dumps(call).encode()
    done = exchange(app, "POST", "/extra/mcp", body, session, during=leave_soon)
    assert done.sent == []
    deadline = time.monotonic() + 5
    while not patient_saw and time.monotonic() < deadline:
        time.sleep(0.01)
    # In a session, only notifications/cancelled cancels: the call ran to its end.
    assert patient_saw == [False]


def test_an_initialize_era_session_calls_a_tool(app: Route) -> None:
    session = open_session(app)
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "add", "arguments": {"numbers": [2, 3]}},
    }
    done = exchange(app, body=json.dumps(call).encode(), headers=session)
    assert done.status == 200
    answer = (
        done.json() if done.headers["content-type"] == "application/json" else done.messages()[-1]
    )
    assert answer["result"]["structuredContent"] == {"sum": 5}


# -- everything else goes to Django ----------------------------------------------------------------


def test_other_paths_are_served_by_django(app: Route) -> None:
    done = exchange(app, "GET", "/admin/login/")
    assert done.status == 200
    assert done.headers["content-type"].startswith("text/html")
    assert b"Django" in done.body
    # The site's middleware ran for it.
    assert done.headers["x-content-type-options"] == "nosniff"


def test_the_oauth_metadata_beside_the_endpoint_is_served_by_django(app: Route) -> None:
    done = exchange(app, "GET", "/.well-known/oauth-protected-resource/mcp")
    assert done.status == 200
    assert done.json()["resource"] == "http://localhost/mcp"


@pytest.mark.parametrize("kind", ["lifespan", "websocket"])
def test_lifespan_and_websockets_go_to_the_wrapped_application(kind: str) -> None:
    seen: list[str] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    async def main() -> None:
        await route(inner)(scope("GET", "/mcp", {}, kind=kind), _never, _ignore)

    asyncio.run(main())
    assert seen == [kind]


def _queue_audit_rows(mcp: Any, count: int) -> None:
    from mcp_app import audit

    mcp(AUDIT_FLUSH_SECONDS=3600, AUDIT_BATCH_SIZE=10_000)
    for number in range(count):
        audit.record(
            audit.Record(
                "default", "tools/call", f"t{number}", "modern", None, None, 1.0, "complete"
            )
        )
    assert audit.pending() == count


def test_the_shutdown_of_django_s_handler_writes_the_queued_audit_rows(mcp: Any) -> None:
    from mcp_app.models import ToolCall

    _queue_audit_rows(mcp, 3)
    sent: list[JSON] = []
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> JSON:
        return next(messages)

    async def send(message: JSON) -> None:
        sent.append(message)

    async def main() -> None:
        await route(get_asgi_application())(scope("GET", "/", {}, kind="lifespan"), receive, send)

    asyncio.run(main())
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert sorted(ToolCall.objects.values_list("name", flat=True)) == ["t0", "t1", "t2"]


def test_another_application_s_shutdown_is_answered_after_the_rows_are_written(mcp: Any) -> None:
    from mcp_app.models import ToolCall

    _queue_audit_rows(mcp, 2)
    written_when_answered: list[int] = []

    async def inner(scope_: Any, receive: Any, send: Any) -> None:
        await send({"type": "lifespan.shutdown.complete"})

    async def send(message: JSON) -> None:
        written_when_answered.append(await asyncio.to_thread(lambda: ToolCall.objects.count()))

    async def main() -> None:
        await route(inner)(scope("GET", "/", {}, kind="lifespan"), _never, send)

    asyncio.run(main())
    assert written_when_answered == [2]


async def _never() -> JSON:
    raise AssertionError("the route read a message it should have passed on")


async def _ignore(message: JSON) -> None:
    raise AssertionError("the route sent a message it should have passed on")


def scope_request(headers: list[tuple[bytes, bytes]]) -> Any:
    from django.core.handlers.asgi import ASGIRequest

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    return ASGIRequest(scope, io.BytesIO())


def test_the_route_reads_headers_as_django_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_app.asgi, "_HEADER_NAMES", {})
    request = scope_request(
        [
            (b"MCP-Method", b"tools/call"),
            (b"mcp_name", b"spoofed"),  # an underscore: dropped, as Django drops it from META
            (b"Accept", b"application/json"),
            (b"accept", b"text/event-stream"),
        ]
    )
    expected = {"mcp-method": "tools/call", "accept": "application/json,text/event-stream"}
    assert mcp_app.asgi._HOOKS.headers(request) == expected
    # Read again, from the names remembered, the same.
    assert mcp_app.asgi._HOOKS.headers(request) == expected


def test_header_names_the_route_remembers_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_app.asgi, "_HEADER_NAMES", {})
    monkeypatch.setattr(views, "HEADER_NAMES_LIMIT", 3)
    request = scope_request([(f"X-{n}".encode(), str(n).encode()) for n in range(10)])
    expected = {f"x-{n}": str(n) for n in range(10)}
    assert mcp_app.asgi._HOOKS.headers(request) == expected
    assert mcp_app.asgi._HOOKS.headers(request) == expected
    assert len(mcp_app.asgi._HEADER_NAMES) == 3


def test_long_header_names_the_route_meets_are_not_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mcp_app.asgi, "_HEADER_NAMES", {})
    long = b"x" * (views.HEADER_NAME_MAX + 1)
    request = scope_request([(b"short", b"1"), (long, b"2")])
    assert mcp_app.asgi._HOOKS.headers(request) == {"short": "1", long.decode(): "2"}
    assert list(mcp_app.asgi._HEADER_NAMES) == [b"short"]
