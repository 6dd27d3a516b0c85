"""Tests for mcp_app.protocol.modern: the stateless wire's header and ``_meta`` checks."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mcp_app.protocol import modern, versions
from mcp_app.protocol.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    HeaderMismatch,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from mcp_app.registry import ToolDef

MODERN = versions.MODERN
KNOWN = {"tools/list", "tools/call", "prompts/get", "resources/read"}


def knows(method: str) -> bool:
    return method in KNOWN


def handler(*args: Any) -> None:
    return None


WEATHER = ToolDef(
    name="weather",
    handler=handler,
    input_schema={
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "days": {"type": "integer", "x-mcp-header": "Days"},
            "metric": {"type": "boolean", "x-mcp-header": "Metric"},
            "note": {"type": "string"},
            "options": {
                "type": "object",
                "properties": {"limit": {"type": "integer", "x-mcp-header": "Limit"}},
            },
        },
    },
)
PLAIN = ToolDef(name="plain", handler=handler)
TOOLS = {"weather": WEATHER, "plain": PLAIN}


def meta(**extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        versions.META_PROTOCOL_VERSION: MODERN,
        versions.META_CLIENT_CAPABILITIES: {},
    }
    out.update(extra)
    return out


def message(
    method: str, params: dict[str, Any] | None = None, *, with_meta: bool = True
) -> dict[str, Any]:
    body = dict(params or {})
    if with_meta:
        body["_meta"] = meta()
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": body}


def headers(method: str, **extra: str) -> dict[str, str]:
    out = {"mcp-protocol-version": MODERN, "mcp-method": method}
    out.update(extra)
    return out


def parse(msg: dict[str, Any], hdrs: dict[str, str]) -> modern.ModernRequest:
    return modern.parse(msg, hdrs, knows, TOOLS.get)


def b64(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


# ---------------------------------------------------------------- header_value


def test_header_value_trims_spaces_and_tabs() -> None:
    assert modern.header_value("  \ttools/call \t") == "tools/call"


def test_header_value_decodes_base64_form() -> None:
    assert modern.header_value(b64("Zürich")) == "Zürich"
    assert modern.header_value(" " + b64(" padded ") + " ") == " padded "


def test_header_value_accepts_empty_base64_and_empty_plain_value() -> None:
    assert modern.header_value("=?base64??=") == ""
    assert modern.header_value("") == ""


@pytest.mark.parametrize(
    "raw",
    [
        "=?base64?abc?=",  # length not a multiple of 4
        "=?base64?ab!d?=",  # not base64 alphabet
        "=?base64?YW=j?=",  # padding in the middle
        "=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=",  # not UTF-8
    ],
)
def test_header_value_refuses_bad_base64(raw: str) -> None:
    with pytest.raises(HeaderMismatch, match="Malformed base64 header value") as info:
        modern.header_value(raw)
    assert info.value.code == HEADER_MISMATCH
    assert info.value.http_status == 400


@pytest.mark.parametrize("raw", ["=?base64?YWJj", "=?base64?YWJj?=x", "=?base64?="])
def test_incomplete_base64_wrapper_is_a_literal_value(raw: str) -> None:
    assert modern.header_value(raw) == raw


def test_upper_case_base64_marker_is_not_the_sentinel() -> None:
    # Markers are case-sensitive: this is a plain (visible ASCII) value.
    assert modern.header_value("=?BASE64?YWJj?=") == "=?BASE64?YWJj?="


@pytest.mark.parametrize("raw", ["caf\u00e9", "a\x01b", "a\x7fb"])
def test_header_value_refuses_characters_that_need_base64(raw: str) -> None:
    with pytest.raises(HeaderMismatch, match="must be base64-encoded"):
        modern.header_value(raw)


def test_header_value_allows_inner_spaces() -> None:
    assert modern.header_value("New York") == "New York"


# ---------------------------------------------------------------- parse: a good request


def test_parse_reads_the_request_and_its_meta() -> None:
    msg = message("tools/list")
    msg["params"]["cursor"] = "c"
    msg["params"]["_meta"].update(
        {
            versions.META_CLIENT_CAPABILITIES: {"elicitation": {}},
            versions.META_CLIENT_INFO: {"name": "c", "version": "1"},
            versions.META_LOG_LEVEL: "warning",
            "progressToken": "tok",
        }
    )
    req = parse(msg, headers("tools/list"))
    assert req.id == 7
    assert req.method == "tools/list"
    assert req.params is msg["params"]
    assert req.meta is msg["params"]["_meta"]
    assert req.version == MODERN
    assert req.capabilities == {"elicitation": {}}
    assert req.client_info == {"name": "c", "version": "1"}
    assert req.log_level == "warning"
    assert req.progress_token == "tok"


def test_parse_without_optional_meta_gives_defaults() -> None:
    msg = message("tools/list")
    msg["params"]["_meta"][versions.META_CLIENT_INFO] = "not a dict"
    req = parse(msg, headers("tools/list"))
    assert req.client_info == {}
    assert req.log_level is None
    assert req.progress_token is None


def test_own_methods_are_known_without_the_engine() -> None:
    for method in ("server/discover", "subscriptions/listen"):
        assert parse(message(method), headers(method)).method == method


def test_whitespace_around_header_values_is_accepted() -> None:
    req = parse(
        message("tools/call", {"name": "plain"}),
        {
            "mcp-protocol-version": f"  {MODERN} ",
            "mcp-method": "\ttools/call  ",
            "mcp-name": " plain ",
        },
    )
    assert req.method == "tools/call"


def test_base64_encoded_headers_are_decoded_before_comparing() -> None:
    req = parse(
        message("resources/read", {"uri": "file:///Zürich.txt"}),
        headers(b64("resources/read"), **{"mcp-name": b64("file:///Zürich.txt")}),
    )
    assert req.params["uri"] == "file:///Zürich.txt"


# ---------------------------------------------------------------- parse: checks in order


def test_missing_protocol_version_header_is_a_header_mismatch() -> None:
    hdrs = headers("tools/list")
    del hdrs["mcp-protocol-version"]
    with pytest.raises(
        HeaderMismatch, match="Missing required header: MCP-Protocol-Version"
    ) as info:
        parse(message("tools/list", with_meta=False), hdrs)
    assert info.value.code == HEADER_MISMATCH
    assert info.value.http_status == 400


def test_missing_method_header_is_a_header_mismatch() -> None:
    hdrs = headers("tools/list")
    del hdrs["mcp-method"]
    with pytest.raises(HeaderMismatch, match="Missing required header: Mcp-Method"):
        parse(message("tools/list", with_meta=False), hdrs)


@pytest.mark.parametrize("params", [None, {}, {"_meta": "x"}])
def test_missing_meta_is_invalid_params_with_status_400(params: Any) -> None:
    msg = {"jsonrpc": "2.0", "id": 1, "method": "server/discover"}
    if params is not None:
        msg["params"] = params
    with pytest.raises(InvalidParams, match=r"Missing params\._meta") as info:
        parse(msg, headers("server/discover"))
    assert info.value.code == INVALID_PARAMS
    assert info.value.http_status == 400


def test_meta_without_protocol_version_is_invalid_params_not_header_mismatch() -> None:
    msg = message("server/discover")
    del msg["params"]["_meta"][versions.META_PROTOCOL_VERSION]
    with pytest.raises(InvalidParams, match="protocolVersion") as info:
        parse(msg, headers("server/discover"))
    assert type(info.value) is InvalidParams
    assert info.value.http_status == 400


@pytest.mark.parametrize("capabilities", [None, "x", []])
def test_meta_without_client_capabilities_object_is_invalid_params(capabilities: Any) -> None:
    msg = message("server/discover")
    if capabilities is None:
        del msg["params"]["_meta"][versions.META_CLIENT_CAPABILITIES]
    else:
        msg["params"]["_meta"][versions.META_CLIENT_CAPABILITIES] = capabilities
    with pytest.raises(InvalidParams, match="clientCapabilities") as info:
        parse(msg, headers("server/discover"))
    assert info.value.http_status == 400


def test_meta_is_checked_before_header_values() -> None:
    msg = message("tools/list", with_meta=False)
    with pytest.raises(InvalidParams):
        parse(msg, headers("something/else", **{"mcp-protocol-version": "1999-01-01"}))


def test_header_version_disagreeing_with_meta_is_a_header_mismatch() -> None:
    msg = message("server/discover")
    msg["params"]["_meta"][versions.META_PROTOCOL_VERSION] = "v999.0.0"
    with pytest.raises(HeaderMismatch, match=r"does not match _meta protocol version 'v999\.0\.0'"):
        parse(msg, headers("server/discover"))


def test_version_mismatch_beats_unsupported_version() -> None:
    msg = message("server/discover")
    msg["params"]["_meta"][versions.META_PROTOCOL_VERSION] = "v999.0.0"
    hdrs = headers("server/discover", **{"mcp-protocol-version": "v998.0.0"})
    with pytest.raises(HeaderMismatch):
        parse(msg, hdrs)


def test_unsupported_version_is_32022_with_supported_and_requested() -> None:
    msg = message("server/discover")
    msg["params"]["_meta"][versions.META_PROTOCOL_VERSION] = "v999.0.0"
    with pytest.raises(UnsupportedProtocolVersion) as info:
        parse(msg, headers("server/discover", **{"mcp-protocol-version": "v999.0.0"}))
    assert info.value.code == UNSUPPORTED_PROTOCOL_VERSION
    assert info.value.http_status == 400
    assert info.value.data == {"supported": [MODERN], "requested": "v999.0.0"}


def test_legacy_version_is_unsupported_on_this_wire() -> None:
    msg = message("tools/list")
    msg["params"]["_meta"][versions.META_PROTOCOL_VERSION] = "2025-11-25"
    with pytest.raises(UnsupportedProtocolVersion):
        parse(msg, headers("tools/list", **{"mcp-protocol-version": "2025-11-25"}))


def test_method_header_disagreeing_with_body_is_a_header_mismatch() -> None:
    with pytest.raises(HeaderMismatch, match="Mcp-Method header 'tools/call' does not match"):
        parse(message("tools/list"), headers("tools/call"))


def test_method_comparison_is_case_sensitive() -> None:
    with pytest.raises(HeaderMismatch):
        parse(message("tools/list"), headers("Tools/List"))


def test_method_mismatch_beats_unsupported_version() -> None:
    msg = message("tools/list")
    msg["params"]["_meta"][versions.META_PROTOCOL_VERSION] = "v999.0.0"
    with pytest.raises(HeaderMismatch):
        parse(msg, headers("tools/call", **{"mcp-protocol-version": "v999.0.0"}))


def test_malformed_version_header_is_a_header_mismatch() -> None:
    with pytest.raises(HeaderMismatch, match="must be base64-encoded"):
        parse(message("tools/list"), headers("tools/list", **{"mcp-protocol-version": "2026\x01"}))


def test_unknown_method_is_method_not_found_with_404() -> None:
    with pytest.raises(MethodNotFound, match="Method not found: ping") as info:
        parse(message("ping"), headers("ping"))
    assert info.value.code == METHOD_NOT_FOUND
    assert info.value.http_status == 404


def test_unsupported_version_beats_unknown_method() -> None:
    msg = message("ping")
    msg["params"]["_meta"][versions.META_PROTOCOL_VERSION] = "v9"
    with pytest.raises(UnsupportedProtocolVersion):
        parse(msg, headers("ping", **{"mcp-protocol-version": "v9"}))


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": "plain"}),
        ("prompts/get", {"name": "greet"}),
        ("resources/read", {"uri": "x://a"}),
    ],
)
def test_named_methods_need_the_mcp_name_header(method: str, params: dict[str, Any]) -> None:
    with pytest.raises(
        HeaderMismatch, match=f"Missing required header: Mcp-Name \\(for {method}\\)"
    ):
        parse(message(method, params), headers(method))


@pytest.mark.parametrize(
    ("method", "params", "key"),
    [
        ("tools/call", {"name": "plain"}, "name"),
        ("prompts/get", {"name": "greet"}, "name"),
        ("resources/read", {"uri": "x://a"}, "uri"),
    ],
)
def test_mcp_name_must_match_the_body(method: str, params: dict[str, Any], key: str) -> None:
    with pytest.raises(HeaderMismatch, match=f"Mcp-Name header does not match params.{key}"):
        parse(message(method, params), headers(method, **{"mcp-name": "other"}))
    value = next(iter(params.values()))
    assert parse(message(method, params), headers(method, **{"mcp-name": value})).method == method


def test_mcp_name_is_not_required_for_unnamed_methods() -> None:
    assert parse(message("tools/list"), headers("tools/list")).method == "tools/list"


def test_unknown_method_beats_name_checks() -> None:
    with pytest.raises(MethodNotFound):
        parse(message("nope/call", {"name": "x"}), headers("nope/call"))


# ---------------------------------------------------------------- parse: Mcp-Param-* headers


def call_weather(arguments: Any, **param_headers: str) -> modern.ModernRequest:
    msg = message("tools/call", {"name": "weather", "arguments": arguments})
    return parse(msg, headers("tools/call", **{"mcp-name": "weather"}, **param_headers))


def test_param_headers_matching_arguments_pass() -> None:
    req = call_weather(
        {"region": "eu-west", "days": 3, "metric": True, "note": "n"},
        **{"mcp-param-region": "eu-west", "mcp-param-days": "3", "mcp-param-metric": "true"},
    )
    assert req.params["arguments"]["days"] == 3


def test_missing_param_header_for_a_present_argument_is_a_mismatch() -> None:
    with pytest.raises(
        HeaderMismatch, match="Missing header mcp-param-region for argument 'region'"
    ):
        call_weather({"region": "eu-west"})


def test_param_header_without_the_argument_is_a_mismatch() -> None:
    with pytest.raises(HeaderMismatch, match="is set but argument 'region' is absent"):
        call_weather({}, **{"mcp-param-region": "eu-west"})


def test_null_argument_counts_as_absent() -> None:
    assert call_weather({"region": None}).method == "tools/call"
    with pytest.raises(HeaderMismatch, match="is absent"):
        call_weather({"region": None}, **{"mcp-param-region": "x"})


def test_param_header_with_a_different_value_is_a_mismatch() -> None:
    with pytest.raises(
        HeaderMismatch, match="Header mcp-param-region does not match argument 'region'"
    ):
        call_weather({"region": "eu-west"}, **{"mcp-param-region": "us-east"})


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("3", True),
        ("3.0", True),
        ("0.3e1", True),
        (" 3 ", True),
        ("4", False),
        ("three", False),
        # Python reads these as 3; a gateway reading the header as JSON would not.
        ("+3", False),
        ("0_3", False),
        ("03", False),
        ("3.", False),
    ],
)
def test_integer_arguments_compare_numerically(header: str, ok: bool) -> None:
    if ok:
        call_weather({"days": 3}, **{"mcp-param-days": header})
    else:
        with pytest.raises(HeaderMismatch):
            call_weather({"days": 3}, **{"mcp-param-days": header})


def test_float_arguments_compare_numerically() -> None:
    call_weather({"days": 2.5}, **{"mcp-param-days": "2.50"})
    for header in ("+2.5", "2_5e-1", "inf"):
        with pytest.raises(HeaderMismatch):
            call_weather({"days": 2.5}, **{"mcp-param-days": header})


@pytest.mark.parametrize(
    ("value", "header", "ok"),
    [
        (True, "true", True),
        (False, "false", True),
        (True, "True", False),
        (False, "0", False),
        (True, "1", False),
    ],
)
def test_boolean_arguments_compare_as_true_false(value: bool, header: str, ok: bool) -> None:
    if ok:
        call_weather({"metric": value}, **{"mcp-param-metric": header})
    else:
        with pytest.raises(HeaderMismatch):
            call_weather({"metric": value}, **{"mcp-param-metric": header})


def test_object_arguments_never_match_a_header() -> None:
    with pytest.raises(HeaderMismatch, match="does not match"):
        call_weather({"region": {"a": 1}}, **{"mcp-param-region": '{"a":1}'})


def test_a_nested_argument_is_checked_against_its_header() -> None:
    # Clients mirror an annotated property reached through "properties" at any depth.
    req = call_weather({"options": {"limit": 5}}, **{"mcp-param-limit": "5"})
    assert req.params["arguments"]["options"] == {"limit": 5}
    with pytest.raises(
        HeaderMismatch, match=r"Header mcp-param-limit does not match argument 'options\.limit'"
    ):
        call_weather({"options": {"limit": 5}}, **{"mcp-param-limit": "6"})
    with pytest.raises(HeaderMismatch, match="Missing header mcp-param-limit for argument"):
        call_weather({"options": {"limit": 5}})


@pytest.mark.parametrize("options", [None, {}, {"limit": None}, "not an object", [5]])
def test_a_nested_argument_not_there_needs_no_header_and_refuses_one(options: Any) -> None:
    call_weather({"options": options})
    with pytest.raises(HeaderMismatch, match=r"is set but argument 'options\.limit' is absent"):
        call_weather({"options": options}, **{"mcp-param-limit": "5"})


def test_base64_param_header_is_decoded() -> None:
    call_weather({"region": "Zürich"}, **{"mcp-param-region": b64("Zürich")})


def test_bad_base64_param_header_is_refused() -> None:
    with pytest.raises(HeaderMismatch, match="Malformed base64"):
        call_weather({"region": "x"}, **{"mcp-param-region": "=?base64?***?="})


def test_non_object_arguments_are_treated_as_empty_for_headers() -> None:
    with pytest.raises(HeaderMismatch, match="is absent"):
        call_weather("nonsense", **{"mcp-param-region": "x"})
    assert call_weather(None).method == "tools/call"


def test_param_headers_are_ignored_for_tools_without_them_or_unknown_tools() -> None:
    msg = message("tools/call", {"name": "plain", "arguments": {"region": "x"}})
    parse(msg, headers("tools/call", **{"mcp-name": "plain", "mcp-param-region": "y"}))
    msg = message("tools/call", {"name": "ghost", "arguments": {}})
    parse(msg, headers("tools/call", **{"mcp-name": "ghost"}))


# ---------------------------------------------------------------- parse: log level


@pytest.mark.parametrize("level", versions.LOG_LEVELS)
def test_every_mcp_log_level_is_accepted(level: str) -> None:
    msg = message("tools/list")
    msg["params"]["_meta"][versions.META_LOG_LEVEL] = level
    assert parse(msg, headers("tools/list")).log_level == level


@pytest.mark.parametrize("level", ["verbose", "WARNING", 3])
def test_unknown_log_level_is_invalid_params_with_400(level: Any) -> None:
    msg = message("tools/list")
    msg["params"]["_meta"][versions.META_LOG_LEVEL] = level
    with pytest.raises(InvalidParams, match="Unknown log level") as info:
        parse(msg, headers("tools/list"))
    assert info.value.http_status == 400


def test_a_server_that_does_no_logging_checks_the_level_but_keeps_none() -> None:
    msg = message("tools/list")
    msg["params"]["_meta"][versions.META_LOG_LEVEL] = "debug"
    assert modern.parse(msg, headers("tools/list"), knows, TOOLS.get, logs=False).log_level is None
    msg["params"]["_meta"][versions.META_LOG_LEVEL] = "verbose"
    with pytest.raises(InvalidParams, match="Unknown log level"):
        modern.parse(msg, headers("tools/list"), knows, TOOLS.get, logs=False)


def test_every_parse_error_is_a_protocol_error() -> None:
    for exc in (HeaderMismatch, InvalidParams, MethodNotFound, UnsupportedProtocolVersion):
        assert issubclass(exc, ProtocolError)


# ---------------------------------------------------------------- finish


INFO = {"name": "srv", "version": "1"}


@pytest.mark.parametrize("method", sorted(modern.CACHEABLE))
def test_cacheable_results_get_cache_hints(method: str) -> None:
    out = modern.finish(method, {"x": 1}, INFO, 5000, "public")
    assert out == {
        "x": 1,
        "resultType": "complete",
        "_meta": {versions.META_SERVER_INFO: INFO},
        "ttlMs": 5000,
        "cacheScope": "public",
    }


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "completion/complete"])
def test_other_results_get_no_cache_hints(method: str) -> None:
    out = modern.finish(method, {"content": []}, INFO, 5000, "public")
    assert out == {
        "content": [],
        "resultType": "complete",
        "_meta": {versions.META_SERVER_INFO: INFO},
    }


def test_finish_keeps_existing_meta_and_cache_hints_and_does_not_mutate() -> None:
    result = {"_meta": {"k": 1}, "ttlMs": 0, "cacheScope": "private"}
    out = modern.finish("tools/list", result, INFO, 5000, "public")
    assert out["_meta"] == {"k": 1, versions.META_SERVER_INFO: INFO}
    assert out["ttlMs"] == 0
    assert out["cacheScope"] == "private"
    assert result == {"_meta": {"k": 1}, "ttlMs": 0, "cacheScope": "private"}


def test_supported_versions_are_the_modern_one() -> None:
    assert modern.SUPPORTED == [MODERN]
    assert modern.NAMED == {
        "tools/call": "name",
        "prompts/get": "name",
        "resources/read": "uri",
        # The tasks extension names the task (SEP-2663, routing headers).
        "tasks/cancel": "taskId",
        "tasks/get": "taskId",
        "tasks/update": "taskId",
    }


def test_a_long_header_value_is_quoted_cut_short_in_the_error() -> None:
    from mcp_app.protocol.jsonrpc import SHOWN_CHARS
    from mcp_app.protocol.modern import shown

    long = "x" * 60_000
    assert shown("short") == "'short'"
    cut = shown(long)
    assert len(cut) == SHOWN_CHARS and cut.startswith("'xxx") and cut.endswith("…")
    hdrs = {**headers("tools/list"), "mcp-method": long}
    with pytest.raises(HeaderMismatch) as info:
        parse(message("tools/list"), hdrs)
    assert str(info.value) == f"Mcp-Method header {cut} does not match method 'tools/list'"


def test_a_long_method_or_version_is_cut_short_in_the_error() -> None:
    long = "x" * 60_000
    with pytest.raises(MethodNotFound) as unknown:
        parse(message(long), headers(long))
    assert len(str(unknown.value)) < 120
    msg = message("tools/list")
    msg["params"]["_meta"][versions.META_PROTOCOL_VERSION] = long
    hdrs = {**headers("tools/list"), "mcp-protocol-version": long}
    with pytest.raises(UnsupportedProtocolVersion) as unsupported:
        parse(msg, hdrs)
    assert len(str(unsupported.value)) < 120
    assert len(unsupported.value.data["requested"]) == 80
