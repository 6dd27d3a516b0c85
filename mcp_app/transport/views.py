"""The Django views: an async one for ASGI servers and a sync one for WSGI servers.

Under ASGI every request makes one thread hop (``respond``): preparing it, handling it and
running its call happen in one pool thread, whose answer the loop takes when it ends, and
whose call's events reach the loop through a ``Pipe`` meanwhile. ``mcp_app.asgi`` serves
requests through the same ``respond`` without Django's handler in front.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from django.core.exceptions import DisallowedHost, RequestDataTooBig, SuspiciousOperation
from django.core.handlers.asgi import ASGIRequest
from django.core.signals import got_request_exception
from django.db import transaction
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse, UnreadablePostError
from django.http.response import HttpResponseBase
from django.utils.log import log_response
from django.views.decorators.csrf import csrf_exempt

from .. import shutdown
from ..auth import site_user
from ..conf import conf, django_setting
from ..delivery import backend
from ..protocol import jsonrpc
from . import sse
from .connections import close_old_connections
from .http import Call, Departure, Incoming, Reply
from .listen import Renewal
from .pipe import Empty, Pipe
from .sse import Event
from .workers import workers

if TYPE_CHECKING:
    from ..server import Server

logger = logging.getLogger("django.request")

_FINAL = "final"
_EVENT = "event"
_REPLY = "reply"
_CALL = "call"
_FAILED = "failed"


class Stream(Protocol):
    """A long-lived stream fed by the delivery backend (listen, GET, resumption)."""

    finished: bool

    @property
    def channels(self) -> list[str]: ...

    def opening(self) -> list[Event]: ...

    def backlog(self) -> list[Event]: ...

    def notifications(self, channel: str, message: dict[str, Any]) -> list[Event]: ...

    def ending(self) -> list[Event]:
        """What the stream says when the server ends it (a listen request's final result)."""

    def closed(self) -> None:
        """The stream ended (in a thread that may wait on the backend)."""

    #: Whether ``renew()`` does anything: only then is it called, in a pool thread (under WSGI,
    #: in the request's own).
    renews: bool
    #: Set by a delivery that makes the next renewal due at once.
    stale: bool

    def renew(self) -> bool:
        """Whether the stream may go on; called every ``KEEPALIVE_SECONDS`` in a thread that
        may query (a session's GET stream keeps its session alive, and ends with it)."""


def body_limit() -> int:
    """The most body bytes a request may carry: ``MAX_BODY_BYTES`` or Django's limit if lower."""
    limit, django_limit = conf.MAX_BODY_BYTES, django_setting("DATA_UPLOAD_MAX_MEMORY_SIZE")
    return limit if django_limit is None else min(limit, django_limit)


class InvalidLength(Exception):
    """The request's ``Content-Length`` is not a number of bytes."""


def declared_length(request: HttpRequest) -> int:
    """The body length the request declares (``Content-Length``); 0 if none.

    Raises:
        InvalidLength: the header is not a number of bytes (Django would fail reading the body).
    """
    raw = request.META.get("CONTENT_LENGTH") or "0"
    if not (raw.isascii() and raw.isdigit()):
        raise InvalidLength
    return int(raw)


#: Most bytes of a refused body read and dropped before the refusal is sent. A server that
#: closes a connection holding unread bytes resets it, and the client may never read the
#: answer (RFC 9112, 9.6); one that keeps it open reads them as the next request.
DRAIN_BYTES = 16 * 1024 * 1024
#: Longest the wait for the rest of a refused body, by the lean ASGI route and under WSGI.
DRAIN_SECONDS = 5.0


def drain(request: HttpRequest) -> None:
    """Read and drop what is left of a refused WSGI request's body, up to ``DRAIN_BYTES``
    and for up to ``DRAIN_SECONDS``: a client that stops sending would hold the worker.

    Where the server gives the connection's socket (gunicorn) a read still waiting at the
    deadline is ended; elsewhere the time is checked between reads. Django's ASGI handler has read the body already (the lean
    ASGI route drains its own).
    """
    if isinstance(request, ASGIRequest):
        return
    meta = request.META
    try:
        declared = declared_length(request)
    except InvalidLength:
        return  # no length to trust: the server ends the connection
    if declared:
        if declared > DRAIN_BYTES:
            return
        stream = getattr(request, "_stream", None)  # Django's reader, bounded by the length
    else:
        stream = meta.get("wsgi.input") if meta.get("wsgi.input_terminated") else None
    if stream is None:
        return
    sock = meta.get("gunicorn.socket")
    stop = None
    if sock is not None:
        # A read waits for all it asked for, which a client sending a byte at a time never
        # completes: at the deadline, reading ends (the connection then ends too).
        stop = threading.Timer(DRAIN_SECONDS, _stop_reading, (sock,))
        stop.daemon = True
        stop.start()
    deadline = time.monotonic() + DRAIN_SECONDS
    left = DRAIN_BYTES
    try:
        while left > 0 and time.monotonic() < deadline:
            chunk = stream.read(min(65536, left))
            if not chunk:
                break
            left -= len(chunk)
    except Exception:
        pass  # what cannot be read in time is the server's to close
    finally:
        if stop is not None:
            stop.cancel()


def _stop_reading(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)


def invalid_length() -> Reply:
    """400 with a JSON-RPC error for a ``Content-Length`` that is not a number of bytes."""
    error = jsonrpc.InvalidRequest("Bad Request: invalid Content-Length header")
    return Reply(400, jsonrpc.error_response(None, error))


def _body(request: HttpRequest) -> bytes:
    """The POST body; one declared longer than ``MAX_BODY_BYTES`` is refused unread.

    Raises:
        RequestDataTooBig: the body is over ``MAX_BODY_BYTES`` or Django's
            ``DATA_UPLOAD_MAX_MEMORY_SIZE``.
    """
    if request.method != "POST":
        return b""
    if declared_length(request) > conf.MAX_BODY_BYTES:
        raise RequestDataTooBig("Request body over MAX_BODY_BYTES")
    meta = request.META
    if not meta.get("CONTENT_LENGTH") and meta.get("wsgi.input_terminated"):
        # A chunked body under WSGI: Django reads as many bytes as Content-Length says, none
        # here, where the server (gunicorn) lets the input be read to its end.
        return _read_to_end(request, meta["wsgi.input"])
    return request.body


def _read_to_end(request: HttpRequest, stream: Any) -> bytes:
    limit = body_limit()
    chunks: list[bytes] = []
    size = 0
    while chunk := _read(stream, min(65536, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise RequestDataTooBig("Request body over the limit")
    body = b"".join(chunks)
    request._body = body  # what request.body then gives
    return body


def _read(stream: Any, size: int) -> bytes:
    try:
        return stream.read(size)  # type: ignore[no-any-return]
    except Exception as exc:
        # The server's own errors for a malformed chunked body, or one cut short (gunicorn's
        # InvalidChunkSize, NoMoreData): the client's fault, as Django's UnreadablePostError.
        raise UnreadablePostError(str(exc) or type(exc).__name__) from exc


def unreadable_body() -> Reply:
    """400 with a JSON-RPC error for a body the server could not read to its end."""
    error = jsonrpc.InvalidRequest("Bad Request: the request body could not be read")
    return Reply(400, jsonrpc.error_response(None, error))


def too_large() -> Reply:
    """413 with a JSON-RPC error naming the smaller of the two body limits."""
    error = jsonrpc.InvalidRequest(f"Request body over {body_limit()} bytes")
    return Reply(413, jsonrpc.error_response(None, error))


#: ``Host`` headers ``get_host()`` found allowed, and what it found them allowed by: the
#: ``ALLOWED_HOSTS`` entries and ``DEBUG``.
_allowed_hosts: tuple[tuple[Any, ...], set[str]] = ((), set())
#: Most hosts remembered, and the longest: a wildcard in ALLOWED_HOSTS lets clients choose.
ALLOWED_HOSTS_LIMIT = 1024
HOST_MAX = 300


def request_host(request: HttpRequest) -> str:
    """``request.get_host()``, which a ``Host`` header allowed before skips.

    Checking a host against ``ALLOWED_HOSTS`` costs several times more than looking it up.
    Only a request without ``X-Forwarded-Host`` is looked up: its host is its ``Host``
    header, whatever ``USE_X_FORWARDED_HOST`` says. Hosts are remembered only while
    ``ALLOWED_HOSTS`` (a list or tuple) holds the same entries and ``DEBUG`` is the same,
    and not for a request class with a ``get_host()`` of its own. A host refused is
    refused by Django.

    Raises:
        DisallowedHost: the host is not allowed.
    """
    global _allowed_hosts
    meta = request.META
    raw = meta.get("HTTP_HOST")
    hosts = django_setting("ALLOWED_HOSTS")
    if (
        raw is None
        or "HTTP_X_FORWARDED_HOST" in meta
        or len(raw) > HOST_MAX
        or type(hosts) not in (list, tuple)
        or type(request).get_host is not HttpRequest.get_host
    ):
        return request.get_host()
    key = (*hosts, django_setting("DEBUG"))
    known = _allowed_hosts
    if known[0] != key:
        known = _allowed_hosts = (key, set())
    if raw in known[1]:
        return raw  # type: ignore[no-any-return]
    host = request.get_host()
    if len(known[1]) < ALLOWED_HOSTS_LIMIT:
        known[1].add(raw)
    return host


def incoming(
    request: HttpRequest, headers: dict[str, str] | None = None
) -> Incoming | Reply | None:
    """Read what the transport needs; ``None`` when the Host is not allowed, 413 when too large.

    ``headers``: the request's headers by lower-case name, when the caller has them already.
    """
    try:
        host = request_host(request)
    except DisallowedHost as exc:
        # Logged where Django logs it, so a site's alerting on the security loggers sees it.
        logging.getLogger("django.security.DisallowedHost").error(
            str(exc), extra={"status_code": 400, "request": request}
        )
        return None
    try:
        body = _body(request)
    except RequestDataTooBig:
        # Django would answer an HTML 400 page; a client of this endpoint reads JSON-RPC.
        drain(request)
        return too_large()
    except InvalidLength:
        return invalid_length()
    except UnreadablePostError:
        # The client sent less than it said, or a chunked body that is not one.
        return unreadable_body()
    return Incoming(
        method=request.method or "GET",
        headers=meta_headers(request.META) if headers is None else headers,
        body=body,
        host=host,
        scheme=request.scheme or "http",
        user=site_user(request),
        request=request,
    )


#: What a plain JSON answer is encoded with: as events are.
ENCODER = sse.ENCODER
_UNPREFIXED = {"CONTENT_TYPE": "content-type", "CONTENT_LENGTH": "content-length"}


#: Header names by META key (``None``: not a header), for the keys met so far: a WSGI
#: server's environ holds some 40 keys, nearly the same on every request.
_HEADER_NAMES: dict[str, str | None] = {}
#: Most keys remembered, and the longest: header names are the client's to choose, and a
#: server may pass on names of any length.
HEADER_NAMES_LIMIT = 1024
HEADER_NAME_MAX = 100


def _header_name(key: str) -> str | None:
    if key.startswith("HTTP_"):
        name: str | None = key[5:].replace("_", "-").lower()
    else:
        name = _UNPREFIXED.get(key)
    remember_name(_HEADER_NAMES, key, name)
    return name


def remember_name(names: dict[Any, Any], key: str | bytes, name: str | None) -> None:
    """Keep ``name`` for ``key`` in a cache of header names, within the bounds above."""
    if len(names) < HEADER_NAMES_LIMIT and len(key) <= HEADER_NAME_MAX:
        names[key] = name


def meta_headers(meta: dict[str, Any]) -> dict[str, str]:
    """The request's headers by lower-case name, as ``request.headers`` has them, from META.

    Made directly: building ``request.headers`` title-cases every name first.
    """
    headers: dict[str, str] = {}
    names = _HEADER_NAMES
    for key, value in meta.items():
        name = names[key] if key in names else _header_name(key)
        if name is not None:
            headers[name] = value
    return headers


def reply_content(reply: Reply) -> bytes | None:
    """The reply's body as sent, written as events are (``sse.ENCODER``); ``None`` if none.

    A response JSON cannot carry goes as an internal error, and the reply's status becomes its
    ``failed_status``, if it has one.
    """
    if reply.body is None:
        return None
    if reply.content is None:
        text, replaced = jsonrpc.encode_answer(reply.body, ENCODER)
        if replaced and reply.failed_status is not None:
            reply.status = reply.failed_status
        reply.content = text.encode()
    return reply.content


def to_response(reply: Reply) -> HttpResponse:
    """The reply as a JSON response, written as events are (``sse.ENCODER``)."""
    content = reply_content(reply)
    if content is None:
        response = HttpResponse(status=reply.status)
        # No body, so no type: Django's default would call it an HTML page.
        del response["Content-Type"]
    else:
        response = HttpResponse(content, content_type="application/json", status=reply.status)
    for name, value in reply.headers.items():
        response[name] = value
    return response


def host_refused_reply() -> Reply:
    # 400, as Django answers ``DisallowedHost``, whichever of the two refuses it first.
    return Reply(400, jsonrpc.error_response(None, jsonrpc.InvalidRequest("Host not allowed")))


def endpoint_reply(
    server: Server, request: HttpRequest, hooks: Hooks, departure: Departure | None = None
) -> Reply:
    """What the endpoint answers a request: refusals first, then ``Endpoint.handle``."""
    data = incoming(request, hooks.headers(request))
    if data is None:
        return host_refused_reply()
    if isinstance(data, Reply):
        return data
    data.departure = departure
    reply: Reply = server.endpoint.handle(data)
    # Encoded now, so that its status is final before the request's hooks log it.
    reply_content(reply)
    return reply


def internal_error() -> HttpResponse:
    """500 with the JSON-RPC error a client reads when the server failed; no traceback."""
    return to_response(
        Reply(500, jsonrpc.error_response(None, jsonrpc.InternalError("Internal error")))
    )


def failure(exc: Exception, request: HttpRequest) -> HttpResponse:
    """The answer to an exception no code below caught, reported as Django reports one.

    Called in the ``except`` block, so signal receivers that read ``sys.exc_info()`` (the
    test client, error trackers) see the exception. A ``SuspiciousOperation`` (a request
    Django will not read) is bad input: 400, logged on Django's security logger.
    """
    if isinstance(exc, SuspiciousOperation):
        logging.getLogger(f"django.security.{exc.__class__.__name__}").error(
            str(exc), exc_info=exc, extra={"status_code": 400, "request": request}
        )
        error = jsonrpc.InvalidRequest(f"Bad Request: {jsonrpc.clip(str(exc))}")
        return to_response(Reply(400, jsonrpc.error_response(None, error)))
    response = internal_error()
    got_request_exception.send(sender=None, request=request)
    log_response(
        "%s: %s",
        response.reason_phrase,
        request.path,
        response=response,
        request=request,
        exception=exc,
    )
    return response


def _run(call: Call, put: Callable[[tuple[str, Any]], None]) -> None:
    """Run a call in this thread, passing what it produces to ``put``.

    The thread's database connections are the caller's to let go of (``Hooks`` in a
    request's hop, ``_run_alone`` for the sync view's call thread).
    """
    try:
        status, final = call.run(lambda event: put((_EVENT, event)))
    except BaseException as exc:  # the endpoint answers errors itself; this is a last resort
        call.ctx.server.endpoint.report(exc, call.ctx)
        error = jsonrpc.error_response(call.request_id, jsonrpc.InternalError("Internal error"))
        status, final = 500, Event(error)
    put((_FINAL, (status, final)))


def _run_alone(call: Call, put: Callable[[tuple[str, Any]], None]) -> None:
    """``_run`` in a pool thread of its own, its stale connections let go of before and after."""
    close_old_connections()
    try:
        _run(call, put)
    finally:
        close_old_connections()


class Hooks:
    """What runs in a request's pool thread around its work.

    Under Django's handler only the thread's database connections need letting go of: the
    handler sends the request signals itself, in other threads.
    """

    #: Whether the pool thread gets the request's asgiref ``Local`` data (its language, time
    #: zone, script prefix and URLconf), as ``sync_to_async`` would give it.
    locals_too = True

    def begin(self, request: HttpRequest) -> None:
        close_old_connections()

    def refusal(self, request: HttpRequest) -> HttpResponseBase | None:
        """A response that turns the request away before it is read (a login redirect)."""
        return None

    def headers(self, request: HttpRequest) -> dict[str, str] | None:
        """The request's headers by lower-case name, or ``None`` to read them from META."""
        return None

    def end(self, request: HttpRequest, reply: Reply | None) -> None:
        """``reply`` is what was answered, ``None`` when preparing or handling raised."""
        close_old_connections()


Item = tuple[str, Any]


def _serve(
    server: Server,
    request: HttpRequest,
    start: Callable[[Item], None],
    hooks: Hooks,
    departure: Departure | None = None,
) -> Item | None:
    """All of a request's database work, in this one pool thread: prepare, handle, run.

    Returns ``(_REPLY, reply)``, or ``(_FAILED, response)``. A call is announced to
    ``start`` instead, as ``(_CALL, (call, pipe))``, and run here; its events and its final
    event go through the pipe (as ``_run`` puts them), and ``None`` is returned.
    """
    last: Item | None = (_FAILED, None)  # a response of None: the loop answers 500 unreported
    items: Pipe | None = None
    try:
        hooks.begin(request)
        reply = None
        try:
            refused = hooks.refusal(request)
            if refused is not None:
                return (_FAILED, refused)
            reply = endpoint_reply(server, request, hooks, departure)
            if reply.call is None:
                last = (_REPLY, reply)
            else:
                items = Pipe()
                start((_CALL, (reply.call, items)))
                last = None
                _run(reply.call, items.put)
        finally:
            hooks.end(request, reply)
    except Exception as exc:
        failed = (_FAILED, failure(exc, request))
        if items is not None:
            items.put(failed)  # ends the call's stream if it is still read
            last = None
        else:
            last = failed
    return last


@dataclass
class Answer:
    """What to send back: a JSON reply, an event stream, or a failure already reported."""

    reply: Reply | None = None
    stream: AsyncGenerator[bytes, None] | None = None
    response: HttpResponse | None = None
    #: A call's plain answer: its status was known only once it had run, after the request's
    #: thread let go of it, so the sender logs a 4xx or 5xx.
    from_call: bool = False


def _settle(first: asyncio.Future[Item], item: Item) -> None:
    if not first.done():
        first.set_result(item)
    elif item[0] == _CALL:
        _left(item[1][0])  # nobody waits for it any more: the client went away


def _broken(first: asyncio.Future[Item], error: BaseException) -> None:
    # Only a BaseException gets past _serve: answer 500, end a stream the call had begun.
    logger.error("Error serving an MCP request", exc_info=error)
    failed: Item = (_FAILED, None)
    if first.done() and not first.cancelled() and first.result()[0] == _CALL:
        first.result()[1][1].put(failed)
    _settle(first, failed)


def _hop(
    loop: asyncio.AbstractEventLoop,
    first: asyncio.Future[Item],
    server: Server,
    request: HttpRequest,
    hooks: Hooks,
    departure: Departure,
) -> None:
    """The request's one task on a pool thread; its outcome settles ``first`` on the loop."""
    local = SyncToAsync.threadlocal
    # As asgiref's own pool threads do: a coroutine a handler runs with async_to_sync goes
    # to the request's event loop rather than to a loop of its own.
    local.main_event_loop, local.main_event_loop_pid = loop, os.getpid()

    def start(item: Item) -> None:
        loop.call_soon_threadsafe(_settle, first, item)

    try:
        item = _serve(server, request, start, hooks, departure)
        if item is not None:
            loop.call_soon_threadsafe(_settle, first, item)
    except BaseException as error:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(_broken, first, error)
        if not isinstance(error, Exception):
            raise
    finally:
        local.main_event_loop = local.main_event_loop_pid = None


_DJANGO_HOOKS = Hooks()


def _failed(response: HttpResponse | None) -> Answer:
    # None: the failure was not reported yet (only a BaseException gets there).
    return Answer(response=response if response is not None else internal_error())


class ClientGone(Exception):
    """The client went away before it could be answered (a call it made is cancelled)."""


async def respond(
    server: Server,
    request: HttpRequest,
    hooks: Hooks = _DJANGO_HOOKS,
    gone: Callable[[], Awaitable[None]] | None = None,
) -> Answer:
    """Answer one request in a single thread hop; what a call emits comes back by a pipe.

    ``hooks`` run in that thread before and after the request's work. The hop is a task on
    the growing pool (a call waiting for a client's answer holds its thread, and the answer
    must not queue behind it), which wakes the loop once, with its outcome; only a call,
    which may stream, wakes it before it ends.

    ``gone``, when given, returns once the client has disconnected: a call still waiting to
    produce its first event is then cancelled, and ``ClientGone`` raised. A 2026-07-28
    request answered in one piece is cancelled too, if it runs longer than
    ``WATCH_AFTER_SECONDS`` (only then is the client watched: most are answered sooner).
    Without ``gone``, such a request is cancelled when this coroutine is (Django's handler
    cancels the view when its client disconnects).
    """
    loop = asyncio.get_running_loop()
    first: asyncio.Future[Item] = loop.create_future()
    departure = Departure()
    workers.run(
        functools.partial(_hop, loop, first, server, request, hooks, departure),
        locals_too=hooks.locals_too,
    )
    try:
        kind, payload = await (first if gone is None else _watching(first, gone, departure))
    except asyncio.CancelledError:
        departure.left()
        raise
    if kind == _FAILED:
        return _failed(payload)
    if kind == _REPLY:
        reply: Reply = payload
        if reply.listen is not None:
            return Answer(stream=_listen_chunks(reply.listen))
        if departure.gone:
            raise ClientGone
        return Answer(reply=reply)
    call, items = payload
    try:
        if gone is None:
            kind, payload = await items.aget()
        else:
            kind, payload = await _unless_gone(items.aget(), gone)
    except (asyncio.CancelledError, ClientGone):
        _left(call)  # the client went away before the call produced anything
        raise
    if kind == _FAILED:
        return _failed(payload)
    plain = _plain_reply(call, kind, payload)
    if plain is not None:
        return Answer(reply=plain, from_call=True)
    return Answer(stream=_call_chunks(call, kind, payload, items))


#: How long a request runs before its client is watched for leaving (which takes a task).
WATCH_AFTER_SECONDS = 0.05


async def _watching(
    first: asyncio.Future[Item], gone: Callable[[], Awaitable[None]], departure: Departure
) -> Item:
    """What ``first`` gives; tells ``departure`` if the client leaves meanwhile."""
    loop = asyncio.get_running_loop()
    watcher: asyncio.Future[None] | None = None

    async def watch() -> None:
        await gone()
        departure.left()

    def start() -> None:
        nonlocal watcher
        watcher = asyncio.ensure_future(watch())

    timer = loop.call_later(WATCH_AFTER_SECONDS, start)
    try:
        return await first
    finally:
        timer.cancel()
        if watcher is not None:
            watcher.cancel()


async def _unless_gone(waiting: Awaitable[Item], gone: Callable[[], Awaitable[None]]) -> Item:
    """What ``waiting`` gives, unless ``gone()`` returns first (``ClientGone``)."""
    task = asyncio.ensure_future(waiting)
    watcher = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    # The client left, even if the first event came at the same time: the disconnect was
    # taken here, and whoever would stream to the client would never see it.
    if (watcher.done() and not watcher.cancelled()) or not task.done() or task.cancelled():
        raise ClientGone
    return task.result()


async def _call_chunks(
    call: Call, kind: str, payload: Any, items: Pipe
) -> AsyncGenerator[bytes, None]:
    relay = _CallRelay(call)
    try:
        chunks = relay.start(kind, payload)
        while True:
            for chunk in chunks:
                yield chunk
            if relay.done:
                return
            kind, payload = await items.aget()
            if kind == _FAILED:
                return  # the thread failed outside the call, and reported it
            chunks = relay.feed(kind, payload)
    finally:
        relay.finish()


async def _listen_chunks(stream: Stream) -> AsyncGenerator[bytes, None]:
    # The loop's thread is the main one under uvicorn: where the server's shutdown is heard.
    shutdown.install(_SHUTDOWN_SIGNALS)
    # Subscribing may wait on the backend (Redis, the database poller): not on the loop.
    opening = asyncio.ensure_future(sync_to_async(_open_listen, thread_sensitive=False)(stream))
    try:
        relay, chunks = await asyncio.shield(opening)
    except asyncio.CancelledError:
        # The client went away while its thread subscribed: close the stream once it is open.
        opening.add_done_callback(_abandoned)
        raise
    try:
        while True:
            for chunk in chunks:
                yield chunk
            if stream.finished:
                return
            if relay.ends:
                for chunk in relay.ending():
                    yield chunk
                return
            if (
                relay.renewal_due()
                and not await sync_to_async(relay.renew, thread_sensitive=False)()
            ):
                return
            try:
                chunks = relay.feed(*await relay.items.aget(relay.wait()))
            except Empty:
                chunks = [sse.comment()]
    finally:
        relay.unsubscribe()
        # The backend may wait (the database one queries): not on the loop.
        workers.run(functools.partial(_closed, stream))


def _abandoned(opening: asyncio.Future[tuple[_ListenRelay, list[bytes]]]) -> None:
    """Close a listen stream that opened after its client went away."""
    if opening.cancelled() or opening.exception() is not None:
        return  # never opened: _open_listen unsubscribed
    relay, _ = opening.result()
    relay.unsubscribe()
    workers.run(functools.partial(_closed, relay.stream))


def _plain_reply(call: Call, kind: str, payload: Any) -> Reply | None:
    """Plain JSON when the call finished before producing anything else."""
    if kind == _FINAL:
        status, final = payload
        # No message: a cancelled call, answered by a stream that ends at once, or with no
        # body where the client takes no stream.
        if final.message is not None or not call.ctx.streams:
            return call_answer(call, status, final.message)
    return None


def call_answer(call: Call, status: int, message: Any) -> Reply:
    """A call's final message as a plain reply, encoded, so its status is the one sent."""
    reply = Reply(status, message, failed_status=call.failed_status)
    reply_content(reply)
    return reply


def _open_listen(stream: Stream) -> tuple[_ListenRelay, list[bytes]]:
    """Subscribe, then read the stored events (so that none falls between), and the opening
    chunks; in one pool thread, whose connection is let go of after."""
    relay = _ListenRelay(stream)
    try:
        return relay, relay.start(stream.backlog())
    except BaseException:
        relay.unsubscribe()
        raise
    finally:
        close_old_connections()


def _closed(stream: Stream) -> None:
    """``stream.closed()`` in a pool thread, whose connection is let go of after."""
    try:
        stream.closed()
    except Exception:
        logger.exception("Error closing a stream")
    finally:
        close_old_connections()


class _CallRelay:
    """Turns what a call produces into the bytes of its event stream, sync or async alike."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.done = False
        self.released = False
        self.finished = False

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
        return [event.encode()] if event.message is not None else []

    def finish(self) -> None:
        # A call the server let go of goes on.
        if not self.released and not self.finished:
            self.finished = True
            _left(self.call)


def _left(call: Call) -> None:
    """The client went away from ``call``: that cancels it, unless the client may resume its
    stream (an initialize-era call, whose events are kept): there a client cancels by saying so."""
    if call.log is None:
        call.cancel()


#: Most deliveries a long-lived stream holds for a client that has read nothing for
#: ``STREAM_STALL_SECONDS``; past both the stream ends (the client opens a new one), so memory
#: stays bounded. A burst that a reading client works through is not cut.
STREAM_BACKLOG_LIMIT = 1000
STREAM_STALL_SECONDS = 30.0
#: What wakes a listen stream to end it at shutdown: no channel has an empty name.
_WAKE: tuple[str, dict[str, Any]] = ("", {})
#: The signals a stream installs the shutdown handler for, when the app's loading could not (a
#: gunicorn worker of a preloaded site). Not SIGINT: a gunicorn worker quits on it at once,
#: and a script's asyncio.run() would keep the handler after it returns.
_SHUTDOWN_SIGNALS = (signal.SIGTERM,)


class _ListenRelay:
    """Turns a long-lived stream's deliveries into the bytes of its event stream."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.items = Pipe()
        self.overflowed = False
        self.read_at = time.monotonic()
        self.renewed = self.read_at
        self.renewal = Renewal()
        self.shut = False
        self._unwatch = shutdown.watch(self._shutdown)
        try:
            self._unsubscribe = backend().subscribe(stream.channels, self._delivered)
        except BaseException:
            self._unwatch()
            raise

    @property
    def ends(self) -> bool:
        """Whether the server ends the stream now: its client fell behind, or the process
        shuts down."""
        return self.overflowed or self.shut

    def unsubscribe(self) -> None:
        try:
            self._unsubscribe()
        finally:
            self._unwatch()

    def _shutdown(self) -> None:
        self.shut = True
        self.items.put(_WAKE)

    def renewal_due(self) -> bool:
        """Whether to renew the stream now: ``KEEPALIVE_SECONDS`` after the last time, or at
        once when a delivery made it stale."""
        if not self.stream.renews:
            return False
        now = time.monotonic()
        if now - self.renewed < conf.KEEPALIVE_SECONDS and not self.stream.stale:
            return False
        self.renewed, self.stream.stale = now, False
        return True

    def wait(self) -> float:
        """How long to wait for a delivery before a keep-alive, or the next renewal."""
        if not self.stream.renews:
            return conf.KEEPALIVE_SECONDS
        return max(0.0, self.renewed + conf.KEEPALIVE_SECONDS - time.monotonic())

    def renew(self) -> bool:
        """``stream.renew()`` in a thread that may query, its connection let go of after.

        A failure (the database is down) keeps the stream open, and is logged once a stream.
        """
        try:
            return self.renewal(self.stream)
        finally:
            close_old_connections()

    def _delivered(self, channel: str, message: dict[str, Any]) -> None:
        if (
            len(self.items) >= STREAM_BACKLOG_LIMIT
            and time.monotonic() - self.read_at > STREAM_STALL_SECONDS
        ):
            if not self.overflowed:
                logger.warning(
                    "A stream's client read none of its last %d messages in %.0f s; ending the "
                    "stream",
                    STREAM_BACKLOG_LIMIT,
                    STREAM_STALL_SECONDS,
                )
            self.overflowed = True
            return
        self.items.put((channel, message))

    def start(self, backlog: list[Event]) -> list[bytes]:
        opening = self.stream.opening() + backlog
        return [event.encode() for event in opening] or [sse.comment("stream open")]

    def feed(self, channel: str, message: dict[str, Any]) -> list[bytes]:
        self.read_at = time.monotonic()
        if not channel:
            return []
        return [event.encode() for event in self.stream.notifications(channel, message)]

    def ending(self) -> list[bytes]:
        """What the stream says when the server ends it (a listen request's final result)."""
        return [event.encode() for event in self.stream.ending()]


# -- ASGI ---------------------------------------------------------------------------------

#: The attribute of a view built here that holds the server it serves.
ENDPOINT_OF = "mcp_app_endpoint_of"


def async_view(server: Server) -> Callable[..., Awaitable[HttpResponseBase]]:
    """The endpoint for ASGI servers: one thread hop per request, streams as async iterators.

    Under a WSGI server (gunicorn, runserver) it serves as ``sync_view`` does, in the
    request's thread.
    """
    serve = _async_endpoint(server)
    under_wsgi = sync_to_async(_sync_endpoint(server), thread_sensitive=True)

    # Not in ATOMIC_REQUESTS' transaction: Django refuses one for an async view, and the
    # handler's own (ATOMIC, which follows ATOMIC_REQUESTS) is taken in the thread it runs in.
    @transaction.non_atomic_requests
    @csrf_exempt
    async def mcp_endpoint(request: HttpRequest) -> HttpResponseBase:
        if not isinstance(request, ASGIRequest):
            # Django's WSGI handler reads an async stream whole before it sends a byte, so a
            # progress message or a listen stream would never arrive: stream from a generator.
            return await under_wsgi(request)
        return await serve(request)

    setattr(mcp_endpoint, ENDPOINT_OF, server)
    return mcp_endpoint


def _async_endpoint(server: Server) -> Callable[[HttpRequest], Awaitable[HttpResponseBase]]:
    async def mcp_endpoint(request: HttpRequest) -> HttpResponseBase:
        answer = await respond(server, request)
        if answer.response is not None:
            return answer.response
        if answer.stream is not None:
            return StreamingHttpResponse(answer.stream, headers=sse.HEADERS)
        assert answer.reply is not None
        return to_response(answer.reply)

    return mcp_endpoint


# -- WSGI ---------------------------------------------------------------------------------


def sync_view(server: Server) -> Callable[..., HttpResponseBase]:
    """The endpoint for WSGI servers: streams are generators fed by a worker thread.

    Under an ASGI server (uvicorn, Django's handler) it serves as ``async_view`` does, on the
    server's event loop.
    """
    serve = _sync_endpoint(server)
    under_asgi = async_to_sync(_async_endpoint(server))

    # Not in ATOMIC_REQUESTS' transaction: the handler's own (ATOMIC, which follows
    # ATOMIC_REQUESTS) is taken in the thread it runs in, and a transaction of this thread
    # would hold SQLite's write lock (IMMEDIATE mode) against it.
    @transaction.non_atomic_requests
    @csrf_exempt
    def mcp_endpoint(request: HttpRequest) -> HttpResponseBase:
        if isinstance(request, ASGIRequest):
            # Django's ASGI handler reads a sync stream whole before it sends a byte: stream
            # from an async generator, made on the loop that will read it.
            return under_asgi(request)
        return serve(request)

    setattr(mcp_endpoint, ENDPOINT_OF, server)
    return mcp_endpoint


def _sync_endpoint(server: Server) -> Callable[[HttpRequest], HttpResponseBase]:
    def mcp_endpoint(request: HttpRequest) -> HttpResponseBase:
        try:
            reply = endpoint_reply(server, request, _DJANGO_HOOKS)
        except Exception as exc:
            # A client of this endpoint reads JSON-RPC, not Django's HTML error page.
            return failure(exc, request)
        answer = sync_answer(reply)
        if isinstance(answer, Reply):
            return to_response(answer)
        return StreamingHttpResponse(answer, headers=sse.HEADERS)

    return mcp_endpoint


def sync_answer(reply: Reply) -> Reply | Iterator[bytes]:
    """What a WSGI server sends for ``reply``: a plain reply, or an event stream's chunks.

    A call runs in a worker thread until it produces something; its plain answer if that is
    all it produces. A listen stream's chunks are made in the thread that reads them.
    """
    if reply.listen is not None:
        return _sync_listen_chunks(reply.listen)
    if reply.call is None:
        return reply
    return _sync_call(reply.call)


def _sync_call(call: Call) -> Reply | Iterator[bytes]:
    items = Pipe()
    workers.run(functools.partial(_run_alone, call, items.put))
    kind, payload = items.get()
    plain = _plain_reply(call, kind, payload)
    if plain is not None:
        return plain

    relay = _CallRelay(call)

    def chunks() -> Iterator[bytes]:
        try:
            chunks = relay.start(kind, payload)
            while True:
                yield from chunks
                if relay.done:
                    return
                chunks = relay.feed(*items.get())
        finally:
            relay.finish()

    return _Closing(chunks(), relay.finish)


class _Closing(Iterator[bytes]):
    """``chunks``, whose ``close`` calls ``finish`` even if the server closes them unread (a
    generator closed before it starts runs none of its ``finally``)."""

    def __init__(self, chunks: Iterator[bytes], finish: Callable[[], None]) -> None:
        self.chunks = chunks
        self.finish = finish

    def __next__(self) -> bytes:
        return next(self.chunks)

    def close(self) -> None:
        close_then(self.chunks, self.finish)


def close_then(body: Iterable[bytes], after: Callable[[], None]) -> None:
    """Close ``body`` as a WSGI server closes an answer (if it can be closed), then
    ``after()``, whatever the closing raised."""
    try:
        close = getattr(body, "close", None)
        if close is not None:
            close()
    finally:
        after()


def _sync_listen_chunks(stream: Stream) -> Iterator[bytes]:
    # A sync gunicorn worker serves in its main thread, where its shutdown is heard.
    shutdown.install(_SHUTDOWN_SIGNALS)
    relay = _ListenRelay(stream)
    try:
        # The request's own thread, whose connection is let go of as the stream ends.
        chunks = relay.start(stream.backlog())
        while True:
            yield from chunks
            if stream.finished:
                return
            if relay.ends:
                yield from relay.ending()
                return
            if relay.renewal_due() and not relay.renew():
                return
            try:
                chunks = relay.feed(*relay.items.get(relay.wait()))
            except Empty:
                chunks = [sse.comment()]
    finally:
        relay.unsubscribe()
        _closed(stream)
