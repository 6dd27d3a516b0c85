"""Test clients that speak MCP to this site's servers through the real Django view, no network."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import inspect
import json
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Mapping,
)
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar, cast

from asgiref.sync import async_to_sync, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import AsyncClient, Client
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, resolve, reverse

from . import __version__
from .input import ELICITATION_FORMS, ELICITATION_URLS, INPUT_METHODS
from .protocol import versions as revisions
from .protocol.modern import NAMED, encode_header_value, header_text, mirrored
from .registry import header_annotations
from .server import Server, servers, site
from .transport.listen import LISTS
from .transport.views import ENDPOINT_OF

__all__ = ["AsyncMCPClient", "MCPClient", "MCPClientError"]

JSON = dict[str, Any]
T = TypeVar("T")
InputHandler = Callable[[JSON], Any]

logger = logging.getLogger("mcp_app.testing")

#: The client capability declared for each input request method a handler is given for.
HANDLER_CAPABILITIES: dict[str, JSON] = {
    "elicitation/create": {"elicitation": {"form": {}, "url": {}}},
    "sampling/createMessage": {"sampling": {}},
    "roots/list": {"roots": {}},
}
#: Methods whose name, URI or task id travels in ``Mcp-Name``, and the param that holds it.
NAMED_PARAMS = NAMED
ACCEPT = "application/json, text/event-stream"
#: How many times one request's stream is resumed (GET with ``Last-Event-ID``) at most.
RESUME_ATTEMPTS = 5
#: Least seconds a cancel sent after a timeout is given to be accepted.
CANCEL_TIMEOUT = 5.0
#: Seconds allowed beyond a bounded operation for the private event loop to hand back its result.
PORTAL_MARGIN = 5.0


class MCPClientError(Exception):
    """A request the test client could not complete.

    ``kind`` says why:

    * ``"protocol"``: the server answered with a JSON-RPC error (``code``, ``message``, ``data``);
    * ``"unsupported"``: the server asked for input this client has no handler for (2026-07-28),
      or answered ``initialize`` with a version not in ``versions``;
    * ``"max_rounds"``: the server still asked for input after ``max_rounds`` answered rounds;
    * ``"timeout"``: a stream did not deliver in time (``data`` holds what did arrive);
    * ``"transport"``: the HTTP answer is not a valid MCP answer.

    ``status`` is the HTTP status of the answer, when there was one; a JSON-RPC error is kind
    ``"protocol"`` whatever the status (a request in an ended session: 404, code -32600).
    ``method`` is the JSON-RPC method, or the HTTP verb of a GET or DELETE.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        code: int | None = None,
        data: Any = None,
        status: int | None = None,
        method: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.code = code
        self.data = data
        self.status = status
        self.method = method

    def __str__(self) -> str:
        details = [f"code {self.code}"] if self.code is not None else []
        if self.status is not None:
            details.append(f"HTTP {self.status}")
        if self.method is not None:
            details.append(self.method)
        suffix = f" ({', '.join(details)})" if details else ""
        return f"{self.kind}: {self.message}{suffix}"

    def __repr__(self) -> str:
        fields = [f"kind={self.kind!r}"]
        for name in ("code", "message", "data", "status", "method"):
            value = getattr(self, name)
            if value is not None:
                fields.append(f"{name}={value!r}")
        return f"MCPClientError({', '.join(fields)})"


# -- routing -------------------------------------------------------------------------------


def _find_server(server: Server | str | None) -> Server:
    if server is None:
        return site
    if isinstance(server, Server):
        return server
    if server not in servers:
        # A server made in the URLconf (path("mcp", Server(...).urls)) exists once it loads.
        from django.urls import get_resolver

        get_resolver().url_patterns  # noqa: B018
    try:
        return servers[server]
    except KeyError:
        known = ", ".join(repr(name) for name in sorted(servers)) or "none"
        raise ValueError(f"No MCP server named {server!r}; known servers: {known}") from None


def _serves(view: Any, server: Server) -> bool:
    """Whether ``view`` is an endpoint built for this server (by ``server.urls``)."""
    return getattr(view, ENDPOINT_OF, None) is server


def _scan(patterns: Iterable[Any], namespaces: list[str], server: Server) -> str | None:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = [*namespaces, pattern.namespace] if pattern.namespace else namespaces
            found = _scan(pattern.url_patterns, inner, server)
            if found is not None:
                return found
        elif isinstance(pattern, URLPattern) and pattern.name and _serves(pattern.callback, server):
            try:
                return reverse(":".join([*namespaces, pattern.name]))
            except NoReverseMatch:
                continue
    return None


def endpoint_path(server: Server) -> str:
    """The URL path at which the current URLconf serves ``server``.

    Raises:
        ImproperlyConfigured: the URLconf does not include ``server.urls``.
    """
    try:
        path = reverse(f"{server.name}:endpoint")
    except NoReverseMatch:
        pass
    else:
        if "mcp_app" in resolve(path).app_names:
            return path
    found = _scan(get_resolver().url_patterns, [], server)
    if found is None:
        raise ImproperlyConfigured(
            f"{server!r} is not routed by ROOT_URLCONF {settings.ROOT_URLCONF!r}: add "
            f"path('mcp', <server>.urls) to the URLconf (or override ROOT_URLCONF in the test)"
        )
    return found


def _is_async_view(path: str) -> bool:
    return iscoroutinefunction(resolve(path).func)


# -- wire helpers --------------------------------------------------------------------------


def _merge(base: JSON, extra: Mapping[str, Any]) -> JSON:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _ref(ref: Mapping[str, Any] | str) -> JSON:
    if isinstance(ref, Mapping):
        return dict(ref)
    if "{" in ref or "://" in ref:
        # A URI template or a URL: a resource. (A prompt's name may hold a colon, so any
        # other URI is given as a ref dict.)
        return {"type": "ref/resource", "uri": ref}
    return {"type": "ref/prompt", "name": ref}


def _declared(handlers: Iterable[str], version: str) -> JSON:
    """The capabilities that the input handlers call for, as ``version`` spells them."""
    declared: JSON = {}
    for method in handlers:
        capability = HANDLER_CAPABILITIES[method]
        if method == "elicitation/create" and version < ELICITATION_FORMS:
            continue  # the revision has no elicitation
        if method == "elicitation/create" and version < ELICITATION_URLS:
            # Before 2025-11-25 elicitation had no modes: an empty object meant forms.
            capability = {"elicitation": {}}
        declared = _merge(declared, capability)
    return declared


def _listen_filter(notifications: Mapping[str, Any] | Iterable[str] | str) -> JSON:
    if isinstance(notifications, Mapping):
        return dict(notifications)
    if isinstance(notifications, str):
        return {notifications: True}
    return {name: True for name in notifications}


def _is_response(message: JSON) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


class _EventParser:
    """Splits ``text/event-stream`` bytes into the JSON messages of their ``data`` fields.

    It also keeps what resuming a stream needs: the last event id (a priming event with empty
    data sets it too) and the ``retry`` delay the server asked for.
    """

    def __init__(self) -> None:
        self._ready: deque[JSON] = deque()
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._buffer = ""
        self._after_cr = False
        #: Events read in full, comments and keep-alives included.
        self.events = 0
        self.last_id: str | None = None
        self.retry_ms: int | None = None

    def restart(self) -> None:
        """Read a new connection: a cut-off event of the old one is dropped, the id kept."""
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._buffer = ""
        self._after_cr = False

    def feed(self, chunk: bytes) -> None:
        """Take more bytes of the stream.

        Raises:
            MCPClientError: ``transport``, when an event's data is not a JSON object.
        """
        text = self._decoder.decode(chunk)
        if self._after_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split between chunks
        if text:
            self._after_cr = text.endswith("\r")
        # Lines end in CRLF, LF or CR alone, as the event stream format allows.
        self._buffer += text.replace("\r\n", "\n").replace("\r", "\n")
        while "\n\n" in self._buffer:
            block, self._buffer = self._buffer.split("\n\n", 1)
            self.events += 1
            self._event(block)

    def _event(self, block: str) -> None:
        lines: list[str] = []
        for line in block.split("\n"):
            name, _, value = line.partition(":")  # a comment line has an empty name
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                lines.append(value)
            elif name == "id" and "\0" not in value:
                self.last_id = value or None
            elif name == "retry" and value.isdigit():
                self.retry_ms = int(value)
        data = "\n".join(lines)
        if not data.strip():
            return  # a comment, a keep-alive, or a priming event
        try:
            message = json.loads(data)
        except ValueError:
            shown = data[:200]
            raise MCPClientError("transport", f"Event data is not JSON: {shown!r}") from None
        if not isinstance(message, dict):
            raise MCPClientError("transport", f"Event data is not a message: {data[:200]!r}")
        self._ready.append(message)

    def pop(self) -> JSON | None:
        return self._ready.popleft() if self._ready else None


# -- what a client operation asks of its driver --------------------------------------------
#
# Every operation is a generator yielding these commands; MCPClient performs them with
# django.test.Client and AsyncMCPClient with django.test.AsyncClient, so the protocol logic
# (headers, sessions, input, pagination, event streams) is written once.


@dataclass(frozen=True)
class _Open:
    """Send an HTTP request; the driver answers with an ``_Opened``.

    A POST carries the JSON-RPC message ``body``; a GET (a stream) and a DELETE carry none.
    ``timeout`` bounds the wait for the answer instead of the client's own.
    """

    body: JSON | None
    headers: dict[str, str]
    verb: str = "POST"
    timeout: float | None = None

    @property
    def label(self) -> str:
        """What an error names: the JSON-RPC method, or the HTTP verb of a bodiless request."""
        if self.body is not None and isinstance(self.body.get("method"), str):
            return str(self.body["method"])
        return self.verb


@dataclass(frozen=True)
class _Read:
    """Read the next chunk of a stream: bytes, ``None`` at its end, or ``TimeoutError``."""

    stream: Any
    timeout: float


@dataclass(frozen=True)
class _Shut:
    """Close a stream (the wire's way to cancel)."""

    stream: Any


@dataclass(frozen=True)
class _Call:
    """Call a user function (an input handler, ``during``); async ones are awaited."""

    function: Callable[..., Any]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class _Wait:
    """Sleep: the delay a server asks for before a stream is resumed."""

    seconds: float


@dataclass(frozen=True)
class _Opened:
    """What came back from an ``_Open``: a JSON message, or an event stream to read."""

    status: int
    message: Any = None
    text: str = ""
    stream: Any = None
    #: The response headers, by lower-case name.
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def answer(self) -> Any:
        """The JSON message, else the body's text."""
        return self.message if self.message is not None else self.text


_Command: TypeAlias = _Open | _Read | _Shut | _Call | _Wait
Op: TypeAlias = Generator[_Command, Any, T]


def _opened(response: Any, stream: Callable[[Any], Any]) -> _Opened:
    status = int(response.status_code)
    headers = {str(name).lower(): str(value) for name, value in response.items()}
    if getattr(response, "streaming", False):
        if response.get("Content-Type", "").startswith("text/event-stream"):
            return _Opened(status, stream=stream(response), headers=headers)
        if getattr(response, "is_async", False):
            text = f"<{response.get('Content-Type', '')} stream>"
            return _Opened(status, text=text, headers=headers)
        text = b"".join(response.streaming_content).decode(errors="replace")
        return _Opened(status, text=text, headers=headers)
    text = response.content.decode(errors="replace")
    try:
        message = json.loads(text) if text else None
    except ValueError:
        message = None
    return _Opened(status, message, text, headers=headers)


def _http(client: Any, command: _Open, path: str) -> Any:
    """Send ``command`` with a Django test client: a response, or (``AsyncClient``) its awaitable."""
    if command.verb == "POST":
        return client.post(
            path,
            data=json.dumps(command.body),
            content_type="application/json",
            headers=command.headers,
        )
    if command.verb == "GET":
        return client.get(path, headers=command.headers)
    if command.verb == "DELETE":
        return client.delete(path, headers=command.headers)
    raise ValueError(f"Unknown HTTP verb {command.verb!r}")


def _timed_out(command: _Open, seconds: float) -> MCPClientError:
    return MCPClientError(
        "timeout", f"No HTTP answer within {seconds} seconds", method=command.label
    )


# -- streams -------------------------------------------------------------------------------


class _ThreadStream:
    """A synchronous streaming body, pumped by a thread so that reads can time out."""

    def __init__(self, response: Any) -> None:
        self._queue: queue.Queue[bytes | BaseException | None] = queue.Queue()
        self._stop = threading.Event()
        self._ended = False
        thread = threading.Thread(
            target=self._pump, args=(response,), name="mcp-test-stream", daemon=True
        )
        thread.start()

    def _pump(self, response: Any) -> None:
        finished = False
        try:
            for chunk in response.streaming_content:
                self._queue.put(bytes(chunk))
                if self._stop.is_set():
                    break
            else:
                finished = True
        except BaseException as exc:  # handed to the reader
            self._queue.put(exc)
        finally:
            if not finished:
                # Closing the response closes its generators, as a WSGI server does.
                response.close()
        self._queue.put(None)

    def read(self, timeout: float) -> bytes | None:
        if self._ended:
            return None
        try:
            item = self._queue.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            raise TimeoutError from None
        if isinstance(item, BaseException):
            self._ended = True
            raise item
        if item is None:
            self._ended = True
        return item

    def close(self) -> None:
        # The pump closes the body when it next gets control (a chunk or a keep-alive).
        self._stop.set()


async def _next_chunk(iterator: AsyncIterator[bytes]) -> bytes:
    return await anext(iterator)


class _AsyncStream:
    """An asynchronous streaming body, read on the event loop it runs on."""

    def __init__(self, response: Any) -> None:
        self._iterator: AsyncIterator[bytes] = aiter(response.streaming_content)
        self._ended = False

    async def aread(self, timeout: float) -> bytes | None:
        if self._ended:
            return None
        try:
            return bytes(await asyncio.wait_for(_next_chunk(self._iterator), timeout))
        except StopAsyncIteration:
            self._ended = True
            return None
        except BaseException:
            # A cancelled or failed read ends the body (its generators have unwound).
            self._ended = True
            raise

    async def aclose(self) -> None:
        """End the body as an ASGI server does when the client leaves: cancel its pending read.

        Closing the outer iterator would not reach the view's own generator, which holds the
        subscription; a cancelled read unwinds all of them.
        """
        for _ in range(1000):
            if self._ended:
                return
            task = asyncio.ensure_future(_next_chunk(self._iterator))
            done, _ = await asyncio.wait({task}, timeout=0.05)
            if not done:
                task.cancel()
                with contextlib.suppress(BaseException):  # the cancellation, or a last error
                    await task
                self._ended = True
                return
            if task.cancelled() or task.exception() is not None:
                self._ended = True


class _Portal:
    """A private event loop in a daemon thread, shared by every ``MCPClient`` of the process.

    ``MCPClient`` sends requests to async views from a worker thread of this loop, so the view
    and its streams run on a loop that outlives the response, as they do under an ASGI server;
    a plain ``django.test.Client`` runs them on a loop that closes when the view returns.
    """

    _lock = threading.Lock()
    _instance: _Portal | None = None

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="mcp-test-portal", daemon=True).start()

    @classmethod
    def get(cls) -> _Portal:
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coroutine`` on the loop and wait for it, at most ``timeout`` seconds.

        Raises:
            TimeoutError: it did not finish in time (it is cancelled).
        """
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise


class _PortalStream:
    """An asynchronous body of an async view, read from synchronous code through the portal."""

    def __init__(self, portal: _Portal, response: Any) -> None:
        self._portal = portal
        self._stream = _AsyncStream(response)

    def read(self, timeout: float) -> bytes | None:
        # The read times out by itself; the margin only guards against a stuck loop.
        return self._portal.run(self._stream.aread(timeout), timeout + PORTAL_MARGIN)

    def close(self) -> None:
        self._portal.run(self._stream.aclose(), PORTAL_MARGIN)


# -- the protocol --------------------------------------------------------------------------


def _error_of(status: int, message: Any, method: str) -> MCPClientError | None:
    """The ``protocol`` error that ``message`` carries, if it is a JSON-RPC error."""
    if not isinstance(message, dict) or not isinstance(message.get("error"), dict):
        return None
    error = message["error"]
    return MCPClientError(
        "protocol",
        str(error.get("message", "")),
        code=error.get("code"),
        data=error.get("data"),
        status=status,
        method=method,
    )


def _unexpected(status: int, message: Any, method: str, what: str) -> MCPClientError:
    """The error for an answer that is not the one expected: its JSON-RPC error if it has one."""
    found = _error_of(status, message, method)
    if found is not None:
        return found
    shown = message if isinstance(message, str) else json.dumps(message)
    return MCPClientError(
        "transport", f"{what}: HTTP {status}, {shown[:300]!r}", status=status, method=method
    )


class _Protocol:
    """What a protocol era does for the public methods; each is an operation generator.

    :class:`_Stateless` speaks 2026-07-28 (one self-describing POST per request, input in
    MRTR rounds); :class:`_Session` the initialize era (a handshake, then requests in a session
    whose streams carry the server's own requests). Shared here: reading a request's stream,
    results and errors, pagination, running input handlers, and collecting a listen stream.
    """

    version: str
    #: The initialize-era session's ``Mcp-Session-Id``; ``None`` on the stateless wire.
    session_id: str | None = None

    def __init__(self, client: _ClientBase, candidates: list[str]) -> None:
        self.client = client
        self.candidates = candidates
        self.version = candidates[0]

    # -- what each era does its own way ----------------------------------------------------

    def request(
        self, method: str, params: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
    ) -> Op[JSON]:
        raise NotImplementedError

    def info(self) -> Op[JSON]:
        raise NotImplementedError

    def close(self) -> Op[None]:
        """End what the server keeps for this client (nothing on the stateless wire)."""
        yield from ()

    def _listen_request(self, notifications: JSON) -> Op[tuple[_Open, Callable[[JSON], bool]]]:
        """The request that opens a listen stream, and which of its notifications to keep."""
        raise NotImplementedError

    def _acknowledgement(
        self, opened: _Opened, parser: _EventParser, deadline: float, notifications: JSON
    ) -> Op[JSON]:
        """Read a listen stream until it is open; what the server honours of the filter."""
        raise NotImplementedError

    def _server_request(self, message: JSON, method: str) -> Op[None]:
        """Answer a request the server sent on a stream.

        Raises:
            MCPClientError: ``transport``: the stateless wire carries none.
        """
        raise MCPClientError(
            "transport", f"The server sent a request on the stream: {message!r}", method=method
        )

    def _resume_request(self, last_id: str) -> _Open | None:
        """The GET that resumes a stream after ``last_id``; ``None`` where streams don't resume."""
        return None

    def _gave_up(self, request: _Open) -> Op[None]:
        """Tell the server a request timed out (closing its stream is enough on 2026-07-28)."""
        yield from ()

    def _page(self, method: str, page: list[Any]) -> None:
        """Learn from a page of a list (the stateless wire learns tools' header arguments)."""

    # -- shared ---------------------------------------------------------------------------

    def _with_extra(self, headers: dict[str, str]) -> dict[str, str]:
        """The client's own ``headers`` replace these, whatever their case."""
        extra = self.client.headers
        lowered = {name.lower() for name in extra}
        merged = {k: v for k, v in headers.items() if k.lower() not in lowered}
        merged.update(extra)
        return merged

    def _next_message(self, stream: Any, parser: _EventParser, deadline: float) -> Op[JSON | None]:
        while True:
            message = parser.pop()
            if message is not None:
                return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            chunk = yield _Read(stream, remaining)
            if chunk is None:
                return None
            parser.feed(chunk)

    def _exchange(self, request: _Open) -> Op[tuple[_Opened, Any]]:
        """POST one request; return the first HTTP answer and the final message.

        On a stream, notifications go to ``client.notifications``, the server's requests are
        answered, and a stream that ends before its response is resumed where the era can.

        Raises:
            MCPClientError: ``timeout`` after ``client.timeout`` seconds, ``transport`` for a
                stream that ended for good without a response.
        """
        method = request.label
        try:
            opened: _Opened = yield request
        except MCPClientError as exc:
            if exc.kind == "timeout":
                # The server may still be working on it, with nothing sent yet.
                yield from self._gave_up(request)
            raise
        if opened.stream is None:
            return opened, opened.answer
        stream: Any = opened.stream
        parser = _EventParser()
        deadline = time.monotonic() + self.client.timeout
        reconnections = 0
        asked = 0  # the server's requests for input, answered
        try:
            while True:
                message = yield from self._next_message(stream, parser, deadline)
                if message is None:
                    yield _Shut(stream)
                    stream = None  # shut already, whatever the reconnection does
                    stream = yield from self._reconnect(
                        parser, deadline, reconnections, method, opened.status
                    )
                    reconnections += 1
                elif _is_response(message):
                    return opened, message
                elif "method" in message and "id" in message:
                    if message["method"] != "ping":
                        if asked >= self.client.max_rounds:
                            yield from self._gave_up(request)
                            raise MCPClientError(
                                "max_rounds",
                                f"The server still asked for input after {asked} answered requests",
                                data=message,
                                status=opened.status,
                                method=method,
                            )
                        asked += 1
                    yield from self._server_request(message, method)
                else:
                    self.client.notifications.append(message)
        except TimeoutError:
            yield from self._gave_up(request)
            raise MCPClientError(
                "timeout",
                f"No response within {self.client.timeout} seconds",
                status=opened.status,
                method=method,
            ) from None
        finally:
            if stream is not None:
                yield _Shut(stream)

    def _reconnect(
        self, parser: _EventParser, deadline: float, reconnections: int, method: str, status: int
    ) -> Op[Any]:
        """Resume a stream that ended before its response: the new stream to read.

        The server let go of the connection (2025-11-25 polling) or lost it: after the
        ``retry`` delay it asked for, a GET with ``Last-Event-ID`` brings the rest.

        Raises:
            MCPClientError: ``transport`` when the stream cannot be resumed (no event id, not
                this era, ``RESUME_ATTEMPTS`` spent) or the GET is refused.
            TimeoutError: the deadline passed.
        """
        resume = self._resume_request(parser.last_id) if parser.last_id is not None else None
        if resume is None or reconnections >= RESUME_ATTEMPTS:
            spent = f" after {reconnections} reconnections" if reconnections else ""
            raise MCPClientError(
                "transport",
                f"The event stream ended without a response{spent}",
                status=status,
                method=method,
            )
        remaining = deadline - time.monotonic()
        delay = (parser.retry_ms or 0) / 1000
        if delay >= remaining:
            raise TimeoutError
        if delay > 0:
            yield _Wait(delay)
        opened: _Opened = yield resume
        if opened.stream is None:
            raise _unexpected(opened.status, opened.answer, method, "The stream was not resumed")
        parser.restart()
        return opened.stream

    def _result(self, body: JSON, status: int, message: Any) -> JSON:
        """The ``result`` of the response to ``body``.

        Raises:
            MCPClientError: ``protocol`` for a JSON-RPC error, ``transport`` for anything else
                that is not the response.
        """
        method = str(body["method"])
        error = _error_of(status, message, method)
        if error is not None:
            raise error
        if not 200 <= status < 300:
            raise _unexpected(status, message, method, f"A response with HTTP status {status}")
        if isinstance(message, dict) and isinstance(message.get("result"), dict):
            if message.get("id") != body["id"]:
                raise MCPClientError(
                    "transport",
                    f"The response answers id {message.get('id')!r}, not {body['id']!r}",
                    status=status,
                    method=method,
                )
            return cast(JSON, message["result"])
        raise _unexpected(status, message, method, "No JSON-RPC response")

    def _run_handler(self, wanted: str, params: Any, what: str) -> Op[JSON]:
        """Ask the client's handler for ``wanted``: ``{"result": ...}`` or ``{"error": ...}``.

        A handler that raises declines: an elicitation is cancelled, anything else fails
        with -32603 (the stateless wire leaves that answer out).
        """
        handler = self.client.handlers[wanted]
        try:
            result = yield _Call(handler, (params if isinstance(params, dict) else {},))
        except Exception as exc:
            logger.warning("The %s handler failed for %s", wanted, what, exc_info=True)
            if wanted == "elicitation/create":
                return {"result": {"action": "cancel"}}
            return {"error": {"code": -32603, "message": f"The {wanted} handler failed: {exc}"}}
        return {"result": result}

    def list_all(self, method: str, key: str) -> Op[JSON]:
        items: list[Any] = []
        seen: set[Any] = set()
        cursor: Any = None
        while True:
            params = {} if cursor is None else {"cursor": cursor}
            result = yield from self.request(method, params, None)
            page = result.get(key) or []
            items.extend(page)
            self._page(method, page)
            cursor = result.get("nextCursor")
            if cursor is None:
                return {key: items}
            if cursor in seen:
                raise MCPClientError("transport", f"Repeated cursor {cursor!r}", method=method)
            seen.add(cursor)

    def listen(
        self, notifications: JSON, count: int, timeout: float, during: Callable[[], Any] | None
    ) -> Op[JSON]:
        request, keep = yield from self._listen_request(notifications)
        method = request.label
        opened: _Opened = yield request
        if opened.stream is None:
            what = f"{method} was answered without an event stream"
            raise _unexpected(opened.status, opened.answer, method, what)
        parser = _EventParser()
        acknowledged: Any = None
        collected: list[JSON] = []
        try:
            deadline = time.monotonic() + timeout
            acknowledged = yield from self._acknowledgement(opened, parser, deadline, notifications)
            if during is not None:
                yield _Call(during)
            deadline = time.monotonic() + timeout
            while len(collected) < count:
                message = yield from self._next_message(opened.stream, parser, deadline)
                if message is None or _is_response(message):
                    error = _error_of(opened.status, message, method)
                    raise error or MCPClientError(
                        "transport",
                        f"The listen stream ended after {len(collected)} of {count} notifications",
                        data={"acknowledged": acknowledged, "notifications": collected},
                        status=opened.status,
                        method=method,
                    )
                if "method" in message and "id" in message:
                    yield from self._server_request(message, method)
                elif keep(message):
                    collected.append(message)
        except TimeoutError:
            raise MCPClientError(
                "timeout",
                "No acknowledgement"
                if acknowledged is None
                else f"{len(collected)} of {count} notifications",
                data={"acknowledged": acknowledged, "notifications": collected},
                status=opened.status,
                method=method,
            ) from None
        finally:
            yield _Shut(opened.stream)
        return {"acknowledged": acknowledged, "notifications": collected}


def _protocol_for(client: _ClientBase, wanted: list[str]) -> _Protocol:
    """The era of the preferred (first) version; the list's other versions of that era follow."""
    if not wanted:
        raise ValueError("versions must name at least one protocol revision")
    modern = revisions.is_modern(wanted[0])
    candidates = [version for version in wanted if revisions.is_modern(version) == modern]
    return _Stateless(client, candidates) if modern else _Session(client, candidates)


class _Stateless(_Protocol):
    """The 2026-07-28 wire: one self-describing POST per request, MRTR for input."""

    def __init__(self, client: _ClientBase, candidates: list[str]) -> None:
        super().__init__(client, candidates)
        # By tool name: each x-mcp-header name by the path of the argument it mirrors.
        self._tool_headers: dict[str, dict[tuple[str, ...], str]] | None = None

    # -- building requests ---------------------------------------------------------------

    def _meta(self, extra: Mapping[str, Any] | None) -> JSON:
        meta: JSON = {
            revisions.META_PROTOCOL_VERSION: self.version,
            revisions.META_CLIENT_CAPABILITIES: self.client.capabilities,
            revisions.META_CLIENT_INFO: dict(self.client.client_info),
        }
        meta.update(extra or {})
        return meta

    def _build(
        self,
        method: str,
        params: Mapping[str, Any],
        meta: Mapping[str, Any] | None,
        param_headers: Mapping[tuple[str, ...], str],
    ) -> _Open:
        body_params = dict(params)
        body_params["_meta"] = self._meta({**(params.get("_meta") or {}), **(meta or {})})
        headers = {
            "Accept": ACCEPT,
            "MCP-Protocol-Version": encode_header_value(self.version),
            "Mcp-Method": encode_header_value(method),
        }
        if method in NAMED_PARAMS:
            headers["Mcp-Name"] = encode_header_value(header_text(params.get(NAMED_PARAMS[method])))
        named = {f"Mcp-Param-{name}": path for path, name in param_headers.items()}
        headers.update(mirrored(named, params.get("arguments")))
        body = {
            "jsonrpc": "2.0",
            "id": self.client._new_id(),
            "method": method,
            "params": body_params,
        }
        return _Open(body, self._with_extra(headers))

    def _param_headers(
        self, method: str, params: Mapping[str, Any]
    ) -> Op[dict[tuple[str, ...], str]]:
        """The ``x-mcp-header`` arguments of the tool called, from ``tools/list`` (cached)."""
        if method != "tools/call" or not params.get("arguments"):
            return {}
        name = str(params.get("name"))
        if self._tool_headers is None or name not in self._tool_headers:
            try:
                yield from self.list_all("tools/list", "tools")
            except MCPClientError:
                return {}  # the call itself will say what is wrong
        return (self._tool_headers or {}).get(name, {})

    def _page(self, method: str, page: list[Any]) -> None:
        if method == "tools/list":
            self._learn_tools(page)

    def _learn_tools(self, tools: list[Any]) -> None:
        found = self._tool_headers if self._tool_headers is not None else {}
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            found[tool["name"]] = dict(header_annotations(tool.get("inputSchema")))
        self._tool_headers = found

    # -- requests with input rounds ------------------------------------------------------

    def request(
        self, method: str, params: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
    ) -> Op[JSON]:
        base = dict(params or {})
        param_headers = yield from self._param_headers(method, base)
        extra: JSON = {}
        rounds = 0
        while True:
            request = self._build(method, {**base, **extra}, meta, param_headers)
            body = cast(JSON, request.body)
            opened, message = yield from self._exchange(request)
            try:
                result = self._result(body, opened.status, message)
            except MCPClientError as exc:
                if self._fall_back(exc):
                    continue
                raise
            if result.get("resultType") != "input_required":
                return result
            if rounds >= self.client.max_rounds:
                raise MCPClientError(
                    "max_rounds",
                    f"Still input_required after {rounds} answered rounds",
                    data=result,
                    status=opened.status,
                    method=method,
                )
            rounds += 1
            asked = result.get("inputRequests") or {}
            extra = {}
            if asked:
                extra["inputResponses"] = yield from self._answer(method, asked)
            if "requestState" in result:
                extra["requestState"] = result["requestState"]

    def _fall_back(self, error: MCPClientError) -> bool:
        """After -32022, switch to another of the client's versions that the server names."""
        if error.code != -32022 or not isinstance(error.data, dict):
            return False
        supported = error.data.get("supported") or []
        self.candidates = [v for v in self.candidates if v != self.version]
        for version in self.candidates:
            if version in supported:
                self.version = version
                return True
        return False

    def _answer(self, method: str, asked: Mapping[str, Any]) -> Op[JSON]:
        answers: JSON = {}
        for key, request in asked.items():
            wanted = request.get("method") if isinstance(request, dict) else None
            if wanted not in self.client.handlers:
                raise MCPClientError(
                    "unsupported",
                    f"The server asked for {wanted} (input request {key!r}) "
                    "and this client has no handler for it",
                    data={key: request},
                    method=method,
                )
            reply = yield from self._run_handler(
                str(wanted), request.get("params"), f"input request {key!r}"
            )
            if "result" in reply:  # a failed handler's answer is left out
                answers[key] = reply["result"]
        return answers

    def info(self) -> Op[JSON]:
        result = yield from self.request("server/discover", None, None)
        supported = result.get("supportedVersions")
        if not isinstance(supported, list) or self.version not in supported:
            raise MCPClientError(
                "protocol",
                f"server/discover lists {supported!r}, without {self.version}",
                data=result,
                method="server/discover",
            )
        return {
            "protocolVersion": self.version,
            "supportedVersions": supported,
            "serverInfo": (result.get("_meta") or {}).get(revisions.META_SERVER_INFO),
            "capabilities": result.get("capabilities") or {},
            "instructions": result.get("instructions"),
        }

    # -- subscriptions -------------------------------------------------------------------

    def _listen_request(self, notifications: JSON) -> Op[tuple[_Open, Callable[[JSON], bool]]]:
        yield from ()
        request = self._build("subscriptions/listen", {"notifications": notifications}, None, {})
        return request, _keep_all  # the server filters

    def _acknowledgement(
        self, opened: _Opened, parser: _EventParser, deadline: float, notifications: JSON
    ) -> Op[JSON]:
        method = "subscriptions/listen"
        first = yield from self._next_message(opened.stream, parser, deadline)
        if first is None or first.get("method") != "notifications/subscriptions/acknowledged":
            error = _error_of(opened.status, first, method)
            raise error or MCPClientError(
                "transport",
                f"The stream did not start with an acknowledgement: {first!r}",
                status=opened.status,
                method=method,
            )
        return cast(JSON, first.get("params") or {})


def _keep_all(message: JSON) -> bool:
    return True


class _Session(_Protocol):
    """The initialize era (2025-03-26 to 2025-11-25): a session that ``initialize`` begins.

    The session begins with the first operation. Later requests carry ``Mcp-Session-Id`` and
    ``MCP-Protocol-Version``; the server asks for input with JSON-RPC requests on a request's
    own stream, each answered by a POST of its own.
    """

    def __init__(self, client: _ClientBase, candidates: list[str]) -> None:
        super().__init__(client, candidates)
        #: The ``InitializeResult``, once the session began.
        self.initialized: JSON | None = None
        self._ended = False
        #: The level last set with ``logging/setLevel``.
        self._log_level: str | None = None

    def _headers(self, accept: str = ACCEPT) -> dict[str, str]:
        headers = {"Accept": accept}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.initialized is not None:
            headers["MCP-Protocol-Version"] = self.version
        return self._with_extra(headers)

    def _start(self) -> Op[None]:
        """Begin the session on first use: ``initialize``, then ``notifications/initialized``.

        Raises:
            MCPClientError: ``initialize`` failed, or (``unsupported``) the server chose a
                version that is not in ``versions``; the session is then ended.
        """
        if self.initialized is not None:
            return
        body: JSON = {
            "jsonrpc": "2.0",
            "id": self.client._new_id(),
            "method": "initialize",
            "params": {
                "protocolVersion": self.candidates[0],
                "capabilities": self.client.capabilities,
                "clientInfo": dict(self.client.client_info),
            },
        }
        opened, message = yield from self._exchange(_Open(body, self._headers()))
        result = self._result(body, opened.status, message)
        # A server may keep no sessions: then no header, and requests go without one.
        self.session_id = opened.headers.get("mcp-session-id") or None
        self.initialized = result
        chosen = result.get("protocolVersion")
        self.version = str(chosen)
        if chosen not in self.candidates:
            # The client cannot speak the server's choice: leave the session, as the spec says.
            yield from self.close()
            raise MCPClientError(
                "unsupported",
                f"The server answered initialize with version {chosen!r}, "
                f"not one of {self.candidates}",
                data=result,
                status=opened.status,
                method="initialize",
            )
        yield from self._deliver({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _deliver(self, body: JSON, timeout: float | None = None) -> Op[None]:
        """POST a notification or a response: the server accepts it with 202.

        Raises:
            MCPClientError: any other answer (``protocol`` if it is a JSON-RPC error).
        """
        request = _Open(body, self._headers(), timeout=timeout)
        opened: _Opened = yield request
        if opened.stream is not None:
            yield _Shut(opened.stream)
        if opened.status != 202:
            raise _unexpected(opened.status, opened.answer, request.label, "Not accepted (202)")

    def _send(self, method: str, params: Mapping[str, Any] | None, meta: JSON) -> Op[JSON]:
        """One request of the session, and its result."""
        body_params = dict(params or {})
        merged = {**(body_params.pop("_meta", None) or {}), **meta}
        if merged:
            body_params["_meta"] = merged
        body: JSON = {"jsonrpc": "2.0", "id": self.client._new_id(), "method": method}
        if body_params:
            body["params"] = body_params
        opened, message = yield from self._exchange(_Open(body, self._headers()))
        return self._result(body, opened.status, message)

    def request(
        self, method: str, params: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
    ) -> Op[JSON]:
        yield from self._start()
        extra = dict(meta or {})
        # The stateless wire's per-request log level is a session-wide setting here.
        level = extra.pop(revisions.META_LOG_LEVEL, None)
        if level is not None and level != self._log_level:
            yield from self._send("logging/setLevel", {"level": level}, {})
            self._log_level = str(level)
        result = yield from self._send(method, params, extra)
        if method == "logging/setLevel" and params:
            self._log_level = str(params.get("level"))
        return result

    def info(self) -> Op[JSON]:
        yield from self._start()
        result = self.initialized or {}
        return {
            "protocolVersion": result.get("protocolVersion"),
            "serverInfo": result.get("serverInfo"),
            "capabilities": result.get("capabilities") or {},
            "instructions": result.get("instructions"),
        }

    def close(self) -> Op[None]:
        """DELETE the session; later requests on it are refused (404).

        Raises:
            MCPClientError: the server answered the DELETE other than 2xx, 404 (the session
                had already ended) or 405 (the server does not let clients end sessions).
        """
        if self.session_id is None or self._ended:
            return
        self._ended = True
        request = _Open(None, self._headers(), "DELETE")
        opened: _Opened = yield request
        if opened.stream is not None:
            yield _Shut(opened.stream)
        if not (200 <= opened.status < 300 or opened.status in (404, 405)):
            raise _unexpected(opened.status, opened.answer, "DELETE", "The session did not end")

    # -- the server's requests, resumption, cancellation ---------------------------------

    def _server_request(self, message: JSON, method: str) -> Op[None]:
        wanted = str(message.get("method"))
        reply: JSON
        if wanted == "ping":
            reply = {"result": {}}
        elif wanted in self.client.handlers:
            what = f"server request {message['id']!r} during {method}"
            reply = yield from self._run_handler(wanted, message.get("params"), what)
        else:
            error = f"Method not found: this client has no handler for {wanted}"
            reply = {"error": {"code": -32601, "message": error}}
        yield from self._deliver({"jsonrpc": "2.0", "id": message["id"], **reply})

    def _resume_request(self, last_id: str) -> _Open | None:
        headers = self._headers("text/event-stream")
        headers["Last-Event-ID"] = last_id
        return _Open(None, headers, "GET")

    def _gave_up(self, request: _Open) -> Op[None]:
        body = request.body or {}
        if body.get("method") == "initialize" or "id" not in body:
            return  # initialize is never cancelled
        cancelled = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": body["id"], "reason": "The test client timed out"},
        }
        # Best effort: the timeout is what the caller hears about. However short the
        # client's own timeout, the cancel is given time to arrive.
        with contextlib.suppress(MCPClientError):
            yield from self._deliver(cancelled, max(self.client.timeout, CANCEL_TIMEOUT))

    # -- the GET stream ------------------------------------------------------------------

    def _listen_request(self, notifications: JSON) -> Op[tuple[_Open, Callable[[JSON], bool]]]:
        """Subscribe to the filter's resources; the session's GET stream and the filter.

        Raises:
            ValueError: ``resourceSubscriptions`` is not a list of URIs.
        """
        uris = notifications.get("resourceSubscriptions") or []
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            raise ValueError("resourceSubscriptions takes a list of URIs")
        yield from self._start()
        for uri in uris:
            yield from self._send("resources/subscribe", {"uri": uri}, {})
        lists = {method for key, _, method in LISTS if notifications.get(key) is True}
        watched = set(uris)

        def keep(message: JSON) -> bool:
            # The GET stream carries every change; the filter is the client's here.
            if message.get("method") == "notifications/resources/updated":
                return (message.get("params") or {}).get("uri") in watched
            return message.get("method") in lists

        return _Open(None, self._headers("text/event-stream"), "GET"), keep

    def _acknowledgement(
        self, opened: _Opened, parser: _EventParser, deadline: float, notifications: JSON
    ) -> Op[JSON]:
        # The server subscribes the stream before its first event (a comment when nothing is
        # pending), so a change made after that event reaches it.
        while parser.events == 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            chunk = yield _Read(opened.stream, remaining)
            if chunk is None:
                raise MCPClientError(
                    "transport", "The GET stream ended at once", status=opened.status, method="GET"
                )
            parser.feed(chunk)
        # No acknowledgement on this wire: the server's capabilities say what it will send.
        capabilities = (self.initialized or {}).get("capabilities") or {}
        honoured: JSON = {
            key: True
            for key, capability, _ in LISTS
            if notifications.get(key) is True
            and (capabilities.get(capability) or {}).get("listChanged")
        }
        uris = notifications.get("resourceSubscriptions")
        if uris and (capabilities.get("resources") or {}).get("subscribe"):
            honoured["resourceSubscriptions"] = list(uris)
        return {"notifications": honoured}


# -- the public clients --------------------------------------------------------------------


class _ClientBase:
    """Settings and operations shared by the sync and async clients."""

    #: Sent as ``_meta["io.modelcontextprotocol/clientInfo"]``.
    client_info: Mapping[str, Any] = {"name": "mcp_app.testing", "version": __version__}

    def __init__(
        self,
        server: Server | str | None = None,
        *,
        versions: Iterable[str] | None = None,
        handlers: Mapping[str, InputHandler] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        user: Any = None,
        headers: Mapping[str, str] | None = None,
        max_rounds: int = 10,
        timeout: float = 30.0,
    ) -> None:
        self.server = _find_server(server)
        self.handlers: dict[str, InputHandler] = dict(handlers or {})
        unknown = sorted(set(self.handlers) - set(INPUT_METHODS))
        if unknown:
            raise ValueError(
                f"No such input request method: {', '.join(unknown)}; "
                f"handlers take {', '.join(sorted(INPUT_METHODS))}"
            )
        self.headers: dict[str, str] = dict(headers or {})
        self.user = user
        self.max_rounds = max_rounds
        self.timeout = timeout
        #: Notifications that arrived on requests' own streams (progress, log messages).
        self.notifications: list[JSON] = []
        self._last_id = 0
        wanted = [revisions.MODERN] if versions is None else list(versions)
        self._protocol = _protocol_for(self, wanted)
        #: What the client declares: in every request's ``_meta`` (2026-07-28), or in
        #: ``initialize``.
        self.capabilities = _merge(
            _declared(self.handlers, self._protocol.version), capabilities or {}
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.server.name!r} {self.version}>"

    @property
    def version(self) -> str:
        """The protocol revision spoken: the one offered until ``initialize`` was answered."""
        return self._protocol.version

    @property
    def session_id(self) -> str | None:
        """The initialize-era session's ``Mcp-Session-Id`` once it began; else ``None``."""
        return self._protocol.session_id

    @property
    def path(self) -> str:
        """The endpoint's URL path in the current URLconf.

        Raises:
            ImproperlyConfigured: the server is not routed.
        """
        return endpoint_path(self.server)

    def _new_id(self) -> int:
        self._last_id += 1
        return self._last_id

    @staticmethod
    def text(result: Mapping[str, Any]) -> str:
        """The text of a result, joined with newlines.

        Takes the text blocks of a tool result's ``content``, of a prompt's ``messages`` and
        the ``text`` of a resource's ``contents``.
        """
        pieces: list[str] = []
        blocks: list[Any] = list(result.get("content") or [])
        for message in result.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            blocks.extend(content if isinstance(content, list) else [content])
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "text":
                pieces.append(str(block.get("text", "")))
        for item in result.get("contents") or []:
            if isinstance(item, dict) and "text" in item:
                pieces.append(str(item["text"]))
        return "\n".join(pieces)

    # -- operations ----------------------------------------------------------------------

    def _request_op(
        self, method: str, params: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
    ) -> Op[JSON]:
        return self._protocol.request(method, params, meta)

    def _call_tool_op(
        self, name: str, arguments: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
    ) -> Op[JSON]:
        params: JSON = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return self._protocol.request("tools/call", params, meta)

    def _get_prompt_op(
        self, name: str, arguments: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
    ) -> Op[JSON]:
        params: JSON = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return self._protocol.request("prompts/get", params, meta)

    def _complete_op(
        self,
        ref: Mapping[str, Any] | str,
        argument: str,
        value: str,
        context: Mapping[str, Any] | None,
    ) -> Op[JSON]:
        params: JSON = {"ref": _ref(ref), "argument": {"name": argument, "value": value}}
        if context is not None:
            params["context"] = {"arguments": dict(context)}
        return self._protocol.request("completion/complete", params, None)

    def _list_op(self, method: str, key: str) -> Op[JSON]:
        return self._protocol.list_all(method, key)

    def _listen_op(
        self,
        notifications: Mapping[str, Any] | Iterable[str] | str,
        count: int,
        timeout: float,
        during: Callable[[], Any] | None,
    ) -> Op[JSON]:
        return self._protocol.listen(_listen_filter(notifications), count, timeout, during)


class MCPClient(_ClientBase):
    """Speaks MCP to a server of this site through ``django.test.Client``: no network.

    Requests go through the URLconf, the middleware, authentication and the real view.
    ``server`` is a ``Server``, a server's name, or ``None`` for ``mcp_app.site``.
    ``versions`` lists the protocol revisions the client may speak, preferred first (default
    ``["2026-07-28"]``); the first one picks the era:

    * 2026-07-28 (or later): stateless requests; after -32022 the client switches to another
      listed version the server supports;
    * an initialize-era revision (2025-11-25, 2025-06-18, 2025-03-26): the first operation
      sends ``initialize`` offering it, and the server's answer decides, if it is listed
      (else ``MCPClientError`` kind ``"unsupported"``). Requests then go in that session;
      the server's input requests arrive on their streams and are answered by POSTs;
      streams the server lets go of are resumed; :meth:`close` ends the session.

    ``handlers`` answers the server's input requests, by method (``"elicitation/create"``,
    ``"sampling/createMessage"``, ``"roots/list"``): each is called with the request's params
    and returns the result; the client declares the matching capability, and
    ``capabilities`` declares more. ``user`` is logged in; ``headers`` go on every request.
    ``max_rounds`` bounds the input rounds of one request; ``timeout`` bounds the wait for
    any one answer, streamed or not (under ``VIEW="sync"``, only within an event stream: a
    plain answer is waited for as ``django.test.Client`` waits).

    Methods return the JSON-RPC ``result`` as a dict, in either era. An exception that the
    endpoint answers with an internal error (-32603) is re-raised, as ``django.test.Client``
    does; a tool's exception is an ``isError`` result, as on the wire.

    Raises:
        ValueError: no server has that name, a handler key is not an input method, or
            ``versions`` is empty.
    """

    def __init__(
        self,
        server: Server | str | None = None,
        *,
        versions: Iterable[str] | None = None,
        handlers: Mapping[str, InputHandler] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        user: Any = None,
        headers: Mapping[str, str] | None = None,
        max_rounds: int = 10,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(
            server,
            versions=versions,
            handlers=handlers,
            capabilities=capabilities,
            user=user,
            headers=headers,
            max_rounds=max_rounds,
            timeout=timeout,
        )
        #: The Django test client that carries the requests (its cookies hold the login).
        self.django_client = Client()
        if user is not None:
            self.django_client.force_login(user)
        # What carries them to an async view.
        self._async_client = AsyncClient()
        self._streams: set[Any] = set()

    # -- driving operations --------------------------------------------------------------

    def _drive(self, op: Op[T]) -> T:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                command = op.throw(error) if error is not None else op.send(value)
            except StopIteration as stop:
                return cast(T, stop.value)
            value, error = None, None
            try:
                value = self._perform(command)
            except BaseException as exc:  # handed to the operation, which cleans up
                error = exc

    def _perform(self, command: _Command) -> Any:
        if isinstance(command, _Open):
            return self._open(command)
        if isinstance(command, _Read):
            return command.stream.read(command.timeout)
        if isinstance(command, _Shut):
            self._streams.discard(command.stream)
            command.stream.close()
            return None
        if isinstance(command, _Wait):
            time.sleep(command.seconds)
            return None
        result = command.function(*command.args)
        if inspect.isawaitable(result):
            result = async_to_sync(_awaited)(result)
        return result

    def _open(self, command: _Open) -> _Opened:
        path = self.path
        if not _is_async_view(path):
            # In this thread, so the view sees the test's database connection; a streaming
            # view returns once it has something to send, and the stream is read by a pump.
            response = _http(self.django_client, command, path)
            opened = _opened(response, _ThreadStream)
        else:
            # The async view is served as under an ASGI server, on a loop of the client's own
            # (under the sync test client it would serve as under a WSGI server).
            portal = _Portal.get()
            # The same cookies, and with them the login (logout() replaces the jar).
            self._async_client.cookies = self.django_client.cookies
            try:
                bound = command.timeout or self.timeout
                response = portal.run(_http(self._async_client, command, path), bound)
            except TimeoutError:
                raise _timed_out(command, bound) from None
            opened = _opened(
                response, lambda r: _PortalStream(portal, r) if r.is_async else _ThreadStream(r)
            )
        if opened.stream is not None:
            self._streams.add(opened.stream)
        return opened

    # -- the API -------------------------------------------------------------------------

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> JSON:
        """Send any request (answering input rounds) and return its result.

        Raises:
            MCPClientError: see its ``kind``s.
        """
        return self._drive(self._request_op(method, params, meta))

    def info(self) -> JSON:
        """``protocolVersion``, ``serverInfo``, ``capabilities`` and ``instructions``.

        From ``server/discover`` on 2026-07-28, from the ``InitializeResult`` on the
        initialize era (beginning the session if need be).

        Raises:
            MCPClientError: ``server/discover`` or ``initialize`` failed.
        """
        return self._drive(self._protocol.info())

    def list_tools(self) -> JSON:
        """``{"tools": [...]}``, every page followed.

        Raises:
            MCPClientError: a page failed.
        """
        return self._drive(self._list_op("tools/list", "tools"))

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> JSON:
        """Call a tool; ``meta`` adds to ``_meta`` (``progressToken``, the log level key).

        Notifications streamed before the result are appended to ``notifications``. On the
        initialize era the log level key becomes a ``logging/setLevel`` request first (the
        level is the session's from then on; the server's default is ``debug``).

        Raises:
            MCPClientError: a JSON-RPC error, input that cannot be given, too many rounds.
        """
        return self._drive(self._call_tool_op(name, arguments, meta))

    def list_resources(self) -> JSON:
        """``{"resources": [...]}``, every page followed.

        Raises:
            MCPClientError: a page failed.
        """
        return self._drive(self._list_op("resources/list", "resources"))

    def list_resource_templates(self) -> JSON:
        """``{"resourceTemplates": [...]}``, every page followed.

        Raises:
            MCPClientError: a page failed.
        """
        return self._drive(self._list_op("resources/templates/list", "resourceTemplates"))

    def read_resource(self, uri: str, *, meta: Mapping[str, Any] | None = None) -> JSON:
        """Read a resource.

        Raises:
            MCPClientError: a JSON-RPC error (for an unknown URI, -32602 on 2026-07-28 and
                -32002 in the initialize era), or failed input.
        """
        return self._drive(self._request_op("resources/read", {"uri": uri}, meta))

    def list_prompts(self) -> JSON:
        """``{"prompts": [...]}``, every page followed.

        Raises:
            MCPClientError: a page failed.
        """
        return self._drive(self._list_op("prompts/list", "prompts"))

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> JSON:
        """Get a prompt's messages.

        Raises:
            MCPClientError: a JSON-RPC error, or failed input.
        """
        return self._drive(self._get_prompt_op(name, arguments, meta))

    def complete(
        self,
        ref: Mapping[str, Any] | str,
        argument: str,
        value: str,
        context: Mapping[str, Any] | None = None,
    ) -> JSON:
        """Complete an argument of a prompt (a ``ref`` that is its name) or a URI template (one
        with ``{`` or ``://``; a ``ref/resource`` dict for any other).

        ``context`` holds the values of the other arguments.

        Raises:
            MCPClientError: a JSON-RPC error.
        """
        return self._drive(self._complete_op(ref, argument, value, context))

    def listen(
        self,
        notifications: Mapping[str, Any] | Iterable[str] | str,
        *,
        count: int = 1,
        timeout: float = 5.0,
        during: Callable[[], Any] | None = None,
    ) -> JSON:
        """Open a stream of change notifications and collect ``count`` of them.

        ``notifications`` is the filter (``{"toolsListChanged": True}``, or a list of its keys;
        ``"resourceSubscriptions"`` takes a list of URIs); ``during()`` is called once the
        stream is open, to make the changes; the stream is closed before returning
        ``{"acknowledged": params, "notifications": [...]}``. ``timeout`` bounds the wait for
        the stream to open, then for the notifications.

        On 2026-07-28 this is ``subscriptions/listen``, and ``acknowledged`` is what the
        server acknowledged. On the initialize era it is the session's GET stream, after a
        ``resources/subscribe`` for each URI of ``resourceSubscriptions``; the client keeps
        the notifications the filter selects, and ``acknowledged`` is
        ``{"notifications": ...}``: the part of the filter the server's capabilities offer
        (``listChanged``, ``subscribe``).

        Raises:
            MCPClientError: ``timeout`` (what arrived is in ``data``), ``protocol``, or
                ``transport`` (the stream ended early).
            ValueError: (initialize era) ``resourceSubscriptions`` is not a list of URIs.
        """
        return self._drive(self._listen_op(notifications, count, timeout, during))

    def close(self) -> None:
        """Close the streams still open, and end the initialize-era session (DELETE).

        Requests of the ended session after that are refused: ``MCPClientError`` kind
        ``"protocol"``, status 404. (A 2026-07-28 client has no session to end.)

        Raises:
            MCPClientError: the server refused the DELETE (but not with 404 or 405).
        """
        for stream in list(self._streams):
            stream.close()
        self._streams.clear()
        self._drive(self._protocol.close())

    def __enter__(self) -> MCPClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


class AsyncMCPClient(_ClientBase):
    """:class:`MCPClient` over ``django.test.AsyncClient``: the same methods, as coroutines.

    Input handlers and ``during`` may be sync (run in a thread) or async functions. On the
    initialize era the session begins with the first operation: run one (``await info()``)
    before running others concurrently.

    Raises:
        ValueError: no server has that name, a handler key is not an input method, or
            ``versions`` is empty.
    """

    def __init__(
        self,
        server: Server | str | None = None,
        *,
        versions: Iterable[str] | None = None,
        handlers: Mapping[str, InputHandler] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        user: Any = None,
        headers: Mapping[str, str] | None = None,
        max_rounds: int = 10,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(
            server,
            versions=versions,
            handlers=handlers,
            capabilities=capabilities,
            user=user,
            headers=headers,
            max_rounds=max_rounds,
            timeout=timeout,
        )
        #: The Django test client that carries the requests (logged in on first use).
        self.django_client = AsyncClient()
        self._logged_in = user is None
        self._streams: set[Any] = set()

    async def _drive(self, op: Op[T]) -> T:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                command = op.throw(error) if error is not None else op.send(value)
            except StopIteration as stop:
                return cast(T, stop.value)
            value, error = None, None
            try:
                value = await self._perform(command)
            except BaseException as exc:  # handed to the operation, which cleans up
                error = exc

    async def _perform(self, command: _Command) -> Any:
        if isinstance(command, _Open):
            return await self._open(command)
        if isinstance(command, _Read):
            if isinstance(command.stream, _AsyncStream):
                return await command.stream.aread(command.timeout)
            return await asyncio.to_thread(command.stream.read, command.timeout)
        if isinstance(command, _Shut):
            self._streams.discard(command.stream)
            await self._close_stream(command.stream)
            return None
        if isinstance(command, _Wait):
            await asyncio.sleep(command.seconds)
            return None
        function = command.function
        if iscoroutinefunction(function):
            result = await function(*command.args)
        else:
            result = await sync_to_async(function)(*command.args)
        if inspect.isawaitable(result):
            result = await result
        return result

    @staticmethod
    async def _close_stream(stream: Any) -> None:
        if isinstance(stream, _AsyncStream):
            await stream.aclose()
        else:
            stream.close()

    async def _open(self, command: _Open) -> _Opened:
        if not self._logged_in:
            await self.django_client.aforce_login(self.user)
            self._logged_in = True
        bound = command.timeout or self.timeout
        try:
            response = await asyncio.wait_for(_http(self.django_client, command, self.path), bound)
        except TimeoutError:
            raise _timed_out(command, bound) from None
        opened = _opened(response, lambda r: _AsyncStream(r) if r.is_async else _ThreadStream(r))
        if opened.stream is not None:
            self._streams.add(opened.stream)
        return opened

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> JSON:
        """Send any request (answering input rounds) and return its result.

        Raises:
            MCPClientError: see its ``kind``s.
        """
        return await self._drive(self._request_op(method, params, meta))

    async def info(self) -> JSON:
        """As :meth:`MCPClient.info`.

        Raises:
            MCPClientError: ``server/discover`` or ``initialize`` failed.
        """
        return await self._drive(self._protocol.info())

    async def list_tools(self) -> JSON:
        """As :meth:`MCPClient.list_tools`.

        Raises:
            MCPClientError: a page failed.
        """
        return await self._drive(self._list_op("tools/list", "tools"))

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> JSON:
        """As :meth:`MCPClient.call_tool`.

        Raises:
            MCPClientError: a JSON-RPC error, input that cannot be given, too many rounds.
        """
        return await self._drive(self._call_tool_op(name, arguments, meta))

    async def list_resources(self) -> JSON:
        """As :meth:`MCPClient.list_resources`.

        Raises:
            MCPClientError: a page failed.
        """
        return await self._drive(self._list_op("resources/list", "resources"))

    async def list_resource_templates(self) -> JSON:
        """As :meth:`MCPClient.list_resource_templates`.

        Raises:
            MCPClientError: a page failed.
        """
        return await self._drive(self._list_op("resources/templates/list", "resourceTemplates"))

    async def read_resource(self, uri: str, *, meta: Mapping[str, Any] | None = None) -> JSON:
        """As :meth:`MCPClient.read_resource`.

        Raises:
            MCPClientError: a JSON-RPC error, or failed input.
        """
        return await self._drive(self._request_op("resources/read", {"uri": uri}, meta))

    async def list_prompts(self) -> JSON:
        """As :meth:`MCPClient.list_prompts`.

        Raises:
            MCPClientError: a page failed.
        """
        return await self._drive(self._list_op("prompts/list", "prompts"))

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> JSON:
        """As :meth:`MCPClient.get_prompt`.

        Raises:
            MCPClientError: a JSON-RPC error, or failed input.
        """
        return await self._drive(self._get_prompt_op(name, arguments, meta))

    async def complete(
        self,
        ref: Mapping[str, Any] | str,
        argument: str,
        value: str,
        context: Mapping[str, Any] | None = None,
    ) -> JSON:
        """As :meth:`MCPClient.complete`.

        Raises:
            MCPClientError: a JSON-RPC error.
        """
        return await self._drive(self._complete_op(ref, argument, value, context))

    async def listen(
        self,
        notifications: Mapping[str, Any] | Iterable[str] | str,
        *,
        count: int = 1,
        timeout: float = 5.0,
        during: Callable[[], Any] | None = None,
    ) -> JSON:
        """As :meth:`MCPClient.listen`; ``during`` may be a coroutine function.

        Raises:
            MCPClientError: ``timeout`` (what arrived is in ``data``), ``protocol``, or
                ``transport`` (the stream ended early).
            ValueError: (initialize era) ``resourceSubscriptions`` is not a list of URIs.
        """
        return await self._drive(self._listen_op(notifications, count, timeout, during))

    async def close(self) -> None:
        """As :meth:`MCPClient.close`.

        Raises:
            MCPClientError: the server refused the DELETE (but not with 404 or 405).
        """
        for stream in list(self._streams):
            await self._close_stream(stream)
        self._streams.clear()
        await self._drive(self._protocol.close())

    async def __aenter__(self) -> AsyncMCPClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
