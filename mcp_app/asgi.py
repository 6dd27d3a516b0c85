"""Serve mcp_app's endpoints straight from ASGI, in front of a site's Django application.

In the site's ``asgi.py``::

    from django.core.asgi import get_asgi_application

    import mcp_app.asgi

    application = mcp_app.asgi.route(get_asgi_application())

A request whose path resolves, through the site's ``ROOT_URLCONF``, to an endpoint of
``Server.urls`` is served here: one thread hop per request, and none of Django's handler or
``MIDDLEWARE``. Everything else (other paths, websockets) goes to the wrapped application
unchanged; so does the lifespan, except that its shutdown first writes the queued audit rows
(answered by the route itself for Django's handler, which does not speak that protocol).

What such a request still gets, as under Django's handler: the ``ALLOWED_HOSTS`` check, the
body limits (``MAX_BODY_BYTES``, ``DATA_UPLOAD_MAX_MEMORY_SIZE``), stale database
connections let go of before and after (``close_old_connections``, what the request signals
do for the database), ``SessionMiddleware`` and ``AuthenticationMiddleware``'s lazy
``request.session`` and ``request.user`` when the site lists them, ``LoginRequiredMiddleware``'s
redirect of an anonymous caller (unless the endpoint is marked ``login_not_required``), the endpoint's own Origin
check and DRF authentication, ``got_request_exception`` and the ``django.request`` log for
failures and 4xx/5xx answers. What it does not get: any other middleware, their
``process_response`` (a session is not saved), the ``request_started`` and
``request_finished`` signals (their other receivers, such as ``close_caches``, do not run),
and Django's HTML error pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.core.exceptions import BadRequest
from django.core.handlers.asgi import ASGIHandler, ASGIRequest, get_script_prefix
from django.http import HttpRequest, HttpResponse
from django.urls import ResolverMatch, set_script_prefix

from .protocol import jsonrpc
from .transport import sse
from .transport.bare import BareHooks, endpoint, log_status, reply_parts, unreadable
from .transport.http import Reply
from .transport.views import (
    DRAIN_BYTES,
    DRAIN_SECONDS,
    Answer,
    ClientGone,
    InvalidLength,
    body_limit,
    declared_length,
    failure,
    invalid_length,
    remember_name,
    respond,
    too_large,
)
from .transport.workers import LOCALS_STAY_BEHIND

if TYPE_CHECKING:
    from .server import Server

__all__ = ["Route", "route"]

Scope = MutableMapping[str, Any]
# Loose on purpose: servers and frameworks each type their messages their own way.
Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]

logger = logging.getLogger("django.request")


_SSE_HEADERS = [(name.lower().encode(), value.encode()) for name, value in sse.HEADERS.items()]


def route(application: ASGIApp) -> Route:
    """Serve mcp_app's endpoints directly, and every other request with ``application``."""
    return Route(application)


class Route:
    """An ASGI application answering mcp_app endpoint requests itself (see the module)."""

    def __init__(self, application: ASGIApp) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            found = endpoint_at(scope)
            if found is not None:
                await _serve(found[0], found[1], scope, receive, send)
                return
        elif scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        await self.application(scope, receive, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Write the queued audit rows when the server shuts down.

        A server that stops on a signal may end the process without running exit handlers
        (uvicorn does), so the lifespan's shutdown is the last sure moment. Django's own
        handler does not speak the lifespan protocol: for it the route answers alone.
        """
        if not isinstance(self.application, ASGIHandler):

            async def flushing_send(message: Any) -> None:
                if message.get("type") in (
                    "lifespan.shutdown.complete",
                    "lifespan.shutdown.failed",
                ):
                    await _flush_audit()
                await send(message)

            await self.application(scope, receive, flushing_send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await _flush_audit()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _flush_audit() -> None:
    from . import audit

    if audit.pending():
        await sync_to_async(audit.flush, thread_sensitive=False)()


def endpoint_at(scope: Scope) -> tuple[Server, ResolverMatch] | None:
    """The server whose endpoint the request's path resolves to, and the match; else ``None``."""
    # The path as Django resolves it: without the script prefix (root_path, FORCE_SCRIPT_NAME).
    script_name = get_script_prefix(scope)
    path: str = scope["path"]
    return endpoint(path.removeprefix(script_name) if script_name else path)


# -- one request ----------------------------------------------------------------------------


class _TooLarge(Exception):
    """The body is over the limit: declared so (``left`` unread), or found so reading it.

    ``left``: how much of the body may still be on its way, if not all of it was received.
    """

    def __init__(self, left: int | None) -> None:
        super().__init__()
        self.left = left


async def _serve(
    server: Server, match: ResolverMatch, scope: Scope, receive: Receive, send: Send
) -> None:
    try:
        body = io.BytesIO()
        request = ASGIRequest(scope, body)
    except (ValueError, BadRequest) as exc:  # Django 6 raises BadRequest for a Content-Type
        if isinstance(exc, UnicodeDecodeError):
            # As Django's handler answers a query string that is not UTF-8.
            error = jsonrpc.InvalidRequest("Bad Request: the query string is not UTF-8")
            refusal = Reply(400, jsonrpc.error_response(None, error))
        else:
            refusal = unreadable(exc)
        await _send_reply(refusal, send, None)
        await _logged(log_status, 400, None, scope["path"])
        return
    request.resolver_match = match
    client = _Client(receive)
    try:
        answer = await _answer(server, request, body, client)
    except ClientGone:
        return
    except (_TooLarge, InvalidLength) as exc:
        refusal = too_large() if isinstance(exc, _TooLarge) else invalid_length()
        if not (isinstance(exc, _TooLarge) and await _drained(client, exc.left, request)):
            # Refused before the body was read to its end: the connection cannot be reused.
            refusal.headers["Connection"] = "close"
        await _send_reply(refusal, send, request)
        return
    except Exception as exc:
        response = await sync_to_async(failure, thread_sensitive=False)(exc, request)
        answer = Answer(response=response)
    if answer.stream is not None:
        await _send_stream(answer, client, send, request)
    elif answer.response is not None:
        await _send_response(answer.response, send)
    else:
        assert answer.reply is not None
        # Other 4xx and 5xx answers were logged in the request's thread (BareHooks.end).
        await _send_reply(answer.reply, send, request if answer.from_call else None)


class _Client:
    """The client's end of the connection: whether it left, once heard, is kept (a server may
    hand out ``http.disconnect`` only once, and several waits ask)."""

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.left = False

    async def gone(self) -> None:
        """Return once the client has disconnected (at once if it was heard before)."""
        while not self.left:
            if (await self.receive())["type"] == "http.disconnect":
                self.left = True


async def _drained(client: _Client, left: int | None, request: ASGIRequest) -> bool:
    """Read and drop the rest of a refused body (``left``: its declared bytes not yet read,
    ``None`` if unknown), up to ``DRAIN_BYTES`` and ``DRAIN_SECONDS``; whether it was read to
    its end, so that the client reads the refusal and may send its next request on the
    connection."""
    if left == 0:
        return True  # received whole
    if left is not None and left > DRAIN_BYTES:
        return False
    if request.META.get("HTTP_EXPECT", "").lower() == "100-continue":
        # Reading would have the server invite the upload it refuses: not sent, not read.
        return False

    async def drain() -> bool:
        budget = DRAIN_BYTES
        while budget > 0:
            message = await client.receive()
            if message["type"] == "http.disconnect":
                client.left = True
                return False
            budget -= len(message.get("body", b""))
            if not message.get("more_body", False):
                return True
        return False

    try:
        return await asyncio.wait_for(drain(), DRAIN_SECONDS)
    except TimeoutError:
        return False  # a client that stopped sending: the connection ends


async def _answer(
    server: Server, request: ASGIRequest, body: io.BytesIO, client: _Client
) -> Answer:
    limit = body_limit()
    declared = declared_length(request)
    if declared > limit:
        raise _TooLarge(declared)
    size = 0
    while True:
        message = await client.receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            ended = not message.get("more_body", False)
            raise _TooLarge(0 if ended else (declared - size if declared else None))
        body.write(chunk)
        if not message.get("more_body", False):
            break
    body.seek(0)
    # What request.body gives, read already: Django's own reading would check the limits
    # just checked, then copy the bytes into another stream.
    request._body = body.getvalue()
    return await respond(server, request, _HOOKS, client.gone)


class _BareHooks(BareHooks):
    """``BareHooks``, with the headers read straight from the scope, and a pool thread that
    starts from asgiref's defaults.

    What the request's context holds of asgiref ``Local`` data (a language, a time zone, a
    script prefix or URLconf a request before it on the connection left there) is left out
    of the copy the request's pool thread runs in, which then starts from the site's
    defaults, for its handlers' ``async_to_sync`` code too. With an asgiref older than 3.12,
    which has no such data of its own, the language and time zone are undone instead.
    """

    locals_too = False

    def begin(self, request: HttpRequest) -> None:
        prefix = getattr(request, "script_name", "")  # an ASGIRequest's
        if prefix:
            # As Django's handler does, so reverse() in a handler honours it; otherwise "/".
            set_script_prefix(prefix)
        super().begin(request)

    def site_defaults(self) -> None:
        if not LOCALS_STAY_BEHIND:
            super().site_defaults()

    def headers(self, request: HttpRequest) -> dict[str, str]:
        # As no middleware changed META: the round trip through META and request.headers
        # costs more. Names with an underscore are dropped and repeated ones joined, as
        # Django does.
        headers: dict[str, str] = {}
        names = _HEADER_NAMES
        for raw_name, raw_value in getattr(request, "scope", {}).get("headers", ()):
            name = names.get(raw_name)
            if name is None:
                name = _header_name(raw_name)
            if not name:
                continue
            value = raw_value.decode("latin1")
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        return headers


#: Header names by the bytes a client sent ("": dropped), for the names met so far: most
#: requests send the same few.
_HEADER_NAMES: dict[bytes, str] = {}


def _header_name(raw_name: bytes) -> str:
    name = raw_name.decode("latin1").lower()
    if "_" in name:
        name = ""
    remember_name(_HEADER_NAMES, raw_name, name)
    return name


_HOOKS = _BareHooks()


# -- sending ----------------------------------------------------------------------------------


def _latin1(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode("latin1"), value.encode("latin1")) for name, value in headers]


async def _send_reply(reply: Reply, send: Send, request: HttpRequest | None) -> None:
    """A JSON reply, encoded as ``to_response`` encodes it."""
    headers, content = reply_parts(reply)
    await send({"type": "http.response.start", "status": reply.status, "headers": _latin1(headers)})
    await send({"type": "http.response.body", "body": content})
    if request is not None and reply.status >= 400:
        await _logged(log_status, reply.status, request)


async def _logged(log: Callable[..., None], *args: Any, **kwargs: Any) -> None:
    """``log(*args, **kwargs)`` in a thread, as Django's handler logs: a site's log handler
    may block (mail, a log service) or query (``request.user``), which the loop must not."""
    await sync_to_async(log, thread_sensitive=False)(*args, **kwargs)


async def _send_response(response: HttpResponse, send: Send) -> None:
    headers = _latin1(response.items())
    headers.append((b"content-length", str(len(response.content)).encode()))
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.content})


async def _send_stream(answer: Answer, client: _Client, send: Send, request: HttpRequest) -> None:
    """An event stream until it ends or the client goes away, which ends (cancels) it."""
    assert answer.stream is not None
    chunks = answer.stream

    async def write() -> None:
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
    writer = asyncio.ensure_future(write())
    watcher = asyncio.ensure_future(client.gone())
    try:
        await asyncio.wait({writer, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        # Cancelling the writer closes the stream, whose ``finally`` cancels the call.
        for task in (writer, watcher):
            task.cancel()
        results = await asyncio.gather(writer, watcher, return_exceptions=True)
    for result in results:
        if isinstance(result, Exception):
            # The status is sent: nothing left to answer, only to report.
            await _logged(
                logger.error,
                "Error streaming %s",
                request.path,
                exc_info=result,
                extra={"request": request},
            )
