"""Tests for mcp_app.checks: each settings problem has its own stable ID."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core import checks
from django.core.checks import CheckMessage
from django.test import override_settings
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle

from mcp_app.checks import (
    check_delivery,
    check_deployment,
    check_row_schemas,
    check_row_templates,
    check_settings,
)
from mcp_app.schema import JSONSchemaValidator


def ids(value: Any) -> list[str]:
    with override_settings(MCP_APP=value):
        return [message.id for message in check_settings()]


@pytest.mark.parametrize(
    "value", [None, {}, {"VIEW": "sync"}, {"VIEW": "async", "ALLOWED_ORIGINS": ("x",)}]
)
def test_good_settings_pass(value: Any) -> None:
    assert ids(value) == []


def test_absent_setting_passes(settings: Any) -> None:
    del settings.MCP_APP
    assert check_settings() == []


@pytest.mark.parametrize("value", [["VIEW", "sync"], "sync", 3, [], ""])
def test_non_dict_setting_is_e001_alone(value: Any) -> None:
    with override_settings(MCP_APP=value):
        messages = check_settings()
    assert [m.id for m in messages] == ["mcp_app.E001"]
    assert messages[0].msg == "MCP_APP must be a dict."
    assert messages[0].level == checks.ERROR


def test_unknown_keys_are_e002_naming_them_sorted_with_a_hint() -> None:
    with override_settings(MCP_APP={"VEIW": "sync", "ALLOWED_ORIGIN": []}):
        messages = check_settings()
    assert [m.id for m in messages] == ["mcp_app.E002"]
    assert messages[0].msg == "Unknown MCP_APP settings: ALLOWED_ORIGIN, VEIW."
    assert "VIEW" in messages[0].hint
    assert messages[0].hint.startswith("Known settings: ALLOWED_ORIGINS, ATOMIC,")


def test_unknown_keys_that_are_not_text_are_named_as_written() -> None:
    with override_settings(MCP_APP={1: 2, None: 3, "VEIW": "sync"}):
        messages = check_settings()
    assert [m.id for m in messages] == ["mcp_app.E002"]
    assert messages[0].msg == "Unknown MCP_APP settings: 1, None, VEIW."


@pytest.mark.parametrize("view", ["wsgi", "", "ASYNC"])
def test_bad_view_is_e003(view: str) -> None:
    assert ids({"VIEW": view}) == ["mcp_app.E003"]


@pytest.mark.parametrize("origins", ["https://a.example", None, {"https://a.example": 1}])
def test_non_list_allowed_origins_is_e004(origins: Any) -> None:
    assert ids({"ALLOWED_ORIGINS": origins}) == ["mcp_app.E004"]


@pytest.mark.parametrize("age", [0, -1, True, float("inf"), 10**20])
def test_non_positive_request_state_age_is_e005(age: int) -> None:
    # 10**20 ms is past what a timedelta holds: every input_required round would fail.
    assert ids({"REQUEST_STATE_MAX_AGE_MS": age}) == ["mcp_app.E005"]


@pytest.mark.parametrize(
    "value",
    [
        # Past threading.TIMEOUT_MAX: every wait for a client's answer would fail.
        {"INPUT_TIMEOUT_SECONDS": 10**10},
        {"SSE_RETRY_MS": 10**13},
    ],
)
def test_durations_longer_than_a_wait_can_be_are_e009(value: dict[str, int]) -> None:
    assert ids(value) == ["mcp_app.E009"]


@pytest.mark.parametrize(
    "value",
    [
        # Past what the standard library takes as a size (stdin's readline(limit + 1)).
        {"MAX_BODY_BYTES": 10**30},
        {"MAX_BODY_BYTES": 2**63 - 1},
        {"MAX_JSON_DEPTH": 2**60},
        {"AUDIT_MAX_PENDING": 10**20},
        {"ROW_TEMPLATE_MAX_CHARS": 10**18},
    ],
)
def test_sizes_and_counts_past_any_memory_are_e009(value: dict[str, int]) -> None:
    with override_settings(MCP_APP=value):
        messages = check_settings()
    assert [m.id for m in messages] == ["mcp_app.E009"]
    assert f"must be at most {2**53} " in messages[0].msg
    assert ids({name: 2**53 for name in value}) == []


def test_several_problems_are_all_reported_in_order() -> None:
    assert ids(
        {"BOGUS": 1, "VIEW": "x", "ALLOWED_ORIGINS": "x", "REQUEST_STATE_MAX_AGE_MS": 0}
    ) == [
        "mcp_app.E002",
        "mcp_app.E003",
        "mcp_app.E004",
        "mcp_app.E005",
    ]


def test_check_is_registered_with_django() -> None:
    assert check_settings in checks.registry.registry.get_checks()
    with override_settings(MCP_APP={"VIEW": "bad"}):
        found = [m.id for m in checks.run_checks(tags=[checks.Tags.compatibility])]
    assert "mcp_app.E003" in found


# -- E002 knows the audit settings ----------------------------------------------------------


def test_the_audit_settings_are_known() -> None:
    assert ids({"AUDIT": False, "AUDIT_ARGUMENTS": True, "AUDIT_RETENTION_DAYS": 90}) == []
    assert ids({"AUDIT_RETENTION_DAYS": None}) == []
    # A century of audit rows: a date limit, not a wait's.
    assert ids({"AUDIT_RETENTION_DAYS": 36500}) == []


# -- E006: DRF classes ----------------------------------------------------------------------


class NoRate(SimpleRateThrottle):
    scope = "nowhere"


class ScopedWithRate(ScopedRateThrottle):
    THROTTLE_RATES = {"mcp": "10/min"}


class NotAPermission:
    pass


class BadRate(SimpleRateThrottle):
    # DRF's parser fails on it with an IndexError, not an ImproperlyConfigured.
    rate = "60/"


@pytest.mark.parametrize(
    "value",
    [
        {"AUTHENTICATION_CLASSES": None},
        {"AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]},
        {"AUTHENTICATION_CLASSES": ("mcp_app.auth.BearerTokenAuthentication",)},
        {"PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"]},
        {"THROTTLE_CLASSES": [f"{__name__}.ScopedWithRate"]},
    ],
)
def test_usable_drf_classes_pass(value: Any) -> None:
    assert ids(value) == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (
            {"AUTHENTICATION_CLASSES": "rest_framework.authentication.TokenAuthentication"},
            "None or a list",
        ),
        ({"PERMISSION_CLASSES": None}, "must be a list of dotted paths"),
        ({"THROTTLE_CLASSES": [3]}, "must be a list of dotted paths"),
        ({"AUTHENTICATION_CLASSES": ["rest_framework.authentication.Nope"]}, "does not import"),
        ({"PERMISSION_CLASSES": ["no_such_module.Perm"]}, "does not import"),
        ({"PERMISSION_CLASSES": [f"{__name__}.NotAPermission"]}, "no has_permission() method"),
        ({"THROTTLE_CLASSES": [f"{__name__}.NoRate"]}, "ImproperlyConfigured"),
        ({"THROTTLE_CLASSES": [f"{__name__}.BadRate"]}, "IndexError"),
        (
            {"THROTTLE_CLASSES": ["rest_framework.throttling.ScopedRateThrottle"]},
            "DEFAULT_THROTTLE_RATES']['mcp']",
        ),
    ],
)
def test_unusable_drf_classes_are_e006(value: Any, problem: str) -> None:
    with override_settings(MCP_APP=value):
        messages = check_settings()
    assert [m.id for m in messages] == ["mcp_app.E006"]
    assert problem in messages[0].msg


def test_a_module_that_fails_while_importing_is_e006(monkeypatch: Any) -> None:
    from django.utils import module_loading

    def broken(path: str) -> Any:
        raise RuntimeError("settings not ready")

    monkeypatch.setattr(module_loading, "import_string", broken)
    with override_settings(MCP_APP={"PERMISSION_CLASSES": ["shop.permissions.Broken"]}):
        messages = check_settings()
    assert [m.id for m in messages] == ["mcp_app.E006"]
    assert "importing it raised RuntimeError: settings not ready" in messages[0].msg


def test_each_bad_class_is_its_own_e006() -> None:
    value = {"PERMISSION_CLASSES": ["a.B", "rest_framework.permissions.AllowAny", "c.D"]}
    with override_settings(MCP_APP=value):
        messages = check_settings()
    assert [("'a.B'" in m.msg, "'c.D'" in m.msg) for m in messages] == [
        (True, False),
        (False, True),
    ]


# -- E007: pluggable components -------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"VALIDATOR": "mcp_app.schema.JSONSchemaValidator"},
        {"SESSION_STORE": "mcp_app.sessions.CacheSessionStore"},
        {"DELIVERY_BACKEND": "mcp_app.delivery.database.DatabaseBackend"},
        {"VALIDATOR": None},
    ],
)
def test_usable_components_pass(value: Any) -> None:
    assert ids(value) == []


VALIDATOR_INSTANCE = JSONSchemaValidator()


class StrictValidator(JSONSchemaValidator):
    def __init__(self, strict: bool) -> None:
        super().__init__()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"VALIDATOR": "mcp_app.schema.Nope"}, "does not import"),
        ({"VALIDATOR": "mcp_app.sessions.SessionStore"}, "is not a mcp_app.schema.Validator"),
        # An instance, where a class is made once per process: every call would fail.
        ({"VALIDATOR": "tests.test_checks.VALIDATOR_INSTANCE"}, "is not a class of"),
        ({"VALIDATOR": "tests.test_checks.StrictValidator"}, "cannot be made without arguments"),
        ({"SESSION_STORE": "mcp_app.delivery.local.LocalBackend"}, "SessionStore subclass"),
        ({"DELIVERY_BACKEND": "mcp_app.delivery.nope.Backend"}, "does not import"),
        ({"DELIVERY_BACKEND": "mcp_app.sessions.CacheSessionStore"}, "Backend subclass"),
        ({"DELIVERY_BACKEND": 3}, "must be a dotted path"),
    ],
)
def test_unusable_components_are_e007(value: Any, problem: str) -> None:
    with override_settings(MCP_APP=value):
        messages = check_settings()
    assert [m.id for m in messages] == ["mcp_app.E007"]
    assert problem in messages[0].msg


# -- E008: protected resource metadata -------------------------------------------------------


def test_good_resource_metadata_passes() -> None:
    metadata = {
        "authorization_servers": ["https://auth.example.com/realms/x"],
        "scopes_supported": ["mcp:read", "mcp:write"],
        "resource_name": "Demo",
    }
    assert ids({"RESOURCE_METADATA": metadata}) == []
    assert ids({"RESOURCE_METADATA": None}) == []


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        (["https://auth.example.com"], "it must be a dict"),
        ({"authorization_servers": "https://auth.example.com"}, "'authorization_servers'"),
        ({"authorization_servers": ["auth.example.com"]}, "'authorization_servers'"),
        ({"scopes_supported": ["read write"]}, "'scopes_supported'"),
        ({"scopes_supported": ['say "hi"']}, "'scopes_supported'"),
        ({"resource": "https://elsewhere.example/mcp"}, "'resource' is set from the request"),
    ],
)
def test_malformed_resource_metadata_is_e008(metadata: Any, problem: str) -> None:
    with override_settings(MCP_APP={"RESOURCE_METADATA": metadata}):
        messages = check_settings()
    assert [m.id for m in messages] == ["mcp_app.E008"]
    assert problem in messages[0].msg


# -- E011: required scopes ----------------------------------------------------------------


def test_required_scopes_pass() -> None:
    assert ids({"REQUIRED_SCOPES": ["mcp:read", "mcp:write"]}) == []
    assert ids({"REQUIRED_SCOPES": []}) == []


@pytest.mark.parametrize("scopes", ["mcp:read", ["mcp read"], ['say "hi"'], [""], [1], {"a": 1}])
def test_malformed_required_scopes_are_e011(scopes: Any) -> None:
    # A string, not a list, would be read as one scope per character.
    assert ids({"REQUIRED_SCOPES": scopes}) == ["mcp_app.E011"]


# -- E009, E010: numbers and switches ----------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"MAX_BODY_BYTES": 0},
        {"MAX_JSON_DEPTH": -1},
        {"MAX_ARGUMENTS_BYTES": "big"},
        {"ROW_TEMPLATE_MAX_CHARS": 0},
        {"ROW_TEMPLATE_MAX_SECONDS": 0},
        {"INPUT_TIMEOUT_SECONDS": None},
        {"SESSION_IDLE_SECONDS": True},
        {"AUDIT_RETENTION_DAYS": 0},
        {"AUDIT_RETENTION_DAYS": "30"},
        # Numbers no duration can be: not finite, or past what a date can be offset by.
        {"KEEPALIVE_SECONDS": float("inf")},
        {"TASK_TTL_SECONDS": 10**12},
        {"AUDIT_RETENTION_DAYS": 10**9},
        {"RECHECK_SECONDS": float("nan")},
        {"DELIVERY_REORDER_SECONDS": "5s"},
        {"DELIVERY_REORDER_SECONDS": -3},
    ],
)
def test_numbers_that_are_not_positive_are_e009(value: Any) -> None:
    assert ids(value) == ["mcp_app.E009"]


@pytest.mark.parametrize("alias", ["nope", None, 3])
def test_a_database_alias_that_is_no_database_is_e012(alias: Any) -> None:
    assert ids({"DATABASE_ALIAS": alias}) == ["mcp_app.E012"]


@pytest.mark.parametrize("cache", ["nope", 5, None])
def test_a_session_cache_that_is_no_cache_is_e012(cache: Any) -> None:
    store = "mcp_app.sessions.CacheSessionStore"
    assert ids({"SESSION_STORE": store, "SESSION_CACHE": cache}) == ["mcp_app.E012"]
    assert ids({"SESSION_STORE": store, "SESSION_CACHE": "default"}) == []
    # Only the cache store reads it.
    assert ids({"SESSION_CACHE": cache}) == []


@pytest.mark.parametrize(
    "value", [{"REDIS_URL": None}, {"REDIS_URL": 6379}, {"REDIS_CHANNEL_PREFIX": b"site:"}]
)
def test_redis_settings_that_are_not_text_are_e014(value: dict[str, Any]) -> None:
    assert ids(value) == ["mcp_app.E014"]
    assert ids({"REDIS_URL": "redis://cache:6379/1", "REDIS_CHANNEL_PREFIX": "site:"}) == []


def test_delivery_messages_kept_no_longer_than_a_poll_and_the_reorder_window_is_w010() -> None:
    database = {"DELIVERY_BACKEND": "mcp_app.delivery.database.DatabaseBackend"}
    with override_settings(
        MCP_APP={**database, "DELIVERY_RETENTION_SECONDS": 0.1, "DELIVERY_POLL_SECONDS": 5}
    ):
        messages = check_settings()
    assert [(m.id, m.level) for m in messages] == [("mcp_app.W010", checks.WARNING)]
    short = {"DELIVERY_RETENTION_SECONDS": 5.5, "DELIVERY_REORDER_SECONDS": 5}
    assert ids({**database, **short}) == ["mcp_app.W010"]
    assert ids({**database, **short, "DELIVERY_RETENTION_SECONDS": 6}) == []
    # Only the database backend keeps messages for that long.
    assert ids(short) == []
    assert ids({**short, "DELIVERY_BACKEND": "mcp_app.delivery.redis.RedisBackend"}) == []


@pytest.mark.parametrize("libraries", ["humanize", [""], [3], None])
def test_row_template_libraries_that_are_no_list_of_names_are_e013(libraries: Any) -> None:
    assert ids({"ROW_TEMPLATE_LIBRARIES": libraries}) == ["mcp_app.E013"]
    assert ids({"ROW_TEMPLATE_LIBRARIES": ["cache", "tz"]}) == []


def test_numbers_conf_reads_pass() -> None:
    assert ids({"MAX_BODY_BYTES": "1000", "KEEPALIVE_SECONDS": 0.5, "MAX_JSON_DEPTH": 8}) == []
    assert ids({"ROW_TEMPLATE_MAX_CHARS": 50_000}) == []
    assert ids({"ROW_TEMPLATE_MAX_SECONDS": 0.5}) == []
    assert ids({"DELIVERY_REORDER_SECONDS": 0, "TASK_TTL_SECONDS": 86400 * 365}) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (name, value)
        for name in ["VALIDATE_INPUT", "ATOMIC", "AUDIT", "AUDIT_ARGUMENTS", "BATCH_SCHEDULING"]
        for value in ["false", 0, None]
        # ATOMIC = None is valid: see the test below.
        if not (name == "ATOMIC" and value is None)
    ],
)
def test_switches_that_are_not_bools_are_e010(name: str, value: Any) -> None:
    with override_settings(MCP_APP={name: value}):
        messages = check_settings()
    assert [m.id for m in messages] == ["mcp_app.E010"]
    assert "counts as true" in messages[0].hint


def test_atomic_may_be_none_to_follow_atomic_requests() -> None:
    with override_settings(MCP_APP={"ATOMIC": None}):
        assert check_settings() == []


# -- deployment: W001-W004 -----------------------------------------------------------------


def deploy_ids(**overrides: Any) -> list[str]:
    with override_settings(**overrides):
        return [message.id for message in check_deployment()]


GOOD_KEY = "k3y-" + "".join(chr(ord("a") + i % 26) for i in range(60))
#: A deployment none of the checks warns about: each test changes one thing.
ORIGINS = {"ALLOWED_ORIGINS": ["https://app.example.com"], "TOOL_ERROR_DETAILS": False}
QUIET = {"TOOL_ERROR_DETAILS": False}


# Django 6 runs checks that open a database connection as part of the full run.
@pytest.mark.django_db
def test_the_deployment_checks_are_registered_as_deploy_checks() -> None:
    assert check_deployment not in checks.registry.registry.get_checks()
    assert check_deployment in checks.registry.registry.get_checks(include_deployment_checks=True)
    with override_settings(SECRET_KEY="django-insecure-x", MCP_APP=ORIGINS):
        found = [m.id for m in checks.run_checks(include_deployment_checks=True)]
    assert "mcp_app.W001" in found


def test_a_good_deployment_passes() -> None:
    assert deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP=ORIGINS) == []


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("django-insecure-" + "x" * 60, "Django's insecure development key"),
        ("short-but-random-9f3a", "too short or too simple"),
        ("a" * 80, "too short or too simple"),
    ],
)
def test_an_insecure_secret_key_is_w001(key: str, problem: str) -> None:
    with override_settings(SECRET_KEY=key, MCP_APP=ORIGINS):
        messages = check_deployment()
    assert [m.id for m in messages] == ["mcp_app.W001"]
    assert messages[0].msg.startswith("The key that signs requestState (SECRET_KEY) is ")
    assert problem in messages[0].msg
    assert messages[0].level == checks.WARNING


def test_a_missing_secret_key_is_w001() -> None:
    with override_settings(SECRET_KEY="", MCP_APP=ORIGINS):
        messages = check_deployment()
    assert messages[0].msg == "The key that signs requestState (SECRET_KEY) is missing."


def test_a_request_state_key_is_checked_instead_of_the_secret_key() -> None:
    weak = {**ORIGINS, "REQUEST_STATE_KEY": "weak"}
    with override_settings(SECRET_KEY=GOOD_KEY, MCP_APP=weak):
        messages = check_deployment()
    assert messages[0].msg.startswith("The key that signs requestState (REQUEST_STATE_KEY)")
    strong = {**ORIGINS, "REQUEST_STATE_KEY": GOOD_KEY}
    assert deploy_ids(SECRET_KEY="django-insecure-x", MCP_APP=strong) == []
    # Not text: the state is signed with its text, judged as such (not "missing").
    number = {**ORIGINS, "REQUEST_STATE_KEY": 12345}
    with override_settings(SECRET_KEY=GOOD_KEY, MCP_APP=number):
        messages = check_deployment()
    assert messages[0].msg == (
        "The key that signs requestState (REQUEST_STATE_KEY) is too short or too simple "
        "(fewer than 50 characters or 5 distinct ones)."
    )


def test_no_allowed_origins_with_debug_off_is_w002() -> None:
    assert deploy_ids(SECRET_KEY=GOOD_KEY, DEBUG=False, MCP_APP=QUIET) == ["mcp_app.W002"]
    assert deploy_ids(SECRET_KEY=GOOD_KEY, DEBUG=True, MCP_APP=QUIET) == []


def test_any_host_is_w006() -> None:
    ids = deploy_ids(SECRET_KEY=GOOD_KEY, ALLOWED_HOSTS=["*"], MCP_APP=ORIGINS)
    assert ids == ["mcp_app.W006"]


def test_throttles_without_num_proxies_are_w007() -> None:
    throttled = {**ORIGINS, "THROTTLE_CLASSES": ["rest_framework.throttling.AnonRateThrottle"]}
    assert deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP=throttled) == ["mcp_app.W007"]
    assert (
        deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP=throttled, REST_FRAMEWORK={"NUM_PROXIES": 0}) == []
    )
    assert deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP=ORIGINS) == []


def test_sessions_in_a_cache_of_the_process_own_memory_are_w008() -> None:
    cached = {**ORIGINS, "SESSION_STORE": "mcp_app.sessions.CacheSessionStore"}
    locmem = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    shared = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache"}}
    assert deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP=cached, CACHES=locmem) == ["mcp_app.W008"]
    assert deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP=cached, CACHES=shared) == []
    # The default store keeps sessions in the database, whatever the caches.
    assert deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP=ORIGINS, CACHES=locmem) == []


def test_any_origin_is_w003() -> None:
    value = {**QUIET, "ALLOWED_ORIGINS": ["*"]}
    assert deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP=value) == ["mcp_app.W003"]


@pytest.mark.parametrize(
    "origin", ["app.example.com", "https://app.example.com/", "https://app.example.com/mcp", 3]
)
def test_an_origin_that_can_never_match_is_w004(origin: Any) -> None:
    value = {**QUIET, "ALLOWED_ORIGINS": ["https://ok.example", origin]}
    with override_settings(SECRET_KEY=GOOD_KEY, MCP_APP=value):
        messages = check_deployment()
    assert [m.id for m in messages] == ["mcp_app.W004"]
    assert repr(origin) in messages[0].msg


def test_deployment_checks_leave_a_non_list_of_origins_to_e004() -> None:
    assert deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP={**QUIET, "ALLOWED_ORIGINS": "x"}) == []


def test_handlers_exception_messages_sent_to_clients_with_debug_off_are_w012() -> None:
    assert deploy_ids(
        SECRET_KEY=GOOD_KEY, DEBUG=False, MCP_APP={**ORIGINS, "TOOL_ERROR_DETAILS": True}
    ) == ["mcp_app.W012"]
    # On by default.
    default = {"ALLOWED_ORIGINS": ORIGINS["ALLOWED_ORIGINS"]}
    with override_settings(SECRET_KEY=GOOD_KEY, DEBUG=False, MCP_APP=default):
        messages = check_deployment()
    assert [m.id for m in messages] == ["mcp_app.W012"]
    assert messages[0].level == checks.WARNING
    assert "TOOL_ERROR_DETAILS" in messages[0].msg
    assert "tool_error" in messages[0].hint
    # With DEBUG on, the developer reads them anyway; a setting that is not a bool is E010's.
    assert deploy_ids(SECRET_KEY=GOOD_KEY, DEBUG=True, MCP_APP=default) == []
    assert deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP={**ORIGINS, "TOOL_ERROR_DETAILS": 1}) == []
    # Whatever else the origins say.
    assert "mcp_app.W012" in deploy_ids(SECRET_KEY=GOOD_KEY, MCP_APP={"ALLOWED_ORIGINS": "x"})


# -- W005: the delivery backend --------------------------------------------------------------


def delivery_ids(value: Any, databases: Any = ("default",)) -> list[CheckMessage]:
    with override_settings(MCP_APP=value):
        return check_delivery(databases=list(databases) if databases is not None else None)


def test_the_delivery_check_connects_only_when_asked() -> None:
    assert check_delivery in checks.registry.registry.get_checks()
    assert checks.Tags.database in check_delivery.tags  # type: ignore[attr-defined]
    unreachable = {
        "DELIVERY_BACKEND": "mcp_app.delivery.redis.RedisBackend",
        "REDIS_URL": "redis://127.0.0.1:1/0",
    }
    assert delivery_ids(unreachable, databases=None) == []


def test_the_local_backend_needs_nothing() -> None:
    assert delivery_ids({}) == []


def test_an_unreachable_redis_is_w005_without_its_password() -> None:
    value = {
        "DELIVERY_BACKEND": "mcp_app.delivery.redis.RedisBackend",
        "REDIS_URL": "redis://user:s3cret@127.0.0.1:1/0",
    }
    messages = delivery_ids(value)
    assert [m.id for m in messages] == ["mcp_app.W005"]
    assert "PING to redis://***@127.0.0.1:1/0 failed" in messages[0].msg
    assert "s3cret" not in messages[0].msg


def test_a_reachable_redis_passes() -> None:
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.skip("REDIS_URL is not set (scripts/services.sh starts a Redis server)")
    value = {"DELIVERY_BACKEND": "mcp_app.delivery.redis.RedisBackend", "REDIS_URL": url}
    assert delivery_ids(value) == []


@pytest.mark.django_db
def test_the_database_backend_needs_its_table(monkeypatch: Any) -> None:
    from mcp_app.models import DeliveryMessage

    value = {"DELIVERY_BACKEND": "mcp_app.delivery.database.DatabaseBackend"}
    assert delivery_ids(value) == []
    assert delivery_ids(value, databases=["other"]) == []  # only named databases are touched
    monkeypatch.setattr(DeliveryMessage._meta, "db_table", "mcp_app_missing")
    messages = delivery_ids(value)
    assert [m.id for m in messages] == ["mcp_app.W005"]
    assert (
        "table mcp_app_missing does not exist in database 'default'; run migrate" in messages[0].msg
    )


def test_a_backend_that_does_not_import_is_left_to_e007() -> None:
    assert delivery_ids({"DELIVERY_BACKEND": "nowhere.Backend"}) == []


# -- W009: stored templates --------------------------------------------------------------------


@pytest.mark.django_db
def test_stored_templates_that_no_longer_compile_are_w009_when_asked() -> None:
    from django.core.management import call_command

    from mcp_app.models import Prompt, PromptMessage, ResourceTemplate, Tool

    assert checks.Tags.database in check_row_templates.tags  # type: ignore[attr-defined]
    # Rows saved when their libraries were allowed, or written around the admin's forms.
    cache = {"template": "{% load cache %}x"}
    Tool.objects.create(name="fine", handler="template", config={"template": "{{ a }}"})
    Tool.objects.create(name="cached", handler="template", config=cache)
    # Never rendered: disabled, or a restyle of a code tool (whose config is not used).
    Tool.objects.create(name="off", handler="template", config=cache, enabled=False)
    Tool.objects.create(name="restyle", overrides_code=True, handler="template", config=cache)
    ResourceTemplate.objects.create(name="notes", uri_template="n://{t}", text="{% load static %}")
    prompt = Prompt.objects.create(name="ask")
    PromptMessage.objects.create(prompt=prompt, text="{{ topic }}")
    # A call renders the resource URI when there is one, so that is what is checked.
    PromptMessage.objects.create(
        prompt=prompt, text="{% load cache %}", resource_uri="n://{{ topic|nosuchfilter }}"
    )
    hidden = Prompt.objects.create(name="hidden", enabled=False)
    PromptMessage.objects.create(prompt=hidden, text="{% load cache %}")

    assert check_row_templates(databases=None) == []  # connects only when asked
    assert check_row_templates(databases=["other"]) == []  # only the databases named
    [message] = check_row_templates(databases=["default"])
    assert message.id == "mcp_app.W009"
    assert message.msg.startswith("3 stored template(s) no longer compile")
    assert "tool 'cached' (id " in message.msg and "'cache' is not a registered tag" in message.msg
    assert "resource template 'notes' (id " in message.msg
    assert "prompt 'ask', message id " in message.msg
    assert "resource URI: Template syntax error: Invalid filter: 'nosuchfilter'" in message.msg
    assert message.msg.count("prompt 'ask'") == 1  # not its text, which is never rendered
    for never_rendered in ("'fine'", "'off'", "'restyle'", "'hidden'"):
        assert never_rendered not in message.msg

    # What migrate and check --database show after an upgrade (a warning, not a failure).
    out = io.StringIO()
    call_command("check", "--database", "default", stdout=out, stderr=out)
    assert "mcp_app.W009" in out.getvalue()


class _ReadsFromAReplica:
    """A primary/replica router: reads go to a replica, writes to the default database."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return "replica"


@pytest.mark.django_db
def test_w009_reads_the_rows_where_the_catalog_reads_them() -> None:
    from mcp_app.models import Tool

    Tool.objects.create(name="cached", handler="template", config={"template": "{% load cache %}"})
    with override_settings(DATABASE_ROUTERS=[f"{__name__}._ReadsFromAReplica"]):
        assert [m.id for m in check_row_templates(databases=["default"])] == ["mcp_app.W009"]


def test_w009_lists_a_few_rows_and_counts_the_rest(monkeypatch: Any) -> None:
    from mcp_app import checks as module

    broken = [(f"tool {i}", "{% load cache %}") for i in range(module.LISTED_ROWS + 5)]
    monkeypatch.setattr(module, "_stored_templates", lambda alias: iter(broken))
    [message] = check_row_templates(databases=["default"])
    assert f"tool {module.LISTED_ROWS - 1}:" in message.msg
    assert f"tool {module.LISTED_ROWS}:" not in message.msg
    assert message.msg.endswith("and 5 more")


@pytest.mark.django_db
def test_a_table_w009_cannot_read_yet_leaves_the_others_checked(monkeypatch: Any) -> None:
    from mcp_app.models import ResourceTemplate, Tool

    Tool.objects.create(name="cached", handler="template", config={"template": "{% load cache %}"})
    ResourceTemplate.objects.create(name="notes", uri_template="n://{t}", text="{% load static %}")
    monkeypatch.setattr(Tool._meta, "db_table", "mcp_app_not_migrated_yet")
    [message] = check_row_templates(databases=["default"])
    assert message.msg.startswith("1 stored template(s)")
    assert "resource template 'notes'" in message.msg
    # The failed read spoiled no transaction around it.
    assert ResourceTemplate.objects.count() == 1


# -- W013: stored schemas -------------------------------------------------------------------

UNKNOWN_DIALECT = {"$schema": "https://example.com/dialect", "type": "object"}


class LenientValidator(JSONSchemaValidator):
    """Used through MCP_APP["VALIDATOR"]: takes any schema."""

    def check_schema(self, schema: Any) -> None:
        pass


@pytest.mark.django_db
def test_stored_schemas_the_validator_cannot_use_are_w013_when_asked() -> None:
    from django.core.management import call_command

    from mcp_app.models import Tool

    assert checks.Tags.database in check_row_schemas.tags  # type: ignore[attr-defined]
    # Rows saved under rules since tightened, or written around the admin's forms.
    template = {"template": "{{ a }}"}
    Tool.objects.create(name="fine", handler="template", config=template)
    Tool.objects.create(name="dialect", handler="template", config=template)
    Tool.objects.filter(name="dialect").update(input_schema=UNKNOWN_DIALECT)
    Tool.objects.create(name="out", handler="template", config=template)
    Tool.objects.filter(name="out").update(output_schema={"type": 12})
    Tool.objects.create(name="never", handler="template", config=template)
    Tool.objects.filter(name="never").update(input_schema={"type": "object", "not": {}})
    Tool.objects.create(name="off", handler="template", config=template, enabled=False)
    Tool.objects.filter(name="off").update(input_schema=UNKNOWN_DIALECT)

    assert check_row_schemas(databases=None) == []  # connects only when asked
    assert check_row_schemas(databases=["other"]) == []  # only the databases named
    [message] = check_row_schemas(databases=["default"])
    assert message.id == "mcp_app.W013"
    assert message.msg.startswith("3 stored schema(s) cannot be used")
    assert (
        "tool 'never' (id " in message.msg
        and "input_schema: no value can pass it (at the root: its not refuses every value)"
        in message.msg
    )
    assert "tool 'dialect' (id " in message.msg
    assert "input_schema: invalid schema at /$schema: unsupported dialect" in message.msg
    assert (
        "tool 'out' (id " in message.msg and "output_schema: invalid schema at /type" in message.msg
    )
    for never_called in ("'fine'", "'off'"):
        assert never_called not in message.msg

    out = io.StringIO()
    call_command("check", "--database", "default", stdout=out, stderr=out)
    assert "mcp_app.W013" in out.getvalue()

    # The validator the calls use judges: one that takes every schema leaves only the schema
    # no value passes.
    with override_settings(MCP_APP={"VALIDATOR": f"{__name__}.LenientValidator"}):
        [message] = check_row_schemas(databases=["default"])
    assert message.msg.startswith("1 stored schema(s)") and "'never'" in message.msg


# -- W011: an endpoint routed under a path that ends in a slash -----------------------------


class _URLconf:
    """A URLconf made in the test (``ROOT_URLCONF`` may name any object with ``urlpatterns``)."""

    def __init__(self, *patterns: Any) -> None:
        self.urlpatterns = list(patterns)


@pytest.fixture
def make_server() -> Iterator[Callable[[str], Any]]:
    """Servers made by the test, forgotten after it (their names are the process's)."""
    from mcp_app import Server
    from mcp_app.server import servers

    made: list[str] = []

    def make(name: str) -> Server:
        made.append(name)
        return Server(name)

    yield make
    for name in made:
        servers.pop(name, None)


def route_warnings(*patterns: Any) -> list[CheckMessage]:
    from mcp_app.checks import check_endpoint_routes

    with override_settings(ROOT_URLCONF=_URLconf(*patterns)):
        return check_endpoint_routes()


def test_an_endpoint_routed_with_a_trailing_slash_is_w011_naming_the_route(
    make_server: Callable[[str], Any],
) -> None:
    from django.urls import path

    server = make_server("slashed")
    messages = route_warnings(path("mcp/", server.urls))
    assert [m.id for m in messages] == ["mcp_app.W011"]
    assert messages[0].level == checks.WARNING
    assert "'slashed'" in messages[0].msg
    assert "'mcp/'" in messages[0].msg
    assert "/mcp is redirected" in messages[0].msg
    assert "path('mcp', ...urls)" in messages[0].hint


def test_an_endpoint_under_nested_includes_is_judged_by_its_whole_route(
    make_server: Callable[[str], Any],
) -> None:
    from django.urls import include, path, re_path

    server = make_server("nested")
    inner = [path("v1/mcp/", server.urls)]
    messages = route_warnings(path("api/", include(inner)), re_path(r"^x/", include([])))
    assert [m.id for m in messages] == ["mcp_app.W011"]
    assert "'api/v1/mcp/'" in messages[0].msg
    # The route to change is the one that includes it, where it is written.
    assert "path('v1/mcp', ...urls)" in messages[0].hint


def test_an_endpoint_under_a_regex_route_is_told_to_drop_the_slash_of_that_pattern(
    make_server: Callable[[str], Any],
) -> None:
    from django.urls import re_path

    server = make_server("regex")
    messages = route_warnings(re_path(r"^mcp/", server.urls))
    assert [m.id for m in messages] == ["mcp_app.W011"]
    assert "a client given /mcp is redirected" in messages[0].msg
    assert "the pattern '^mcp/' without its last slash" in messages[0].hint


@pytest.mark.parametrize("route", ["mcp", "", "api/mcp"])
def test_an_endpoint_routed_without_a_trailing_slash_passes(
    route: str, make_server: Callable[[str], Any]
) -> None:
    from django.urls import include, path

    server = make_server("plain")
    assert route_warnings(path("admin/", include([])), path(route, server.urls)) == []


def test_a_route_with_a_slash_that_is_not_an_endpoint_passes() -> None:
    from django.http import HttpResponse
    from django.urls import path

    assert route_warnings(path("page/", lambda request: HttpResponse())) == []


def test_a_urlconf_that_does_not_load_is_left_to_djangos_own_check() -> None:
    from mcp_app.checks import check_endpoint_routes

    with override_settings(ROOT_URLCONF="tests.no_such_urlconf_module"):
        assert check_endpoint_routes() == []


def test_the_route_check_runs_with_every_command() -> None:
    from mcp_app.checks import check_endpoint_routes

    assert check_endpoint_routes in checks.registry.registry.get_checks()
