"""Typed access to the ``MCP_APP`` settings dict.

The dict is read once and read again whenever Django announces a change of it
(``setting_changed``: ``override_settings``, pytest-django's ``settings`` fixture): a request
reads a dozen settings, and each read of ``django.conf.settings`` goes through its lazy proxy.
Each typed value is worked out once too, and then read as a plain attribute.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar, overload

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

DEFAULTS: dict[str, Any] = {
    # Origins allowed besides the request's own host; "*" allows any.
    "ALLOWED_ORIGINS": [],
    # Validate tool arguments and structured results against their schemas.
    "VALIDATE_INPUT": True,
    "VALIDATE_OUTPUT": True,
    # Send the message of an exception a tool raised to the client (in its isError result);
    # False sends "Tool <name> failed" instead, and only the log has the message.
    "TOOL_ERROR_DETAILS": True,
    # Dotted path of a mcp_app.schema.Validator subclass, or None for the default.
    "VALIDATOR": None,
    # Lifetime of a signed requestState, in milliseconds.
    "REQUEST_STATE_MAX_AGE_MS": 300_000,
    # Key that signs requestState; None means SECRET_KEY (with SECRET_KEY_FALLBACKS).
    "REQUEST_STATE_KEY": None,
    # Run each handler attempt in a transaction rolled back when it asks for input or fails.
    # None follows the ATOMIC_REQUESTS of DATABASE_ALIAS, as Django's own views do: the
    # transaction needs a database connection even for a call that uses none.
    "ATOMIC": None,
    "DATABASE_ALIAS": "default",
    # Seconds between comment keep-alives on long-lived SSE streams.
    "KEEPALIVE_SECONDS": 15.0,
    # Dotted path of the mcp_app.delivery.Backend that carries notifications.
    "DELIVERY_BACKEND": "mcp_app.delivery.local.LocalBackend",
    # Seconds between polls of the database delivery backend.
    "DELIVERY_POLL_SECONDS": 0.5,
    # Seconds the database delivery backend keeps published messages.
    "DELIVERY_RETENTION_SECONDS": 60,
    # Seconds the database backend waits for rows whose ids committed out of order.
    "DELIVERY_REORDER_SECONDS": 5.0,
    # Prefix of the Redis backend's channels (sites sharing a Redis server need their own).
    "REDIS_CHANNEL_PREFIX": "",
    # The Redis server of the Redis delivery backend.
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    # Dotted path of the mcp_app.sessions.SessionStore for initialize-era sessions.
    "SESSION_STORE": "mcp_app.sessions.DatabaseSessionStore",
    # The cache alias CacheSessionStore uses.
    "SESSION_CACHE": "default",
    # Seconds a session may stay idle before it expires.
    "SESSION_IDLE_SECONDS": 3600,
    # Seconds a server-to-client request waits for the client's answer.
    "INPUT_TIMEOUT_SECONDS": 300.0,
    # Seconds a task is kept from its creation (its ttlMs); tasks/get forgets it after.
    "TASK_TTL_SECONDS": 3600,
    # The interval (ms) a task's client is asked to poll tasks/get at.
    "TASK_POLL_INTERVAL_MS": 1000,
    # Seconds events are kept for clients resuming a stream with Last-Event-ID.
    "EVENT_RETENTION_SECONDS": 600,
    # The retry interval (ms) announced on streams the server may close early.
    "SSE_RETRY_MS": 1000,
    # "async" serves through an async view (ASGI), "sync" through a plain one (WSGI).
    "VIEW": "async",
    # DRF authentication classes (dotted paths); None keeps the user Django's middleware set.
    "AUTHENTICATION_CLASSES": None,
    # DRF permission classes every caller must pass.
    "PERMISSION_CLASSES": [],
    # DRF throttle classes (429 with Retry-After when over the rate).
    "THROTTLE_CLASSES": [],
    # OAuth 2.0 protected resource metadata (RFC 9728): authorization_servers, scopes_supported.
    "RESOURCE_METADATA": {},
    # Scopes every token must hold: the scope of the 401 and 403 challenges, and the view's
    # required_scopes for scope permission classes (django-oauth-toolkit's TokenHasScope).
    "REQUIRED_SCOPES": [],
    # Deepest JSON nesting accepted in a request body.
    "MAX_JSON_DEPTH": 64,
    # Largest tool arguments accepted, in bytes of JSON.
    "MAX_ARGUMENTS_BYTES": 1024 * 1024,
    # Write a ToolCall row for every tool call, resource read and prompt get.
    "AUDIT": True,
    # Keep each call's arguments in its audit row.
    "AUDIT_ARGUMENTS": False,
    # Delete a resource row's former upload from storage once no row names it.
    "DELETE_REPLACED_FILES": False,
    # Days mcp_audit_clean keeps audit rows; None keeps them for ever.
    "AUDIT_RETENTION_DAYS": 30,
    # Seconds an audit row may wait before a background thread writes it (with the rows queued
    # alongside it, in one transaction); 0 writes each row in the request's thread at once.
    "AUDIT_FLUSH_SECONDS": 1.0,
    # Queued audit rows that are written at once, without waiting for AUDIT_FLUSH_SECONDS.
    "AUDIT_BATCH_SIZE": 500,
    # Most audit rows a process keeps queued while they cannot be written; the oldest go first.
    "AUDIT_MAX_PENDING": 100_000,
    # Largest request body accepted, in bytes.
    "MAX_BODY_BYTES": 4 * 1024 * 1024,
    # The tag libraries a row's Django template may {% load %}, of those the site has: not
    # all, since a library such as cache reaches beyond the template (the site's cache).
    "ROW_TEMPLATE_LIBRARIES": ["humanize", "i18n", "l10n", "tz"],
    # The longest text a row's Django template may render, in characters; its loops may run as
    # many rounds, and none of its filters may make a longer text (an error, not a truncation).
    "ROW_TEMPLATE_MAX_CHARS": 1_000_000,
    # The longest a row's Django template may take to render, in seconds (work that makes no
    # text, such as a filter run on a long argument in every round of a loop).
    "ROW_TEMPLATE_MAX_SECONDS": 5.0,
    # Longest a worker trusts what it read of the catalog's generation or of a session without
    # reading it again, for changes no signal or delivery backend reports; 0: on every call.
    "RECHECK_SECONDS": 1.0,
    # Linux: run the threads that serve requests under SCHED_BATCH, so a thread handed a
    # request does not preempt the one that handed it over, which holds the GIL.
    "BATCH_SCHEDULING": True,
}


T = TypeVar("T")

#: Held while a value is kept or kept values are dropped, so that a value worked out before
#: a change is never kept after it. Reentrant: a reload drops its source's value too.
_STORING = threading.RLock()
_UNSET: Any = object()


class Derived(Generic[T]):
    """A value worked out from Django settings on first use, and kept until Django announces a
    change of one of ``names`` (``setting_changed``) or ``forget()`` is called.

    A value worked out while a change was announced is used once, not kept.
    """

    def __init__(self, compute: Callable[[], T], names: Iterable[str] = ()) -> None:
        self._compute = compute
        self._names = frozenset(names)
        self._value: T = _UNSET
        #: Moved by every change.
        self.generation = 0
        if self._names:
            _derived.append(self)

    def get(self) -> T:
        value = self._value
        if value is _UNSET:
            generation = self.generation
            value = self._compute()
            self.keep(generation, lambda: setattr(self, "_value", value))
        return value

    def keep(self, generation: int, store: Callable[[], None]) -> None:
        """Run ``store`` unless a change came after ``generation`` was read."""
        with _STORING:
            if generation == self.generation:
                store()

    def forget(self) -> None:
        with _STORING:
            self.generation += 1
            self._value = _UNSET


_derived: list[Derived[Any]] = []


class _setting(Generic[T]):  # a decorator, named as ``property`` is
    """A typed setting, worked out on first read and kept in the instance until ``reload()``.

    A non-data descriptor: once kept, a read is a plain instance attribute lookup.
    """

    def __init__(self, compute: Callable[[Settings], T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    @overload
    def __get__(self, instance: None, owner: type) -> _setting[T]: ...

    @overload
    def __get__(self, instance: Settings, owner: type) -> T: ...

    def __get__(self, instance: Settings | None, owner: type) -> T | _setting[T]:
        if instance is None:
            return self
        generation = instance._source.generation
        value = self.compute(instance)
        instance._source.keep(generation, lambda: instance.__dict__.__setitem__(self.name, value))
        return value


def _merged() -> dict[str, Any]:
    overrides = getattr(settings, "MCP_APP", None) or {}
    return {**DEFAULTS, **overrides} if isinstance(overrides, dict) else dict(DEFAULTS)


class Settings:
    """One attribute per setting; values come from ``settings.MCP_APP`` or the defaults."""

    def __init__(self) -> None:
        self._source = Derived(_merged)

    def _get(self, name: str) -> Any:
        return self._source.get()[name]

    def reload(self) -> None:
        """Read ``settings.MCP_APP`` again on the next access."""
        with _STORING:
            self._source.forget()
            for name, attribute in vars(type(self)).items():
                if isinstance(attribute, _setting):
                    self.__dict__.pop(name, None)

    @property
    def ALLOWED_ORIGINS(self) -> list[str]:
        return list(self._get("ALLOWED_ORIGINS"))

    @_setting
    def VALIDATE_INPUT(self) -> bool:
        return bool(self._get("VALIDATE_INPUT"))

    @_setting
    def VALIDATE_OUTPUT(self) -> bool:
        return bool(self._get("VALIDATE_OUTPUT"))

    @_setting
    def TOOL_ERROR_DETAILS(self) -> bool:
        return bool(self._get("TOOL_ERROR_DETAILS"))

    @_setting
    def VALIDATOR(self) -> str | None:
        value = self._get("VALIDATOR")
        return str(value) if value else None

    @_setting
    def REQUEST_STATE_MAX_AGE_MS(self) -> int:
        return int(self._get("REQUEST_STATE_MAX_AGE_MS"))

    @_setting
    def REQUEST_STATE_KEY(self) -> str | None:
        value = self._get("REQUEST_STATE_KEY")
        return str(value) if value else None

    @_setting
    def BATCH_SCHEDULING(self) -> bool:
        return bool(self._get("BATCH_SCHEDULING"))

    @_setting
    def RECHECK_SECONDS(self) -> float:
        return float(self._get("RECHECK_SECONDS"))

    @property
    def ATOMIC(self) -> bool:
        # Not kept: unset, it follows ATOMIC_REQUESTS, which may be changed in place (as
        # Django's own request handler reads it, on every request).
        value = self._atomic
        if value is None:
            database = django_setting("DATABASES").get(self.DATABASE_ALIAS) or {}
            return bool(database.get("ATOMIC_REQUESTS", False))
        return value

    @_setting
    def _atomic(self) -> bool | None:
        """``ATOMIC`` as set: ``None`` when it follows ``ATOMIC_REQUESTS``."""
        value = self._get("ATOMIC")
        return None if value is None else bool(value)

    @_setting
    def DATABASE_ALIAS(self) -> str:
        return str(self._get("DATABASE_ALIAS"))

    @_setting
    def KEEPALIVE_SECONDS(self) -> float:
        return float(self._get("KEEPALIVE_SECONDS"))

    @_setting
    def DELIVERY_BACKEND(self) -> str:
        return str(self._get("DELIVERY_BACKEND"))

    @_setting
    def DELIVERY_POLL_SECONDS(self) -> float:
        return float(self._get("DELIVERY_POLL_SECONDS"))

    @_setting
    def DELIVERY_RETENTION_SECONDS(self) -> float:
        return float(self._get("DELIVERY_RETENTION_SECONDS"))

    @_setting
    def DELIVERY_REORDER_SECONDS(self) -> float:
        return float(self._get("DELIVERY_REORDER_SECONDS"))

    @_setting
    def REDIS_CHANNEL_PREFIX(self) -> str:
        return str(self._get("REDIS_CHANNEL_PREFIX"))

    @_setting
    def REDIS_URL(self) -> str:
        return str(self._get("REDIS_URL"))

    @_setting
    def SESSION_STORE(self) -> str:
        return str(self._get("SESSION_STORE"))

    @_setting
    def SESSION_CACHE(self) -> str:
        return str(self._get("SESSION_CACHE"))

    @_setting
    def SESSION_IDLE_SECONDS(self) -> int:
        return int(self._get("SESSION_IDLE_SECONDS"))

    @_setting
    def INPUT_TIMEOUT_SECONDS(self) -> float:
        return float(self._get("INPUT_TIMEOUT_SECONDS"))

    @_setting
    def TASK_TTL_SECONDS(self) -> int:
        return int(self._get("TASK_TTL_SECONDS"))

    @_setting
    def TASK_POLL_INTERVAL_MS(self) -> int:
        return int(self._get("TASK_POLL_INTERVAL_MS"))

    @_setting
    def EVENT_RETENTION_SECONDS(self) -> int:
        return int(self._get("EVENT_RETENTION_SECONDS"))

    @_setting
    def SSE_RETRY_MS(self) -> int:
        return int(self._get("SSE_RETRY_MS"))

    @_setting
    def VIEW(self) -> str:
        return str(self._get("VIEW"))

    @_setting
    def AUTHENTICATION_CLASSES(self) -> tuple[str, ...] | None:
        value = self._get("AUTHENTICATION_CLASSES")
        return None if value is None else tuple(str(v) for v in value)

    @_setting
    def PERMISSION_CLASSES(self) -> tuple[str, ...]:
        return tuple(str(v) for v in self._get("PERMISSION_CLASSES") or ())

    @_setting
    def THROTTLE_CLASSES(self) -> tuple[str, ...]:
        return tuple(str(v) for v in self._get("THROTTLE_CLASSES") or ())

    @property
    def RESOURCE_METADATA(self) -> dict[str, Any]:
        return dict(self._get("RESOURCE_METADATA") or {})

    @_setting
    def REQUIRED_SCOPES(self) -> tuple[str, ...]:
        return tuple(str(v) for v in self._get("REQUIRED_SCOPES") or ())

    @_setting
    def MAX_JSON_DEPTH(self) -> int:
        return int(self._get("MAX_JSON_DEPTH"))

    @_setting
    def MAX_ARGUMENTS_BYTES(self) -> int:
        return int(self._get("MAX_ARGUMENTS_BYTES"))

    @_setting
    def AUDIT(self) -> bool:
        return bool(self._get("AUDIT"))

    @_setting
    def AUDIT_ARGUMENTS(self) -> bool:
        return bool(self._get("AUDIT_ARGUMENTS"))

    @_setting
    def DELETE_REPLACED_FILES(self) -> bool:
        return bool(self._get("DELETE_REPLACED_FILES"))

    @_setting
    def AUDIT_RETENTION_DAYS(self) -> int | None:
        value = self._get("AUDIT_RETENTION_DAYS")
        return None if value is None else int(value)

    @_setting
    def AUDIT_FLUSH_SECONDS(self) -> float:
        return float(self._get("AUDIT_FLUSH_SECONDS"))

    @_setting
    def AUDIT_BATCH_SIZE(self) -> int:
        return int(self._get("AUDIT_BATCH_SIZE"))

    @_setting
    def AUDIT_MAX_PENDING(self) -> int:
        return int(self._get("AUDIT_MAX_PENDING"))

    @_setting
    def MAX_BODY_BYTES(self) -> int:
        return int(self._get("MAX_BODY_BYTES"))

    @_setting
    def ROW_TEMPLATE_LIBRARIES(self) -> tuple[str, ...]:
        return tuple(str(v) for v in self._get("ROW_TEMPLATE_LIBRARIES") or ())

    @_setting
    def ROW_TEMPLATE_MAX_CHARS(self) -> int:
        return int(self._get("ROW_TEMPLATE_MAX_CHARS"))

    @_setting
    def ROW_TEMPLATE_MAX_SECONDS(self) -> float:
        return float(self._get("ROW_TEMPLATE_MAX_SECONDS"))


conf = Settings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_APP":
        conf.reload()
    for derived in _derived:
        if setting in derived._names:
            derived.forget()


setting_changed.connect(_reload, dispatch_uid="mcp_app.conf.reload")


#: ``import_string`` whose answers are kept: for what a module cannot import as it loads (the
#: modules import each other, or the app registry is not ready) and needs on every request,
#: where an import statement costs about as much as the lookup it serves.
imported: Callable[[str], Any] = functools.cache(import_string)


#: What ``django.conf.settings`` keeps of the settings read so far. ``settings.NAME`` goes
#: through its proxy's ``__getattribute__``, which also asks the value for an attribute it
#: lacks (an exception raised and caught inside): about ten times a dict lookup's cost. The
#: proxy clears this dict in place whenever the settings it wraps change (``override_settings``)
#: and drops a name set anew, so a value found here is the current one.
_read_settings: dict[str, Any] = vars(settings)


def django_setting(name: str) -> Any:
    """``getattr(django.conf.settings, name)``, without the proxy's cost once it has been read."""
    try:
        return _read_settings[name]
    except KeyError:
        return getattr(settings, name)
