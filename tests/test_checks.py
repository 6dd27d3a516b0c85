"""Tests for mcp_app.checks: each settings error has its own stable ID."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import checks
from django.test import override_settings

from mcp_app.checks import check_settings


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


@pytest.mark.parametrize("value", [["VIEW", "sync"], "sync", 3])
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


@pytest.mark.parametrize("view", ["wsgi", "", "ASYNC"])
def test_bad_view_is_e003(view: str) -> None:
    assert ids({"VIEW": view}) == ["mcp_app.E003"]


@pytest.mark.parametrize("origins", ["https://a.example", None, {"https://a.example": 1}])
def test_non_list_allowed_origins_is_e004(origins: Any) -> None:
    assert ids({"ALLOWED_ORIGINS": origins}) == ["mcp_app.E004"]


@pytest.mark.parametrize("age", [0, -1])
def test_non_positive_request_state_age_is_e005(age: int) -> None:
    assert ids({"REQUEST_STATE_MAX_AGE_MS": age}) == ["mcp_app.E005"]


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
