"""The initialize era (2025-03-26, 2025-06-18, 2025-11-25) through the real view at ``/mcp``.

Digest sections 2, 3 and 5: the handshake and version negotiation, ``Mcp-Session-Id``,
``MCP-Protocol-Version``, the session methods, the POST stream's input loop (requests the
server sends the client and the answers POSTed back), 2025-03-26 batches, the GET stream,
and resumption with ``Last-Event-ID``.

Streams are read by ``StreamReader`` from a background thread, the way a client reads them
while it keeps POSTing: the async view through ``AsyncClient`` on the thread's own event
loop (as an ASGI server serves it), the sync view through ``Client`` (as a WSGI server
does). ``MCP_VIEW=sync`` runs the module against the sync view. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import iscoroutinefunction
from django.test import AsyncClient, Client
from django.urls import resolve
from django.utils import timezone

import mcp_app
from mcp_app import elicit, elicit_url, input_required, sample
from mcp_app.delivery import GAP, backend
from mcp_app.models import Session, StreamEvent, ToolCall
from mcp_app.protocol.context import RequestContext
from mcp_app.transport import views
from tests.conftest import modern_request, require_redis_url, sse_messages, stream_bytes

pytestmark = pytest.mark.django_db(transaction=True)

JSON = dict[str, Any]
ACCEPT = "application/json, text/event-stream"
LATEST = "2025-11-25"
VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
WATCHED = "test://watched-resource"
WAIT = 5.0  # seconds any single wait may take before the test fails
FORM_AND_MORE: JSON = {"elicitation": {}, "sampling": {}, "roots": {}}


# -- reading server-sent events ---------------------------------------------------------------


@dataclass
class SSE:
    """One server-sent event as a client sees it."""

    id: str | None = None
    retry: int | None = None
    data: str = ""
    comment: str | None = None

    @property
    def message(self) -> JSON | None:
        return json.loads(self.data) if self.data.strip() else None


def parse_event(block: str) -> SSE:
    event = SSE()
    data: list[str] = []
    for line in block.split("\n"):
        if line.startswith(":"):
            event.comment = line[1:].strip()
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            event.id = value
        elif name == "retry":
            event.retry = int(value)
        elif name == "data":
            data.append(value)
    event.data = "\n".join(data)
    return event


def stream_events(response: Any) -> list[SSE]:
    """Every event of a finished event-stream response."""
    text = stream_bytes(response).decode()
    return [parse_event(block) for block in text.split("\n\n") if block]


def serves_async() -> bool:
    return iscoroutinefunction(resolve("/mcp").func)


class StreamReader:
    """Makes one request from a background thread and hands over its events as they arrive."""

    def __init__(
        self, method: str, headers: dict[str, str], body: Any = None, drop_after: int = 0
    ) -> None:
        # With drop_after, the client goes away once it has read that many events.
        self._drop_after = drop_after
        self._events = 0
        self._method = method
        self._headers = headers
        self._body = body
        self._items: queue.Queue[SSE | BaseException | None] = queue.Queue()
        self._answered = threading.Event()
        self._stop = threading.Event()
        self._buffer = ""
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body: Any = None
        self.ended = False
        self._end_sent = False
        self.thread = threading.Thread(target=self._main, daemon=True, name="sse-reader")
        self.thread.start()

    # the background thread

    def _main(self) -> None:
        try:
            if serves_async():
                asyncio.run(self._read_async())
            else:
                self._read_sync()
        except BaseException as exc:
            self._items.put(exc)
        finally:
            self._answered.set()
            self._end()

    def _end(self) -> None:
        """Tell the test the stream is over (once), as soon as its last byte is read."""
        if not self._end_sent:
            self._end_sent = True
            self._items.put(None)

    def _send(self, client: Any) -> Any:
        if self._method == "GET":
            return client.get("/mcp", headers=self._headers)
        return client.post(
            "/mcp",
            data=json.dumps(self._body),
            content_type="application/json",
            headers=self._headers,
        )

    def _answer(self, response: Any) -> None:
        self.status = response.status_code
        self.headers = dict(response.headers)
        if not response.streaming and response.content:
            self.body = json.loads(response.content)
        self._answered.set()

    def _feed(self, chunk: bytes) -> None:
        self._buffer += chunk.decode()
        while "\n\n" in self._buffer:
            block, self._buffer = self._buffer.split("\n\n", 1)
            self._items.put(parse_event(block))
            self._events += 1

    def _leaving(self) -> bool:
        return self._stop.is_set() or 0 < self._drop_after <= self._events

    def _read_sync(self) -> None:
        response = self._send(Client())
        self._answer(response)
        if not response.streaming:
            return
        try:
            for chunk in response.streaming_content:
                self._feed(chunk)
                if self._leaving():
                    break
        finally:
            response.close()
            self._end()

    async def _read_async(self) -> None:
        response = await self._send(AsyncClient())
        self._answer(response)
        if not response.streaming:
            return
        content = response.streaming_content
        try:
            async for chunk in content:
                self._feed(chunk)
                if self._leaving():
                    break
        finally:
            await content.aclose()
            # The event loop lingers for the call's thread; the stream itself is over.
            self._end()

    # the test's side

    def answered(self) -> int:
        """The HTTP status, once the response has started."""
        assert self._answered.wait(WAIT), "no response in time"
        assert self.status is not None, self._failure()
        return self.status

    def _failure(self) -> str:
        try:
            item = self._items.get_nowait()
        except queue.Empty:
            return "no status"
        return repr(item)

    def next(self, timeout: float = WAIT) -> SSE:
        """The next event; fails if the stream ends or nothing comes in time."""
        try:
            item = self._items.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no event within {timeout}s") from None
        if item is None:
            self.ended = True
            raise AssertionError("the stream ended")
        if isinstance(item, BaseException):
            raise item
        return item

    def next_message(self, timeout: float = WAIT) -> JSON:
        """The next JSON-RPC message, skipping comments and the priming event."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.next(max(deadline - time.monotonic(), 0.01))
            if event.message is not None:
                return event.message

    def until_end(self, timeout: float = WAIT) -> list[SSE]:
        """Every remaining event, up to the end of the stream."""
        deadline = time.monotonic() + timeout
        found: list[SSE] = []
        while True:
            try:
                item = self._items.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"the stream did not end within {timeout}s") from None
            if item is None:
                self.ended = True
                return found
            if isinstance(item, BaseException):
                raise item
            found.append(item)

    def close(self) -> None:
        self._stop.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the reader did not stop"


# -- a client session ---------------------------------------------------------------------------


@dataclass
class LegacySession:
    """What a client keeps after ``initialize``: the id, the version, and its streams."""

    client: Client
    id: str
    version: str
    result: JSON
    readers: list[StreamReader] = field(default_factory=list)

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {
            "Accept": ACCEPT,
            "Mcp-Session-Id": self.id,
            "MCP-Protocol-Version": self.version,
        }
        headers.update(extra)
        return headers

    def post(self, body: Any, **headers: str) -> Any:
        return self.client.post(
            "/mcp",
            data=json.dumps(body),
            content_type="application/json",
            headers=self.headers(**headers),
        )

    def request(self, method: str, params: JSON | None = None, request_id: Any = 1) -> Any:
        body: JSON = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        return self.post(body)

    def notify(self, method: str, params: JSON | None = None) -> Any:
        body: JSON = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        return self.post(body)

    def answer(self, request_id: Any, result: JSON) -> Any:
        return self.post({"jsonrpc": "2.0", "id": request_id, "result": result})

    def result_of(self, method: str, params: JSON | None = None, request_id: Any = 1) -> Any:
        response = self.request(method, params, request_id)
        assert response.status_code == 200, response.content
        return response.json()["result"]

    def open(self, reader: StreamReader) -> StreamReader:
        self.readers.append(reader)
        return reader

    def call_streaming(
        self,
        tool: str,
        arguments: JSON | None = None,
        request_id: Any = 1,
        drop_after: int = 0,
        method: str = "tools/call",
    ) -> Any:
        """Call a tool (or get a prompt) from a background thread; its events come through
        the reader."""
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {"name": tool, "arguments": arguments or {}},
        }
        return self.open(StreamReader("POST", self.headers(), body, drop_after))

    def listen(self, **headers: str) -> StreamReader:
        """Open the GET stream and wait until it is subscribed to the server's channels."""
        reader = self.open(StreamReader("GET", self.headers(**headers)))
        assert reader.answered() == 200, reader.body
        assert reader.next().comment == "stream open"
        return reader

    def resume(self, last_event_id: str) -> StreamReader:
        return self.open(StreamReader("GET", self.headers(**{"Last-Event-ID": last_event_id})))


def initialize_body(
    version: Any = LATEST, capabilities: JSON | None = None, request_id: Any = 0
) -> JSON:
    params: JSON = {
        "capabilities": capabilities if capabilities is not None else {},
        "clientInfo": {"name": "legacy-tests", "version": "1.0"},
    }
    if version is not None:
        params["protocolVersion"] = version
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def post_raw(client: Client, body: Any, **headers: str) -> Any:
    return client.post(
        "/mcp",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Accept": ACCEPT, **headers},
    )


@pytest.fixture(autouse=True)
def calls_finish(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every call a test starts has finished before its database goes away."""
    running = [0]
    done = threading.Condition()
    run = views._run

    def tracked(call: Any, put: Callable[[Any], None]) -> None:
        with done:
            running[0] += 1
        try:
            run(call, put)
        finally:
            with done:
                running[0] -= 1
                done.notify_all()

    monkeypatch.setattr(views, "_run", tracked)
    yield
    with done:
        assert done.wait_for(lambda: running[0] == 0, WAIT), "a call was still running"


@pytest.fixture(autouse=True)
def quick_settings(settings: Any) -> None:
    """Short keep-alives so readers stop promptly; a bounded wait for client answers."""
    settings.MCP_APP = {**settings.MCP_APP, "KEEPALIVE_SECONDS": 0.2, "INPUT_TIMEOUT_SECONDS": 10}


def set_mcp(settings: Any, **values: Any) -> None:
    settings.MCP_APP = {**settings.MCP_APP, **values}


@pytest.fixture
def connect() -> Iterator[Callable[..., LegacySession]]:
    opened: list[LegacySession] = []

    def connect(version: Any = LATEST, capabilities: JSON | None = None) -> LegacySession:
        client = Client()
        response = post_raw(client, initialize_body(version, capabilities))
        assert response.status_code == 200, response.content
        result = response.json()["result"]
        session = LegacySession(
            client, response["Mcp-Session-Id"], result["protocolVersion"], result
        )
        opened.append(session)
        return session

    yield connect
    for session in opened:
        for reader in session.readers:
            reader.close()


@pytest.fixture
def session(connect: Callable[..., LegacySession]) -> LegacySession:
    return connect()


@pytest.fixture
def temporary() -> Iterator[Callable[..., None]]:
    """Register definitions on the demo site for one test; they go again afterwards."""
    added: list[tuple[str, str]] = []

    def register(kind: str, handler: Callable[..., Any], **options: Any) -> None:
        getattr(mcp_app.site, f"add_{kind}")(handler, **options)
        added.append((kind, options.get("name") or options.get("uri") or handler.__name__))

    yield register
    for kind, key in added:
        getattr(mcp_app.site, f"remove_{kind}")(key)


def tool_text(message: JSON) -> str:
    return str(message["result"]["content"][0]["text"])


# -- initialize -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_initialize_echoes_each_supported_version(version: str) -> None:
    response = post_raw(Client(), initialize_body(version))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["id"] == 0
    result = body["result"]
    assert result["protocolVersion"] == version
    assert result["capabilities"] == {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "completions": {},
        "logging": {},
    }
    assert result["serverInfo"] == {"name": "django-mcp-app", "version": "0.1.0"}
    assert "instructions" not in result


@pytest.mark.parametrize("requested", ["2024-11-05", "2026-07-28", "1999-01-01", "v2"])
def test_initialize_answers_an_unsupported_version_with_2025_11_25(requested: Any) -> None:
    response = post_raw(Client(), initialize_body(requested))
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"
    assert response["Mcp-Session-Id"]


SERVER_INFO = {
    "name": "django-mcp-app",
    "version": "0.1.0",
    "title": "Demo",
    "description": "The demo site",
    "websiteUrl": "https://example.com",
    "icons": [{"src": "https://example.com/icon.png"}],
}


@pytest.mark.parametrize(
    ("version", "keys"),
    [
        ("2025-03-26", {"name", "version"}),
        ("2025-06-18", {"name", "version", "title"}),
        ("2025-11-25", set(SERVER_INFO)),
    ],
)
def test_server_info_has_only_the_fields_the_negotiated_version_knows(
    monkeypatch: pytest.MonkeyPatch, version: str, keys: set[str]
) -> None:
    options = mcp_app.site.options
    monkeypatch.setattr(options, "title", SERVER_INFO["title"])
    monkeypatch.setattr(options, "description", SERVER_INFO["description"])
    monkeypatch.setattr(options, "website_url", SERVER_INFO["websiteUrl"])
    monkeypatch.setattr(options, "icons", SERVER_INFO["icons"])
    info = post_raw(Client(), initialize_body(version)).json()["result"]["serverInfo"]
    assert info == {key: SERVER_INFO[key] for key in keys}


def test_initialize_carries_the_instructions_when_the_server_has_some(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mcp_app.site.options, "instructions", "Call greet to say hello.")
    result = post_raw(Client(), initialize_body()).json()["result"]
    assert result["instructions"] == "Call greet to say hello."


def test_session_ids_are_long_visible_ascii_and_differ(
    connect: Callable[..., LegacySession],
) -> None:
    first, second = connect(), connect()
    for session_id in (first.id, second.id):
        assert len(session_id) >= 32
        assert all(0x21 <= ord(char) <= 0x7E for char in session_id)
    assert first.id != second.id


def test_initialize_remembers_the_client_in_the_session_row(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect("2025-06-18", {"elicitation": {}})
    row = Session.objects.get(pk=session.id)
    assert row.server == "default"
    assert row.protocol_version == "2025-06-18"
    assert row.client_info == {"name": "legacy-tests", "version": "1.0"}
    assert row.capabilities == {"elicitation": {}}
    assert row.initialized is False


@pytest.mark.parametrize("missing", ["capabilities", "clientInfo"])
def test_initialize_without_capabilities_or_client_info_is_invalid_params(missing: str) -> None:
    body = initialize_body()
    del body["params"][missing]
    response = post_raw(Client(), body)
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602
    assert "Mcp-Session-Id" not in response
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("protocolVersion", 20251125, "'protocolVersion' string"),
        ("protocolVersion", None, "'protocolVersion' string"),
        ("clientInfo", {"name": 5, "version": "1"}, "'name' and 'version' strings"),
        ("clientInfo", {"name": "x"}, "'name' and 'version' strings"),
    ],
)
def test_initialize_with_a_malformed_version_or_client_info_is_invalid_params(
    key: str, value: Any, said: str
) -> None:
    body = initialize_body()
    body["params"][key] = value
    response = post_raw(Client(), body)
    error = response.json()["error"]
    assert error["code"] == -32602 and said in error["message"]
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    ("negotiated", "said"), [("2025-06-18", "2025-11-25"), ("2025-03-26", "2025-06-18")]
)
def test_a_header_naming_another_revision_than_the_sessions_is_refused(
    connect: Callable[..., LegacySession], negotiated: str, said: str
) -> None:
    session = connect(negotiated)
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    refused = session.post(ping, **{"MCP-Protocol-Version": said})
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "code": -32600,
        "message": f"MCP-Protocol-Version {said} is not the session's ({negotiated})",
    }
    assert session.post(ping).json()["result"] == {}
    # Left out, the header is taken for the session's (2025-03-26 clients send none).
    without = session.client.post(
        "/mcp",
        data=json.dumps(ping),
        content_type="application/json",
        headers={"Accept": ACCEPT, "Mcp-Session-Id": session.id},
    )
    assert without.json()["result"] == {}


@pytest.mark.parametrize("meta", ["x", [1], 3])
def test_a_meta_that_is_no_object_is_invalid_params(
    connect: Callable[..., LegacySession], meta: Any
) -> None:
    session = connect(LATEST)
    response = session.request("tools/list", {"_meta": meta})
    assert response.json()["error"] == {"code": -32602, "message": "_meta must be an object"}


def test_initialize_sent_as_a_notification_is_refused() -> None:
    body = initialize_body()
    del body["id"]
    response = post_raw(Client(), body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600
    assert not Session.objects.exists()


def test_initialized_notification_is_accepted_and_marks_the_session(
    session: LegacySession,
) -> None:
    response = session.notify("notifications/initialized")
    assert response.status_code == 202 and response.content == b""
    assert Session.objects.get(pk=session.id).initialized is True


def test_with_the_delivery_backend_down_session_changes_are_still_answered(
    session: LegacySession, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    set_mcp(settings, DELIVERY_BACKEND="tests.test_server.BrokenBackend")
    initialized = session.notify("notifications/initialized")
    assert initialized.status_code == 202
    assert Session.objects.get(pk=session.id).initialized is True
    cancelled = session.notify("notifications/cancelled", {"requestId": 7})
    assert cancelled.status_code == 202
    subscribed = session.request("resources/subscribe", {"uri": "demo://greeting"})
    assert subscribed.status_code == 200 and "result" in subscribed.json()
    ended = session.client.delete("/mcp", headers=session.headers())
    assert ended.status_code == 200
    assert not Session.objects.filter(pk=session.id).exists()
    assert "Could not publish on" in caplog.text


def test_with_the_delivery_backend_down_a_get_stream_opens_and_a_response_is_refused(
    session: LegacySession, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    set_mcp(settings, DELIVERY_BACKEND="tests.test_server.BrokenBackend")
    stream = session.listen()
    assert stream.answered() == 200
    assert stream.next().comment == "keep-alive" and stream.ended is False
    # A client's answer to a server request: the request waiting for it would never hear it.
    answer = {"jsonrpc": "2.0", "id": "srv-1", "result": {"action": "accept"}}
    response = session.post(answer)
    assert response.status_code == 503
    error = response.json()
    assert error.get("id") is None and error["error"]["code"] == -32603
    assert "could not be passed on" in error["error"]["message"]
    assert "Could not pass on a client's response" in caplog.text


# -- Mcp-Session-Id -------------------------------------------------------------------------------


def test_request_without_session_id_is_400() -> None:
    response = post_raw(Client(), {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600
    assert "Mcp-Session-Id" in response.json()["error"]["message"]


@pytest.mark.parametrize("http_method", ["POST", "GET", "DELETE"])
def test_unknown_session_id_is_404(http_method: str) -> None:
    headers = {"Accept": ACCEPT, "Mcp-Session-Id": "no-such-session-" + "x" * 32}
    client = Client()
    if http_method == "POST":
        response = post_raw(client, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, **headers)
    else:
        response = client.generic(http_method, "/mcp", headers=headers)
    assert response.status_code == 404


@pytest.mark.parametrize("session_id", ["\x00", "a\x00b", "with space", "tab\tinside", "é" * 8])
def test_a_session_id_no_server_could_have_made_is_404_unread(session_id: str) -> None:
    # Session ids are visible ASCII; anything else is not looked up (PostgreSQL refuses NULs).
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    headers = {"Accept": ACCEPT, "Mcp-Session-Id": session_id}
    with CaptureQueriesContext(connection) as queries:
        response = post_raw(Client(), {"jsonrpc": "2.0", "id": 1, "method": "ping"}, **headers)
    assert response.status_code == 404
    assert not [q for q in queries if "mcp_app_session" in q["sql"]]


def test_session_of_another_server_is_404(session: LegacySession) -> None:
    Session.objects.filter(pk=session.id).update(server="another-server")
    assert session.request("ping").status_code == 404


def test_deleted_session_is_404_for_every_method(session: LegacySession) -> None:
    response = session.client.delete("/mcp", headers=session.headers())
    assert response.status_code == 200
    assert not Session.objects.filter(pk=session.id).exists()
    assert session.request("ping").status_code == 404
    assert session.client.get("/mcp", headers=session.headers()).status_code == 404
    assert session.client.delete("/mcp", headers=session.headers()).status_code == 404


def test_delete_drops_the_sessions_stream_events(session: LegacySession) -> None:
    sse_messages(session.request("tools/call", {"name": "test_tool_with_logging"}))
    # Three log messages, the result, and the stream's priming record.
    assert StreamEvent.objects.filter(session_id=session.id).count() == 5
    session.client.delete("/mcp", headers=session.headers())
    assert not StreamEvent.objects.filter(session_id=session.id).exists()


def test_expired_session_is_404(session: LegacySession, settings: Any) -> None:
    set_mcp(settings, SESSION_IDLE_SECONDS=60)
    Session.objects.filter(pk=session.id).update(last_seen=timezone.now() - timedelta(seconds=61))
    assert session.request("ping").status_code == 404


def test_session_used_within_the_idle_time_lives_on(session: LegacySession, settings: Any) -> None:
    set_mcp(settings, SESSION_IDLE_SECONDS=60)
    Session.objects.filter(pk=session.id).update(last_seen=timezone.now() - timedelta(seconds=50))
    assert session.request("ping").status_code == 200
    # The request restarted the idle clock.
    row = Session.objects.get(pk=session.id)
    assert timezone.now() - row.last_seen < timedelta(seconds=5)


# -- MCP-Protocol-Version ---------------------------------------------------------------------


def test_request_without_protocol_version_header_is_served(session: LegacySession) -> None:
    headers = session.headers()
    del headers["MCP-Protocol-Version"]
    response = post_raw(session.client, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, **headers)
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize("header", ["1999-01-01", "latest"])
def test_unsupported_protocol_version_header_is_400(session: LegacySession, header: str) -> None:
    response = session.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"}, **{"MCP-Protocol-Version": header}
    )
    assert response.status_code == 400
    assert header in response.json()["error"]["message"]


@pytest.mark.parametrize("header", ["2024-11-05", "2099-01-01", "latest"])
def test_a_revision_not_served_is_named_before_a_missing_session(header: str) -> None:
    # An older client says nothing of the stateless revision's headers or _meta: what it
    # needs to hear is that its revision is not served, not which header it lacks.
    response = post_raw(
        Client(),
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        **{"MCP-Protocol-Version": header},
    )
    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 1,  # read from the body, so the client can match the answer
        "error": {"code": -32600, "message": f"Unsupported MCP-Protocol-Version: {header}"},
    }


@pytest.mark.parametrize(
    ("session_id", "status", "message"),
    [(None, 400, "Missing Mcp-Session-Id header"), ("f" * 32, 404, "Session not found")],
)
@pytest.mark.parametrize("request_id", [7, "seven"])
def test_a_refused_session_answers_the_requests_id(
    session_id: str | None, status: int, message: str, request_id: Any
) -> None:
    headers = {"MCP-Protocol-Version": LATEST}
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
    response = post_raw(Client(), body, **headers)
    assert response.status_code == status
    assert response.json()["id"] == request_id
    assert response.json()["error"]["message"] == message
    # An id a request cannot have is not echoed, nor a response's (an error answers no response).
    body["id"] = True
    assert post_raw(Client(), body, **headers).json().get("id") is None
    response = {"jsonrpc": "2.0", "id": request_id, "result": {}}
    refused = post_raw(Client(), response, **headers)
    assert refused.status_code == status
    assert refused.json().get("id") is None


def test_a_sessions_request_under_the_stateless_revisions_header_is_judged_by_its_rules(
    session: LegacySession,
) -> None:
    response = session.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"}, **{"MCP-Protocol-Version": "2026-07-28"}
    )
    # Not "unsupported": the revision is served, and its requests carry Mcp-Method.
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": -32020,
        "message": "Missing required header: Mcp-Method",
    }


@pytest.mark.parametrize("http_method", ["GET", "DELETE"])
def test_unsupported_protocol_version_header_is_400_on_get_and_delete(
    session: LegacySession, http_method: str
) -> None:
    headers = session.headers(**{"MCP-Protocol-Version": "1999-01-01"})
    response = session.client.generic(http_method, "/mcp", headers=headers)
    assert response.status_code == 400
    assert Session.objects.filter(pk=session.id).exists()


# -- Origin and Accept --------------------------------------------------------------------------


@pytest.mark.parametrize("http_method", ["GET", "DELETE"])
def test_foreign_origin_is_refused_on_get_and_delete(
    session: LegacySession, http_method: str
) -> None:
    headers = session.headers(Origin="http://evil.example.com")
    response = session.client.generic(http_method, "/mcp", headers=headers)
    assert response.status_code == 403
    assert Session.objects.filter(pk=session.id).exists()


def test_foreign_origin_is_refused_on_post_in_a_session(session: LegacySession) -> None:
    response = session.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"}, Origin="http://evil.example.com"
    )
    assert response.status_code == 403


@pytest.mark.parametrize(
    "accept", ["application/json", "text/event-stream;q=0", "*/*, text/event-stream;q=0"]
)
def test_get_without_event_stream_in_accept_is_406(session: LegacySession, accept: str) -> None:
    response = session.client.get("/mcp", headers=session.headers(Accept=accept))
    assert response.status_code == 406


@pytest.mark.parametrize("accept", ["text/*", "Text/Event-Stream", "*/*;q=0.5"])
def test_get_with_any_range_taking_an_event_stream_opens_it(
    session: LegacySession, accept: str
) -> None:
    session.listen(Accept=accept)


# -- session methods --------------------------------------------------------------------------


def test_ping_answers_an_empty_result(session: LegacySession) -> None:
    response = session.request("ping", request_id="p-1")
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": "p-1", "result": {}}


def test_set_level_is_stored_on_the_session(session: LegacySession) -> None:
    assert session.result_of("logging/setLevel", {"level": "warning"}) == {}
    assert Session.objects.get(pk=session.id).log_level == "warning"


@pytest.mark.parametrize("level", ["verbose", "INFO", None, 3])
def test_set_level_with_an_unknown_level_is_invalid_params(
    session: LegacySession, level: Any
) -> None:
    response = session.request("logging/setLevel", {"level": level})
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602
    assert Session.objects.get(pk=session.id).log_level == ""


def test_tool_logging_streams_three_info_messages_before_the_result(
    session: LegacySession,
) -> None:
    response = session.request("tools/call", {"name": "test_tool_with_logging"}, request_id=7)
    assert response["Content-Type"] == "text/event-stream"
    messages = sse_messages(response)
    logs = [m["params"] for m in messages if m.get("method") == "notifications/message"]
    assert logs == [
        {"level": "info", "data": "Tool execution started", "logger": "conformance"},
        {"level": "info", "data": "Tool processing data", "logger": "conformance"},
        {"level": "info", "data": "Tool execution completed", "logger": "conformance"},
    ]
    assert messages[-1]["id"] == 7
    assert tool_text(messages[-1]) == "Logging test completed: sent 3 info messages."


def test_no_log_messages_below_the_level_the_client_set(session: LegacySession) -> None:
    session.result_of("logging/setLevel", {"level": "warning"})
    response = session.request("tools/call", {"name": "test_tool_with_logging"}, request_id=8)
    # Nothing went out before the result, so it is plain JSON.
    assert response["Content-Type"] == "application/json"
    assert tool_text(response.json()) == "Logging test completed: sent 3 info messages."


def test_a_server_that_does_no_logging_refuses_set_level_and_sends_no_log_messages(
    connect: Callable[..., LegacySession], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_app.site.options, "logging", False)
    session = connect(LATEST)
    assert "logging" not in session.result["capabilities"]
    refused = session.request("logging/setLevel", {"level": "info"})
    assert refused.json()["error"]["code"] == -32601
    response = session.request("tools/call", {"name": "test_tool_with_logging"}, request_id=9)
    # Nothing went out before the result, so it is plain JSON.
    assert response["Content-Type"] == "application/json"
    assert tool_text(response.json()) == "Logging test completed: sent 3 info messages."


def test_info_level_lets_info_messages_through(session: LegacySession) -> None:
    session.result_of("logging/setLevel", {"level": "info"})
    messages = sse_messages(session.request("tools/call", {"name": "test_logging_tool"}))
    levels = [m["params"]["level"] for m in messages if m.get("method") == "notifications/message"]
    assert levels == ["info", "warning"]


def test_progress_notifications_stream_before_the_result(session: LegacySession) -> None:
    response = session.request(
        "tools/call",
        {"name": "test_tool_with_progress", "_meta": {"progressToken": "tok"}},
        request_id=3,
    )
    messages = sse_messages(response)
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert progress == [
        {"progressToken": "tok", "progress": 0, "total": 100},
        {"progressToken": "tok", "progress": 50, "total": 100},
        {"progressToken": "tok", "progress": 100, "total": 100},
    ]
    assert messages[-1]["id"] == 3 and "result" in messages[-1]


def test_a_streamed_call_carries_dates_and_decimals_as_plain_answers_do(
    session: LegacySession, temporary: Callable[..., None]
) -> None:
    import datetime
    from decimal import Decimal

    def priced(arguments: JSON, context: Any) -> Any:
        context.report_progress(1, total=2)
        context.log("info", {"tags": {"a"}})
        return {"price": Decimal("9.99"), "on": datetime.date(2026, 11, 30)}

    temporary("tool", priced, name="priced_for_tests", output_schema=None)
    response = session.request(
        "tools/call", {"name": "priced_for_tests", "_meta": {"progressToken": "p"}}, request_id=4
    )
    messages = sse_messages(response)
    logged = [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]
    assert logged == [{"tags": "{'a'}"}]
    assert messages[-1]["result"]["structuredContent"] == {"price": "9.99", "on": "2026-11-30"}


def test_post_stream_events_carry_ids_and_2025_11_25_primes_the_stream(
    session: LegacySession,
) -> None:
    response = session.request("tools/call", {"name": "test_tool_with_logging"})
    events = stream_events(response)
    assert events[0].data == "" and events[0].retry == 1000
    stream = events[0].id.rpartition("-")[0] if events[0].id else ""
    assert events[0].id == f"{stream}-0"
    assert [e.id for e in events[1:]] == [f"{stream}-{n}" for n in range(1, 5)]


def test_2025_06_18_streams_are_not_primed(connect: Callable[..., LegacySession]) -> None:
    session = connect("2025-06-18")
    response = session.request("tools/call", {"name": "test_tool_with_logging"})
    events = stream_events(response)
    assert all(event.message is not None for event in events)
    assert all(event.retry is None for event in events)


def test_subscribe_and_unsubscribe_keep_the_sessions_uris(session: LegacySession) -> None:
    assert session.result_of("resources/subscribe", {"uri": WATCHED}) == {}
    session.result_of("resources/subscribe", {"uri": WATCHED})
    session.result_of("resources/subscribe", {"uri": "test://static-text"})
    row = Session.objects.get(pk=session.id)
    assert row.subscriptions == [WATCHED, "test://static-text"]
    assert session.result_of("resources/unsubscribe", {"uri": WATCHED}) == {}
    assert Session.objects.get(pk=session.id).subscriptions == ["test://static-text"]


def test_a_session_follows_a_bounded_number_of_resources_by_bounded_uris(
    session: LegacySession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_app.transport import legacy

    monkeypatch.setattr(legacy, "SUBSCRIPTIONS_MAX", 3)
    for n in range(3):
        assert session.result_of("resources/subscribe", {"uri": f"test://{n}"}) == {}
    # Again, one it follows already: still three.
    assert session.result_of("resources/subscribe", {"uri": "test://0"}) == {}
    refused = session.request("resources/subscribe", {"uri": "test://3"}).json()["error"]
    assert refused == {"code": -32602, "message": "At most 3 resources are followed at once"}
    long = session.request("resources/subscribe", {"uri": "test://" + "a" * 2048}).json()
    assert long["error"]["code"] == -32602 and "at most 2048 characters" in long["error"]["message"]
    followed = Session.objects.get(pk=session.id).subscriptions
    assert sorted(followed) == ["test://0", "test://1", "test://2"]
    # Unsubscribing makes room again.
    session.result_of("resources/unsubscribe", {"uri": "test://1"})
    assert session.result_of("resources/subscribe", {"uri": "test://3"}) == {}


def test_nul_characters_a_client_sends_are_kept_by_its_session() -> None:
    # PostgreSQL's jsonb holds no NUL; the session stores them all the same.
    client = Client()
    body = initialize_body(capabilities={"experimental": {"x\x00": {}}})
    body["params"]["clientInfo"] = {"name": "nul\x00client", "version": "1"}
    response = post_raw(client, body)
    assert response.status_code == 200, response.content
    session = LegacySession(client, response["Mcp-Session-Id"], LATEST, response.json()["result"])
    assert session.result_of("resources/subscribe", {"uri": "test://a\x00b"}) == {}
    row = Session.objects.get(pk=session.id)
    assert row.client_info == {"name": "nul\x00client", "version": "1"}
    assert row.capabilities == {"experimental": {"x\x00": {}}}
    assert row.subscriptions == ["test://a\x00b"]


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
@pytest.mark.parametrize("params", [{}, {"uri": ""}, {"uri": 3}])
def test_subscribe_without_a_uri_is_invalid_params(
    session: LegacySession, method: str, params: JSON
) -> None:
    assert session.request(method, params).json()["error"]["code"] == -32602


def test_reading_a_missing_resource_is_32002_with_the_uri(session: LegacySession) -> None:
    response = session.request("resources/read", {"uri": "test://no-such-thing"}, request_id=4)
    assert response.status_code == 200
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 4,
        "error": {
            "code": -32002,
            "message": "Resource not found",
            "data": {"uri": "test://no-such-thing"},
        },
    }


def test_reading_a_resource(session: LegacySession) -> None:
    result = session.result_of("resources/read", {"uri": WATCHED})
    assert result["contents"] == [
        {
            "uri": WATCHED,
            "mimeType": "text/plain",
            "text": "This is the content of the watched resource.",
        }
    ]


def test_common_methods_are_served_in_a_session(session: LegacySession) -> None:
    names = [tool["name"] for tool in session.result_of("tools/list")["tools"]]
    assert names[:2] == ["add", "logo"]
    added = session.result_of("tools/call", {"name": "add", "arguments": {"numbers": [2, 3]}})
    assert added["structuredContent"] == {"sum": 5}
    assert "resultType" not in added


def test_unknown_method_is_method_not_found(session: LegacySession) -> None:
    response = session.request("tasks/list", {}, request_id=9)
    assert response.status_code == 200
    assert response.json()["error"] == {"code": -32601, "message": "Method not found: tasks/list"}


def test_unknown_tool_is_invalid_params(session: LegacySession) -> None:
    response = session.request("tools/call", {"name": "no-such-tool"})
    assert response.json()["error"]["code"] == -32602


def test_malformed_message_in_a_session_is_400(session: LegacySession) -> None:
    response = session.post({"jsonrpc": "2.0", "id": 5, "method": 42})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600
    assert response.json()["id"] == 5


def test_failing_resource_handler_is_an_internal_error(
    session: LegacySession, temporary: Callable[..., None], settings: Any
) -> None:
    def broken(context: RequestContext) -> str:
        raise RuntimeError("the disk is on fire")

    temporary("resource", broken, uri="test://broken")
    # The endpoint reports the exception as Django would; the test client would re-raise it.
    session.client = Client(raise_request_exception=False)
    response = session.request("resources/read", {"uri": "test://broken"})
    # As a tool's isError result has it, unless TOOL_ERROR_DETAILS is off.
    assert response.status_code == 200
    assert response.json()["error"] == {"code": -32603, "message": "the disk is on fire"}
    set_mcp(settings, TOOL_ERROR_DETAILS=False)
    response = session.request("resources/read", {"uri": "test://broken"})
    assert response.json()["error"] == {"code": -32603, "message": "Internal error"}


def test_an_answer_json_cannot_carry_is_an_internal_error_in_a_200(
    session: LegacySession, temporary: Callable[..., None], caplog: pytest.LogCaptureFixture
) -> None:
    def not_a_number(context: RequestContext) -> Any:
        return {"text": "x", "_meta": {"ratio": float("nan")}}

    temporary("resource", not_a_number, uri="test://nan")
    response = session.request("resources/read", {"uri": "test://nan"})
    # As every other error of a session's: the 500 is the stateless revision's.
    assert response.status_code == 200
    assert response.json()["error"] == {"code": -32603, "message": "Internal error"}
    assert "held NaN, Infinity or a lone surrogate" in caplog.text


def test_an_error_of_the_servers_own_while_serving_a_handler_says_only_internal_error(
    session: LegacySession, temporary: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_app.protocol import legacy

    def fine(arguments: dict[str, Any], context: RequestContext) -> str:
        return "fine"

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("SELECT secret FROM elsewhere")

    temporary("prompt", fine, name="fine")
    monkeypatch.setattr(legacy, "result_for", broken)
    session.client = Client(raise_request_exception=False)
    response = session.request("prompts/get", {"name": "fine"})
    assert response.json()["error"] == {"code": -32603, "message": "Internal error"}


def test_response_nobody_waits_for_is_accepted(session: LegacySession) -> None:
    response = session.answer("nobody-asked", {"action": "accept", "content": {}})
    assert response.status_code == 202 and response.content == b""


def test_other_client_notifications_are_accepted(session: LegacySession) -> None:
    response = session.notify("notifications/roots/list_changed")
    assert response.status_code == 202 and response.content == b""


def test_stateless_request_without_a_session_is_not_taken_for_the_initialize_era() -> None:
    body, headers = modern_request("tools/list")
    response = post_raw(Client(), body, **headers)
    assert response.status_code == 200
    assert response.json()["result"]["resultType"] == "complete"


def test_bare_json_value_without_a_session_is_not_taken_for_the_initialize_era() -> None:
    response = post_raw(Client(), 3)
    assert response.status_code == 400
    assert "Mcp-Session-Id" not in response.json()["error"]["message"]


# -- the input loop ---------------------------------------------------------------------------


def accept_name(name: str = "Ada") -> JSON:
    return {"action": "accept", "content": {"name": name}}


def test_greet_elicits_on_the_post_stream_and_uses_the_answer(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("greet", request_id=11)
    assert reader.answered() == 200
    assert reader.headers["Content-Type"] == "text/event-stream"
    priming = reader.next()
    assert priming.data == "" and priming.id and priming.retry == 1000
    asked = reader.next()
    request = asked.message
    assert request is not None and asked.id is not None
    assert request["method"] == "elicitation/create"
    assert isinstance(request["id"], str)
    assert request["params"] == {
        "mode": "form",
        "message": "Who should I greet?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    }
    assert session.answer(request["id"], accept_name()).status_code == 202
    final = reader.next_message()
    assert final["id"] == 11
    assert tool_text(final) == "Hello, Ada!"
    assert reader.until_end() == []


@pytest.mark.parametrize(
    "accept",
    [
        "application/json",
        "application/json, text/event-stream;q=0",
        # The most specific range weighs a type, whatever a wildcard says.
        "*/*, text/event-stream;q=0",
    ],
)
def test_a_client_taking_json_only_gets_its_answer_in_json_without_what_would_stream(
    session: LegacySession, accept: str
) -> None:
    session.result_of("logging/setLevel", {"level": "info"})
    body = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {"name": "test_tool_with_progress", "_meta": {"progressToken": "tok"}},
    }
    response = session.post(body, Accept=accept)
    assert response["Content-Type"] == "application/json"
    assert response.json()["id"] == 4 and "result" in response.json()
    logged = session.post({**body, "params": {"name": "test_tool_with_logging"}}, Accept=accept)
    assert logged["Content-Type"] == "application/json"
    assert tool_text(logged.json()) == "Logging test completed: sent 3 info messages."


def test_a_cancelled_call_of_a_client_taking_json_only_ends_without_a_stream(
    session: LegacySession, temporary: Callable[..., None]
) -> None:
    from mcp_app.models import StreamEvent

    running = held_until_cancelled(temporary)
    body = {
        "jsonrpc": "2.0",
        "id": 13,
        "method": "tools/call",
        "params": {"name": "hold_until_cancelled"},
    }
    answers: list[Any] = []
    posting = threading.Thread(
        target=lambda: answers.append(session.post(body, Accept="application/json"))
    )
    posting.start()
    assert running.wait(WAIT)
    assert session.notify("notifications/cancelled", {"requestId": 13}).status_code == 202
    posting.join(WAIT)
    (response,) = answers
    # No response to the request the client cancelled, and no stream it did not take.
    assert response.status_code == 200
    assert response.content == b"" and "Content-Type" not in response
    # Nothing kept to resume: the client was given no stream.
    assert not StreamEvent.objects.filter(session_id=session.id).exists()


def test_input_cannot_be_asked_of_a_client_taking_json_only(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect(LATEST, {"elicitation": {}})
    body = {"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"name": "greet"}}
    response = session.post(body, Accept="application/json")
    assert response["Content-Type"] == "application/json"
    answer = response.json()
    assert answer["id"] == 12 and answer["result"]["isError"] is True
    assert "Accept header takes no event stream" in tool_text(answer)


def test_a_call_waiting_for_its_client_holds_no_database_connection(
    connect: Callable[..., LegacySession], monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connections

    from mcp_app.transport import legacy

    # Looked at where the call waits: as many calls waiting for people as the database takes
    # clients would otherwise leave it none for any other request.
    held: list[bool] = []
    wait = legacy.LegacyEndpoint._answers

    def watched(self: Any, ctx: Any, pending: Any, inbox: Any) -> Any:
        class Inbox:
            def get(self, timeout: float | None = None) -> Any:
                held.append(connections["default"].connection is not None)
                return inbox.get(timeout=timeout)

        return wait(self, ctx, pending, Inbox())

    monkeypatch.setattr(legacy.LegacyEndpoint, "_answers", watched)
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("greet", request_id=16)
    asked = reader.next_message()
    assert session.answer(asked["id"], accept_name()).status_code == 202
    assert tool_text(reader.next_message()) == "Hello, Ada!"
    assert held == [False]


@pytest.mark.parametrize("error", ["user said no", [1], 5, {"message": "no code"}])
def test_an_answer_whose_error_is_not_an_error_object_is_refused_and_the_call_waits_on(
    connect: Callable[..., LegacySession], error: Any
) -> None:
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("greet", request_id=12)
    request = reader.next_message()
    refused = session.post({"jsonrpc": "2.0", "id": request["id"], "error": error})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == -32600
    assert session.answer(request["id"], accept_name()).status_code == 202
    assert tool_text(reader.next_message()) == "Hello, Ada!"


@pytest.mark.parametrize("extra", [{"ended": True}, {"cancel": 14}])
def test_a_response_cannot_speak_for_the_server_on_the_sessions_channel(
    connect: Callable[..., LegacySession], extra: dict[str, Any]
) -> None:
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("greet", request_id=14)
    request = reader.next_message()
    stray = {"jsonrpc": "2.0", "id": "not-asked", "result": {}, **extra}
    assert session.post(stray).status_code == 202
    assert session.answer(request["id"], accept_name()).status_code == 202
    assert tool_text(reader.next_message()) == "Hello, Ada!"


def test_an_error_answer_is_a_refusal_the_tool_reports(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("greet", request_id=13)
    request = reader.next_message()
    error = {"code": -1, "message": "user said no"}
    assert session.post({"jsonrpc": "2.0", "id": request["id"], "error": error}).status_code == 202
    final = reader.next_message()
    assert final["result"]["isError"] is True
    assert tool_text(final) == "The client refused the request: user said no"


@pytest.mark.parametrize(
    "result",
    [
        "Ada",
        None,
        {"action": "maybe"},
        {"content": {"name": "x"}},
        {"action": "accept", "content": None},
        {"action": "accept", "content": {"nom": "x"}},  # not the form's field
    ],
)
def test_a_malformed_answer_ends_the_call_with_a_result_that_says_so(
    connect: Callable[..., LegacySession], result: Any
) -> None:
    # Not handed to the handler (which would fail on it), nor asked again and again.
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("greet", request_id=15)
    request = reader.next_message()
    answered = session.post({"jsonrpc": "2.0", "id": request["id"], "result": result})
    assert answered.status_code == 202
    final = reader.next_message()
    assert final["result"]["isError"] is True
    assert tool_text(final).startswith("The client's answer to elicitation/create is malformed: ")


def test_a_client_that_drops_the_call_stream_resumes_it_and_the_call_goes_on(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect(LATEST, {"elicitation": {}})
    # The client reads the priming event and the elicitation, then goes away.
    dropped = session.call_streaming("greet", request_id=14, drop_after=2)
    dropped.next()
    asked = dropped.next()
    assert dropped.until_end() == []
    request = asked.message
    assert request is not None and asked.id is not None
    resumed = session.resume(asked.id)
    assert resumed.answered() == 200
    # Nothing was kept after the elicitation: the stream says it is open, and is followed.
    assert resumed.next().comment == "stream open"
    assert session.answer(request["id"], accept_name()).status_code == 202
    final = resumed.next_message()
    assert final["id"] == 14
    assert tool_text(final) == "Hello, Ada!"


def test_elicitation_requests_have_no_mode_before_2025_11_25(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect("2025-06-18", {"elicitation": {}})
    reader = session.call_streaming("greet")
    request = reader.next_message()
    assert "mode" not in request["params"]
    assert request["params"]["message"] == "Who should I greet?"
    session.answer(request["id"], accept_name("Grace"))
    assert tool_text(reader.next_message()) == "Hello, Grace!"


def test_two_steps_asks_twice_and_carries_the_name(connect: Callable[..., LegacySession]) -> None:
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("two-steps")
    first = reader.next_message()
    assert first["params"]["message"] == "Name?"
    session.answer(first["id"], accept_name())
    second = reader.next_message()
    assert second["params"]["message"] == "Color?"
    assert second["id"] != first["id"]
    session.answer(second["id"], {"action": "accept", "content": {"color": "blue"}})
    assert tool_text(reader.next_message()) == "Ada likes blue"


def test_sampling_request_goes_to_the_client_and_its_answer_to_the_tool(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect(LATEST, {"sampling": {}})
    reader = session.call_streaming("test_sampling", {"prompt": "Capital of France?"})
    request = reader.next_message()
    assert request["method"] == "sampling/createMessage"
    assert request["params"]["maxTokens"] == 100
    assert request["params"]["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Capital of France?"}}
    ]
    answer = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}
    session.answer(request["id"], answer)
    assert tool_text(reader.next_message()) == "LLM response: Paris"


def _sample_with_context(arguments: JSON, context: RequestContext) -> Any:
    if context.input_response("llm") is None:
        return input_required({"llm": sample("Hi", 10, include_context="thisServer")})
    return "sampled"


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18"])
def test_sampling_with_context_needs_only_sampling_before_2025_11_25(
    version: str, connect: Callable[..., LegacySession], temporary: Callable[..., None]
) -> None:
    temporary("tool", _sample_with_context, name="sample_with_context_for_tests")
    session = connect(version, {"sampling": {}})
    reader = session.call_streaming("sample_with_context_for_tests")
    request = reader.next_message()
    assert request["method"] == "sampling/createMessage"
    assert request["params"]["includeContext"] == "thisServer"
    answer = {"role": "assistant", "content": {"type": "text", "text": "Hey"}, "model": "m"}
    session.answer(request["id"], answer)
    assert tool_text(reader.next_message()) == "sampled"


def test_sampling_with_context_on_2025_11_25_names_the_missing_sub_capability(
    connect: Callable[..., LegacySession], temporary: Callable[..., None]
) -> None:
    temporary("tool", _sample_with_context, name="sample_with_context_for_tests")
    session = connect("2025-11-25", {"sampling": {}})
    response = session.request(
        "tools/call", {"name": "sample_with_context_for_tests", "arguments": {}}
    )
    # Nothing is asked of the client: the call is answered at once, as a tool error.
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    final = response.json()
    assert final["result"]["isError"] is True
    assert tool_text(final) == (
        "The client does not support sampling.context, which this request needs"
    )


def _url_login(arguments: JSON, context: RequestContext) -> Any:
    if context.input_response("login") is None:
        return input_required({"login": elicit_url("Sign in", "https://example.com/login")})
    return "signed in"


def _pick_many(arguments: JSON, context: RequestContext) -> Any:
    if context.input_response("pick") is None:
        many = {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
        form = {"type": "object", "properties": {"picked": many}}
        return input_required({"pick": elicit("Which?", form)})
    return "picked"


@pytest.mark.parametrize(
    ("version", "handler", "said"),
    [
        ("2025-03-26", "greet", "The client's protocol revision (2025-03-26) has no elicitation"),
        (
            "2025-06-18",
            _url_login,
            "The client's protocol revision (2025-06-18) has no URL elicitation",
        ),
        (
            "2025-06-18",
            _pick_many,
            "The form's field 'picked' is a multi-select list, which the client's protocol "
            "revision (2025-06-18) has no words for",
        ),
    ],
)
def test_a_request_the_clients_revision_has_no_words_for_is_not_sent(
    connect: Callable[..., LegacySession],
    temporary: Callable[..., None],
    version: str,
    handler: Any,
    said: str,
) -> None:
    name = "greet"
    if handler != "greet":
        name = f"{handler.__name__.strip('_')}_for_tests"
        temporary("tool", handler, name=name)
    # Even declared: the capability means nothing the revision cannot say.
    session = connect(version, {"elicitation": {"form": {}, "url": {}}})
    response = session.request("tools/call", {"name": name, "arguments": {}})
    assert response["Content-Type"] == "application/json"  # nothing was asked of the client
    final = response.json()
    assert final["result"]["isError"] is True
    assert tool_text(final) == said


def test_roots_request_goes_to_the_client(connect: Callable[..., LegacySession]) -> None:
    session = connect(LATEST, {"roots": {}})
    reader = session.call_streaming("test_input_required_result_list_roots")
    request = reader.next_message()
    assert request["method"] == "roots/list"
    session.answer(request["id"], {"roots": [{"uri": "file:///work", "name": "work"}]})
    final = reader.next_message()
    assert final["result"]["content"][0]["text"] == "Client exposed 1 root(s)."


def test_several_requests_of_one_round_are_all_awaited(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect(LATEST, FORM_AND_MORE)
    reader = session.call_streaming("test_input_required_result_multiple_inputs")
    requests = {m["method"]: m for m in (reader.next_message() for _ in range(3))}
    assert set(requests) == {"elicitation/create", "sampling/createMessage", "roots/list"}
    session.answer(requests["roots/list"]["id"], {"roots": []})
    session.answer(requests["elicitation/create"]["id"], accept_name())
    sampled = {"role": "assistant", "content": {"type": "text", "text": "Hi."}, "model": "m"}
    session.answer(requests["sampling/createMessage"]["id"], sampled)
    assert (
        tool_text(reader.next_message()) == "Hello, Ada! Model said: Hi. Client exposed 0 root(s)."
    )


def test_url_elicitation_on_2025_11_25_gets_an_elicitation_id(
    connect: Callable[..., LegacySession], temporary: Callable[..., None]
) -> None:
    def sign_in(arguments: JSON, context: RequestContext) -> Any:
        if context.input_response("login") is None:
            return input_required({"login": elicit_url("Sign in", "https://example.com/login")})
        return "signed in"

    temporary("tool", sign_in, name="sign_in_for_tests")
    session = connect(LATEST, {"elicitation": {"url": {}}})
    reader = session.call_streaming("sign_in_for_tests")
    request = reader.next_message()
    assert request["params"]["mode"] == "url"
    assert request["params"]["url"] == "https://example.com/login"
    assert isinstance(request["params"]["elicitationId"], str)
    session.answer(request["id"], {"action": "accept"})
    assert tool_text(reader.next_message()) == "signed in"


def test_answers_to_other_requests_are_ignored(connect: Callable[..., LegacySession]) -> None:
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("greet")
    request = reader.next_message()
    assert session.answer("tools/call-not-ours", accept_name("Mallory")).status_code == 202
    session.answer(request["id"], accept_name())
    assert tool_text(reader.next_message()) == "Hello, Ada!"


def test_client_error_answer_is_an_error_result(connect: Callable[..., LegacySession]) -> None:
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("greet", request_id=12)
    request = reader.next_message()
    refusal = {
        "jsonrpc": "2.0",
        "id": request["id"],
        "error": {"code": -1, "message": "User said no"},
    }
    assert session.post(refusal).status_code == 202
    final = reader.next_message()
    assert final["id"] == 12
    assert final["result"]["isError"] is True
    assert tool_text(final) == "The client refused the request: User said no"


def test_client_without_elicitation_gets_an_error_result_naming_it(session: LegacySession) -> None:
    response = session.request("tools/call", {"name": "greet"}, request_id=13)
    assert response["Content-Type"] == "application/json"
    result = response.json()["result"]
    assert result["isError"] is True
    assert "elicitation" in result["content"][0]["text"]


def test_client_with_form_only_cannot_get_a_url_elicitation(
    connect: Callable[..., LegacySession], temporary: Callable[..., None]
) -> None:
    def sign_in(arguments: JSON, context: RequestContext) -> Any:
        return input_required({"login": elicit_url("Sign in", "https://example.com/login")})

    temporary("tool", sign_in, name="sign_in_for_tests")
    session = connect(LATEST, {"elicitation": {}})
    result = session.result_of("tools/call", {"name": "sign_in_for_tests"})
    assert result["isError"] is True and "elicitation" in result["content"][0]["text"]


def test_prompt_needing_input_the_client_does_not_declare_is_a_missing_capability(
    connect: Callable[..., LegacySession],
) -> None:
    # As on 2026-07-28: -32021, naming what the client would need.
    session = connect(LATEST, {})
    response = session.request("prompts/get", {"name": "test_input_required_result_prompt"})
    assert response.json()["error"] == {
        "code": -32021,
        "message": "The client does not support elicitation, which this request needs",
        "data": {"requiredCapabilities": {"elicitation": {}}},
    }


@pytest.mark.parametrize("declared", [{}, {"elicitation": {}}])
def test_prompt_needing_input_the_clients_revision_has_no_words_for_is_an_internal_error(
    connect: Callable[..., LegacySession], declared: JSON
) -> None:
    # Not -32021: the client may have declared it, and could never give it.
    session = connect("2025-03-26", declared)
    response = session.request("prompts/get", {"name": "test_input_required_result_prompt"})
    assert response.json()["error"] == {
        "code": -32603,
        "message": "The client's protocol revision (2025-03-26) has no elicitation",
    }


def _ask_sampling(arguments: Any, context: RequestContext) -> Any:
    if context.input_response("said") is None:
        return input_required({"said": sample("Say something", max_tokens=5)})
    return "thanks"


def test_input_cannot_be_asked_inside_a_batch_nor_what_the_client_lacks(
    connect: Callable[..., LegacySession], temporary: Callable[..., None]
) -> None:
    temporary("prompt", _ask_sampling, name="ask_sampling_for_tests")
    get = {"name": "ask_sampling_for_tests"}
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": get},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {**get, "arguments": {}}},
    ]
    temporary("tool", _ask_sampling, name="ask_sampling_for_tests")
    able = connect("2025-03-26", {"sampling": {}})
    answers = {answer["id"]: answer for answer in able.post(batch).json()}
    said = "Input cannot be asked for inside a batch; send the request on its own"
    assert answers[1]["error"] == {"code": -32603, "message": said}
    assert answers[2]["result"]["isError"] is True and tool_text(answers[2]) == said
    # A client that could never answer is told what it lacks, batch or not.
    unable = connect("2025-03-26", {})
    answers = {answer["id"]: answer for answer in unable.post(batch).json()}
    assert answers[1]["error"]["code"] == -32021
    assert answers[1]["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_a_malformed_answer_to_a_prompts_question_is_invalid_params(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect(LATEST, {"elicitation": {}})
    name = "test_input_required_result_prompt"
    reader = session.call_streaming(name, request_id=16, method="prompts/get")
    request = reader.next_message()
    malformed = {"action": "accept", "content": {"context": ["not", "text"]}}
    answered = session.post({"jsonrpc": "2.0", "id": request["id"], "result": malformed})
    assert answered.status_code == 202
    error = reader.next_message()["error"]
    assert error["code"] == -32602
    assert error["message"].startswith("The client's answer to elicitation/create is malformed: ")


def test_unanswered_request_times_out_as_an_error_result(
    connect: Callable[..., LegacySession], settings: Any
) -> None:
    set_mcp(settings, INPUT_TIMEOUT_SECONDS=0.5)
    session = connect(LATEST, {"elicitation": {}})
    started = time.monotonic()
    messages = sse_messages(session.request("tools/call", {"name": "greet"}, request_id=14))
    assert time.monotonic() - started < WAIT
    assert messages[0]["method"] == "elicitation/create"
    # The client is told its answer is no longer wanted (the lifecycle's timeouts).
    assert messages[1] == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": messages[0]["id"], "reason": "The client did not answer in time"},
    }
    final = messages[-1]
    assert final["id"] == 14 and final["result"]["isError"] is True
    assert "did not answer in time" in tool_text(final)


def test_cancelled_notification_ends_the_waiting_call_promptly(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("greet", request_id=15)
    asked = reader.next_message()
    started = time.monotonic()
    cancel = session.notify("notifications/cancelled", {"requestId": 15, "reason": "changed mind"})
    assert cancel.status_code == 202
    withdrawn = reader.next_message(timeout=WAIT)
    assert withdrawn["method"] == "notifications/cancelled"
    assert withdrawn["params"]["requestId"] == asked["id"]
    # The request the client cancelled gets no response: its stream just ends.
    rest = reader.until_end(timeout=WAIT)
    assert time.monotonic() - started < WAIT
    assert [event.message for event in rest if event.message is not None] == []
    row = ToolCall.objects.get(name="greet")
    assert row.outcome == "cancelled"


def held_until_cancelled(temporary: Callable[..., None]) -> threading.Event:
    """Register ``hold_until_cancelled``, a tool that waits to be cancelled; the event is set
    once its handler runs."""
    running = threading.Event()

    def hold_until_cancelled(arguments: JSON, context: RequestContext) -> str:
        running.set()
        context.cancelled.wait(WAIT)
        return "stopped"

    temporary("tool", hold_until_cancelled, name="hold_until_cancelled")
    return running


def call_held_until_cancelled(
    session: LegacySession, temporary: Callable[..., None], request_id: int
) -> StreamReader:
    """A call of a tool that waits to be cancelled, once its handler runs."""
    running = held_until_cancelled(temporary)
    reader = session.call_streaming("hold_until_cancelled", request_id=request_id)
    assert running.wait(WAIT)
    return reader


@pytest.mark.parametrize("other", [True, 1.0, [1], {"id": 1}, None])
def test_a_cancel_naming_no_valid_request_id_cancels_nothing(
    other: Any, session: LegacySession, temporary: Callable[..., None]
) -> None:
    reader = call_held_until_cancelled(session, temporary, 1)
    assert session.notify("notifications/cancelled", {"requestId": other}).status_code == 202
    # Request 1 runs on: only its own id cancels it.
    with pytest.raises(AssertionError, match="no event within"):
        reader.next_message(timeout=0.5)
    assert session.notify("notifications/cancelled", {"requestId": 1}).status_code == 202
    assert [event.message for event in reader.until_end() if event.message] == []


def test_a_call_cancelled_before_it_sent_anything_is_answered_by_an_empty_stream(
    session: LegacySession, temporary: Callable[..., None]
) -> None:
    reader = call_held_until_cancelled(session, temporary, 17)
    assert session.notify("notifications/cancelled", {"requestId": 17}).status_code == 202
    assert reader.answered() == 200
    assert reader.headers["Content-Type"] == "text/event-stream"
    events = reader.until_end()
    # Only the priming event, which a client could resume from: no response.
    assert [event.message for event in events] == [None]
    assert events[0].id is not None
    resumed = session.resume(events[0].id)
    assert resumed.answered() == 200
    # The resumed stream ends too: nothing is left to wait for.
    assert [event.message for event in resumed.until_end() if event.message] == []
    row = ToolCall.objects.get(name="hold_until_cancelled")
    # The handler finished all the same: the row says what was not sent.
    assert (row.outcome, row.error) == ("cancelled", "Cancelled by the client; not sent: complete")


def test_a_cancel_reaches_a_call_in_this_process_without_the_backend(
    session: LegacySession, temporary: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = call_held_until_cancelled(session, temporary, 21)
    # The copy published for other processes is lost (Redis out of reach, say).
    monkeypatch.setattr("mcp_app.transport.legacy.tell", lambda channel, message: None)
    started = time.monotonic()
    assert session.notify("notifications/cancelled", {"requestId": 21}).status_code == 202
    assert [event.message for event in reader.until_end() if event.message] == []
    assert time.monotonic() - started < WAIT / 2
    assert ToolCall.objects.get(name="hold_until_cancelled").outcome == "cancelled"


def test_a_cancel_that_overtakes_its_request_still_cancels_it(
    session: LegacySession, temporary: Callable[..., None]
) -> None:
    def hold(arguments: JSON, context: RequestContext) -> str:
        context.cancelled.wait(WAIT)
        return "stopped"

    temporary("tool", hold, name="hold_for_an_early_cancel")
    assert session.notify("notifications/cancelled", {"requestId": 19}).status_code == 202
    started = time.monotonic()
    reader = session.call_streaming("hold_for_an_early_cancel", request_id=19)
    assert [event.message for event in reader.until_end() if event.message] == []
    assert time.monotonic() - started < WAIT / 2
    # The cancel is spent: a later request reusing the id (which a client should not) runs.
    arguments = {"numbers": [1, 2]}
    added = session.result_of("tools/call", {"name": "add", "arguments": arguments}, 19)
    assert added["structuredContent"] == {"sum": 3}


def test_a_cancel_that_arrives_after_its_call_ended_does_not_cancel_a_later_reuse_of_the_id(
    session: LegacySession,
) -> None:
    arguments = {"numbers": [1, 2]}
    assert session.result_of("tools/call", {"name": "add", "arguments": arguments}, 31)
    # The client cancelled as the answer reached it: the cancel is late, not early.
    assert session.notify("notifications/cancelled", {"requestId": 31}).status_code == 202
    again = session.result_of("tools/call", {"name": "add", "arguments": arguments}, 31)
    assert again["structuredContent"] == {"sum": 3}
    # An id this process has not served stays an early cancel, as above.
    assert session.notify("notifications/cancelled", {"requestId": 32}).status_code == 202
    reader = session.call_streaming("add", arguments, request_id=32)
    assert [event.message for event in reader.until_end() if event.message] == []


def test_a_resumed_stream_does_not_keep_its_session_alive(
    session: LegacySession, temporary: Callable[..., None], settings: Any
) -> None:
    set_mcp(settings, SESSION_IDLE_SECONDS=1)
    release = threading.Event()
    # Its call may run nowhere any more (its worker stopped): the session expires all the same.
    resumed, _ = resumed_held_call(session, temporary, 25, lambda context: release.wait(WAIT))
    try:
        assert [event.message for event in resumed.until_end(timeout=3) if event.message] == []
    finally:
        release.set()


def test_a_resumed_stream_ends_when_its_session_is_gone(
    session: LegacySession, temporary: Callable[..., None]
) -> None:
    release = threading.Event()
    resumed, _ = resumed_held_call(session, temporary, 23, lambda context: release.wait(WAIT))
    # Cleaned away, say, while the call runs on a worker that then stops.
    Session.objects.filter(pk=session.id).delete()
    try:
        assert [event.message for event in resumed.until_end(timeout=3) if event.message] == []
    finally:
        release.set()


def progress(seq: int) -> JSON:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": seq}}


def test_a_resumed_stream_that_misses_a_delivery_ends_for_the_client_to_resume_again(
    session: LegacySession,
) -> None:
    from mcp_app.events import stream_channel
    from mcp_app.transport.legacy import Resume

    channel = stream_channel(mcp_app.site, session.id, "s1")
    resumed = Resume(mcp_app.site, session.id, "s1", 1, None)
    (second,) = resumed.notifications(channel, {"seq": 2, "message": progress(2)})
    assert second.id == "s1-2" and resumed.finished is False
    # Event 3 was lost on its way: event 4 is not sent in its place.
    assert resumed.notifications(channel, {"seq": 4, "message": progress(4)}) == []
    assert resumed.finished is True


def test_a_resumed_stream_steps_over_a_hole_in_the_log(session: LegacySession) -> None:
    from mcp_app.transport.legacy import Resume

    # Event 3 could not be kept: the log never has it, and resuming must not stop there.
    for seq in (1, 2, 4):
        StreamEvent.objects.create(
            session_id=session.id, stream="s2", seq=seq, message=progress(seq)
        )
    resumed = Resume(mcp_app.site, session.id, "s2", 1, None)
    assert [event.id for event in resumed.backlog()] == ["s2-2", "s2-4"]
    assert resumed.finished is False


def resumed_held_call(
    session: LegacySession,
    temporary: Callable[..., None],
    request_id: int,
    wait: Callable[[RequestContext], Any],
) -> tuple[StreamReader, str]:
    """Call a tool that lets go of its stream, then waits (``wait(context)``) and answers
    "released"; resume its stream. The resumed reader, once open, and the priming event's id."""

    def hold(arguments: JSON, context: RequestContext) -> str:
        context.close_stream()
        wait(context)
        return "released"

    name = f"hold_for_tests_{request_id}"
    temporary("tool", hold, name=name)
    reader = session.call_streaming(name, request_id=request_id)
    (priming,) = reader.until_end()
    assert priming.id is not None
    resumed = session.resume(priming.id)
    assert resumed.next().comment == "stream open"
    return resumed, priming.id


def test_a_call_cancelled_after_it_let_go_of_its_stream_ends_a_resumed_stream(
    session: LegacySession, temporary: Callable[..., None]
) -> None:
    resumed, _ = resumed_held_call(
        session, temporary, 18, lambda context: context.cancelled.wait(WAIT)
    )
    assert session.notify("notifications/cancelled", {"requestId": 18}).status_code == 202
    assert [event.message for event in resumed.until_end() if event.message] == []


def test_a_resumed_stream_whose_delivery_was_lost_ends_for_the_client_to_resume_again(
    session: LegacySession, temporary: Callable[..., None], settings: Any
) -> None:
    set_mcp(settings, KEEPALIVE_SECONDS=0.1)
    release = threading.Event()
    resumed, priming = resumed_held_call(session, temporary, 20, lambda c: release.wait(WAIT))
    stream = priming.rsplit("-", 1)[0]
    # An event in the log that its channel never carried (the backend dropped it).
    lost = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
    StreamEvent.objects.create(session_id=session.id, stream=stream, seq=5, message=lost)
    try:
        # Ended at its next renewal, with nothing more than keep-alives.
        assert [event.message for event in resumed.until_end(timeout=5) if event.message] == []
        again = session.resume(priming)
        assert again.next_message() == lost
    finally:
        release.set()


def test_a_call_running_when_its_session_is_deleted_leaves_no_events_behind(
    session: LegacySession, temporary: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_app import events

    returned, ended = threading.Event(), threading.Event()
    end = events.StreamLog.end

    def end_noted(self: events.StreamLog) -> None:
        end(self)
        ended.set()

    monkeypatch.setattr(events.StreamLog, "end", end_noted)

    def wait(context: RequestContext) -> None:
        context.cancelled.wait(WAIT)
        context.log("info", "still here")  # emitted after the session ended
        returned.set()

    resumed, _ = resumed_held_call(session, temporary, 19, wait)
    assert session.client.delete("/mcp", headers=session.headers()).status_code == 200
    assert returned.wait(WAIT)
    resumed.until_end()
    assert ended.wait(WAIT)  # the cancelled call marked where its stream ends, or would have
    events._written()
    assert not StreamEvent.objects.filter(session_id=session.id).exists()


def test_cancelling_another_request_id_leaves_the_call_waiting(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect(LATEST, {"elicitation": {}})
    reader = session.call_streaming("greet", request_id=16)
    request = reader.next_message()
    session.notify("notifications/cancelled", {"requestId": 999})
    session.answer(request["id"], accept_name())
    assert tool_text(reader.next_message()) == "Hello, Ada!"


def test_endless_input_requests_give_up_after_max_rounds(
    session: LegacySession, temporary: Callable[..., None]
) -> None:
    rounds: list[int] = []

    def forever(arguments: JSON, context: RequestContext) -> Any:
        count = (context.state or {}).get("round", 0) + 1
        rounds.append(count)
        return input_required(state={"round": count})

    temporary("tool", forever, name="forever_for_tests")
    result = session.result_of("tools/call", {"name": "forever_for_tests"})
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Gave up after 25 rounds of input"
    # 25 rounds, each given to the handler; the 26th ask is not made.
    assert rounds == list(range(1, 27))
    assert ToolCall.objects.get(name="forever_for_tests").rounds == 25


# -- 2025-03-26 batches -----------------------------------------------------------------------


def test_batch_of_two_requests_and_a_notification_answers_both_requests(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect("2025-03-26")
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": "two",
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"numbers": [1, 2]}},
        },
    ]
    response = session.post(batch)
    assert response.status_code == 200
    answers = response.json()
    assert [a["id"] for a in answers] == [1, "two"]
    assert answers[0]["result"] == {}
    # 2025-03-26 has no structured content: the result is in the text.
    assert "structuredContent" not in answers[1]["result"]
    assert json.loads(answers[1]["result"]["content"][0]["text"]) == {"sum": 3}
    assert Session.objects.get(pk=session.id).initialized is True


def test_a_request_id_used_twice_in_a_batch_runs_once(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect("2025-03-26")
    call = {"name": "add", "arguments": {"numbers": [1, 2]}}
    batch = [
        {"jsonrpc": "2.0", "id": 7, "method": "ping"},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call},
        {"jsonrpc": "2.0", "id": "7", "method": "tools/call", "params": call},  # another id
    ]
    answers = session.post(batch).json()
    assert answers[0] == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert answers[1] == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32600, "message": "Request id used twice in the batch"},
    }
    assert answers[2]["id"] == "7" and "result" in answers[2]


def test_batched_tool_call_answers_without_its_notifications(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect("2025-03-26")
    batch = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "test_tool_with_logging"},
        }
    ]
    answers = session.post(batch).json()
    assert len(answers) == 1
    assert tool_text(answers[0]) == "Logging test completed: sent 3 info messages."
    # No stream to resume: none of its events are kept.
    assert not StreamEvent.objects.filter(session_id=session.id).exists()


def test_subscriptions_are_not_served_by_a_server_that_turned_them_off(
    connect: Callable[..., LegacySession],
) -> None:
    from mcp_app.server import servers

    server = servers["default"]
    session = connect(LATEST)
    before, server.options.subscribe = server.options.subscribe, False
    try:
        answer = session.request("resources/subscribe", {"uri": "memo://a"}).json()
    finally:
        server.options.subscribe = before
    assert answer["error"]["code"] == -32601


def test_a_batch_entry_whose_id_cannot_be_read_is_answered_with_a_null_id(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect("2025-03-26")
    initialize = {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    batch = [
        1,
        [{"jsonrpc": "2.0", "id": 2, "method": "ping"}],
        # A notification, though named initialize: never answered.
        {"jsonrpc": "2.0", "method": "initialize", "params": initialize},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    answers = session.post(batch).json()
    # JSON-RPC 2.0: an error whose request's id could not be read has the id null.
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [
        (None, -32600),
        (None, -32600),
        (3, None),
    ]


def test_batch_of_notifications_only_is_202(connect: Callable[..., LegacySession]) -> None:
    session = connect("2025-03-26")
    batch = [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    ]
    response = session.post(batch)
    assert response.status_code == 202 and response.content == b""


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_batch_after_2025_03_26_is_400(connect: Callable[..., LegacySession], version: str) -> None:
    session = connect(version)
    response = session.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_batch_without_a_session_is_400() -> None:
    response = post_raw(Client(), [{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert response.status_code == 400


def test_initialize_inside_a_batch_is_refused(connect: Callable[..., LegacySession]) -> None:
    session = connect("2025-03-26")
    sessions_before = Session.objects.count()
    batch = [
        initialize_body("2025-03-26", request_id=1),
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]
    answers = session.post(batch).json()
    assert answers[0]["id"] == 1 and answers[0]["error"]["code"] == -32600
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert Session.objects.count() == sessions_before


def test_empty_batch_is_400(connect: Callable[..., LegacySession]) -> None:
    session = connect("2025-03-26")
    assert session.post([]).status_code == 400


def test_nested_batch_and_bad_members_get_error_entries(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect("2025-03-26")
    answers = session.post([[{"jsonrpc": "2.0", "id": 1, "method": "ping"}], {"id": 2}]).json()
    assert [a["error"]["code"] for a in answers] == [-32600, -32600]


def test_batched_call_needing_input_does_not_wait_for_a_request_never_sent(
    connect: Callable[..., LegacySession], settings: Any
) -> None:
    set_mcp(settings, INPUT_TIMEOUT_SECONDS=2)
    session = connect("2025-03-26", {"elicitation": {}})
    started = time.monotonic()
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet"}}]
    response = session.post(batch)
    elapsed = time.monotonic() - started
    # Either the request reached the client (an event stream) or the call failed at once.
    assert response["Content-Type"] == "text/event-stream" or elapsed < 1.0


# -- the GET stream ---------------------------------------------------------------------------


def test_get_stream_carries_updates_of_subscribed_resources_only(
    session: LegacySession,
) -> None:
    stream = session.listen()
    session.result_of("resources/subscribe", {"uri": WATCHED})
    mcp_app.site.notify_resource_updated("test://static-text")
    mcp_app.site.notify_resource_updated(WATCHED)
    assert stream.next_message() == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": WATCHED},
    }


def test_subscriptions_made_before_the_stream_opened_apply(session: LegacySession) -> None:
    session.result_of("resources/subscribe", {"uri": WATCHED})
    stream = session.listen()
    mcp_app.site.notify_resource_updated(WATCHED)
    assert stream.next_message()["params"] == {"uri": WATCHED}


def test_get_stream_announces_tool_list_changes(session: LegacySession) -> None:
    stream = session.listen()

    def passing_tool(arguments: JSON, context: RequestContext) -> str:
        return "here for a moment"

    mcp_app.site.add_tool(passing_tool, name="passing_tool_for_tests")
    try:
        changed = stream.next_message()
    finally:
        mcp_app.site.remove_tool("passing_tool_for_tests")
    assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert stream.next_message() == changed


def test_after_a_gap_in_delivery_every_list_and_subscribed_resource_is_announced(
    session: LegacySession,
) -> None:
    session.result_of("resources/subscribe", {"uri": WATCHED})
    stream = session.listen()
    mcp_app.site.announce(dict(GAP), "lists")
    lists = [stream.next_message()["method"] for _ in range(3)]
    assert lists == [
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
    ]
    mcp_app.site.announce(dict(GAP), "updated")
    assert stream.next_message() == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": WATCHED},
    }


def test_after_a_gap_in_the_sessions_messages_one_get_stream_carries_them(
    session: LegacySession,
) -> None:
    outbox = mcp_app.site.channel(f"outbox:{session.id}")
    taken: list[str] = []
    unsubscribe = backend().subscribe(
        [outbox], lambda channel, message: taken.append(message.get("takeover", ""))
    )
    try:
        streams = [session.listen(), session.listen()]
        deadline = time.monotonic() + WAIT
        while len([t for t in taken if t]) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        del taken[:]
        # Takeovers or handbacks may have been lost: each stream takes over again.
        backend().publish(outbox, dict(GAP))
        while len([t for t in taken if t]) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len([t for t in taken if t]) == 2
        time.sleep(0.2)  # each stream hears both
    finally:
        unsubscribe()
    mcp_app.site.announce({"kinds": ["prompts"]}, "lists")
    got = []
    for stream in streams:
        try:
            got.append(stream.next_message(0.5)["method"])
        except AssertionError:
            got.append(None)
    # The last to take over carries the messages, alone.
    assert got.count("notifications/prompts/list_changed") == 1 and got.count(None) == 1


def test_unsubscribed_uri_gets_no_more_updates(session: LegacySession) -> None:
    session.result_of("resources/subscribe", {"uri": WATCHED})
    stream = session.listen()
    session.result_of("resources/unsubscribe", {"uri": WATCHED})
    mcp_app.site.notify_resource_updated(WATCHED)
    # A list change afterwards is the first thing the stream carries.
    mcp_app.site.announce({"kinds": ["prompts"]}, "lists")
    assert stream.next_message()["method"] == "notifications/prompts/list_changed"


def test_an_open_get_stream_keeps_its_session_from_expiring(
    session: LegacySession, settings: Any
) -> None:
    set_mcp(settings, SESSION_IDLE_SECONDS=1)
    stream = session.listen()
    time.sleep(1.5)
    # The client made no request meanwhile, but listened all along.
    recent = timezone.now() - timedelta(seconds=1)
    assert Session.objects.filter(pk=session.id, last_seen__gte=recent).exists()
    assert stream.ended is False


def test_a_get_stream_ends_when_its_session_is_gone(session: LegacySession) -> None:
    stream = session.listen()
    # Cleaned away as expired, say, while the client still listens.
    Session.objects.filter(pk=session.id).delete()
    assert [event.message for event in stream.until_end(timeout=3) if event.message] == []


def never(user: Any) -> bool:
    return False


def broken(user: Any) -> bool:
    raise RuntimeError("the permission check failed")


@pytest.mark.parametrize("permission", [never, broken])
def test_a_subscribed_resource_restricted_later_is_no_longer_announced(
    session: LegacySession, permission: Any, caplog: pytest.LogCaptureFixture
) -> None:
    uri = "test://restricted-later"

    def text(context: RequestContext) -> str:
        return "for now"

    mcp_app.site.add_resource(text, uri=uri, name="restricted_later")
    try:
        session.result_of("resources/subscribe", {"uri": uri})
        session.result_of("resources/subscribe", {"uri": WATCHED})
        stream = session.listen()
        mcp_app.site.notify_resource_updated(uri)
        assert stream.next_message()["params"] == {"uri": uri}
        mcp_app.site.remove_resource(uri)
        mcp_app.site.add_resource(text, uri=uri, name="restricted_later", permission=permission)
        # At once: the change of resources makes the stream check again before it goes on.
        mcp_app.site.notify_resource_updated(uri)
        mcp_app.site.notify_resource_updated(WATCHED)
        updated = stream.next_message()
        while updated["method"] == "notifications/resources/list_changed":
            updated = stream.next_message()
        # The update of the restricted resource was not sent; the next one was. A check that
        # fails holds the updates back, and the stream goes on.
        assert updated["params"] == {"uri": WATCHED}
        held_back = f"Could not check access to {uri}; its updates are held back"
        assert (held_back in caplog.text) is (permission is broken)
    finally:
        mcp_app.site.remove_resource(uri)


def test_session_outbox_messages_go_out_on_the_get_stream(session: LegacySession) -> None:
    stream = session.listen()
    outbox = mcp_app.site.channel(f"outbox:{session.id}")
    backend().publish(outbox, {"unrelated": True})
    ping = {"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}
    backend().publish(outbox, {"send": ping})
    assert stream.next_message() == ping


def test_get_stream_ignores_changes_of_kinds_it_does_not_know(session: LegacySession) -> None:
    stream = session.listen()
    mcp_app.site.announce({"kinds": ["widgets"]}, "lists")
    mcp_app.site.announce({"kinds": ["templates"]}, "lists")
    assert stream.next_message()["method"] == "notifications/resources/list_changed"


def test_a_stream_that_carries_the_messages_again_knows_the_subscriptions_made_meanwhile(
    session: LegacySession,
) -> None:
    first, second = session.listen(), session.listen()
    session.result_of("resources/subscribe", {"uri": WATCHED})
    # Until the server has heard the close, a message may still go to the closing stream.
    close_and_hand_back(session, second)
    mcp_app.site.announce({"kinds": ["tools"]}, "lists")
    assert first.next_message()["method"] == "notifications/tools/list_changed"
    mcp_app.site.notify_resource_updated(WATCHED)
    assert first.next_message() == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": WATCHED},
    }


def test_a_get_stream_that_missed_a_subscription_message_learns_it_at_its_renewal(
    session: LegacySession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_app.transport import legacy

    stream = session.listen()
    told = legacy.tell

    def losing(channel: str, message: JSON) -> None:
        if "subscriptions" not in message:
            told(channel, message)

    # Lost on its way (a backend reconnecting drops messages); the session keeps it.
    monkeypatch.setattr(legacy, "tell", losing)
    session.result_of("resources/subscribe", {"uri": WATCHED})
    assert Session.objects.get(pk=session.id).subscriptions == [WATCHED]
    time.sleep(0.5)  # past a renewal (KEEPALIVE_SECONDS is 0.2 here)
    mcp_app.site.notify_resource_updated(WATCHED)
    assert stream.next_message() == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": WATCHED},
    }


def test_a_notification_goes_on_only_one_of_two_get_streams(session: LegacySession) -> None:
    first, second = session.listen(), session.listen()
    mcp_app.site.announce({"kinds": ["tools"]}, "lists")
    received = 0
    for stream in (first, second):
        try:
            stream.next_message(timeout=1.0)
            received += 1
        except AssertionError:
            pass
    assert received == 1


def close_and_hand_back(session: LegacySession, reader: StreamReader) -> None:
    """Close a GET stream, and wait until the server has told the session's others (which it
    does once the stream has ended, in a thread of its own): a message sent before that goes to
    the closing stream."""
    handed_back = threading.Event()
    outbox = mcp_app.site.channel(f"outbox:{session.id}")
    unsubscribe = backend().subscribe(
        [outbox], lambda channel, message: "handback" in message and handed_back.set()
    )
    try:
        reader.close()
        assert handed_back.wait(WAIT), "the closed stream did not hand back"
    finally:
        unsubscribe()


def test_when_the_newest_get_stream_closes_the_one_before_it_carries_the_messages(
    session: LegacySession,
) -> None:
    first, second, third = session.listen(), session.listen(), session.listen()
    close_and_hand_back(session, third)
    mcp_app.site.announce({"kinds": ["tools"]}, "lists")
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert second.next_message() == changed
    close_and_hand_back(session, second)
    mcp_app.site.announce({"kinds": ["prompts"]}, "lists")
    # Nothing went to the first stream while another one carried the messages.
    assert first.next_message()["method"] == "notifications/prompts/list_changed"


def test_an_older_get_stream_closing_leaves_the_newest_one_active(
    session: LegacySession,
) -> None:
    first, second = session.listen(), session.listen()
    first.close()
    mcp_app.site.announce({"kinds": ["tools"]}, "lists")
    assert second.next_message()["method"] == "notifications/tools/list_changed"


# -- resumption -------------------------------------------------------------------------------


def call_reconnection(session: LegacySession, request_id: int = 21) -> tuple[str, StreamReader]:
    """Call ``test_reconnection``; its stream closes after the priming event."""
    reader = session.call_streaming("test_reconnection", request_id=request_id)
    assert reader.answered() == 200
    events = reader.until_end()
    assert len(events) == 1
    priming = events[0]
    assert priming.data == "" and priming.retry == 1000 and priming.id
    return priming.id, reader


def wait_for_event_rows(session_id: str, count: int) -> None:
    deadline = time.monotonic() + WAIT
    while StreamEvent.objects.filter(session_id=session_id).count() < count:
        assert time.monotonic() < deadline, "the call did not finish in time"
        time.sleep(0.02)


def test_closed_stream_resumes_with_the_result_while_the_call_runs(
    session: LegacySession,
) -> None:
    priming_id, _ = call_reconnection(session)
    stream = priming_id.rpartition("-")[0]
    resumed = session.resume(priming_id)
    assert resumed.answered() == 200
    events = [event for event in resumed.until_end() if event.message is not None]
    assert [event.id for event in events] == [f"{stream}-1"]
    final = events[0].message
    assert final is not None and final["id"] == 21
    assert tool_text(final) == "Reconnection test completed."


def test_resuming_after_the_call_finished_replays_the_result(session: LegacySession) -> None:
    priming_id, _ = call_reconnection(session)
    wait_for_event_rows(session.id, 1)
    resumed = session.resume(priming_id)
    messages = [event.message for event in resumed.until_end() if event.message is not None]
    assert [m["id"] for m in messages] == [21]


def test_resuming_from_a_later_event_replays_only_what_followed(session: LegacySession) -> None:
    response = session.request("tools/call", {"name": "test_tool_with_logging"}, request_id=22)
    events = stream_events(response)
    assert events[2].id is not None
    resumed = session.resume(events[2].id)
    replayed = [event for event in resumed.until_end() if event.message is not None]
    assert [event.id for event in replayed] == [events[3].id, events[4].id]
    assert replayed[-1].message is not None and replayed[-1].message["id"] == 22


def test_resumed_stream_follows_the_call_live_and_skips_stale_events(
    session: LegacySession, temporary: Callable[..., None]
) -> None:
    release = threading.Event()
    resumed, priming_id = resumed_held_call(
        session, temporary, 24, lambda context: release.wait(WAIT)
    )
    stream = priming_id.rpartition("-")[0]
    # An event the client already has (an old number) is not sent again.
    stale = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
    backend().publish(mcp_app.site.channel(f"stream:{stream}"), {"seq": 0, "message": stale})
    release.set()
    final = resumed.next_message()
    assert final["id"] == 24 and tool_text(final) == "released"
    assert resumed.until_end() == []


@pytest.mark.parametrize("last_event_id", ["nonsense", "stream-", "-3", "feedfacefeedface-5"])
def test_unknown_last_event_id_is_400(session: LegacySession, last_event_id: str) -> None:
    headers = session.headers(**{"Last-Event-ID": last_event_id})
    response = session.client.get("/mcp", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_last_event_id_past_the_streams_end_is_400(session: LegacySession) -> None:
    events = stream_events(session.request("tools/call", {"name": "test_tool_with_logging"}))
    stream = (events[0].id or "").rpartition("-")[0]
    assert [event.id for event in events] == [f"{stream}-{n}" for n in range(5)]
    headers = session.headers(**{"Last-Event-ID": f"{stream}-99"})
    response = session.client.get("/mcp", headers=headers)
    response.close()
    assert response.status_code == 400


def test_another_session_cannot_resume_from_a_later_event(
    connect: Callable[..., LegacySession],
) -> None:
    owner, other = connect(), connect()
    response = owner.request("tools/call", {"name": "test_tool_with_logging"})
    events = stream_events(response)
    assert events[1].id is not None
    headers = other.headers(**{"Last-Event-ID": events[1].id})
    assert other.client.get("/mcp", headers=headers).status_code == 400


def test_another_session_cannot_resume_from_the_priming_event(
    connect: Callable[..., LegacySession],
) -> None:
    owner, other = connect(), connect()
    priming_id, _ = call_reconnection(owner)
    headers = other.headers(**{"Last-Event-ID": priming_id})
    response = other.client.get("/mcp", headers=headers)
    response.close()
    assert response.status_code in (400, 404)


def test_made_up_stream_with_event_zero_is_400(session: LegacySession) -> None:
    headers = session.headers(**{"Last-Event-ID": "feedfacefeedface-0"})
    response = session.client.get("/mcp", headers=headers)
    response.close()
    assert response.status_code == 400


def test_last_event_id_with_a_superscript_digit_is_400(session: LegacySession) -> None:
    client = Client(raise_request_exception=False)
    response = client.get("/mcp", headers=session.headers(**{"Last-Event-ID": "abc-²"}))
    assert response.status_code == 400


def test_close_stream_before_2025_11_25_keeps_the_stream_until_the_result(
    connect: Callable[..., LegacySession],
) -> None:
    session = connect("2025-06-18")
    # Without a priming event there is nothing to resume from: the call answers in full.
    response = session.request("tools/call", {"name": "test_reconnection"}, request_id=23)
    assert response["Content-Type"] == "application/json"
    assert response.json()["id"] == 23
    assert "isError" not in response.json()["result"]


def test_a_log_message_with_a_lone_surrogate_goes_out_through_redis(
    session: LegacySession, settings: Any, temporary: Callable[..., None]
) -> None:
    url = require_redis_url()

    def odd_log(arguments: JSON, context: RequestContext) -> str:
        context.log("info", "lone \ud800 here")
        return "done"

    temporary("tool", odd_log, name="odd_log")
    set_mcp(settings, DELIVERY_BACKEND="mcp_app.delivery.redis.RedisBackend", REDIS_URL=url)
    try:
        response = session.request("tools/call", {"name": "odd_log"}, request_id=31)
        messages = sse_messages(response)
    finally:
        backend().close()  # its listener thread must not outlive the test
    logs = [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]
    # The stream sends U+FFFD for what UTF-8 cannot carry; the call still completes.
    assert logs == ["lone \ufffd here"]
    assert tool_text(messages[-1]) == "done"


def test_a_handler_that_writes_then_logs_is_not_held_by_its_own_transaction(
    session: LegacySession, temporary: Callable[..., None]
) -> None:
    from django.contrib.auth.models import Group

    def writer(arguments: dict[str, Any], context: Any) -> str:
        # On SQLite the attempt's transaction now holds the database's write lock, which the
        # stream events' writer needs too.
        Group.objects.create(name="written-by-a-tool")
        context.log("info", "wrote a row")
        return "done"

    temporary("tool", writer, name="writer_for_tests")
    started = time.monotonic()
    response = session.request("tools/call", {"name": "writer_for_tests"}, request_id=3)
    messages = sse_messages(response)
    assert time.monotonic() - started < 3
    assert messages[-1]["result"]["content"][0]["text"] == "done"
    assert Group.objects.filter(name="written-by-a-tool").exists()
    # The log message is kept for resumption once the transaction has ended.
    deadline = time.monotonic() + 5
    while StreamEvent.objects.filter(message__method="notifications/message").count() < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_delete_ends_a_resumed_stream_whose_call_runs_nowhere(session: LegacySession) -> None:
    import mcp_app
    from mcp_app.events import StreamLog

    # A call that streamed, then its worker went away before it answered.
    log = StreamLog(mcp_app.site, session.id)
    progress = {"progressToken": 1, "progress": 1}
    log.append({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    reader = session.resume(f"{log.stream}-0")
    assert reader.next_message()["method"] == "notifications/progress"
    assert session.client.delete("/mcp", headers=session.headers()).status_code == 200
    reader.until_end(timeout=5)


def test_a_resumed_stream_whose_call_runs_nowhere_is_answered_with_an_error(
    session: LegacySession, settings: Any
) -> None:
    import mcp_app
    from mcp_app import events
    from mcp_app.events import StreamLog

    set_mcp(settings, KEEPALIVE_SECONDS=0.1)
    # A call that streamed, then its worker ended before it answered.
    log = StreamLog(mcp_app.site, session.id, request_id=31)
    progress = {"progressToken": 1, "progress": 1}
    log.append({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    log.release()
    StreamEvent.objects.filter(stream=log.stream).update(
        created=timezone.now() - timedelta(seconds=events.LEASE_SECONDS + 1)
    )
    reader = session.resume(f"{log.stream}-1")
    answer = reader.next_message()
    assert answer == {
        "jsonrpc": "2.0",
        "id": 31,
        "error": {
            "code": -32603,
            "message": "The process serving the request ended before it answered",
        },
    }
    reader.until_end(timeout=5)


def test_a_stateless_request_naming_a_session_is_served_statelessly() -> None:
    body, headers = modern_request("server/discover")
    headers["Mcp-Session-Id"] = "abc"  # the stateless revision has none: ignored
    response = Client().post(
        "/mcp", data=json.dumps(body), content_type="application/json", headers=headers
    )
    assert response.status_code == 200, response.content
    assert "Mcp-Session-Id" not in response.headers
    assert "2026-07-28" in response.json()["result"]["supportedVersions"]
    # A batch on that revision is no request of its, whatever session it names.
    batch = Client().post(
        "/mcp", data=json.dumps([body]), content_type="application/json", headers=headers
    )
    assert batch.status_code == 400
    assert batch.json()["error"]["code"] == -32600


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": []},
            "initialize's params must be an object",
        ),
        (
            {"jsonrpc": "2.0", "method": "initialize", "params": {}},
            "initialize must be a JSON-RPC 2.0 request with an id",
        ),
        (
            {"jsonrpc": "1.0", "id": "a", "method": "initialize", "params": {}},
            "initialize must be a JSON-RPC 2.0 request with an id",
        ),
        (
            {"jsonrpc": "2.0", "id": 1.5, "method": "initialize", "params": {}},
            "initialize must be a JSON-RPC 2.0 request with an id",
        ),
    ],
)
def test_an_initialize_that_is_no_request_says_what_is_wrong(body: Any, problem: str) -> None:
    response = post_raw(Client(), body)
    assert response.status_code == 400
    answer = response.json()
    assert answer["error"] == {"code": -32600, "message": problem}
    # Answered to its id when it has one a client could match (not 1.5).
    if isinstance(body.get("id"), int | str):
        assert answer["id"] == body["id"]
    else:
        assert "id" not in answer


def test_the_cancels_and_ended_calls_remembered_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_app.transport import legacy as legacy_transport

    monkeypatch.setattr(legacy_transport, "EARLY_CANCEL_LIMIT", 3)
    cancels = legacy_transport.Cancels()
    for request_id in range(5):
        cancels.add("s", request_id)
    assert list(cancels._seen) == [("s", "2"), ("s", "3"), ("s", "4")]
    for request_id in range(10, 15):
        cancels.running("s", request_id, lambda: None)()
    assert list(cancels._ended) == [("s", "12"), ("s", "13"), ("s", "14")]
    # A cancel of a call that ended lately is not remembered; one of a call not seen is.
    cancels.add("s", 14)
    cancels.add("s", 15)
    assert ("s", "14") not in cancels._seen and ("s", "15") in cancels._seen
