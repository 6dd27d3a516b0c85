"""System checks for the app's settings, with stable IDs ``mcp_app.E0xx`` and ``mcp_app.W0xx``."""

# Errors (every manage.py command): E001 MCP_APP is not a dict, E002 unknown key, E003 bad VIEW,
# E004 ALLOWED_ORIGINS not a list, E005 REQUEST_STATE_MAX_AGE_MS not positive, E006 an
# authentication, permission or throttle class that cannot be used, E007 a VALIDATOR,
# SESSION_STORE or DELIVERY_BACKEND that cannot be used, E008 a malformed RESOURCE_METADATA,
# E009 a number that is not positive (or too large to add to a date), E010 a switch that is
# not a bool, E011 malformed REQUIRED_SCOPES (or none for a permission class that needs them),
# E012 a DATABASE_ALIAS that is not a database (or a SESSION_CACHE that is not a cache), E013
# ROW_TEMPLATE_LIBRARIES not a list of names, E014 REDIS_URL or REDIS_CHANNEL_PREFIX not text.
#
# Settings warning (every manage.py command): W010 the database delivery backend's
# DELIVERY_RETENTION_SECONDS no longer than a poll and the reorder window.
#
# Deployment warnings (check --deploy): W001 the key signing requestState is missing or
# insecure, W002 no allowed origins with DEBUG off, W003 "*" among the allowed origins, W004 an
# allowed origin that can never match, W006 "*" among ALLOWED_HOSTS (own origin not trusted), W007
# throttles without REST_FRAMEWORK["NUM_PROXIES"] (X-Forwarded-For chooses the anonymous ident),
# W008 sessions kept in a cache of the process's own memory (other workers do not find them),
# W012 TOOL_ERROR_DETAILS on with DEBUG off (handlers' exception messages go to clients).
#
# URL warning (every manage.py command): W011 an endpoint routed under a path that ends in a
# slash (a client sent to the path without it is redirected).
#
# Connection warnings (check --database <alias>, and migrate): W005 the delivery backend cannot
# be reached, W009 a stored row's Django template no longer compiles (a library that
# ROW_TEMPLATE_LIBRARIES no longer allows, say), W013 an enabled tool row's JSON Schema the
# validator cannot use (an unknown $schema, say) or no value can pass. Connecting is kept to
# commands that ask for it, as Django does for its own database checks, so runserver and shell
# never wait on a dead Redis.

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

from django.core.checks import CheckMessage, Error, Tags, Warning, register

from .auth import SCOPE_BREAKER
from .conf import DEFAULTS, conf

#: Settings whose values must be positive numbers, with the type ``conf`` reads them as.
NUMBERS = (
    "MAX_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_ARGUMENTS_BYTES",
    "SESSION_IDLE_SECONDS",
    "INPUT_TIMEOUT_SECONDS",
    "TASK_TTL_SECONDS",
    "TASK_POLL_INTERVAL_MS",
    "EVENT_RETENTION_SECONDS",
    "KEEPALIVE_SECONDS",
    "SSE_RETRY_MS",
    "DELIVERY_POLL_SECONDS",
    "DELIVERY_RETENTION_SECONDS",
    "AUDIT_BATCH_SIZE",
    "AUDIT_MAX_PENDING",
    "ROW_TEMPLATE_MAX_CHARS",
    "ROW_TEMPLATE_MAX_SECONDS",
)
#: Settings of seconds that may also be 0, and what 0 does.
ZERO_ALLOWED = {
    "AUDIT_FLUSH_SECONDS": "to write each audit row in the request's thread",
    "RECHECK_SECONDS": "to read the catalog's generation and sessions on every call",
    "DELIVERY_REORDER_SECONDS": "to wait for no row that commits out of order",
}
#: The longest duration of a setting in seconds (about 31 years): a longer wait would pass
#: Python's thread waits (``threading.TIMEOUT_MAX``, about 292 years on Linux).
LONGEST_SECONDS = 10**9
#: The largest size or count (2**53, past any memory): a larger one overflows what the
#: standard library takes as a size (``readline(limit + 1)``).
LARGEST_COUNT = 2**53
#: The largest value of a number setting, by the suffix of its name, and its unit.
LARGEST_BY_SUFFIX = (
    ("_SECONDS", LONGEST_SECONDS, "seconds"),
    ("_MS", LONGEST_SECONDS * 1000, "milliseconds"),
    ("_BYTES", LARGEST_COUNT, "bytes"),
    ("_CHARS", LARGEST_COUNT, "characters"),
    ("_DEPTH", LARGEST_COUNT, "levels"),
    ("_SIZE", LARGEST_COUNT, "rows"),
    ("_PENDING", LARGEST_COUNT, "rows"),
)
#: The longest time dates can be offset by (about 300 years): a longer audit retention would
#: overflow the datetime it is taken from.
LONGEST_RETENTION_SECONDS = 10**10
SWITCHES = (
    "VALIDATE_INPUT",
    "VALIDATE_OUTPUT",
    "ATOMIC",
    "AUDIT",
    "AUDIT_ARGUMENTS",
    "DELETE_REPLACED_FILES",
    "BATCH_SCHEDULING",
    "TOOL_ERROR_DETAILS",
)
#: Switches that may also be None (ATOMIC: follow the database's ATOMIC_REQUESTS).
OPTIONAL_SWITCHES = ("ATOMIC",)
#: What an Origin header holds: a scheme, a host and maybe a port, nothing after.
ORIGIN_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#\s]+\Z")
#: Seconds the delivery check waits for Redis.
PING_TIMEOUT = 1.0


def _raw() -> dict[str, Any]:
    from django.conf import settings

    raw = getattr(settings, "MCP_APP", None) or {}
    return raw if isinstance(raw, dict) else {}


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from django.conf import settings

    errors: list[CheckMessage] = []
    raw = getattr(settings, "MCP_APP", None)
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        return [Error("MCP_APP must be a dict.", id="mcp_app.E001")]
    known = set(DEFAULTS)
    # Named as written: a key may be anything hashable (1, None), not only text.
    unknown = sorted(key if isinstance(key, str) else repr(key) for key in set(raw) - known)
    if unknown:
        errors.append(
            Error(
                f"Unknown MCP_APP settings: {', '.join(unknown)}.",
                hint=f"Known settings: {', '.join(sorted(known))}.",
                id="mcp_app.E002",
            )
        )
    if conf.VIEW not in ("async", "sync"):
        errors.append(Error("MCP_APP['VIEW'] must be 'async' or 'sync'.", id="mcp_app.E003"))
    if not isinstance(raw.get("ALLOWED_ORIGINS", []), list | tuple):
        errors.append(Error("MCP_APP['ALLOWED_ORIGINS'] must be a list.", id="mcp_app.E004"))
    max_age = raw.get("REQUEST_STATE_MAX_AGE_MS")
    age = None if isinstance(max_age, bool) else _number(lambda: conf.REQUEST_STATE_MAX_AGE_MS)
    if age is None or age > LONGEST_SECONDS * 1000:
        errors.append(
            Error(
                "MCP_APP['REQUEST_STATE_MAX_AGE_MS'] must be positive, and at most "
                f"{LONGEST_SECONDS * 1000} ({LONGEST_SECONDS} seconds).",
                id="mcp_app.E005",
            )
        )
    errors += _check_drf_classes(raw)
    errors += _check_components(raw)
    errors += _check_metadata(raw)
    errors += _check_scopes(raw)
    errors += _check_numbers(raw)
    errors += _check_switches(raw)
    errors += _check_alias(raw)
    errors += _check_delivery(raw)
    if not _strings(raw.get("ROW_TEMPLATE_LIBRARIES", [])):
        errors.append(
            Error(
                "MCP_APP['ROW_TEMPLATE_LIBRARIES'] must be a list of tag library names.",
                id="mcp_app.E013",
            )
        )
    return errors


def _check_delivery(raw: dict[str, Any]) -> list[CheckMessage]:
    errors: list[CheckMessage] = [
        # conf reads them with str(): None would be the text "None", found only when used.
        Error(f"MCP_APP['{name}'] must be text, not {raw[name]!r}.", id="mcp_app.E014")
        for name in ("REDIS_URL", "REDIS_CHANNEL_PREFIX")
        if name in raw and not isinstance(raw[name], str)
    ]
    try:
        kept = conf.DELIVERY_RETENTION_SECONDS
        waited = conf.DELIVERY_POLL_SECONDS + conf.DELIVERY_REORDER_SECONDS
    except (TypeError, ValueError, OverflowError):
        return errors  # E009 names the setting
    if 0 < kept <= waited and _delivers_through_the_database():
        errors.append(
            Warning(
                "MCP_APP['DELIVERY_RETENTION_SECONDS'] is no longer than DELIVERY_POLL_SECONDS "
                "and DELIVERY_REORDER_SECONDS together: the database delivery backend may delete "
                "a message before other processes have read it, and they miss it.",
                hint="Keep messages several times longer than a poll and the reorder window.",
                id="mcp_app.W010",
            )
        )
    return errors


def _delivers_through_the_database() -> bool:
    """Whether ``DELIVERY_BACKEND`` is the database backend, the one that keeps messages for
    ``DELIVERY_RETENTION_SECONDS``; ``False`` also when it cannot be imported (E007)."""
    from django.utils.module_loading import import_string

    from .delivery.database import DatabaseBackend

    try:
        chosen = import_string(conf.DELIVERY_BACKEND)
    except Exception:
        return False
    return isinstance(chosen, type) and issubclass(chosen, DatabaseBackend)


def _sessions_in_a_cache() -> bool:
    """Whether ``SESSION_STORE`` keeps sessions in a cache (``SESSION_CACHE``); ``False`` also
    when it cannot be imported (E007)."""
    from django.utils.module_loading import import_string

    from .sessions import CacheSessionStore

    try:
        store = import_string(conf.SESSION_STORE)
    except Exception:
        return False
    return isinstance(store, type) and issubclass(store, CacheSessionStore)


def _check_alias(raw: dict[str, Any]) -> list[CheckMessage]:
    from django.conf import settings

    errors: list[CheckMessage] = []
    alias = raw.get("DATABASE_ALIAS", "default")
    if not (isinstance(alias, str) and alias in settings.DATABASES):
        errors.append(
            Error(
                f"MCP_APP['DATABASE_ALIAS'] is {alias!r}, which is not a key of DATABASES.",
                id="mcp_app.E012",
            )
        )
    cache = raw.get("SESSION_CACHE", "default")
    caches = getattr(settings, "CACHES", {})
    if _sessions_in_a_cache() and not (isinstance(cache, str) and cache in caches):
        errors.append(
            Error(
                f"MCP_APP['SESSION_CACHE'] is {cache!r}, which is not a key of CACHES.",
                id="mcp_app.E012",
            )
        )
    return errors


# -- E006: DRF classes -------------------------------------------------------------------


def _check_drf_classes(raw: dict[str, Any]) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for name in ("AUTHENTICATION_CLASSES", "PERMISSION_CLASSES", "THROTTLE_CLASSES"):
        if name not in raw or (name == "AUTHENTICATION_CLASSES" and raw[name] is None):
            continue
        value = raw[name]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            what = "None or a list" if name == "AUTHENTICATION_CLASSES" else "a list"
            errors.append(
                Error(
                    f"MCP_APP['{name}'] must be {what} of dotted paths.",
                    id="mcp_app.E006",
                )
            )
            continue
        for path in value:
            problem = _drf_class_problem(name, path)
            if problem:
                errors.append(
                    Error(
                        f"MCP_APP['{name}'] names {path!r}, which cannot be used: {problem}",
                        hint="Every request to the endpoint would fail with a server error.",
                        id="mcp_app.E006",
                    )
                )
    return errors


def _drf_class_problem(setting: str, path: str) -> str | None:
    """Why the DRF class at ``path`` cannot serve, or ``None``: it imports and instantiates."""

    cls, problem = _import(path)
    if cls is None:
        return problem
    try:
        # DRF builds one per request without arguments; a throttle without a rate fails here
        # (a malformed rate such as "60/" with an IndexError of DRF's parser).
        instance = cls()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    if setting == "THROTTLE_CLASSES":
        from rest_framework.throttling import ScopedRateThrottle

        # The scope is the view's (``mcp``), looked up on the first request only.
        rates = getattr(cls, "THROTTLE_RATES", {}) or {}
        if isinstance(instance, ScopedRateThrottle) and not rates.get("mcp"):
            return "it needs REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']['mcp'] (e.g. '60/min')."
    method = {
        "AUTHENTICATION_CLASSES": "authenticate",
        "PERMISSION_CLASSES": "has_permission",
        "THROTTLE_CLASSES": "allow_request",
    }[setting]
    if not callable(getattr(instance, method, None)):
        return f"it has no {method}() method."
    return None


def _validator_problem(cls: Any, what: str) -> str:
    """Why ``cls`` cannot be ``VALIDATOR`` (a class made once without arguments), or ``""``."""
    if not isinstance(cls, type):
        return f"it is not a class of {what}."
    try:
        instance = cls()
    except Exception as exc:
        return f"it cannot be made without arguments ({type(exc).__name__}: {exc})."
    if not all(callable(getattr(instance, m, None)) for m in ("check_schema", "problems")):
        return f"it is not {what}."
    return ""


def _import(path: str) -> tuple[Any, str]:
    from django.utils.module_loading import import_string

    try:
        return import_string(path), ""
    except ImportError as exc:
        return None, f"it does not import ({exc})."
    except Exception as exc:  # a module that fails while importing
        return None, f"importing it raised {type(exc).__name__}: {exc}"


# -- E007: pluggable components ----------------------------------------------------------


def _check_components(raw: dict[str, Any]) -> list[CheckMessage]:
    from .delivery.base import Backend
    from .sessions import SessionStore

    errors: list[CheckMessage] = []
    bases: dict[str, tuple[type[Any] | None, str]] = {
        "VALIDATOR": (None, "a mcp_app.schema.Validator (check_schema() and problems())"),
        "SESSION_STORE": (SessionStore, "a mcp_app.sessions.SessionStore subclass"),
        "DELIVERY_BACKEND": (Backend, "a mcp_app.delivery.Backend subclass"),
    }
    for name, (base, what) in bases.items():
        value = raw.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            errors.append(Error(f"MCP_APP['{name}'] must be a dotted path.", id="mcp_app.E007"))
            continue
        cls, problem = _import(value)
        if cls is not None:
            if base is not None:
                fits = isinstance(cls, type) and issubclass(cls, base)
                problem = "" if fits else f"it is not {what}."
            else:
                problem = _validator_problem(cls, what)
        if problem:
            errors.append(
                Error(
                    f"MCP_APP['{name}'] names {value!r}, which cannot be used: {problem}",
                    id="mcp_app.E007",
                )
            )
    return errors


# -- E008: protected resource metadata ---------------------------------------------------


def _check_metadata(raw: dict[str, Any]) -> list[CheckMessage]:
    value = raw.get("RESOURCE_METADATA", {})
    if value is None:
        return []
    problems: list[str] = []
    if not isinstance(value, dict):
        problems.append("it must be a dict")
    else:
        servers = value.get("authorization_servers", [])
        if not _strings(servers) or not all(
            re.match(r"^https?://[^/?#\s]+", server) for server in servers
        ):
            problems.append("'authorization_servers' must be a list of http(s) URLs")
        scopes = value.get("scopes_supported", [])
        if not _strings(scopes) or any(SCOPE_BREAKER.search(scope) for scope in scopes):
            problems.append(
                "'scopes_supported' must be a list of scope names, without spaces or quotes"
            )
        if "resource" in value:
            problems.append("'resource' is set from the request; leave it out")
    return [
        Error(f"MCP_APP['RESOURCE_METADATA'] is malformed: {problem}.", id="mcp_app.E008")
        for problem in problems
    ]


def _check_scopes(raw: dict[str, Any]) -> list[CheckMessage]:
    value = raw.get("REQUIRED_SCOPES", [])
    if value is not None and not (
        _strings(value) and not any(SCOPE_BREAKER.search(s) for s in value)
    ):
        return [
            Error(
                "MCP_APP['REQUIRED_SCOPES'] must be a list of scope names, without spaces or "
                "quotes.",
                id="mcp_app.E011",
            )
        ]
    if value:
        return []
    return [
        Error(
            f"MCP_APP['PERMISSION_CLASSES'] has {path}, which needs the scopes a token must hold.",
            hint="Name them in MCP_APP['REQUIRED_SCOPES'].",
            id="mcp_app.E011",
        )
        for path in _strings_or_empty(raw.get("PERMISSION_CLASSES"))
        if _needs_scopes(path)
    ]


def _strings_or_empty(value: Any) -> list[str]:
    return list(value) if _strings(value) else []


def _needs_scopes(path: str) -> bool:
    """Whether the permission class at ``path`` asks the view for its ``required_scopes`` and
    refuses one without them (django-oauth-toolkit's ``TokenHasScope``)."""
    from django.core.exceptions import ImproperlyConfigured

    from .auth import EndpointView

    cls, _ = _import(path)
    get_scopes = getattr(cls, "get_scopes", None) if cls is not None else None
    if get_scopes is None:
        return False
    try:
        cls().get_scopes(None, EndpointView("default"))
    except ImproperlyConfigured:
        return True
    except Exception:
        return False  # it needs more than a view to tell: not this check's to judge
    return False


def _strings(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, str) and v for v in value)


# -- E009, E010: numbers and switches ----------------------------------------------------


def _number(read: Any) -> float | None:
    """The positive number ``read()`` gives, or ``None`` for anything else."""
    try:
        value = read()
    except (TypeError, ValueError, OverflowError):
        return None
    if not isinstance(value, int | float) or not 0 < value < math.inf:
        return None
    return value


def _check_numbers(raw: dict[str, Any]) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for name in NUMBERS:
        if name not in raw:
            continue
        # Read as conf reads it ("10" is 10), but True is not a number of anything.
        value = None if isinstance(raw[name], bool) else _number(lambda n=name: getattr(conf, n))
        if value is None:
            errors.append(Error(f"MCP_APP['{name}'] must be a positive number.", id="mcp_app.E009"))
        else:
            for suffix, longest, unit in LARGEST_BY_SUFFIX:
                if name.endswith(suffix) and value > longest:
                    errors.append(
                        Error(
                            f"MCP_APP['{name}'] must be at most {longest} {unit}.",
                            id="mcp_app.E009",
                        )
                    )
    if raw.get("AUDIT_RETENTION_DAYS") is not None:
        days = raw["AUDIT_RETENTION_DAYS"]
        if (
            isinstance(days, bool)
            or not isinstance(days, int)
            or not 0 < days * 86400 <= LONGEST_RETENTION_SECONDS
        ):
            errors.append(
                Error(
                    "MCP_APP['AUDIT_RETENTION_DAYS'] must be a positive number of days, at most "
                    f"{LONGEST_RETENTION_SECONDS // 86400}, or None to keep audit rows forever.",
                    id="mcp_app.E009",
                )
            )
    for name, zero in ZERO_ALLOWED.items():
        if name not in raw:
            continue
        try:
            seconds = None if isinstance(raw[name], bool) else float(getattr(conf, name))
        except (TypeError, ValueError, OverflowError):
            seconds = None
        if seconds is None or not 0 <= seconds <= LONGEST_SECONDS:
            errors.append(
                Error(
                    f"MCP_APP['{name}'] must be a number of seconds, or 0 {zero}.",
                    id="mcp_app.E009",
                )
            )
    return errors


def _check_switches(raw: dict[str, Any]) -> list[CheckMessage]:
    return [
        Error(
            f"MCP_APP['{name}'] must be True or False, not {raw[name]!r}.",
            hint="A string such as 'false' counts as true.",
            id="mcp_app.E010",
        )
        for name in SWITCHES
        if name in raw
        and not isinstance(raw[name], bool)
        and not (name in OPTIONAL_SWITCHES and raw[name] is None)
    ]


# -- deployment: W001-W004, W006-W008, W012 ---------------------------------------------


@register(Tags.security, deploy=True)
def check_deployment(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from django.conf import settings

    warnings: list[CheckMessage] = []
    problem = _key_problem()
    if problem:
        source = "REQUEST_STATE_KEY" if _raw().get("REQUEST_STATE_KEY") else "SECRET_KEY"
        warnings.append(
            Warning(
                f"The key that signs requestState ({source}) {problem}.",
                hint="Anyone who knows or guesses it can forge the state handlers carry between "
                "rounds of input. Use a long random key kept out of the code: "
                "django.core.management.utils.get_random_secret_key().",
                id="mcp_app.W001",
            )
        )
    raw = _raw()
    if raw.get("TOOL_ERROR_DETAILS", DEFAULTS["TOOL_ERROR_DETAILS"]) is True and not settings.DEBUG:
        warnings.append(
            Warning(
                "MCP_APP['TOOL_ERROR_DETAILS'] is on: the message of an exception a handler "
                "raises is sent to the client that called it.",
                hint="Such messages may hold paths, SQL or other users' data. Set it to False "
                "and return mcp_app.tool_error('...') for what a tool's caller should read, or "
                "keep it on knowingly (SILENCED_SYSTEM_CHECKS = ['mcp_app.W012']).",
                id="mcp_app.W012",
            )
        )
    origins = raw.get("ALLOWED_ORIGINS", [])
    if not isinstance(origins, list | tuple):
        return warnings  # E004
    if not origins and not settings.DEBUG:
        warnings.append(
            Warning(
                "MCP_APP['ALLOWED_ORIGINS'] is empty: browsers on other origins are refused.",
                hint="Only same-origin pages and clients that send no Origin (SDKs, desktop "
                "apps) can call the endpoint. List the origins of browser-based clients "
                "that should, e.g. ['https://app.example.com'].",
                id="mcp_app.W002",
            )
        )
    if "*" in settings.ALLOWED_HOSTS:
        warnings.append(
            Warning(
                "ALLOWED_HOSTS contains '*': browser requests are accepted only from "
                "MCP_APP['ALLOWED_ORIGINS'], not from the endpoint's own origin.",
                hint="Any Host header is let in, so a page whose DNS name was rebound to this "
                "server looks same-origin. List the site's host names in ALLOWED_HOSTS, or "
                "its own origin in ALLOWED_ORIGINS.",
                id="mcp_app.W006",
            )
        )
    throttles = raw.get("THROTTLE_CLASSES")
    drf = getattr(settings, "REST_FRAMEWORK", None) or {}
    if throttles and isinstance(drf, dict) and drf.get("NUM_PROXIES") is None:
        warnings.append(
            Warning(
                "MCP_APP['THROTTLE_CLASSES'] is set but REST_FRAMEWORK['NUM_PROXIES'] is not: "
                "anonymous callers are told apart by an X-Forwarded-For header they choose.",
                hint="Set NUM_PROXIES to the number of proxies in front of the site (0 for "
                "none), so DRF's throttles count callers by the address the proxies saw.",
                id="mcp_app.W007",
            )
        )
    warnings += _session_cache_warnings()
    if "*" in origins:
        warnings.append(
            Warning(
                "MCP_APP['ALLOWED_ORIGINS'] contains '*': any web page may call the endpoint "
                "from its visitors' browsers.",
                hint="List the origins that need access instead.",
                id="mcp_app.W003",
            )
        )
    for origin in origins:
        if origin != "*" and (not isinstance(origin, str) or not ORIGIN_RE.match(origin)):
            warnings.append(
                Warning(
                    f"MCP_APP['ALLOWED_ORIGINS'] entry {origin!r} can never match an Origin "
                    "header.",
                    hint="An origin is a scheme, a host and an optional port, with no path "
                    "or trailing slash: 'https://app.example.com'.",
                    id="mcp_app.W004",
                )
            )
    return warnings


def _key_problem() -> str | None:
    """What is wrong with the key signing ``requestState``, or ``None``."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    key: Any = _raw().get("REQUEST_STATE_KEY")
    if not key:
        try:
            key = settings.SECRET_KEY
        except ImproperlyConfigured:
            key = ""
    if not isinstance(key, str | bytes):
        # conf signs with str(key): judged as that text.
        key = str(key)
    if not key:
        return "is missing"
    text = key.decode(errors="replace") if isinstance(key, bytes) else key
    if text.startswith("django-insecure"):
        return "is Django's insecure development key"
    if len(text) < 50 or len(set(text)) < 5:
        return "is too short or too simple (fewer than 50 characters or 5 distinct ones)"
    return None


# -- connections: W005 -------------------------------------------------------------------


@register(Tags.database)
def check_delivery(
    app_configs: Any = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Try the delivery backend, when the command asked for checks that connect."""
    if databases is None:
        return []
    problem = _delivery_problem(databases)
    if problem is None:
        return []
    return [
        Warning(
            f"The delivery backend {conf.DELIVERY_BACKEND!r} cannot be reached: {problem}",
            hint="Notifications, GET streams and initialize-era input need it; each process "
            "keeps trying, and what is published meanwhile is lost.",
            id="mcp_app.W005",
        )
    ]


def _delivery_problem(databases: Sequence[str]) -> str | None:
    path = _raw().get("DELIVERY_BACKEND", DEFAULTS["DELIVERY_BACKEND"])
    if not isinstance(path, str):
        return None  # E007
    cls, _ = _import(path)
    if not isinstance(cls, type):
        return None  # E007
    # Told apart by module, so a site on another backend never imports redis here.
    modules = {base.__module__ for base in cls.__mro__}
    if "mcp_app.delivery.redis" in modules:
        return _redis_problem(conf.REDIS_URL)
    if "mcp_app.delivery.database" in modules:
        return _table_problem(conf.DATABASE_ALIAS, databases)
    return None


def _redis_problem(url: str) -> str | None:
    import redis

    client = None
    try:
        client = redis.Redis.from_url(
            url, socket_connect_timeout=PING_TIMEOUT, socket_timeout=PING_TIMEOUT
        )
        client.ping()
    except (redis.RedisError, OSError, ValueError) as exc:
        return f"PING to {_without_password(url)} failed ({type(exc).__name__}: {exc})."
    finally:
        if client is not None:
            client.close()
    return None


def _without_password(url: str) -> str:
    return re.sub(r"//[^@/]*@", "//***@", url)


def _table_problem(alias: str, databases: Sequence[str]) -> str | None:
    from django.db import DatabaseError, connections

    from .models import DeliveryMessage

    if alias not in databases:
        return None  # only the databases the command named are touched
    table = DeliveryMessage._meta.db_table
    try:
        with connections[alias].cursor() as cursor:
            tables = connections[alias].introspection.table_names(cursor)
    except DatabaseError as exc:
        return f"database {alias!r} failed ({exc})."
    if table not in tables:
        return f"table {table} does not exist in database {alias!r}; run migrate."
    return None


# -- routes: W011 ---------------------------------------------------------------------------


@register(Tags.urls)
def check_endpoint_routes(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """An endpoint routed under a path that ends in a slash (``path("mcp/", site.urls)``)
    answers only with the slash: a client sent to ``/mcp`` is redirected, which a POST
    cannot follow, or, with ``DEBUG``, fails on ``APPEND_SLASH``."""
    from django.urls import get_resolver
    from django.urls.resolvers import RoutePattern

    try:
        patterns = get_resolver().url_patterns
    except Exception:
        return []  # a URLconf that does not load is Django's own check's to report
    warnings: list[CheckMessage] = []
    for prefix, route, server in _endpoint_routes(patterns, "", None):
        if not prefix.endswith("/") or route is None:
            continue
        where = prefix.rstrip("/").lstrip("^")
        if isinstance(route, RoutePattern):
            fix = f"path({str(route).rstrip('/')!r}, ...urls)"
        else:
            fix = f"the pattern {str(route)!r} without its last slash"
        warnings.append(
            Warning(
                f"The MCP endpoint of server {server!r} is routed at {prefix!r}, which ends in "
                f"a slash: a client given /{where} is redirected (a POST cannot follow it) or, "
                "with DEBUG on, gets an error from APPEND_SLASH.",
                hint=f"Route it without the slash, {fix}: the endpoint then answers both with "
                "and without it.",
                id="mcp_app.W011",
            )
        )
    return warnings


def _endpoint_routes(
    patterns: Sequence[Any], prefix: str, route: Any
) -> Iterator[tuple[str, Any, str]]:
    """``(whole route prefix, the pattern that includes it, server name)`` of each endpoint
    view in ``patterns``, nested includes followed."""
    from django.urls import URLResolver

    from .server import SERVER_ATTRIBUTE

    for entry in patterns:
        if isinstance(entry, URLResolver):
            try:
                inner = entry.url_patterns
            except Exception:
                continue
            yield from _endpoint_routes(inner, prefix + str(entry.pattern), entry.pattern)
            continue
        server = getattr(getattr(entry, "callback", None), SERVER_ATTRIBUTE, None)
        if server is not None:
            yield prefix, route, str(getattr(server, "name", server))


# -- stored templates: W009 ----------------------------------------------------------------

#: How many broken rows W009 names; the count covers the rest.
LISTED_ROWS = 20


@register(Tags.database)
def check_row_templates(
    app_configs: Any = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Compile the Django templates of the enabled rows, when the command asked for checks
    that connect: a row saved before a library was withdrawn fails only when it is called."""
    from .rows import template_error

    alias = _rows_database(databases)
    if alias is None:
        return []
    broken: list[str] = []
    for label, source in _stored_templates(alias):
        problem = template_error(source)
        if problem:
            broken.append(f"{label}: {' '.join(problem.split())}")
    return _broken_rows(
        broken,
        "stored template(s) no longer compile, so calling them fails",
        hint="Edit these rows in the admin, or add the library they load to "
        "MCP_APP['ROW_TEMPLATE_LIBRARIES'] if whoever edits rows may use it.",
        id="mcp_app.W009",
    )


@register(Tags.database)
def check_row_schemas(
    app_configs: Any = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Check the JSON Schemas of the enabled tool rows against the validator, and for a value
    that can pass them, when the command asked for checks that connect: a row saved under
    rules since tightened (an unknown ``$schema`` read as 2020-12, say) fails only when it is
    called."""
    from .models import Tool
    from .schema import SchemaError, unsatisfiable
    from .server import servers

    alias = _rows_database(databases)
    if alias is None:
        return []
    broken: list[str] = []
    rows = Tool.objects.filter(enabled=True).values_list(
        "pk", "server", "name", "input_schema", "output_schema"
    )
    for pk, server_name, name, *schemas in _read(alias, rows):
        server = servers.get(server_name)
        if server is None:
            continue  # a row of a server no longer registered is served by none
        try:
            # The validator the row's calls use; one that cannot be made is E007's finding.
            validator = server.engine.validator()
        except Exception:
            continue
        for field, schema in zip(("input_schema", "output_schema"), schemas, strict=True):
            if schema is None:
                continue
            try:
                validator.check_schema(schema)
            except SchemaError as exc:
                broken.append(f"tool {name!r} (id {pk}), {field}: {exc}")
                continue
            never = unsatisfiable(schema)
            if never is not None:
                broken.append(f"tool {name!r} (id {pk}), {field}: no value can pass it ({never})")
    return _broken_rows(
        broken,
        "stored schema(s) cannot be used, so their tools' calls fail",
        hint="Edit these rows in the admin; it names what each schema needs.",
        id="mcp_app.W013",
    )


def _rows_database(databases: Sequence[str] | None) -> str | None:
    """The database the catalog reads its rows from, if the command asked for checks that
    connect to it; ``None`` otherwise."""
    if databases is None:
        return None
    from django.db import router

    from .models import CatalogGeneration

    alias = router.db_for_write(CatalogGeneration)
    return alias if alias in databases else None


def _broken_rows(broken: list[str], what: str, *, hint: str, id: str) -> list[CheckMessage]:
    """One warning naming the first ``LISTED_ROWS`` of ``broken`` and counting the rest."""
    if not broken:
        return []
    listed = broken[:LISTED_ROWS]
    if len(broken) > len(listed):
        listed.append(f"and {len(broken) - len(listed)} more")
    return [Warning(f"{len(broken)} {what}:\n  " + "\n  ".join(listed), hint=hint, id=id)]


def _stored_templates(alias: str) -> Iterator[tuple[str, str]]:
    """(which row and field, template source) for each template the catalog renders: of
    enabled rows, the field a call renders."""
    from .models import PromptMessage, ResourceTemplate, Tool

    tools = Tool.objects.filter(enabled=True, overrides_code=False, handler="template")
    for pk, name, config in _read(alias, tools.values_list("pk", "name", "config")):
        template = config.get("template") if isinstance(config, dict) else None
        if isinstance(template, str):
            yield f"tool {name!r} (id {pk}), config", template
    templates = ResourceTemplate.objects.filter(enabled=True, handler="")
    for pk, name, text in _read(alias, templates.values_list("pk", "name", "text")):
        yield f"resource template {name!r} (id {pk}), text", text
    messages = PromptMessage.objects.filter(prompt__enabled=True)
    fields = ("pk", "prompt__name", "text", "resource_uri")
    for pk, prompt, text, uri in _read(alias, messages.values_list(*fields)):
        # As a call renders it: the resource URI when there is one, else the text.
        if uri:
            yield f"prompt {prompt!r}, message id {pk}, resource URI", uri
        else:
            yield f"prompt {prompt!r}, message id {pk}, text", text


def _read(alias: str, rows: Any) -> list[Any]:
    """The rows, or none when their table cannot be read yet (migrate comes next): one
    table's failure neither hides the others' findings nor spoils a transaction around."""
    from django.db import DatabaseError, transaction

    try:
        with transaction.atomic(using=alias):
            return list(rows.using(alias).order_by("pk"))
    except DatabaseError:
        return []


#: Cache backends whose entries only the process that wrote them can read.
_PROCESS_CACHES = (
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.dummy.DummyCache",
)


def _session_cache_warnings() -> list[CheckMessage]:
    from django.conf import settings

    if not _sessions_in_a_cache():
        return []
    alias = conf.SESSION_CACHE
    backend = (getattr(settings, "CACHES", {}).get(alias) or {}).get("BACKEND")
    if backend not in _PROCESS_CACHES:
        return []
    return [
        Warning(
            f"Initialize-era sessions are kept in the cache {alias!r} ({backend}), which "
            "only the process that wrote an entry can read.",
            hint="With more than one worker process, a session begun on one is not found on "
            "the others (404). Use a shared cache (Redis, Memcached, the database) for "
            "MCP_APP['SESSION_CACHE'], or the default DatabaseSessionStore.",
            id="mcp_app.W008",
        )
    ]
