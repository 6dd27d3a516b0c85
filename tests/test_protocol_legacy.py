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


# ---------------------------------------------------------------- results for older revisions

TOOL = {
    "name": "t",
    "title": "T",
    "icons": [{"src": "https://example.com/t.png"}],
    "_meta": {"k": 1},
    "inputSchema": {"type": "object"},
    "outputSchema": {"type": "object", "properties": {"a": {"type": "number"}}},
}


@pytest.mark.parametrize(
    ("version", "keys"),
    [
        ("2025-11-25", {"name", "title", "icons", "_meta", "inputSchema", "outputSchema"}),
        ("2025-06-18", {"name", "title", "_meta", "inputSchema", "outputSchema"}),
        ("2025-03-26", {"name", "inputSchema"}),
    ],
)
def test_listed_definitions_carry_what_each_revision_knows(version: str, keys: set[str]) -> None:
    result = {"tools": [TOOL], "nextCursor": "c"}
    adapted = legacy.result_for(version, "tools/list", result)
    assert set(adapted["tools"][0]) == keys
    assert adapted["nextCursor"] == "c"
    assert set(result["tools"][0]) == set(TOOL)  # the engine's result is left alone


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_an_output_schema_of_another_type_than_object_is_left_out(version: str) -> None:
    listed = {**TOOL, "outputSchema": {"type": "array"}}
    adapted = legacy.result_for(version, "tools/list", {"tools": [listed]})
    assert "outputSchema" not in adapted["tools"][0]
    called = {"content": [{"type": "text", "text": "[1, 2]"}], "structuredContent": [1, 2]}
    assert legacy.result_for(version, "tools/call", called) == {
        "content": [{"type": "text", "text": "[1, 2]"}]
    }
    kept = {"content": [], "structuredContent": {"a": 1}}
    assert legacy.result_for(version, "tools/call", kept) == kept


def test_2025_03_26_gets_no_structured_content_and_links_as_text() -> None:
    link = {"type": "resource_link", "uri": "notes://a", "name": "a", "title": "Note A"}
    called = {"content": [link, {"type": "text", "text": "x"}], "structuredContent": {"a": 1}}
    assert legacy.result_for("2025-03-26", "tools/call", called) == {
        "content": [{"type": "text", "text": "Note A: notes://a"}, {"type": "text", "text": "x"}]
    }
    prompt = {"messages": [{"role": "user", "content": {**link, "title": None}}]}
    assert legacy.result_for("2025-03-26", "prompts/get", prompt) == {
        "messages": [{"role": "user", "content": {"type": "text", "text": "a: notes://a"}}]
    }
    assert legacy.result_for("2025-06-18", "tools/call", called) == called


def test_prompt_arguments_have_no_title_before_2025_06_18() -> None:
    prompt = {"name": "p", "arguments": [{"name": "a", "title": "A", "required": True}]}
    adapted = legacy.result_for("2025-03-26", "prompts/list", {"prompts": [prompt]})
    assert adapted["prompts"][0]["arguments"] == [{"name": "a", "required": True}]


def test_resource_annotations_have_no_last_modified_before_2025_06_18() -> None:
    annotations = {"priority": 0.5, "lastModified": "2025-01-12T15:00:58Z"}
    listed = {"resources": [{"uri": "a://b", "name": "b", "annotations": annotations}]}
    adapted = legacy.result_for("2025-03-26", "resources/list", listed)
    assert adapted["resources"][0]["annotations"] == {"priority": 0.5}
    kept = legacy.result_for("2025-06-18", "resources/list", listed)
    assert kept["resources"][0]["annotations"] == annotations


def test_other_results_pass_unchanged() -> None:
    result = {"contents": [{"uri": "a://b", "text": "x"}]}
    assert legacy.result_for("2025-03-26", "resources/read", result) is result
