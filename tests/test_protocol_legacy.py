"""Initialize-era negotiation and what each revision's ``initialize`` result may carry."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_app.protocol import legacy, versions

FULL_INFO = {
    "name": "demo",
    "version": "1.2.3",
    "title": "Demo",
    "description": "A demo server",
    "websiteUrl": "https://example.com",
    "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png"}],
}
CAPABILITIES = {
    "tools": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": True},
    "completions": {},
    "logging": {},
    "extensions": {"io.example/thing": {}},
}


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_negotiate_echoes_each_supported_version(version: str) -> None:
    assert legacy.negotiate(version) == version


@pytest.mark.parametrize(
    "requested", ["2024-11-05", "2026-07-28", "2099-01-01", "", "latest", None, 20250326, ["x"]]
)
def test_negotiate_answers_anything_else_with_the_newest(requested: Any) -> None:
    assert legacy.negotiate(requested) == "2025-11-25"


def test_newest_initialize_era_version_is_first() -> None:
    assert versions.LEGACY[0] == "2025-11-25"
    assert versions.LEGACY_DEFAULT == "2025-03-26"


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_capabilities_keep_completions_and_drop_extensions(version: str) -> None:
    caps = legacy.capabilities_for(version, CAPABILITIES)
    expected = dict(CAPABILITIES)
    del expected["extensions"]
    assert caps == expected


def test_capabilities_before_2025_03_26_have_no_completions() -> None:
    caps = legacy.capabilities_for("2024-11-05", CAPABILITIES)
    assert "completions" not in caps and "extensions" not in caps
    assert caps["tools"] == {"listChanged": True}


def test_capabilities_for_leaves_the_servers_dict_alone() -> None:
    original = dict(CAPABILITIES)
    legacy.capabilities_for("2024-11-05", CAPABILITIES)
    assert original == CAPABILITIES


def test_capabilities_without_optional_parts() -> None:
    assert legacy.capabilities_for("2025-11-25", {"logging": {}}) == {"logging": {}}


@pytest.mark.parametrize(
    ("version", "keys"),
    [
        ("2024-11-05", ("name", "version")),
        ("2025-03-26", ("name", "version")),
        ("2025-06-18", ("name", "version", "title")),
        ("2025-11-25", tuple(FULL_INFO)),
    ],
)
def test_server_info_carries_what_each_revision_knows(version: str, keys: tuple[str, ...]) -> None:
    assert legacy.server_info_for(version, FULL_INFO) == {key: FULL_INFO[key] for key in keys}


def test_server_info_is_a_copy() -> None:
    info = legacy.server_info_for("2025-11-25", FULL_INFO)
    info["name"] = "changed"
    assert FULL_INFO["name"] == "demo"


def test_server_info_without_a_title_on_2025_06_18() -> None:
    info = {"name": "demo", "version": "1"}
    assert legacy.server_info_for("2025-06-18", info) == info


def test_own_methods_are_the_initialize_era_session_methods() -> None:
    assert {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    } == legacy.OWN_METHODS
