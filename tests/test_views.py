"""The Django views' helpers: headers read from META, replies encoded as JsonResponse would."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, JsonResponse
from django.test import RequestFactory

from mcp_app.transport import views
from mcp_app.transport.http import Incoming, Reply
from mcp_app.transport.views import incoming, meta_headers, to_response


def test_headers_from_meta_are_request_headers_by_lower_case_name() -> None:
    request = RequestFactory().post(
        "/mcp",
        data=b"{}",
        content_type="application/json",
        HTTP_MCP_PROTOCOL_VERSION="2026-07-28",
        HTTP_MCP_PARAM_X_REGION="eu",
        HTTP_AUTHORIZATION="Bearer t",
    )
    request.META["SERVER_NAME"] = "not a header"
    expected = {name.lower(): value for name, value in request.headers.items()}
    assert meta_headers(request.META) == expected
    assert expected["mcp-param-x-region"] == "eu"
    assert expected["content-type"] == "application/json"
    # Read again, from the names remembered, the same.
    assert meta_headers(request.META) == expected


def test_header_names_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "_HEADER_NAMES", {})
    monkeypatch.setattr(views, "HEADER_NAMES_LIMIT", 3)
    meta = {f"HTTP_X_{n}": str(n) for n in range(10)}
    expected = {f"x-{n}": str(n) for n in range(10)}
    assert meta_headers(meta) == expected
    assert meta_headers(meta) == expected
    assert len(views._HEADER_NAMES) == 3


def test_long_header_names_are_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "_HEADER_NAMES", {})
    long = "X" * views.HEADER_NAME_MAX
    meta = {"HTTP_SHORT": "1", f"HTTP_{long}": "2"}
    assert meta_headers(meta) == {"short": "1", long.lower(): "2"}
    assert list(views._HEADER_NAMES) == ["HTTP_SHORT"]


@pytest.fixture
def host_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The hosts Django's ``get_host()`` checks from now on, with none remembered before."""
    monkeypatch.setattr(views, "_allowed_hosts", ((), set()))
    checked: list[str] = []
    get_host = HttpRequest.get_host

    def counted(request: HttpRequest) -> str:
        checked.append(request.META.get("HTTP_HOST", ""))
        return get_host(request)

    monkeypatch.setattr(HttpRequest, "get_host", counted)
    return checked


def host_request(host: str, **extra: str) -> HttpRequest:
    return RequestFactory().post(
        "/mcp", data=b"{}", content_type="application/json", HTTP_HOST=host, **extra
    )


def test_a_host_allowed_once_is_not_checked_again(settings: Any, host_checks: list[str]) -> None:
    settings.ALLOWED_HOSTS = ["api.example.com", "other.example.com"]
    for _ in range(3):
        assert views.request_host(host_request("api.example.com")) == "api.example.com"
    assert views.request_host(host_request("other.example.com")) == "other.example.com"
    assert host_checks == ["api.example.com", "other.example.com"]


def test_a_host_refused_is_refused_every_time(settings: Any, host_checks: list[str]) -> None:
    settings.ALLOWED_HOSTS = ["api.example.com"]
    for _ in range(2):
        with pytest.raises(DisallowedHost):
            views.request_host(host_request("evil.example.com"))
    assert host_checks == ["evil.example.com"] * 2


@pytest.mark.parametrize("setting", ["ALLOWED_HOSTS", "DEBUG"])
def test_a_host_remembered_is_checked_again_once_the_settings_change(
    settings: Any, host_checks: list[str], setting: str
) -> None:
    settings.DEBUG, settings.ALLOWED_HOSTS = True, []
    assert views.request_host(host_request("localhost")) == "localhost"
    if setting == "DEBUG":
        settings.DEBUG = False
    else:
        settings.ALLOWED_HOSTS = ["api.example.com"]
    with pytest.raises(DisallowedHost):
        views.request_host(host_request("localhost"))


def test_a_host_remembered_is_checked_again_once_allowed_hosts_changes_in_place(
    settings: Any, host_checks: list[str]
) -> None:
    # As Django's test runner changes it: without a setting_changed signal.
    settings.ALLOWED_HOSTS = ["api.example.com", "old.example.com"]
    assert views.request_host(host_request("old.example.com")) == "old.example.com"
    settings.ALLOWED_HOSTS.remove("old.example.com")
    with pytest.raises(DisallowedHost):
        views.request_host(host_request("old.example.com"))


class Hosts:
    """An ``ALLOWED_HOSTS`` that is no list: its entries may change at any time."""

    def __init__(self, *hosts: str) -> None:
        self.hosts = list(hosts)

    def __iter__(self) -> Iterator[str]:
        return iter(self.hosts)


def test_hosts_allowed_by_an_object_of_the_sites_are_checked_every_time(
    settings: Any, host_checks: list[str]
) -> None:
    settings.ALLOWED_HOSTS = Hosts("api.example.com")
    for _ in range(2):
        assert views.request_host(host_request("api.example.com")) == "api.example.com"
    assert len(host_checks) == 2


class OwnHostRequest(HttpRequest):
    def get_host(self) -> str:
        return "own.example.com"


def test_a_request_class_with_its_own_get_host_is_asked_every_time(
    settings: Any, host_checks: list[str]
) -> None:
    settings.ALLOWED_HOSTS = ["api.example.com"]
    assert views.request_host(host_request("api.example.com")) == "api.example.com"
    request = host_request("api.example.com")
    request.__class__ = OwnHostRequest
    assert views.request_host(request) == "own.example.com"


def test_a_forwarded_host_is_always_checked(settings: Any, host_checks: list[str]) -> None:
    settings.ALLOWED_HOSTS = ["api.example.com"]
    settings.USE_X_FORWARDED_HOST = True
    assert views.request_host(host_request("api.example.com")) == "api.example.com"
    forwarded = host_request("api.example.com", HTTP_X_FORWARDED_HOST="evil.example.com")
    with pytest.raises(DisallowedHost):
        views.request_host(forwarded)
    assert len(host_checks) == 2


def test_hosts_remembered_are_bounded(
    settings: Any, host_checks: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.ALLOWED_HOSTS = [".example.com"]
    monkeypatch.setattr(views, "ALLOWED_HOSTS_LIMIT", 2)
    for n in range(4):
        views.request_host(host_request(f"h{n}.example.com"))
    assert len(views._allowed_hosts[1]) == 2
    views.request_host(host_request("h3.example.com"))
    assert len(host_checks) == 5


def test_long_hosts_are_not_remembered(settings: Any, host_checks: list[str]) -> None:
    settings.ALLOWED_HOSTS = [".example.com"]
    long = f"{'a' * views.HOST_MAX}.example.com"
    for _ in range(2):
        assert views.request_host(host_request(long)) == long
    assert host_checks == [long, long]
    assert views._allowed_hosts[1] == set()


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {"text": "héllo ✓", "n": 1.5, "ok": True}},
        [{"jsonrpc": "2.0", "id": 2, "result": {}}],
    ],
)
def test_a_reply_is_what_jsonresponse_sends_written_compactly(body: Any) -> None:
    response = to_response(Reply(202, body, headers={"Mcp-Session-Id": "abc"}))
    expected = JsonResponse(
        body,
        status=202,
        safe=False,
        json_dumps_params={"ensure_ascii": False, "separators": (",", ":")},
    )
    assert response.content == expected.content
    assert response.status_code == 202
    assert response["Content-Type"] == expected["Content-Type"]
    assert response["Mcp-Session-Id"] == "abc"


def test_a_reply_without_body_is_empty() -> None:
    response = to_response(Reply(202))
    assert response.status_code == 202
    assert response.content == b""
    assert "Content-Type" not in response  # no HTML page, nor anything else


def test_a_reply_json_cannot_carry_is_an_internal_error() -> None:
    from mcp_app.protocol import jsonrpc

    error = {"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": "Internal error"}}
    response = to_response(Reply(200, jsonrpc.result_response(4, {"x": float("inf")})))
    # Without a status of its own for that (an initialize-era answer), the reply's.
    assert response.status_code == 200
    assert json.loads(response.content) == error
    failing = Reply(200, jsonrpc.result_response(4, {"x": float("nan")}), failed_status=500)
    response = to_response(failing)
    assert (response.status_code, json.loads(response.content)) == (500, error)
    # One that could be sent keeps its status.
    fine = to_response(Reply(200, jsonrpc.result_response(4, {"x": 1}), failed_status=500))
    assert fine.status_code == 200


class _SlowStream:
    """A listen stream whose subscription takes a while to open."""

    finished = False

    def __init__(self) -> None:
        self.closed_calls = 0

    @property
    def channels(self) -> list[str]:
        return ["views-test:slow"]

    def opening(self) -> list[Any]:
        return []

    def backlog(self) -> list[Any]:
        return []

    def notifications(self, channel: str, message: dict[str, Any]) -> list[Any]:
        return []

    def ending(self) -> list[Any]:
        return []

    def closed(self) -> None:
        self.closed_calls += 1

    renews = False
    stale = False

    def renew(self) -> bool:
        return True


@pytest.mark.django_db(transaction=True)
def test_a_listen_stream_whose_client_left_while_it_opened_is_closed(monkeypatch: Any) -> None:
    import asyncio
    import threading
    import time

    from mcp_app.delivery import backend
    from mcp_app.transport import views

    opened = threading.Event()
    make = views._ListenRelay.__init__

    def slowly(self: Any, stream: Any) -> None:
        opened.set()
        time.sleep(0.3)
        make(self, stream)

    monkeypatch.setattr(views._ListenRelay, "__init__", slowly)
    stream = _SlowStream()

    async def leave_early() -> None:
        chunks = views._listen_chunks(stream)  # type: ignore[arg-type]
        task = asyncio.ensure_future(chunks.__anext__())
        await asyncio.to_thread(opened.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.6)  # the subscription opens meanwhile

    asyncio.run(leave_early())
    deadline = time.monotonic() + 5
    while stream.closed_calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert backend().subscriber_count("views-test:slow") == 0  # type: ignore[attr-defined]
    assert stream.closed_calls == 1


@pytest.mark.django_db(transaction=True)
def test_a_stream_whose_client_reads_nothing_ends_instead_of_growing(
    monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio

    from mcp_app.delivery import backend
    from mcp_app.transport import views

    monkeypatch.setattr(views, "STREAM_BACKLOG_LIMIT", 3)
    monkeypatch.setattr(views, "STREAM_STALL_SECONDS", 0.0)
    stream = _SlowStream()

    async def unread() -> list[bytes]:
        chunks = views._listen_chunks(stream)  # type: ignore[arg-type]
        got = [await chunks.__anext__()]  # the stream is open
        for n in range(10):  # the client reads none of these
            backend().publish("views-test:slow", {"n": n})
        got += [chunk async for chunk in chunks]  # the stream ends
        return got

    chunks = asyncio.run(unread())
    assert len(chunks) == 1
    assert "read none of its last 3 messages in 0 s" in caplog.text
    assert backend().subscriber_count("views-test:slow") == 0  # type: ignore[attr-defined]


@pytest.mark.django_db(transaction=True)
def test_a_listen_stream_the_server_ends_gets_its_final_result(monkeypatch: Any) -> None:
    import asyncio
    import json

    from mcp_app.delivery import backend
    from mcp_app.server import servers
    from mcp_app.transport import views
    from mcp_app.transport.listen import Listen

    monkeypatch.setattr(views, "STREAM_BACKLOG_LIMIT", 3)
    monkeypatch.setattr(views, "STREAM_STALL_SECONDS", 0.0)
    server = servers["default"]
    stream = Listen(server, "listen-7", {"toolsListChanged": True}, {}, lists_may_change=True)

    async def unread() -> list[bytes]:
        chunks = views._listen_chunks(stream)
        got = [await chunks.__anext__()]  # the acknowledgement
        for _ in range(10):  # the client reads none of these
            backend().publish(server.channel("lists"), {"kinds": ["tools"]})
        got += [chunk async for chunk in chunks]
        return got

    chunks = asyncio.run(unread())
    data = [line[6:] for line in chunks[-1].decode().splitlines() if line.startswith("data: ")]
    assert json.loads(data[0]) == {
        "jsonrpc": "2.0",
        "id": "listen-7",
        "result": {
            "resultType": "complete",
            "_meta": {
                "io.modelcontextprotocol/subscriptionId": "listen-7",
                "io.modelcontextprotocol/serverInfo": server.options.server_info,
            },
        },
    }


@pytest.mark.django_db(transaction=True)
def test_a_burst_that_a_reading_client_works_through_does_not_end_its_stream(
    monkeypatch: Any,
) -> None:
    from mcp_app.delivery import backend
    from mcp_app.transport import views

    monkeypatch.setattr(views, "STREAM_BACKLOG_LIMIT", 3)
    relay = views._ListenRelay(_SlowStream())  # type: ignore[arg-type]
    try:
        for n in range(10):  # faster than any reader, but the client read just now
            backend().publish("views-test:slow", {"n": n})
        assert not relay.overflowed and len(relay.items) == 10
    finally:
        relay.unsubscribe()


class _FailingRenewal(_SlowStream):
    """A stream whose renewal fails (its database is down), then says it is gone."""

    renews = True

    def __init__(self) -> None:
        super().__init__()
        self.renewals = 0

    def renew(self) -> bool:
        self.renewals += 1
        if self.renewals <= 3:
            raise RuntimeError("the database is down")
        return False


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("view", ["async", "sync"])
def test_a_stream_whose_renewal_fails_stays_open_and_says_so_once(
    view: str, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio

    from mcp_app.transport import views

    settings.MCP_APP = {**settings.MCP_APP, "KEEPALIVE_SECONDS": 0.05}
    stream = _FailingRenewal()

    async def read_async() -> list[bytes]:
        return [chunk async for chunk in views._listen_chunks(stream)]  # type: ignore[arg-type]

    if view == "async":
        chunks = asyncio.run(read_async())
    else:
        chunks = list(views._sync_listen_chunks(stream))  # type: ignore[arg-type]
    # Open through three failed renewals, with keep-alives; ended by the fourth.
    assert stream.renewals == 4
    assert len(chunks) >= 4
    assert caplog.text.count("Could not renew a stream; it stays open") == 1


@pytest.fixture
def shutdown_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A shutdown state of the test's own; its reader thread let go of, and its pipe closed."""
    from mcp_app import shutdown

    state = shutdown._State()
    monkeypatch.setattr(shutdown, "_state", state)
    yield state
    shutdown.begin()
    monkeypatch.undo()
    state.close()


def _read_listen(view: str, stream: Any, within: float = 5) -> list[bytes]:
    """The chunks of a listen stream, through the async or the sync view, till it ends;
    fails the test if it does not end ``within`` seconds."""
    import asyncio
    import threading

    from mcp_app.transport import views

    chunks: list[bytes] = []

    async def read_async() -> None:
        async for chunk in views._listen_chunks(stream):
            chunks.append(chunk)

    def read() -> None:
        if view == "async":
            asyncio.run(read_async())
        else:
            chunks.extend(views._sync_listen_chunks(stream))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(within)
    assert not reader.is_alive(), "the stream did not end"
    return chunks


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("view", ["async", "sync"])
def test_a_listen_stream_ends_with_its_final_result_when_the_process_shuts_down(
    view: str, shutdown_state: Any, settings: Any
) -> None:
    import threading
    import time

    from mcp_app import shutdown
    from mcp_app.server import servers
    from mcp_app.transport.listen import Listen

    state = shutdown_state
    # No keep-alive or renewal would notice the shutdown: the stream must be woken.
    settings.MCP_APP = {**settings.MCP_APP, "KEEPALIVE_SECONDS": 60}
    stream = Listen(servers["default"], "listen-8", {"toolsListChanged": True}, {})

    def once_the_stream_waits() -> None:
        deadline = time.monotonic() + 5
        while not state.callbacks and time.monotonic() < deadline:
            time.sleep(0.01)
        shutdown.begin()

    shutting = threading.Thread(target=once_the_stream_waits)
    shutting.start()
    try:
        chunks = _read_listen(view, stream)
    finally:
        shutting.join()
    data = [line[6:] for line in chunks[-1].decode().splitlines() if line.startswith("data: ")]
    meta = json.loads(data[0])["result"]["_meta"]
    assert meta["io.modelcontextprotocol/subscriptionId"] == "listen-8"
    assert meta["io.modelcontextprotocol/serverInfo"]["name"] == "django-mcp-app"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("view", ["async", "sync"])
def test_a_listen_stream_that_ends_stops_watching_for_the_shutdown(
    view: str, shutdown_state: Any, settings: Any
) -> None:
    from mcp_app import shutdown

    settings.MCP_APP = {**settings.MCP_APP, "KEEPALIVE_SECONDS": 0.05}
    stream = _FailingRenewal()  # ends at its fourth renewal
    _read_listen(view, stream)
    assert stream.renewals == 4
    assert shutdown._state.callbacks == {}


def chunked(body: bytes) -> Any:
    """A WSGI POST as gunicorn passes a chunked one: no Content-Length, input read to its end."""
    request = RequestFactory().post("/mcp", data=b"", content_type="application/json")
    request.META.pop("CONTENT_LENGTH", None)
    request.META["wsgi.input"] = io.BytesIO(body)
    request.META["wsgi.input_terminated"] = True
    return request


def test_a_chunked_wsgi_body_is_read_to_its_end() -> None:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}' * 3000
    request = chunked(body)
    found = incoming(request)
    assert isinstance(found, Incoming)
    assert found.body == body
    assert request.body == body


def test_a_chunked_wsgi_body_over_the_limit_is_413(settings: Any) -> None:
    settings.MCP_APP = {"MAX_BODY_BYTES": 100}
    found = incoming(chunked(b"x" * 101))
    assert isinstance(found, Reply) and found.status == 413
    fits = incoming(chunked(b"x" * 100))
    assert isinstance(fits, Incoming) and len(fits.body) == 100


class _Trickle(io.RawIOBase):
    """A client's body that comes a byte at a time, each after ``pause`` seconds."""

    def __init__(self, pause: float) -> None:
        self.pause, self.reads = pause, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        time.sleep(self.pause)
        self.reads += 1
        buffer[0] = ord("x")
        return 1


def _declaring(length: int, body: Any, **more: Any) -> Any:
    """A WSGI POST whose input is ``body``, of the ``length`` it says."""
    from django.core.handlers.wsgi import WSGIRequest

    environ = RequestFactory()._base_environ(
        REQUEST_METHOD="POST",
        CONTENT_TYPE="application/json",
        CONTENT_LENGTH=str(length),
        **{"wsgi.input": body, **more},
    )
    return WSGIRequest(environ)


def _trickle(client: socket.socket, pause: float | None, done: threading.Event) -> None:
    """A byte every ``pause`` seconds until ``done`` (none if ``pause`` is None)."""
    with contextlib.suppress(OSError):
        while pause is not None and not done.wait(pause):
            client.sendall(b"x")


def test_a_refused_body_that_stops_coming_is_waited_for_drain_seconds_at_most(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.MCP_APP = {"MAX_BODY_BYTES": 100}
    monkeypatch.setattr(views, "DRAIN_SECONDS", 0.3)
    # Where the server gives the socket (gunicorn), a read that waits is cut short: one for
    # a client that stopped, and one for a client sending a byte at a time.
    for pause in (None, 0.05):
        served, client = socket.socketpair()
        client.sendall(b"x" * 200)  # of the 1,000,000 bytes it says it sends
        sending = threading.Event()

        sender = threading.Thread(target=_trickle, args=(client, pause, sending), daemon=True)
        try:
            sender.start()
            request = _declaring(1_000_000, served.makefile("rb"), **{"gunicorn.socket": served})
            started = time.monotonic()
            found = incoming(request)
            assert 0.3 <= time.monotonic() - started < 2
            assert isinstance(found, Reply) and found.status == 413
        finally:
            sending.set()
            sender.join(2)
            served.close()
            client.close()
    # Elsewhere, between reads (a server whose reads return what has come: uWSGI, mod_wsgi
    # and waitress also bound them in their own ways).
    trickle = _Trickle(0.05)
    request = _declaring(1_000_000, trickle)
    started = time.monotonic()
    found = incoming(request)
    assert time.monotonic() - started < 2
    assert isinstance(found, Reply) and found.status == 413
    assert 1 < trickle.reads < 20
    # A body that comes whole is read to its end, as before.
    whole = io.BytesIO(b"x" * 5000)
    assert isinstance(incoming(_declaring(5000, whole)), Reply)
    assert whole.tell() == 5000


def test_without_input_terminated_no_content_length_is_an_empty_body() -> None:
    request = chunked(b"{}")
    del request.META["wsgi.input_terminated"]  # a server that does not say it may be read
    found = incoming(request)
    assert isinstance(found, Incoming) and found.body == b""
