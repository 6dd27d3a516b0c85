"""What ``mcp_app.asgi`` and ``mcp_app.wsgi`` share: serving an endpoint without Django's handler.

Both routes find the endpoint a path resolves to, run the site's session and authentication
middleware's ``process_request`` and ``LoginRequiredMiddleware``'s ``process_view``, let go of
stale database connections before and after, and log 4xx and 5xx answers as Django does.
"""

from __future__ import annotations

import contextlib
import functools
from http.client import responses
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.urls import Resolver404, ResolverMatch, URLResolver, get_resolver
from django.utils import timezone, translation
from django.utils.log import log_response
from django.utils.module_loading import import_string
from django.utils.translation import trans_real

from ..conf import Derived, django_setting
from ..protocol import jsonrpc
from ..server import SERVER_ATTRIBUTE
from .connections import close_old_connections
from .http import Reply
from .views import Hooks, reply_content, request_host
from .workers import holds_data

if TYPE_CHECKING:
    from ..server import Server

__all__ = [
    "BareHooks",
    "endpoint",
    "log_reply",
    "log_status",
    "reason",
    "reply_parts",
    "unreadable",
]


def endpoint(path_info: str) -> tuple[Server, ResolverMatch] | None:
    """The server whose endpoint ``path_info`` resolves to through ``ROOT_URLCONF``, and the
    match; else ``None``. ``path_info`` is the path without the script prefix."""
    try:
        # Keyed by the resolver, which clear_url_caches() replaces.
        return _resolve(get_resolver(django_setting("ROOT_URLCONF")), path_info)
    except Exception:
        # A URLconf that does not load is for Django's handler to report.
        return None


@functools.lru_cache(maxsize=1024)
def _resolve(resolver: URLResolver, path_info: str) -> tuple[Server, ResolverMatch] | None:
    try:
        match = resolver.resolve(path_info)
    except Resolver404:
        return None
    server = getattr(match.func, SERVER_ATTRIBUTE, None)
    # The view itself, not a wrapper that copied its attributes (login_required and the
    # like): a wrapped view is Django's handler's to run, with its checks.
    if server is None or not server.is_endpoint(match.func):
        return None
    return server, match


class BareHooks(Hooks):
    """What Django's handler and the site's auth middleware would do, in the request's thread.

    Stale database connections are let go of before and after (``close_old_connections``,
    which is what ``request_started`` and ``request_finished`` do for the database); the
    signals themselves are not sent.
    """

    def begin(self, request: HttpRequest) -> None:
        close_old_connections()
        self.site_defaults()
        for middleware in _SITE_AUTH_MIDDLEWARE.get():
            middleware.process_request(request)

    def site_defaults(self) -> None:
        """The site's default language and time zone for the endpoint, whose middleware
        does not run."""
        # The thread may have served a request whose middleware (LocaleMiddleware, a time
        # zone middleware) activated a language or time zone. Undoing none costs as much as
        # undoing one: only a Local that may hold one is asked.
        # Looked up each time: Django replaces the language's Local when the language
        # settings change (and when runserver reloads translations).
        if holds_data(getattr(trans_real, "_active", None)):
            translation.deactivate()
        if holds_data(getattr(timezone, "_active", None)):
            timezone.deactivate()

    def refusal(self, request: HttpRequest) -> HttpResponseBase | None:
        # LoginRequiredMiddleware turns an anonymous caller away, as under Django's handler,
        # unless the endpoint is marked login_not_required.
        match = request.resolver_match
        login = _SITE_LOGIN_MIDDLEWARE.get()
        if login:
            try:
                request_host(request)
            except DisallowedHost:
                return None  # the endpoint refuses the Host itself, as it logs and answers it
        for middleware in login:
            assert match is not None
            response: HttpResponseBase | None = middleware.process_view(
                request, match.func, match.args, match.kwargs
            )
            if response is not None:
                return response
        return None

    def end(self, request: HttpRequest, reply: Reply | None) -> None:
        try:
            log_reply(request, reply)
        finally:
            close_old_connections()


def log_reply(request: HttpRequest, reply: Reply | None) -> None:
    """A 4xx or 5xx ``reply`` in the ``django.request`` log, unless it is a call's (whose
    plain answer is logged as it is sent: its status is known only then)."""
    if reply is not None and reply.call is None and reply.status >= 400:
        log_status(reply.status, request)


def unreadable(exc: Exception) -> Reply:
    """400 for a request Django cannot make a request object of (a malformed Content-Type)."""
    message = f"Bad Request: the request's headers cannot be read ({jsonrpc.clip(str(exc))})"
    return Reply(400, jsonrpc.error_response(None, jsonrpc.InvalidRequest(message)))


def reason(status: int) -> str:
    """The status's reason phrase; "Unknown Status Code" (as Django says) for one without."""
    return responses.get(status, "Unknown Status Code")


def reply_parts(reply: Reply) -> tuple[list[tuple[str, str]], bytes]:
    """A plain reply's headers and body as either route sends them, encoded as
    ``to_response`` encodes it: JSON with its length, or no body and no type."""
    content = reply_content(reply)
    headers = [] if content is None else [("Content-Type", "application/json")]
    headers.append(("Content-Length", str(len(content or b""))))
    headers += reply.headers.items()
    return headers, content or b""


def log_status(status: int, request: HttpRequest | None, path: str = "") -> None:
    """A 4xx (warning) or 5xx (error) answer in the ``django.request`` log, as Django logs it."""
    log_response(
        "%s: %s",
        reason(status),
        request.path if request is not None else path,
        response=HttpResponse(status=status),
        request=request,
    )


def _unused(request: HttpRequest) -> HttpResponseBase:
    raise AssertionError("only the middleware's process_request and process_view are used")


def _auth_middleware() -> tuple[Any, ...]:
    """The site's session and authentication middleware, in order, for their process_request.

    Both only attach lazy objects (``request.session``, ``request.user``): a request
    without a session cookie makes no query.
    """
    from django.contrib.sessions.middleware import SessionMiddleware

    wanted: tuple[type, ...] = (SessionMiddleware,)
    with contextlib.suppress(Exception):  # the auth app is not installed
        from django.contrib.auth.middleware import AuthenticationMiddleware

        wanted += (AuthenticationMiddleware,)
    return _site_middleware(wanted)


def _login_middleware() -> tuple[Any, ...]:
    """The site's ``LoginRequiredMiddleware`` (Django 5.1 and later), for its process_view."""
    try:
        from django.contrib.auth.middleware import LoginRequiredMiddleware
    except ImportError:  # an older Django, or the auth app is not installed
        return ()
    return _site_middleware((LoginRequiredMiddleware,))


def _site_middleware(wanted: tuple[type, ...]) -> tuple[Any, ...]:
    """Instances of the site's ``MIDDLEWARE`` that are of the ``wanted`` classes, in order."""
    found = []
    for path in settings.MIDDLEWARE:
        try:
            cls = import_string(path)
        except ImportError:
            continue
        if isinstance(cls, type) and issubclass(cls, wanted):
            middleware: Any = cls
            found.append(middleware(_unused))
    return tuple(found)


#: Found again when the site's MIDDLEWARE changes, or SESSION_ENGINE (which the session
#: middleware reads when it is made).
_SITE_AUTH_MIDDLEWARE = Derived(_auth_middleware, ("MIDDLEWARE", "SESSION_ENGINE"))
_SITE_LOGIN_MIDDLEWARE = Derived(_login_middleware, ("MIDDLEWARE",))
