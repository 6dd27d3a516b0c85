"""The Django views: an async one for ASGI servers and a sync one for WSGI servers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from asgiref.sync import sync_to_async
from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from ..conf import conf
from ..delivery import backend
from ..protocol import jsonrpc
from . import sse
from .http import Call, Incoming, Reply
from .pipe import Empty, Pipe
from .sse import Event

if TYPE_CHECKING:
    from ..server import Server

_FINAL = "final"
_EVENT = "event"


class Stream(Protocol):
    """A long-lived stream fed by the delivery backend (listen, GET, resumption)."""

    finished: bool

    @property
    def channels(self) -> list[str]: ...

    def opening(self) -> list[Event]: ...

    def backlog(self) -> list[Event]: ...

    def notifications(self, channel: str, message: dict[str, Any]) -> list[Event]: ...


def _body(request: HttpRequest) -> bytes:
    """The POST body; one declared longer than ``MAX_BODY_BYTES`` is refused unread.

    Raises:
        RequestDataTooBig: the body is over ``MAX_BODY_BYTES`` or Django's
            ``DATA_UPLOAD_MAX_MEMORY_SIZE``.
    """
    if request.method != "POST":
        return b""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > conf.MAX_BODY_BYTES:
        raise RequestDataTooBig("Request body over MAX_BODY_BYTES")
    return request.body


def too_large() -> Reply:
    """413 with a JSON-RPC error naming the smaller of the two body limits."""
    from django.conf import settings

    limits = [conf.MAX_BODY_BYTES, settings.DATA_UPLOAD_MAX_MEMORY_SIZE]
    limit = min(value for value in limits if value is not None)
    error = jsonrpc.InvalidRequest(f"Request body over {limit} bytes")
    return Reply(413, jsonrpc.error_response(None, error))


def incoming(request: HttpRequest) -> Incoming | Reply | None:
    """Read what the transport needs; ``None`` when the Host is not allowed, 413 when too large."""
    try:
        host = request.get_host()
    except DisallowedHost:
        return None
    try:
        body = _body(request)
    except RequestDataTooBig:
        # Django would answer an HTML 400 page; a client of this endpoint reads JSON-RPC.
        return too_large()
    headers = {k.lower(): v for k, v in request.headers.items()}
    return Incoming(
        method=request.method or "GET",
        headers=headers,
        body=body,
        host=host,
        scheme=request.scheme or "http",
        user=getattr(request, "user", None),
        request=request,
    )


def to_response(reply: Reply) -> HttpResponse:
    if reply.body is None:
        response = HttpResponse(status=reply.status)
    else:
        response = JsonResponse(
            reply.body, status=reply.status, safe=False, json_dumps_params={"ensure_ascii": False}
        )
    for name, value in reply.headers.items():
        response[name] = value
    return response


def host_refused() -> HttpResponse:
    return JsonResponse(
        jsonrpc.error_response(None, jsonrpc.InvalidRequest("Host not allowed")), status=403
    )


def _prepare(server: Server, request: HttpRequest) -> Reply | None:
    close_old_connections()
    try:
        data = incoming(request)
        if data is None or isinstance(data, Reply):
            return data
        return server.endpoint.handle(data)  # type: ignore[no-any-return]
    finally:
        close_old_connections()


def _run(call: Call, put: Callable[[tuple[str, Any]], None]) -> None:
    """Run a call in this (worker) thread, passing what it produces to ``put``."""
    close_old_connections()
    try:
        status, final = call.run(lambda event: put((_EVENT, event)))
    except BaseException as exc:  # the endpoint answers errors itself; this is a last resort
        call.ctx.server.endpoint.report(exc, call.ctx)
        error = jsonrpc.error_response(call.request_id, jsonrpc.InternalError("Internal error"))
        status, final = 500, Event(error)
    finally:
        close_old_connections()
    put((_FINAL, (status, final)))


def _first_response(call: Call, kind: str, payload: Any) -> HttpResponseBase | None:
    """Plain JSON when the call finished before producing anything else."""
    if kind == _FINAL:
        status, final = payload
        return to_response(Reply(status, final.message))
    return None


def _backlog(stream: Stream) -> list[Event]:
    """A stream's stored events, read in a pool thread whose connection is let go of after."""
    try:
        return stream.backlog()
    finally:
        close_old_connections()


class _CallRelay:
    """Turns what a call produces into the bytes of its event stream, sync or async alike."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.done = False
        self.released = False

    def start(self, kind: str, payload: Any) -> list[bytes]:
        priming = self.call.priming()
        return ([priming] if priming is not None else []) + self.feed(kind, payload)

    def feed(self, kind: str, payload: Any) -> list[bytes]:
        event: Event = payload[1] if kind == _FINAL else payload
        if event.close:
            # The server let go of the connection; the call goes on and is resumed later.
            self.done = self.released = True
            return []
        self.done = kind == _FINAL
        return [event.encode()]

    def finish(self) -> None:
        # A client that went away cancels the call; one the server let go of does not.
        if not self.released:
            self.call.cancel()


class _ListenRelay:
    """Turns a long-lived stream's deliveries into the bytes of its event stream."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.items = Pipe()
        self.unsubscribe = backend().subscribe(
            stream.channels, lambda channel, message: self.items.put((channel, message))
        )

    def start(self, backlog: list[Event]) -> list[bytes]:
        opening = self.stream.opening() + backlog
        return [event.encode() for event in opening] or [sse.comment("stream open")]

    def feed(self, channel: str, message: dict[str, Any]) -> list[bytes]:
        return [event.encode() for event in self.stream.notifications(channel, message)]


# -- ASGI ---------------------------------------------------------------------------------


def async_view(server: Server) -> Callable[..., Awaitable[HttpResponseBase]]:
    """The endpoint for ASGI servers: one thread hop per request, streams as async iterators."""

    @csrf_exempt
    async def mcp_endpoint(request: HttpRequest) -> HttpResponseBase:
        reply = await sync_to_async(_prepare, thread_sensitive=False)(server, request)
        if reply is None:
            return host_refused()
        if reply.listen is not None:
            return _stream_async_listen(reply.listen)
        if reply.call is None:
            return to_response(reply)
        return await _stream_async_call(reply.call)

    return mcp_endpoint


async def _stream_async_call(call: Call) -> HttpResponseBase:
    items = Pipe()
    task = asyncio.ensure_future(sync_to_async(_run, thread_sensitive=False)(call, items.put))
    kind, payload = await items.aget()
    plain = _first_response(call, kind, payload)
    if plain is not None:
        await task
        return plain

    async def body() -> AsyncIterator[bytes]:
        relay = _CallRelay(call)
        try:
            chunks = relay.start(kind, payload)
            while True:
                for chunk in chunks:
                    yield chunk
                if relay.done:
                    return
                chunks = relay.feed(*await items.aget())
        finally:
            relay.finish()

    return StreamingHttpResponse(body(), headers=sse.HEADERS)


def _stream_async_listen(stream: Stream) -> HttpResponseBase:
    async def body() -> AsyncIterator[bytes]:
        # Subscribing may wait on the backend (Redis, the database poller): not on the loop.
        relay = await sync_to_async(_ListenRelay, thread_sensitive=False)(stream)
        try:
            chunks = relay.start(await sync_to_async(_backlog, thread_sensitive=False)(stream))
            while True:
                for chunk in chunks:
                    yield chunk
                if stream.finished:
                    return
                try:
                    chunks = relay.feed(*await relay.items.aget(conf.KEEPALIVE_SECONDS))
                except Empty:
                    chunks = [sse.comment()]
        finally:
            relay.unsubscribe()

    return StreamingHttpResponse(body(), headers=sse.HEADERS)


# -- WSGI ---------------------------------------------------------------------------------


def sync_view(server: Server) -> Callable[..., HttpResponseBase]:
    """The endpoint for WSGI servers: streams are generators fed by a worker thread."""

    @csrf_exempt
    def mcp_endpoint(request: HttpRequest) -> HttpResponseBase:
        data = incoming(request)
        if data is None:
            return host_refused()
        if isinstance(data, Reply):
            return to_response(data)
        reply = server.endpoint.handle(data)
        if reply.listen is not None:
            return _stream_sync_listen(reply.listen)
        if reply.call is None:
            return to_response(reply)
        return _stream_sync_call(reply.call)

    return mcp_endpoint


def _stream_sync_call(call: Call) -> HttpResponseBase:
    items = Pipe()
    threading.Thread(target=_run, args=(call, items.put), daemon=True).start()
    kind, payload = items.get()
    plain = _first_response(call, kind, payload)
    if plain is not None:
        return plain

    def body() -> Iterator[bytes]:
        relay = _CallRelay(call)
        try:
            chunks = relay.start(kind, payload)
            while True:
                yield from chunks
                if relay.done:
                    return
                chunks = relay.feed(*items.get())
        finally:
            relay.finish()

    return StreamingHttpResponse(body(), headers=sse.HEADERS)


def _stream_sync_listen(stream: Stream) -> HttpResponseBase:
    def body() -> Iterator[bytes]:
        relay = _ListenRelay(stream)
        try:
            # The request's own thread: Django closes its connection when the request ends.
            chunks = relay.start(stream.backlog())
            while True:
                yield from chunks
                if stream.finished:
                    return
                try:
                    chunks = relay.feed(*relay.items.get(conf.KEEPALIVE_SECONDS))
                except Empty:
                    chunks = [sse.comment()]
        finally:
            relay.unsubscribe()

    return StreamingHttpResponse(body(), headers=sse.HEADERS)
