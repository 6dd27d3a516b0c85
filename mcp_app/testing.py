"""Test clients that speak MCP to this site's servers through the real Django view, no network."""

from __future__ import annotations

import asyncio
import base64
import codecs
import contextlib
import inspect
import json
import logging
import queue
import re
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
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar, cast

from asgiref.sync import async_to_sync, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections
from django.test import AsyncClient, Client
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, resolve, reverse

from . import __version__
from .input import INPUT_METHODS
from .protocol import versions as revisions
from .server import Server, servers, site

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
#: Methods whose name or URI travels in ``Mcp-Name``, and the param that holds it.
NAMED_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
ACCEPT = "application/json, text/event-stream"
BASE64_SENTINEL = "=?base64?"
_PLAIN_HEADER = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


class MCPClientError(Exception):
    """A request the test client could not complete.

    ``kind`` says why:

    * ``"protocol"``: the server answered with a JSON-RPC error (``code``, ``message``, ``data``);
    * ``"unsupported"``: the server asked for input this client has no handler for;
    * ``"max_rounds"``: the server still asked for input after ``max_rounds`` answered rounds;
    * ``"timeout"``: a stream did not deliver in time (``data`` holds what did arrive);
    * ``"transport"``: the HTTP answer is not a valid MCP answer.

    ``status`` is the HTTP status of the answer, when there was one.
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
    try:
        return servers[server]
    except KeyError:
        known = ", ".join(repr(name) for name in sorted(servers)) or "none"
        raise ValueError(f"No MCP server named {server!r}; known servers: {known}") from None


def _serves(view: Any, server: Server) -> bool:
    """Whether ``view`` is an endpoint built by ``server.urls`` for this server."""
    function = inspect.unwrap(view)
    for cell in getattr(function, "__closure__", None) or ():
        try:
            if cell.cell_contents is server:
                return True
        except ValueError:  # an empty cell
            continue
    return False


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


def header_value(value: str) -> str:
    """A header value as the wire wants it: plain visible ASCII, else ``=?base64?…?=``."""
    if value == "" or (_PLAIN_HEADER.fullmatch(value) and not value.startswith(BASE64_SENTINEL)):
        return value
    return f"{BASE64_SENTINEL}{base64.b64encode(value.encode()).decode()}?="


def _header_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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
    if "://" in ref:
        return {"type": "ref/resource", "uri": ref}
    return {"type": "ref/prompt", "name": ref}


def _listen_filter(notifications: Mapping[str, Any] | Iterable[str] | str) -> JSON:
    if isinstance(notifications, Mapping):
        return dict(notifications)
    if isinstance(notifications, str):
        return {notifications: True}
    return {name: True for name in notifications}


def _is_response(message: JSON) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


class _EventParser:
    """Splits ``text/event-stream`` bytes into the JSON messages of their ``data`` fields."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._buffer = ""
        self._ready: deque[JSON] = deque()

    def feed(self, chunk: bytes) -> None:
        self._buffer += self._decoder.decode(chunk).replace("\r\n", "\n")
        while "\n\n" in self._buffer:
            block, self._buffer = self._buffer.split("\n\n", 1)
            lines = [line[5:] for line in block.split("\n") if line.startswith("data:")]
            data = "\n".join(line[1:] if line.startswith(" ") else line for line in lines)
            if not data.strip():
                continue  # a comment, a keep-alive, or a priming event
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
# (headers, MRTR rounds, pagination, event streams) is written once.


@dataclass(frozen=True)
class _Open:
    """POST a JSON-RPC request; the driver answers with an ``_Opened``."""

    body: JSON
    headers: dict[str, str]


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
class _Opened:
    """What came back from an ``_Open``: a JSON message, or an event stream to read."""

    status: int
    message: Any = None
    text: str = ""
    stream: Any = None


_Command: TypeAlias = _Open | _Read | _Shut | _Call
Op: TypeAlias = Generator[_Command, Any, T]


def _opened(response: Any, stream: Callable[[Any], Any]) -> _Opened:
    status = int(response.status_code)
    if getattr(response, "streaming", False):
        if response.get("Content-Type", "").startswith("text/event-stream"):
            return _Opened(status, stream=stream(response))
        if getattr(response, "is_async", False):
            return _Opened(status, text=f"<{response.get('Content-Type', '')} stream>")
        text = b"".join(response.streaming_content).decode(errors="replace")
        return _Opened(status, text=text)
    text = response.content.decode(errors="replace")
    try:
        message = json.loads(text) if text else None
    except ValueError:
        message = None
    return _Opened(status, message, text)


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

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


class _PortalStream:
    """An asynchronous body of an async view, read from synchronous code through the portal."""

    def __init__(self, portal: _Portal, response: Any) -> None:
        self._portal = portal
        self._stream = _AsyncStream(response)

    def read(self, timeout: float) -> bytes | None:
        return self._portal.run(self._stream.aread(timeout))

    def close(self) -> None:
        self._portal.run(self._stream.aclose())


# -- the protocol --------------------------------------------------------------------------


class _Protocol:
    """What a protocol era does for the public methods; each is an operation generator.

    The stateless 2026-07-28 wire is the one served; an initialize-era session (handshake,
    ``Mcp-Session-Id``, server requests on the POST's stream) would be a second subclass.
    """

    version: str

    def __init__(self, client: _ClientBase, candidates: list[str]) -> None:
        self.client = client
        self.candidates = candidates
        self.version = candidates[0]

    def request(
        self, method: str, params: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
    ) -> Op[JSON]:
        raise NotImplementedError

    def list_all(self, method: str, key: str) -> Op[JSON]:
        raise NotImplementedError

    def info(self) -> Op[JSON]:
        raise NotImplementedError

    def listen(
        self, notifications: JSON, count: int, timeout: float, during: Callable[[], Any] | None
    ) -> Op[JSON]:
        raise NotImplementedError


def _protocol_for(client: _ClientBase, wanted: list[str]) -> _Protocol:
    if not wanted:
        raise ValueError("versions must name at least one protocol revision")
    modern = [version for version in wanted if revisions.is_modern(version)]
    if not modern:
        raise NotImplementedError("initialize-era sessions are not served yet")
    return _Stateless(client, modern)


class _Stateless(_Protocol):
    """The 2026-07-28 wire: one self-describing POST per request, MRTR for input."""

    def __init__(self, client: _ClientBase, candidates: list[str]) -> None:
        super().__init__(client, candidates)
        self._tool_headers: dict[str, dict[str, str]] | None = None

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
        param_headers: Mapping[str, str],
    ) -> _Open:
        body_params = dict(params)
        body_params["_meta"] = self._meta({**(params.get("_meta") or {}), **(meta or {})})
        headers = {
            "Accept": ACCEPT,
            "MCP-Protocol-Version": header_value(self.version),
            "Mcp-Method": header_value(method),
        }
        if method in NAMED_PARAMS:
            headers["Mcp-Name"] = header_value(_header_text(params.get(NAMED_PARAMS[method])))
        arguments = params.get("arguments")
        if isinstance(arguments, Mapping):
            for argument, name in param_headers.items():
                value = arguments.get(argument)
                if value is not None:
                    headers[f"Mcp-Param-{name}"] = header_value(_header_text(value))
        extra = self.client.headers
        lowered = {name.lower() for name in extra}
        headers = {k: v for k, v in headers.items() if k.lower() not in lowered}
        headers.update(extra)
        body = {
            "jsonrpc": "2.0",
            "id": self.client._new_id(),
            "method": method,
            "params": body_params,
        }
        return _Open(body, headers)

    def _param_headers(self, method: str, params: Mapping[str, Any]) -> Op[dict[str, str]]:
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

    def _learn_tools(self, tools: list[Any]) -> None:
        found = self._tool_headers if self._tool_headers is not None else {}
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            properties = (tool.get("inputSchema") or {}).get("properties") or {}
            found[tool["name"]] = {
                argument: schema["x-mcp-header"]
                for argument, schema in properties.items()
                if isinstance(schema, dict) and isinstance(schema.get("x-mcp-header"), str)
            }
        self._tool_headers = found

    # -- one POST ------------------------------------------------------------------------

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

    def _exchange(self, request: _Open) -> Op[tuple[int, Any]]:
        """POST one request; return the HTTP status and the final message.

        Notifications on the request's own stream go to ``client.notifications``.
        """
        method = request.body["method"]
        opened: _Opened = yield _Open(request.body, request.headers)
        if opened.stream is None:
            return opened.status, opened.message if opened.message is not None else opened.text
        parser = _EventParser()
        deadline = time.monotonic() + self.client.timeout
        try:
            while True:
                message = yield from self._next_message(opened.stream, parser, deadline)
                if message is None:
                    raise MCPClientError(
                        "transport",
                        "The event stream ended without a response",
                        status=opened.status,
                        method=method,
                    )
                if _is_response(message):
                    return opened.status, message
                if "id" in message:
                    raise MCPClientError(
                        "transport",
                        f"The server sent a request on the stream: {message!r}",
                        status=opened.status,
                        method=method,
                    )
                self.client.notifications.append(message)
        except TimeoutError:
            raise MCPClientError(
                "timeout",
                f"No response within {self.client.timeout} seconds",
                status=opened.status,
                method=method,
            ) from None
        finally:
            yield _Shut(opened.stream)

    def _result(self, request: _Open, status: int, message: Any) -> JSON:
        method = request.body["method"]
        if isinstance(message, dict) and isinstance(message.get("error"), dict):
            error = message["error"]
            raise MCPClientError(
                "protocol",
                str(error.get("message", "")),
                code=error.get("code"),
                data=error.get("data"),
                status=status,
                method=method,
            )
        if isinstance(message, dict) and isinstance(message.get("result"), dict):
            if message.get("id") != request.body["id"]:
                raise MCPClientError(
                    "transport",
                    f"The response answers id {message.get('id')!r}, not {request.body['id']!r}",
                    status=status,
                    method=method,
                )
            return cast(JSON, message["result"])
        shown = message if isinstance(message, str) else json.dumps(message)
        raise MCPClientError(
            "transport",
            f"HTTP {status} without a JSON-RPC response: {shown[:300]!r}",
            status=status,
            method=method,
        )

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
            status, message = yield from self._exchange(request)
            try:
                result = self._result(request, status, message)
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
                    status=status,
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
            handler = self.client.handlers.get(str(wanted))
            if handler is None:
                raise MCPClientError(
                    "unsupported",
                    f"The server asked for {wanted} (input request {key!r}) "
                    "and this client has no handler for it",
                    data={key: request},
                    method=method,
                )
            try:
                answers[key] = yield _Call(handler, (request.get("params") or {},))
            except Exception:
                if wanted == "elicitation/create":
                    answers[key] = {"action": "cancel"}
                logger.warning(
                    "The %s handler failed for input request %r; %s",
                    wanted,
                    key,
                    "answering cancel" if key in answers else "leaving it unanswered",
                    exc_info=True,
                )
        return answers

    def list_all(self, method: str, key: str) -> Op[JSON]:
        items: list[Any] = []
        seen: set[Any] = set()
        cursor: Any = None
        while True:
            params = {} if cursor is None else {"cursor": cursor}
            result = yield from self.request(method, params, None)
            page = result.get(key) or []
            items.extend(page)
            if method == "tools/list":
                self._learn_tools(page)
            cursor = result.get("nextCursor")
            if cursor is None:
                return {key: items}
            if cursor in seen:
                raise MCPClientError("transport", f"Repeated cursor {cursor!r}", method=method)
            seen.add(cursor)

    def info(self) -> Op[JSON]:
        result = yield from self.request("server/discover", None, None)
        return {
            "protocolVersion": self.version,
            "serverInfo": (result.get("_meta") or {}).get(revisions.META_SERVER_INFO),
            "capabilities": result.get("capabilities") or {},
            "instructions": result.get("instructions"),
        }

    # -- subscriptions -------------------------------------------------------------------

    def listen(
        self, notifications: JSON, count: int, timeout: float, during: Callable[[], Any] | None
    ) -> Op[JSON]:
        method = "subscriptions/listen"
        request = self._build(method, {"notifications": notifications}, None, {})
        opened: _Opened = yield _Open(request.body, request.headers)
        if opened.stream is None:
            self._result(request, opened.status, opened.message or opened.text)
            raise MCPClientError(
                "transport",
                "subscriptions/listen was answered without an event stream",
                status=opened.status,
                method=method,
            )
        parser = _EventParser()
        acknowledged: Any = None
        collected: list[JSON] = []
        try:
            deadline = time.monotonic() + timeout
            first = yield from self._next_message(opened.stream, parser, deadline)
            if first is None or first.get("method") != "notifications/subscriptions/acknowledged":
                if first is not None and _is_response(first):
                    self._result(request, opened.status, first)
                raise MCPClientError(
                    "transport",
                    f"The stream did not start with an acknowledgement: {first!r}",
                    status=opened.status,
                    method=method,
                )
            acknowledged = first.get("params") or {}
            if during is not None:
                yield _Call(during)
            deadline = time.monotonic() + timeout
            while len(collected) < count:
                message = yield from self._next_message(opened.stream, parser, deadline)
                if message is not None and _is_response(message):
                    self._result(request, opened.status, message)
                if message is None or _is_response(message):
                    raise MCPClientError(
                        "transport",
                        f"The listen stream ended after {len(collected)} of {count} notifications",
                        data={"acknowledged": acknowledged, "notifications": collected},
                        status=opened.status,
                        method=method,
                    )
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
        declared: JSON = {}
        for method in self.handlers:
            declared = _merge(declared, HANDLER_CAPABILITIES[method])
        #: What the client declares in every request's ``_meta``.
        self.capabilities = _merge(declared, capabilities or {})
        self.headers: dict[str, str] = dict(headers or {})
        self.user = user
        self.max_rounds = max_rounds
        self.timeout = timeout
        #: Notifications that arrived on requests' own streams (progress, log messages).
        self.notifications: list[JSON] = []
        self._last_id = 0
        self._protocol = _protocol_for(self, list(versions or [revisions.MODERN]))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.server.name!r} {self.version}>"

    @property
    def version(self) -> str:
        """The protocol revision spoken."""
        return self._protocol.version

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
    ``versions`` lists the protocol revisions the client may speak (default
    ``["2026-07-28"]``). ``handlers`` answers the server's input requests, by method
    (``"elicitation/create"``, ``"sampling/createMessage"``, ``"roots/list"``): each is called
    with the request's params and returns the result; the client declares the matching
    capability, and ``capabilities`` declares more. ``user`` is logged in; ``headers`` go on
    every request. ``max_rounds`` bounds the input rounds of one request; ``timeout`` bounds
    the wait for a streamed response.

    Methods return the JSON-RPC ``result`` as a dict. An exception that the endpoint answers
    with an internal error (-32603) is re-raised, as ``django.test.Client`` does; a tool's
    exception is an ``isError`` result, as on the wire.

    Raises:
        NotImplementedError: ``versions`` names no 2026-07-28 (or later) revision:
            initialize-era sessions are not served yet.
        ValueError: no server has that name, or a handler key is not an input method.
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
        result = command.function(*command.args)
        if inspect.isawaitable(result):
            result = async_to_sync(_awaited)(result)
        return result

    def _open(self, command: _Open) -> _Opened:
        path = self.path
        data = json.dumps(command.body)
        if not _is_async_view(path):
            response = self.django_client.post(
                path, data=data, content_type="application/json", headers=command.headers
            )
            opened = _opened(response, _ThreadStream)
        else:
            portal = _Portal.get()
            response = portal.run(
                sync_to_async(_post, thread_sensitive=False)(
                    self.django_client, path, data, command.headers
                )
            )
            opened = _opened(response, lambda r: _PortalStream(portal, r))
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

        Raises:
            MCPClientError: ``server/discover`` failed.
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

        Notifications streamed before the result are appended to ``notifications``.

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
            MCPClientError: a JSON-RPC error (-32602 for an unknown URI), or failed input.
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
        """Complete an argument of a prompt or a URI template (a ``ref`` with ``://``).

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
        """Open a ``subscriptions/listen`` stream and collect ``count`` notifications.

        ``notifications`` is the filter (``{"toolsListChanged": True}``, or a list of its keys);
        ``during()`` is called once the acknowledgement arrived, to make the changes; the
        stream is closed before returning ``{"acknowledged": params, "notifications": [...]}``.
        ``timeout`` bounds the wait for the acknowledgement, then for the notifications.

        Raises:
            MCPClientError: ``timeout`` (what arrived is in ``data``), ``protocol``, or
                ``transport`` (the stream ended early).
        """
        return self._drive(self._listen_op(notifications, count, timeout, during))

    def close(self) -> None:
        """Close the streams still open."""
        for stream in list(self._streams):
            stream.close()
        self._streams.clear()

    def __enter__(self) -> MCPClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _post(client: Client, path: str, data: str, headers: dict[str, str]) -> Any:
    try:
        return client.post(path, data=data, content_type="application/json", headers=headers)
    finally:
        close_old_connections()  # this worker thread's own connections


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


class AsyncMCPClient(_ClientBase):
    """:class:`MCPClient` over ``django.test.AsyncClient``: the same methods, as coroutines.

    Input handlers and ``during`` may be sync (run in a thread) or async functions.

    Raises:
        NotImplementedError: ``versions`` names no 2026-07-28 (or later) revision.
        ValueError: no server has that name, or a handler key is not an input method.
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
        response = await self.django_client.post(
            self.path,
            data=json.dumps(command.body),
            content_type="application/json",
            headers=command.headers,
        )
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
            MCPClientError: ``server/discover`` failed.
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
        """
        return await self._drive(self._listen_op(notifications, count, timeout, during))

    async def close(self) -> None:
        """Close the streams still open."""
        for stream in list(self._streams):
            await self._close_stream(stream)
        self._streams.clear()

    async def __aenter__(self) -> AsyncMCPClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
