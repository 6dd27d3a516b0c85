"""Serve mcp_app's endpoints straight from WSGI, in front of a site's Django application.

In the site's ``wsgi.py``::

    from django.core.wsgi import get_wsgi_application

    import mcp_app.wsgi

    application = mcp_app.wsgi.route(get_wsgi_application())

A request whose path resolves, through the site's ``ROOT_URLCONF``, to an endpoint of
``Server.urls`` is served here, from the server's thread (a call runs in a worker thread, as
under the sync view), without Django's handler or ``MIDDLEWARE``. Every other request goes to
the wrapped application unchanged.

What such a request gets and does not get is what ``mcp_app.asgi.route`` gives: the
``ALLOWED_HOSTS`` check, the body limits, stale database connections let go of before and
after, the site's lazy ``request.session`` and ``request.user``, ``LoginRequiredMiddleware``'s
redirect, the endpoint's own Origin check and DRF authentication, ``got_request_exception`` and
the ``django.request`` log for failures and 4xx/5xx answers; no other middleware, no
``request_started`` or ``request_finished`` signals, and no HTML error pages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

from django.core.exceptions import BadRequest
from django.core.handlers.wsgi import WSGIRequest, get_path_info
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import ResolverMatch, set_script_prefix

from .transport import sse
from .transport.bare import (
    BareHooks,
    endpoint,
    log_reply,
    log_status,
    reason,
    reply_parts,
    unreadable,
)
from .transport.connections import close_old_connections
from .transport.http import Reply
from .transport.views import close_then, endpoint_reply, failure, sync_answer

if TYPE_CHECKING:
    from .server import Server

__all__ = ["Route", "route"]

logger = logging.getLogger("django.request")

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

_SSE_HEADERS = tuple(sse.HEADERS.items())


def route(application: WSGIApp) -> Route:
    """Serve mcp_app's endpoints directly, and every other request with ``application``."""
    return Route(application)


class Route:
    """A WSGI application answering mcp_app endpoint requests itself (see the module)."""

    def __init__(self, application: WSGIApp) -> None:
        self.application = application

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        found = endpoint(get_path_info(environ))
        if found is None:
            return self.application(environ, start_response)
        return _serve(found[0], found[1], environ, start_response)


def _serve(
    server: Server, match: ResolverMatch, environ: Environ, start_response: StartResponse
) -> Iterable[bytes]:
    try:
        request = WSGIRequest(environ)
    except (ValueError, BadRequest) as exc:  # Django 6 raises BadRequest for a Content-Type
        log_status(400, None, get_path_info(environ))
        return _send_reply(unreadable(exc), start_response, None)
    # As Django's handler does, so reverse() in a handler honours the script name (which
    # the request worked out); set on every request, since the thread may have served
    # another site's prefix before.
    set_script_prefix(request.META["SCRIPT_NAME"])
    request.resolver_match = match
    answer = _answer(server, request)
    if isinstance(answer, HttpResponseBase):
        return _send_response(answer, start_response, request)
    if isinstance(answer, Reply):
        return _send_reply(answer, start_response, request)
    # A stream may go on for long: the request's stale connections are let go of before it.
    close_old_connections()
    # A copy: a server may add to the list it is given (runserver appends "Connection: close").
    return _started(_Sent(answer, request), start_response, "200 OK", list(_SSE_HEADERS))


class _Hooks(BareHooks):
    """``BareHooks``, but the request's stale connections are let go of once its answer is
    sent (``_Sent.close``), not before."""

    def end(self, request: HttpRequest, reply: Reply | None) -> None:
        log_reply(request, reply)


_HOOKS = _Hooks()


def _answer(server: Server, request: HttpRequest) -> HttpResponseBase | Reply | Iterator[bytes]:
    """The request's answer, with the route's hooks around its work; a failure reported."""
    reply = None
    try:
        _HOOKS.begin(request)
        try:
            refused = _HOOKS.refusal(request)
            if refused is not None:
                return refused
            reply = endpoint_reply(server, request, _HOOKS)
            answer = sync_answer(reply)
        finally:
            _HOOKS.end(request, reply)
    except Exception as exc:
        return failure(exc, request)
    if isinstance(answer, Reply) and reply.call is not None and answer.status >= 400:
        # A call's plain answer: its status was known only once it had run.
        log_status(answer.status, request)
    return answer


def _send_reply(reply: Reply, start_response: StartResponse, request: HttpRequest | None) -> _Sent:
    """A JSON reply, encoded as ``to_response`` encodes it, without building a response."""
    headers, content = reply_parts(reply)
    status = f"{reply.status} {reason(reply.status)}"
    return _started(_Sent([content], request), start_response, status, headers)


def _send_response(
    response: HttpResponseBase, start_response: StartResponse, request: HttpRequest
) -> _Sent:
    headers = list(response.items())
    headers += [("Set-Cookie", cookie.output(header="")) for cookie in response.cookies.values()]
    status = f"{response.status_code} {response.reason_phrase}"
    if response.streaming:
        close_old_connections()  # as for an event stream
        return _started(
            _Sent(cast(Iterable[bytes], response), request), start_response, status, headers
        )
    content = response.content  # type: ignore[attr-defined]
    if not response.has_header("Content-Length"):
        headers.append(("Content-Length", str(len(content))))
    return _started(_Sent([content], request), start_response, status, headers)


def _started(
    sent: _Sent, start_response: StartResponse, status: str, headers: list[tuple[str, str]]
) -> _Sent:
    """``sent``, once the server has its status and headers; closed if it refuses them (the
    server then has nothing to close)."""
    try:
        start_response(status, headers)
    except BaseException:
        sent.close()
        raise
    return sent


class _Sent:
    """An answer's body, for the WSGI server to send and then close.

    Closing ends a stream (a call's, which cancels it; a listen stream's, which lets go of
    the thread's database connections as it ends), then lets go of the request's stale
    connections, as Django's ``request_finished`` does from its response's ``close()``: for a
    plain answer, once it is on its way, not before it. (Under gunicorn's sync worker, where
    the client then closes its end while this runs, the worker need not sleep until it does.)

    A failure while streaming is logged as the ASGI route logs it; the status is sent, so
    the server can only cut the stream short.
    """

    def __init__(self, body: Iterable[bytes], request: HttpRequest | None) -> None:
        self.body = body
        self.request = request

    def __iter__(self) -> Iterator[bytes]:
        if isinstance(self.body, list):
            return iter(self.body)
        return self._streamed()

    def _streamed(self) -> Iterator[bytes]:
        try:
            yield from self.body
        except Exception:
            request = self.request
            path = request.path if request is not None else ""
            logger.exception("Error streaming %s", path, extra={"request": request})
            raise

    def close(self) -> None:
        close_then(self.body, close_old_connections)
