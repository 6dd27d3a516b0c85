"""Who may call the endpoint: Django REST framework authentication, permissions and throttling."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import DataError
from django.http import Http404
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import APIException

from .conf import conf, imported


@dataclass
class Refusal:
    """Why a request is turned away before it reaches the protocol."""

    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)


class BearerTokenAuthentication(TokenAuthentication):
    """DRF's token authentication with the header MCP clients send: ``Authorization: Bearer <key>``.

    Keys are ``rest_framework.authtoken`` tokens (add that app to ``INSTALLED_APPS``).
    """

    keyword = "Bearer"


class EndpointView:
    """What DRF permission and throttle classes see as ``view``: the MCP endpoint."""

    def __init__(self, server_name: str) -> None:
        self.server_name = server_name
        self.throttle_scope = "mcp"
        # ``REQUIRED_SCOPES``, where scope permission classes look for what a token must hold
        # (django-oauth-toolkit's ``TokenHasScope`` among them). Left undefined when none are
        # set: such a class then refuses to guess, where an empty list would let any token in.
        if conf.REQUIRED_SCOPES:
            self.required_scopes = list(conf.REQUIRED_SCOPES)


class _Unread:
    """Lets DRF classes read ``request.POST`` or ``request.data`` (django-oauth-toolkit's
    authentication does) of a body that is the endpoint's to read: empty, the body untouched.

    A parser as DRF uses one, without subclassing ``BaseParser``: importing
    ``rest_framework.parsers`` imports DRF's renderers and serializers, and every optional
    package they look for, into every process that serves the endpoint.
    """

    media_type = "*/*"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        return {}


#: Typed as DRF's stubs want its parsers; duck-typed, as DRF uses them.
_UNREAD: Any = [_Unread()]


@functools.lru_cache(maxsize=32)
def _classes(paths: tuple[str, ...]) -> tuple[type[Any], ...]:
    from django.utils.module_loading import import_string

    return tuple(import_string(path) for path in paths)


def _instances(paths: Sequence[str] | None) -> list[Any]:
    return [cls() for cls in _classes(tuple(paths or ()))]


def resource_metadata_url(request: Any) -> str:
    """Where the endpoint's OAuth protected resource metadata is (RFC 9728 path form)."""
    path = request.path.rstrip("/") or "/"
    return str(request.build_absolute_uri(f"/.well-known/oauth-protected-resource{path}"))


def site_user(request: Any) -> Any:
    """The user the site's middleware set on ``request``, or ``AnonymousUser`` if none did
    (a site without ``AuthenticationMiddleware``), so permission rules always get a user."""
    user = getattr(request, "user", None)
    return _anonymous() if user is None else user


def _anonymous() -> Any:
    return imported("django.contrib.auth.models.AnonymousUser")()


def readmitted(request: Any, server_name: str, user: Any) -> bool:
    """Whether a request admitted earlier for ``user`` (a stream it opened) would be now: its
    credentials still authenticate (a token not revoked, a user neither deleted nor made
    inactive) and the permission classes still pass. Its throttles are not counted again."""
    from .transport.listen import fresh_user

    now, refusal = admit(request, server_name, throttle=False)
    if refusal is not None:
        return False
    was = bool(getattr(user, "is_authenticated", False))
    # The site's own login (a session's user, read once) is read again from the database.
    return not was or bool(getattr(fresh_user(now), "is_authenticated", False))


def admit(request: Any, server_name: str, throttle: bool = True) -> tuple[Any, Refusal | None]:
    """Authenticate, authorise and throttle a request the way a DRF view would.

    Returns the caller (a user or ``AnonymousUser``) and, when the request is turned away,
    the refusal: 401 with ``WWW-Authenticate`` for a caller that must authenticate, 403 for
    one that may not call, 429 with ``Retry-After`` for one over its rate.
    """
    authenticators = conf.AUTHENTICATION_CLASSES
    permission_paths, throttle_paths = conf.PERMISSION_CLASSES, conf.THROTTLE_CLASSES
    if authenticators is None and not permission_paths and not throttle_paths:
        # Nothing to check: the site's own middleware decided who calls.
        return site_user(request), None

    from rest_framework.request import Request

    if authenticators is None:
        # The site's own middleware decides (sessions, RemoteUser ...): no DRF layer needed.
        user: Any = site_user(request)
        drf_request = None
    else:
        if _has_controls(request.META.get("HTTP_AUTHORIZATION", "")):
            # No HTTP field value holds them, and no credential does: refused before an
            # authenticator looks one up (PostgreSQL refuses a NUL in any query).
            message = "Invalid Authorization header: it holds control characters"
            return None, _unauthorized(request, message, invalid=True)
        drf_request = Request(request, parsers=_UNREAD, authenticators=_instances(authenticators))
        try:
            user = drf_request.user
            if user is None:  # REST_FRAMEWORK["UNAUTHENTICATED_USER"] = None
                # Set on the request too (DRF's setter does), for handlers and permissions.
                user = drf_request.user = _anonymous()
        except _REFUSALS as exc:
            # Bad credentials, or SessionAuthentication's CSRF check (403), as DRF answers.
            return None, _refusal(request, exc, drf_request)
        except DataError:
            # Credentials the database cannot even compare, such as a NUL in a decoded Basic
            # password on PostgreSQL: no user has them.
            return None, _unauthorized(
                request, "Invalid credentials", invalid=True, others=_challenges(drf_request)
            )
        if drf_request.successful_authenticator is None and _unheeded(request, drf_request):
            # Some authenticators (django-oauth-toolkit's, for an expired or unknown token)
            # answer "no credentials" rather than refusing them: the caller would run as
            # anonymous with a token it believes good. MCP has invalid tokens answered 401.
            return None, _unauthorized(
                request, "Invalid credentials", invalid=True, others=_challenges(drf_request)
            )
    permissions = _instances(permission_paths)
    throttles = _instances(throttle_paths) if throttle else []
    if not permissions and not throttles:
        return user, None
    if drf_request is None:
        drf_request = Request(request, parsers=_UNREAD, authenticators=[])
        drf_request.user = user
    view = EndpointView(server_name)
    authenticated = bool(getattr(user, "is_authenticated", False))
    for permission in permissions:
        try:
            allowed = permission.has_permission(drf_request, view)
        except _REFUSALS as exc:  # a permission may raise its own refusal
            scopes = _scopes(permission, view) if authenticated else None
            return user, _refusal(request, exc, drf_request, scopes)
        if not allowed:
            if not authenticated:
                return user, _unauthorized(
                    request,
                    "Authentication credentials were not provided",
                    others=_challenges(drf_request),
                )
            # A message may be a dict, as django-oauth-toolkit's TokenHasScope makes it.
            message = _detail(getattr(permission, "message", None) or "Permission denied")
            scopes = _scopes(permission, view)
            return user, _forbidden(request, message, scopes, drf_request.auth)
    waits = [t.wait() for t in throttles if not t.allow_request(drf_request, view)]
    if waits:
        known = [w for w in waits if w is not None]
        retry = max(1, math.ceil(max(known))) if known else 1
        return user, Refusal(
            429, f"Too many requests; retry in {retry} s", {"Retry-After": str(retry)}
        )
    return user, None


#: Control characters, which RFC 9110 allows in no field value but for the horizontal tab.
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _has_controls(value: str) -> bool:
    return _CONTROLS.search(value) is not None


#: What authenticators and permissions raise to refuse a request: DRF's exceptions, and
#: Django's own two, which DRF's views answer 403 and 404 too.
_REFUSALS = (APIException, PermissionDenied, Http404)


def _refusal(
    request: Any, exc: Exception, drf_request: Any, scopes: Sequence[str] | None = None
) -> Refusal:
    """The refusal for an exception raised while authenticating or authorising; ``scopes``:
    those the refusing permission asks of an authenticated caller."""
    from rest_framework import exceptions

    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    assert isinstance(exc, APIException)
    message = _detail(exc.detail)
    if isinstance(exc, exceptions.AuthenticationFailed):
        return _unauthorized(request, message, invalid=True, others=_challenges(drf_request))
    if isinstance(exc, exceptions.NotAuthenticated):
        return _unauthorized(request, message, others=_challenges(drf_request))
    if isinstance(exc, exceptions.PermissionDenied) and scopes is not None:
        return _forbidden(request, message, scopes, drf_request.auth)
    status = int(getattr(exc, "status_code", 403) or 403)
    headers = {}
    if isinstance(exc, exceptions.Throttled):
        headers["Retry-After"] = str(max(1, math.ceil(getattr(exc, "wait", None) or 1)))
    return Refusal(status if 400 <= status < 600 else 403, message, headers)


def _detail(detail: Any) -> str:
    if isinstance(detail, dict):
        detail = next(iter(detail.values()), "")
    if isinstance(detail, list):
        detail = detail[0] if detail else ""
    return str(detail) or "Permission denied"


def _quoted(text: str) -> str:
    """``text`` fit for a quoted-string: printable ASCII, no quotes or backslashes, bounded."""
    return "".join(c for c in text if c.isascii() and c.isprintable() and c not in '"\\')[:200]


def _unauthorized(
    request: Any, message: str, *, invalid: bool = False, others: Sequence[str] = ()
) -> Refusal:
    """401 with an RFC 6750 challenge naming the protected resource metadata (RFC 9728).

    ``others``: the challenges of the site's other schemes (``Basic realm="api"``), after the
    Bearer one, which MCP clients read first.
    """
    parts = []
    if invalid:
        # Credentials were sent and refused: RFC 6750 names the error so clients drop them.
        parts += ['error="invalid_token"', f'error_description="{_quoted(message)}"']
    parts.append(f'resource_metadata="{resource_metadata_url(request)}"')
    parts += _scope(conf.REQUIRED_SCOPES or conf.RESOURCE_METADATA.get("scopes_supported"))
    challenge = ", ".join(["Bearer " + ", ".join(parts), *others])
    return Refusal(401, message, {"WWW-Authenticate": challenge})


def _forbidden(request: Any, message: str, scopes: Sequence[str], auth: Any = None) -> Refusal:
    """403; for a bearer token refused for its scopes, with the RFC 6750 ``insufficient_scope``
    challenge MCP asks for, naming the scopes the refusing permission wants (so a client can
    ask for them). A refusal that more scopes would not lift (``IsAdminUser``, or a token
    that holds them all) is a plain 403: a client would otherwise ask again and again."""
    authorization = str(request.META.get("HTTP_AUTHORIZATION", ""))
    if authorization.split(" ", 1)[0].lower() != "bearer" or not scopes:
        return Refusal(403, message)
    granted = getattr(auth, "scope", None)
    if isinstance(granted, str) and set(scopes) <= set(granted.split()):
        return Refusal(403, message)
    parts = ['error="insufficient_scope"', *_scope(scopes)]
    parts += [
        f'resource_metadata="{resource_metadata_url(request)}"',
        f'error_description="{_quoted(message)}"',
    ]
    return Refusal(403, message, {"WWW-Authenticate": "Bearer " + ", ".join(parts)})


def _scope(scopes: Sequence[str] | None) -> list[str]:
    """The challenge's ``scope`` parameter, if there are scopes to name."""
    return [f'scope="{_quoted(" ".join(str(s) for s in scopes))}"'] if scopes else []


def _scopes(permission: Any, view: EndpointView) -> list[str]:
    """The scopes a refusing permission asks for: its own ``required_scopes``, or the view's."""
    scopes: Any = getattr(permission, "required_scopes", None)
    if not isinstance(scopes, list | tuple) or not all(isinstance(s, str) for s in scopes):
        scopes = getattr(view, "required_scopes", ())
    return [s for s in scopes if s and not SCOPE_BREAKER.search(s)]


#: What a scope name may not hold: challenges send scopes quoted and space-separated.
SCOPE_BREAKER = re.compile(r'[\s"\\]')


def _unheeded(request: Any, drf_request: Any) -> bool:
    """Whether the request sent credentials in the scheme of one of its authenticators (as its
    ``authenticate_header`` names it) that none of them took."""
    sent = str(request.META.get("HTTP_AUTHORIZATION", "")).split(None, 1)
    if len(sent) < 2:
        return False
    scheme = sent[0].lower()
    return any(header.split(None, 1)[0].lower() == scheme for header in _headers(drf_request))


def _headers(drf_request: Any) -> Iterator[str]:
    """The challenge each authenticator would send (``authenticate_header``), those that are
    one: some text, without control characters."""
    for authenticator in drf_request.authenticators:
        try:
            header = authenticator.authenticate_header(drf_request)
        except Exception:
            continue  # a challenge is a courtesy: never a reason to fail the refusal
        if isinstance(header, str) and header.strip() and not _has_controls(header):
            yield header.strip()


def _challenges(drf_request: Any) -> list[str]:
    """The challenges of the authenticators' schemes other than Bearer, as DRF would send the
    first of them (``Basic realm="api"``, ``Token``)."""
    found: list[str] = []
    for header in _headers(drf_request):
        if header.split(None, 1)[0].lower() != "bearer" and header not in found:
            found.append(header)
    return found


def protected_resource_metadata(request: Any, resource_path: str) -> dict[str, Any]:
    """The RFC 9728 document for the endpoint at ``resource_path``.

    ``RESOURCE_METADATA`` gives its fields (``authorization_servers``, ``scopes_supported``,
    ``resource_name`` ...); ``resource`` is always the endpoint's absolute URL.
    """
    metadata = dict(conf.RESOURCE_METADATA)
    # Under a script prefix (a site mounted at /app) the endpoint is at /app/mcp.
    prefix = str(request.META.get("SCRIPT_NAME") or "").rstrip("/")
    metadata["resource"] = request.build_absolute_uri(prefix + resource_path)
    metadata.setdefault("authorization_servers", [])
    metadata.setdefault("bearer_methods_supported", ["header"])
    return metadata
