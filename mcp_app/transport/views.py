"""The Django views: an async one for ASGI servers and a sync one for WSGI servers."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.core.exceptions import DisallowedHost
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from ..conf import conf
from ..delivery import backend
from ..protocol import jsonrpc
from . import sse
from .http import Call, Incoming, Reply
from .legacy import SessionStream
from .listen import Listen

if TYPE_CHECKING:
    from ..server import Server

_FINAL = "final"
_EVENT = "event"


def incoming(request: HttpRequest) -> Incoming | None:
    """Read what the transport needs; ``None`` when the Host is not allowed."""
    try:
        host = request.get_host()
    except DisallowedHost:
        return None
    headers = {k.lower(): v for k, v in request.headers.items()}
    return Incoming(
        method=request.method or "GET",
        headers=headers,
        body=request.body if request.method == "POST" else b"",
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
        if data is None:
            return None
        return server.endpoint.handle(data)  # type: ignore[no-any-return]
    finally:
        close_old_connections()


def _run(call: Call, put: Any) -> None:
    close_old_connections()
    try:
        status, final = call.run(lambda message: put((_EVENT, message)))
    except BaseException as exc:  # the endpoint answers errors itself; this is a last resort
        call.ctx.server.endpoint.report(exc, call.ctx)
        status, final = 500, jsonrpc.error_response(
            call.request_id, jsonrpc.InternalError("Internal error")
        )
    finally:
        close_old_connections()
    put((_FINAL, (status, final)))


def async_view(server: Server) -> Callable[..., Awaitable[HttpResponse]]:
    """The endpoint for ASGI servers: one thread hop per request, streams as async iterators."""

    @csrf_exempt
    async def mcp_endpoint(request: HttpRequest) -> HttpResponse:
        reply = await sync_to_async(_prepare, thread_sensitive=False)(server, request)
        if reply is None:
            return host_refused()
        if reply.listen is not None:
            return _listen_async(reply.listen)
        if reply.call is None:
            return to_response(reply)
        return await _stream_async(reply.call)

    return mcp_endpoint


async def _stream_async(call: Call) -> HttpResponse:
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def put(item: tuple[str, Any]) -> None:
        loop.call_soon_threadsafe(events.put_nowait, item)

    task = asyncio.ensure_future(sync_to_async(_run, thread_sensitive=False)(call, put))
    kind, payload = await events.get()
    if kind == _FINAL:
        await task
        return to_response(Reply(*payload))

    async def body() -> AsyncIterator[bytes]:
        try:
            yield sse.event(payload)
            while True:
                kind, item = await events.get()
                yield sse.event(item[1] if kind == _FINAL else item)
                if kind == _FINAL:
                    return
        finally:
            # The client went away, or the stream ended: either way the handler stops.
            call.cancel()

    return StreamingHttpResponse(body(), headers=sse.HEADERS)


def _listen_async(listen: Listen | SessionStream) -> HttpResponse:
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def sink(channel: str, message: dict[str, Any]) -> None:
        loop.call_soon_threadsafe(events.put_nowait, (channel, message))

    async def body() -> AsyncIterator[bytes]:
        unsubscribe = backend().subscribe(listen.channels, sink)
        try:
            first = listen.acknowledgement()
            yield sse.event(first) if first is not None else sse.comment("stream open")
            while True:
                try:
                    channel, message = await asyncio.wait_for(events.get(), conf.KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield sse.comment()
                    continue
                for notification in listen.notifications(channel, message):
                    yield sse.event(notification)
        finally:
            unsubscribe()

    return StreamingHttpResponse(body(), headers=sse.HEADERS)


def _listen_sync(listen: Listen | SessionStream) -> HttpResponse:
    events: queue.Queue[tuple[str, Any]] = queue.Queue()

    def body() -> Iterator[bytes]:
        unsubscribe = backend().subscribe(listen.channels, lambda c, m: events.put((c, m)))
        try:
            first = listen.acknowledgement()
            yield sse.event(first) if first is not None else sse.comment("stream open")
            while True:
                try:
                    channel, message = events.get(timeout=conf.KEEPALIVE_SECONDS)
                except queue.Empty:
                    yield sse.comment()
                    continue
                for notification in listen.notifications(channel, message):
                    yield sse.event(notification)
        finally:
            unsubscribe()

    return StreamingHttpResponse(body(), headers=sse.HEADERS)


def sync_view(server: Server) -> Callable[..., HttpResponse]:
    """The endpoint for WSGI servers: streams are generators fed by a worker thread."""

    @csrf_exempt
    def mcp_endpoint(request: HttpRequest) -> HttpResponse:
        data = incoming(request)
        if data is None:
            return host_refused()
        reply = server.endpoint.handle(data)
        if reply.listen is not None:
            return _listen_sync(reply.listen)
        if reply.call is None:
            return to_response(reply)
        call = reply.call
        events: queue.Queue[tuple[str, Any]] = queue.Queue()
        threading.Thread(target=_run, args=(call, events.put), daemon=True).start()
        kind, payload = events.get()
        if kind == _FINAL:
            return to_response(Reply(*payload))

        def body() -> Iterator[bytes]:
            try:
                yield sse.event(payload)
                while True:
                    kind, item = events.get()
                    yield sse.event(item[1] if kind == _FINAL else item)
                    if kind == _FINAL:
                        return
            finally:
                call.cancel()

        return StreamingHttpResponse(body(), headers=sse.HEADERS)

    return mcp_endpoint
