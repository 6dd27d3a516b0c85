"""Tests for mcp_app.conf: defaults and live reading of ``settings.MCP_APP``."""

from __future__ import annotations

from typing import Any

import django.conf
import pytest
from django.test import override_settings

from mcp_app.conf import DEFAULTS, conf, django_setting


@override_settings(MCP_APP={})
def test_every_setting_has_its_default() -> None:
    assert conf.ALLOWED_ORIGINS == []
    assert conf.VALIDATE_INPUT is True
    assert conf.VALIDATE_OUTPUT is True
    assert conf.VALIDATOR is None
    assert conf.REQUEST_STATE_MAX_AGE_MS == 300_000
    assert conf.REQUEST_STATE_KEY is None
    assert conf.ATOMIC is False  # the test database has no ATOMIC_REQUESTS
    assert conf.DATABASE_ALIAS == "default"
    assert conf.KEEPALIVE_SECONDS == 15.0
    assert conf.VIEW == "async"
    assert conf.MAX_BODY_BYTES == 4 * 1024 * 1024


def test_defaults_cover_exactly_the_properties() -> None:
    properties = {name for name in dir(type(conf)) if name.isupper()}
    assert properties == set(DEFAULTS)


@pytest.mark.parametrize("value", [None, {}])
def test_missing_or_empty_setting_means_defaults(value: object) -> None:
    with override_settings(MCP_APP=value):
        assert conf.VIEW == "async"
        assert conf.MAX_BODY_BYTES == 4 * 1024 * 1024


def test_absent_setting_means_defaults(settings: object) -> None:
    del settings.MCP_APP  # type: ignore[attr-defined]
    assert conf.VALIDATE_INPUT is True


def test_overrides_are_read_live_and_coerced() -> None:
    with override_settings(
        MCP_APP={
            "ALLOWED_ORIGINS": ("https://a.example",),
            "VALIDATE_INPUT": 0,
            "VALIDATE_OUTPUT": "",
            "VALIDATOR": "pkg.Validator",
            "REQUEST_STATE_MAX_AGE_MS": "1000",
            "REQUEST_STATE_KEY": "k",
            "ATOMIC": None,
            "DATABASE_ALIAS": "other",
            "KEEPALIVE_SECONDS": 2,
            "VIEW": "sync",
            "MAX_BODY_BYTES": "10",
        }
    ):
        assert conf.ALLOWED_ORIGINS == ["https://a.example"]
        assert conf.VALIDATE_INPUT is False
        assert conf.VALIDATE_OUTPUT is False
        assert conf.VALIDATOR == "pkg.Validator"
        assert conf.REQUEST_STATE_MAX_AGE_MS == 1000
        assert conf.REQUEST_STATE_KEY == "k"
        assert conf.ATOMIC is False
        assert conf.DATABASE_ALIAS == "other"
        assert conf.KEEPALIVE_SECONDS == 2.0
        assert isinstance(conf.KEEPALIVE_SECONDS, float)
        assert conf.VIEW == "sync"
        assert conf.MAX_BODY_BYTES == 10
    assert conf.KEEPALIVE_SECONDS == 15.0
    assert conf.VALIDATE_INPUT is True


def test_empty_validator_and_key_mean_none() -> None:
    with override_settings(MCP_APP={"VALIDATOR": "", "REQUEST_STATE_KEY": ""}):
        assert conf.VALIDATOR is None
        assert conf.REQUEST_STATE_KEY is None


def test_settings_fixture_changes_are_seen(settings: object) -> None:
    settings.MCP_APP = {"VIEW": "sync"}  # type: ignore[attr-defined]
    assert conf.VIEW == "sync"
    settings.MCP_APP = {"VIEW": "async", "ATOMIC": False}  # type: ignore[attr-defined]
    assert conf.VIEW == "async"
    assert conf.ATOMIC is False


def test_allowed_origins_is_a_fresh_list_each_time() -> None:
    origins = ["https://a.example"]
    with override_settings(MCP_APP={"ALLOWED_ORIGINS": origins}):
        got = conf.ALLOWED_ORIGINS
        got.append("mutated")
        assert conf.ALLOWED_ORIGINS == ["https://a.example"]


def _other_value(default: object) -> object:
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return default + 1
    if isinstance(default, list):
        return ["https://other.example"]
    if default is None:
        return "other.value"
    if isinstance(default, dict):
        return {"other": ["value"]}
    return f"{default}-other"


@pytest.mark.parametrize("name", sorted(set(DEFAULTS) - {"ATOMIC"}))
def test_each_setting_reads_its_default_then_its_override(name: str) -> None:
    default = DEFAULTS[name]
    with override_settings(MCP_APP={}):
        assert _listed(getattr(conf, name)) == default
    other = ["other.Value"] if name == "AUTHENTICATION_CLASSES" else _other_value(default)
    with override_settings(MCP_APP={name: other}):
        assert _listed(getattr(conf, name)) == other


def _listed(value: object) -> object:
    # The class paths are kept as tuples: one value, read by every request, none may change.
    return list(value) if isinstance(value, tuple) else value


def test_a_typed_value_is_worked_out_once_until_a_change_is_announced() -> None:
    with override_settings(MCP_APP={"MAX_JSON_DEPTH": "7", "PERMISSION_CLASSES": ["a.B"]}):
        assert conf.MAX_JSON_DEPTH == 7
        assert conf.PERMISSION_CLASSES == ("a.B",)
        assert conf.__dict__["MAX_JSON_DEPTH"] == 7  # kept as a plain attribute
        with override_settings(MCP_APP={"MAX_JSON_DEPTH": 9}):
            assert conf.MAX_JSON_DEPTH == 9
            assert conf.PERMISSION_CLASSES == ()
        assert conf.MAX_JSON_DEPTH == 7


def test_atomic_unset_follows_atomic_requests_changed_in_place() -> None:
    from django.db import connection

    # The connection's settings dict is settings.DATABASES["default"] itself, and Django's
    # request handler reads ATOMIC_REQUESTS from it on every request.
    before = connection.settings_dict.get("ATOMIC_REQUESTS", False)
    with override_settings(MCP_APP={}):
        try:
            connection.settings_dict["ATOMIC_REQUESTS"] = True
            assert conf.ATOMIC is True
            connection.settings_dict["ATOMIC_REQUESTS"] = False
            assert conf.ATOMIC is False
        finally:
            connection.settings_dict["ATOMIC_REQUESTS"] = before


def test_a_value_worked_out_before_a_reload_is_not_kept_after_it() -> None:
    from mcp_app.conf import Settings, _setting

    class Racing(Settings):
        @_setting
        def VIEW(self) -> str:
            value = str(self._get("VIEW"))
            self.reload()  # another thread's reload, while this one was working it out
            return value

    racing = Racing()
    with override_settings(MCP_APP={"VIEW": "sync"}):
        assert racing.VIEW == "sync"  # used once
        assert "VIEW" not in racing.__dict__  # but not kept
    assert "VIEW" not in racing.__dict__


def test_the_audit_writer_settings_and_their_types() -> None:
    with override_settings(MCP_APP={}):
        assert (conf.AUDIT_FLUSH_SECONDS, conf.AUDIT_BATCH_SIZE, conf.AUDIT_MAX_PENDING) == (
            1.0,
            500,
            100_000,
        )
    values = {"AUDIT_FLUSH_SECONDS": 0, "AUDIT_BATCH_SIZE": "50", "AUDIT_MAX_PENDING": 10.0}
    with override_settings(MCP_APP=values):
        assert isinstance(conf.AUDIT_FLUSH_SECONDS, float)
        assert conf.AUDIT_FLUSH_SECONDS == 0.0
        assert conf.AUDIT_BATCH_SIZE == 50
        assert isinstance(conf.AUDIT_MAX_PENDING, int)
        assert conf.AUDIT_MAX_PENDING == 10


@pytest.mark.parametrize("atomic_requests", [True, False])
def test_atomic_unset_follows_the_databases_atomic_requests(atomic_requests: bool) -> None:
    from django.conf import settings

    database = settings.DATABASES["default"]
    before = database.get("ATOMIC_REQUESTS", False)
    database["ATOMIC_REQUESTS"] = atomic_requests
    try:
        with override_settings(MCP_APP={}):
            assert conf.ATOMIC is atomic_requests
        with override_settings(MCP_APP={"ATOMIC": None}):
            assert conf.ATOMIC is atomic_requests
        with override_settings(MCP_APP={"ATOMIC": not atomic_requests}):
            assert conf.ATOMIC is (not atomic_requests)
    finally:
        database["ATOMIC_REQUESTS"] = before


def test_the_dict_is_read_once_until_django_announces_a_change() -> None:
    values = {"KEEPALIVE_SECONDS": 3}
    with override_settings(MCP_APP=values):
        assert conf.KEEPALIVE_SECONDS == 3.0
        values["KEEPALIVE_SECONDS"] = 4  # changed behind Django's back: not announced
        assert conf.KEEPALIVE_SECONDS == 3.0
        conf.reload()
        assert conf.KEEPALIVE_SECONDS == 4.0
        with override_settings(MCP_APP={"KEEPALIVE_SECONDS": 5}):
            assert conf.KEEPALIVE_SECONDS == 5.0
        assert conf.KEEPALIVE_SECONDS == 4.0


def test_django_setting_reads_what_django_conf_settings_reads_now(settings: Any) -> None:
    assert django_setting("ALLOWED_HOSTS") is django.conf.settings.ALLOWED_HOSTS
    with override_settings(ALLOWED_HOSTS=["one.example"], DEBUG=True):
        assert django_setting("ALLOWED_HOSTS") == ["one.example"]
        assert django_setting("DEBUG") is True
    assert django_setting("DEBUG") is django.conf.settings.DEBUG
    # Set and removed on the proxy (pytest-django's fixture), and changed in place.
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 123
    assert django_setting("DATA_UPLOAD_MAX_MEMORY_SIZE") == 123
    del settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    with pytest.raises(AttributeError):
        django_setting("DATA_UPLOAD_MAX_MEMORY_SIZE")
    django.conf.settings.ALLOWED_HOSTS.append("two.example")
    try:
        assert "two.example" in django_setting("ALLOWED_HOSTS")
    finally:
        django.conf.settings.ALLOWED_HOSTS.remove("two.example")
    with pytest.raises(AttributeError):
        django_setting("NO_SUCH_SETTING")
