"""Tests for mcp_app.protocol.jsonrpc: message shapes and protocol errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_app.protocol import jsonrpc
from mcp_app.protocol.jsonrpc import (
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingClientCapability,
    ParseError,
    ProtocolError,
    ResourceNotFound,
    UnsupportedProtocolVersion,
    capability_names,
)

# ---------------------------------------------------------------- classify


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, "request"),
        ({"jsonrpc": "2.0", "id": "abc", "method": "tools/list", "params": {}}, "request"),
        ({"jsonrpc": "2.0", "id": 0, "method": "x"}, "request"),
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, "notification"),
        ({"jsonrpc": "2.0", "method": "n", "params": {"a": 1}}, "notification"),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, "response"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "m"}}, "response"),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "m"}}, "response"),
    ],
)
def test_classify_recognises_valid_shapes(message: dict[str, Any], kind: str) -> None:
    assert jsonrpc.classify(message) == kind


@pytest.mark.parametrize(
    "message",
    [
        None,
        [],
        [{"jsonrpc": "2.0", "id": 1, "method": "x"}],
        "text",
        {},
        {"id": 1, "method": "x"},
        {"jsonrpc": "1.0", "id": 1, "method": "x"},
        {"jsonrpc": 2.0, "id": 1, "method": "x"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 1, "method": "x", "params": None},
        {"jsonrpc": "2.0", "id": None, "method": "x"},
        {"jsonrpc": "2.0", "id": True, "method": "x"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "x"},
        {"jsonrpc": "2.0", "id": {}, "method": "x"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "result": {}},
        {"jsonrpc": "2.0", "error": {}},
        {"jsonrpc": "2.0", "id": 1, "error": "no"},
        {"jsonrpc": "2.0", "id": 1, "error": [-1, "m"]},
        {"jsonrpc": "2.0", "id": 1, "error": {}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -1}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": "-1", "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -1.5, "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": None}},
    ],
)
def test_classify_flags_everything_else_as_invalid(message: Any) -> None:
    assert jsonrpc.classify(message) == "invalid"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("a", True),
        ("", True),
        (0, True),
        (-3, True),
        (None, False),
        (True, False),
        (False, False),
        (1.0, False),
        ([], False),
    ],
)
def test_valid_id_allows_only_strings_and_integers(value: Any, valid: bool) -> None:
    assert jsonrpc.valid_id(value) is valid


# ---------------------------------------------------------------- building messages


def test_result_response() -> None:
    assert jsonrpc.result_response(3, {"a": 1}) == {"jsonrpc": "2.0", "id": 3, "result": {"a": 1}}
    assert jsonrpc.result_response(None, {}) == {"jsonrpc": "2.0", "id": None, "result": {}}


def test_error_response_with_id() -> None:
    response = jsonrpc.error_response("r1", InvalidParams("bad", {"x": 1}))
    assert response == {
        "jsonrpc": "2.0",
        "id": "r1",
        "error": {"code": -32602, "message": "bad", "data": {"x": 1}},
    }


def test_error_response_without_id_leaves_the_id_out() -> None:
    response = jsonrpc.error_response(None, ParseError("Parse error"))
    assert response == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}
    assert "id" not in response


def test_error_response_keeps_a_zero_id() -> None:
    assert jsonrpc.error_response(0, InternalError("x"))["id"] == 0


def test_notification_with_and_without_params() -> None:
    assert jsonrpc.notification("n") == {"jsonrpc": "2.0", "method": "n"}
    assert jsonrpc.notification("n", {}) == {"jsonrpc": "2.0", "method": "n", "params": {}}


def test_request_with_and_without_params() -> None:
    assert jsonrpc.request(1, "m") == {"jsonrpc": "2.0", "id": 1, "method": "m"}
    assert jsonrpc.request("a", "m", {"p": 1}) == {
        "jsonrpc": "2.0",
        "id": "a",
        "method": "m",
        "params": {"p": 1},
    }


# ---------------------------------------------------------------- errors


def test_to_error_without_data_has_only_code_and_message() -> None:
    assert ProtocolError("boom").to_error() == {"code": -32603, "message": "boom"}


def test_to_error_with_data_includes_it_even_when_falsy() -> None:
    assert ProtocolError("m", {}).to_error() == {"code": -32603, "message": "m", "data": {}}
    assert ProtocolError("m", 0).to_error()["data"] == 0


def test_protocol_error_defaults_and_overrides() -> None:
    plain = ProtocolError("m")
    assert (plain.code, plain.http_status, plain.message, plain.data) == (-32603, 200, "m", None)
    assert str(plain) == "m"
    custom = ProtocolError("m", code=-31999, http_status=418)
    assert (custom.code, custom.http_status) == (-31999, 418)
    # Overrides are per instance, not on the class.
    assert ProtocolError.code == -32603
    assert ProtocolError.http_status == 200


def test_protocol_error_repr_names_class_code_and_message() -> None:
    assert repr(InvalidParams("bad")) == "InvalidParams(code=-32602, message='bad')"


@pytest.mark.parametrize(
    ("cls", "code", "status"),
    [
        (ParseError, -32700, 400),
        (InvalidRequest, -32600, 400),
        (MethodNotFound, -32601, 404),
        (InvalidParams, -32602, 200),
        (InternalError, -32603, 500),
        (HeaderMismatch, -32020, 400),
    ],
)
def test_error_classes_carry_their_code_and_http_status(
    cls: type[ProtocolError], code: int, status: int
) -> None:
    error = cls("m")
    assert error.code == code
    assert error.http_status == status
    assert error.to_error() == {"code": code, "message": "m"}


def test_resource_not_found_carries_the_uri() -> None:
    error = ResourceNotFound("file:///x")
    assert error.uri == "file:///x"
    assert error.to_error() == {
        "code": jsonrpc.INVALID_PARAMS,
        "message": "Resource not found",
        "data": {"uri": "file:///x"},
    }


def test_missing_client_capability_names_them_in_message_and_data() -> None:
    error = MissingClientCapability({"sampling": {}, "elicitation": {"url": {}}})
    assert error.code == -32021
    assert error.http_status == 400
    assert error.message == "Missing required client capability: elicitation.url, sampling"
    assert error.data == {"requiredCapabilities": {"sampling": {}, "elicitation": {"url": {}}}}
    assert error.required == {"sampling": {}, "elicitation": {"url": {}}}


def test_capability_names_name_each_sub_capability() -> None:
    assert capability_names({}) == ""
    assert capability_names({"roots": {}}) == "roots"
    assert (
        capability_names({"sampling": {"tools": {}, "context": {}}, "elicitation": {}})
        == "elicitation, sampling.context, sampling.tools"
    )


def test_missing_client_capability_with_custom_message_or_none() -> None:
    assert MissingClientCapability({}, "custom").message == "custom"
    assert MissingClientCapability({}).message == "Missing required client capability: none"


def test_unsupported_protocol_version_data() -> None:
    error = UnsupportedProtocolVersion("1999", ["2026-07-28"])
    assert error.code == -32022
    assert error.http_status == 400
    assert error.message == "Unsupported protocol version: 1999"
    assert error.data == {"supported": ["2026-07-28"], "requested": "1999"}


def test_error_codes_are_the_spec_numbers() -> None:
    assert jsonrpc.RESOURCE_NOT_FOUND == -32002
    assert jsonrpc.HEADER_MISMATCH == -32020
    assert jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY == -32021
    assert jsonrpc.UNSUPPORTED_PROTOCOL_VERSION == -32022


# -- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (b'{"a": [1, 2.5, "x"]}', {"a": [1, 2.5, "x"]}),
        ('{"smile": "\\ud83d\\ude00"}', {"smile": "\U0001f600"}),
        (b'"\\\\ud800"', "\\ud800"),  # an escaped backslash: six plain characters
        ('"é"'.encode(), "é"),
        (b'\xef\xbb\xbf{"bom": 1}', {"bom": 1}),
        ("[1e308, -1e-400, 12345678901234567890123]", [1e308, -0.0, 12345678901234567890123]),
    ],
)
def test_loads_takes_json(text: bytes | str, value: Any) -> None:
    assert jsonrpc.loads(text) == value


def typed(value: Any) -> str:
    """``value`` as JSON text, which tells 1 from 1.0 and 0.0 from -0.0 where == does not."""
    return json.dumps(value, sort_keys=True)


class _StandardOnly(json.JSONDecoder):
    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("read by the standard decoder")


def test_a_body_of_bytes_is_read_by_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonrpc, "_DECODER", _StandardOnly())
    body = '{"jsonrpc":"2.0","id":1,"params":{"s":"é\\u00e9😀","n":[1,-0.0,2.5e-8]}}'
    assert typed(jsonrpc.loads(body.encode())) == typed(json.loads(body))


@pytest.mark.parametrize(
    "text",
    [
        b"[18446744073709551616]",  # past 64 bits: orjson would read a float
        b"[-9223372036854775809]",  # 19 digits, past a signed 64-bit integer: likewise
        b'{"n": 12345678901234567890123}',
    ],
)
def test_an_integer_past_64_bits_is_read_whole(text: bytes) -> None:
    value = jsonrpc.loads(text)
    assert typed(value) == typed(json.loads(text))
    number = value[0] if isinstance(value, list) else value["n"]
    assert isinstance(number, int)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
@settings(max_examples=300, deadline=None)
def test_a_body_is_read_as_the_standard_decoder_reads_it(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        assert typed(jsonrpc.loads(text.encode())) == typed(json.loads(text))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (b"{nope", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[NaN]", "NaN is not a JSON number"),
        ('{"a": -Infinity}', "-Infinity is not a JSON number"),
        (b"[1e400]", "1e400 is out of a double's range"),
        (b"[-2E+999]", "-2E\\+999 is out of a double's range"),
        (b'"\\ud800"', "lone UTF-16 surrogate"),
        (b'{"\\udfff": 1}', "lone UTF-16 surrogate"),
        (b'["\\ude00\\ud83d"]', "lone UTF-16 surrogate"),
        (b'\xef\xbb\xbf["\\uD800"]', "lone UTF-16 surrogate"),  # behind a byte order mark
        (b'"\xed\xa0\x80"', "not valid JSON"),  # a surrogate's bytes are not UTF-8
        ('["\\udc00"]'.encode("utf-16-le"), "not valid JSON"),  # JSON on the wire is UTF-8
        ('["\udc00"]', "lone UTF-16 surrogate"),  # text decoded with surrogateescape
    ],
)
def test_loads_refuses_what_is_not_json_or_cannot_be_answered(text: bytes | str, said: str) -> None:
    with pytest.raises(jsonrpc.ParseError, match=said):
        jsonrpc.loads(text)


# -- encoding --------------------------------------------------------------------------------

COMPACT = jsonrpc.encoder(separators=(",", ":"))
FAST = jsonrpc.encoder(ensure_ascii=False, separators=(",", ":"), fast=True)
STANDARD = jsonrpc.encoder(ensure_ascii=False, separators=(",", ":"))


class _Unused(json.JSONEncoder):
    def encode(self, o: Any) -> str:
        raise AssertionError("written by the standard encoder")


def test_a_fast_encoder_writes_with_orjson() -> None:
    by = jsonrpc.encoder(cls=_Unused, ensure_ascii=False, separators=(",", ":"), fast=True)
    message = jsonrpc.result_response(1, {"s": "é😀\n\x01\x7f\u2028", "n": [1, 2.5, True]})
    assert jsonrpc.encode(message, by) == STANDARD.encode(message)


@given(JSON_VALUES)
@settings(max_examples=300, deadline=None)
def test_a_fast_encoder_writes_what_the_standard_one_writes(value: Any) -> None:
    message = jsonrpc.result_response(1, {"v": value})
    fast = jsonrpc.encode(message, FAST)
    standard = jsonrpc.encode(message, STANDARD)
    # The same value; and, floats apart (1e-07 against 1e-7), the same text.
    assert typed(json.loads(fast)) == typed(json.loads(standard))
    if "." not in standard and "e" not in standard.lower():
        assert fast == standard


@pytest.mark.parametrize(
    "value",
    [
        2**64,  # past 64 bits
        {1: "int key"},
        {"t": (1, 2)},
        type("Text", (str,), {})("a str subclass"),
        type("Number", (int,), {})(5),
        "lone \udc00",
    ],
)
def test_what_orjson_leaves_is_written_by_the_standard_encoder(value: Any) -> None:
    message = jsonrpc.notification("notifications/message", {"data": value})
    assert jsonrpc.encode(message, FAST) == jsonrpc.encode(message, STANDARD)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [float("-inf")]])
def test_a_fast_encoder_refuses_what_orjson_would_write_as_null(value: Any) -> None:
    text = jsonrpc.encode(jsonrpc.result_response(3, {"x": value}), FAST)
    assert json.loads(text)["error"]["code"] == -32603


@pytest.mark.parametrize(
    "options",
    [{"indent": 2}, {"sort_keys": True}, {"separators": (",", ":")}, {"ensure_ascii": False}],
)
def test_a_fast_encoder_must_write_compact_text_orjson_can_write(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="compact JSON with non-ASCII kept"):
        jsonrpc.encoder(fast=True, **options)


def test_encode_sends_what_json_can_spell_as_it_is() -> None:
    message = jsonrpc.result_response(1, {"n": 1.5, "s": "é"})
    assert (
        jsonrpc.encode(message, COMPACT)
        == '{"jsonrpc":"2.0","id":1,"result":{"n":1.5,"s":"\\u00e9"}}'
    )


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), "lone \ud800"])
def test_a_response_holding_what_json_cannot_carry_becomes_an_internal_error(
    value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    by = jsonrpc.encoder(ensure_ascii=False)
    text = jsonrpc.encode(jsonrpc.result_response(7, {"sum": value}), by)
    assert json.loads(text) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "Internal error"},
    }
    assert "request 7 held NaN, Infinity or a lone surrogate" in caplog.text


def test_a_message_nested_deeper_than_python_recurses() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    by = jsonrpc.encoder(ensure_ascii=False)
    text = jsonrpc.encode([jsonrpc.result_response(1, {"d": deep})], by)
    assert json.loads(text) == [
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Internal error"}}
    ]
    with pytest.raises(ValueError, match="nested too deeply"):
        jsonrpc.encode(jsonrpc.notification("notifications/message", {"data": deep}), by)


def test_in_a_batch_only_the_response_holding_one_is_replaced() -> None:
    batch = [jsonrpc.result_response(1, {"x": 1}), jsonrpc.result_response(2, {"x": float("nan")})]
    first, second = json.loads(jsonrpc.encode(batch, COMPACT))
    assert first == {"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}
    assert second["id"] == 2 and second["error"]["code"] == -32603


def test_a_notification_holding_one_is_sent_with_null_and_u_fffd_in_their_place(
    caplog: pytest.LogCaptureFixture,
) -> None:
    params = {"progress": float("nan"), "total": [1, float("inf")], "message": "a\udc00b"}
    message = jsonrpc.notification("notifications/progress", params)
    sent = json.loads(jsonrpc.encode(message, jsonrpc.encoder(ensure_ascii=False)))
    assert sent["params"] == {"progress": None, "total": [1, None], "message": "a\ufffdb"}
    assert "notifications/progress message held NaN" in caplog.text


def test_a_request_to_the_client_holding_one_is_sent_with_null_not_as_an_error() -> None:
    # An elicitation or sampling request has an id too, but it is no answer to replace.
    message = jsonrpc.request("elicit-1", "sampling/createMessage", {"temperature": float("nan")})
    sent = json.loads(jsonrpc.encode(message, COMPACT))
    assert sent == {
        "jsonrpc": "2.0",
        "id": "elicit-1",
        "method": "sampling/createMessage",
        "params": {"temperature": None},
    }


# ---------------------------------------------------------------- values JSON has no form for


def test_a_response_holding_a_set_is_an_internal_error_for_its_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = jsonrpc.encode(jsonrpc.result_response(4, {"tags": {"a"}}), jsonrpc.encoder())
    assert json.loads(text) == {
        "jsonrpc": "2.0",
        "id": 4,
        "error": {"code": -32603, "message": "Internal error"},
    }
    assert "held a value JSON cannot carry" in caplog.text


def test_a_response_that_holds_itself_is_an_internal_error_for_its_id() -> None:
    loop: list[Any] = []
    loop.append(loop)
    text = jsonrpc.encode(jsonrpc.result_response(5, {"loop": loop}), jsonrpc.encoder())
    assert json.loads(text)["error"]["code"] == -32603


def test_a_notification_goes_out_with_such_values_as_their_text() -> None:
    message = jsonrpc.notification("n", {"tags": {"a"}, "ratio": float("nan"), "s": "\ud800"})
    text = jsonrpc.encode(message, jsonrpc.encoder())
    assert json.loads(text)["params"] == {"tags": "{'a'}", "ratio": None, "s": "\ufffd"}


def test_a_notification_that_holds_itself_cannot_be_sent() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        jsonrpc.encode(jsonrpc.notification("n", {"loop": loop}), jsonrpc.encoder())


def test_a_notification_with_nan_and_a_set_goes_out_with_both_replaced() -> None:
    message = jsonrpc.notification("n", {"ratio": float("nan"), "tags": {"a"}})
    assert json.loads(jsonrpc.encode(message, jsonrpc.encoder()))["params"] == {
        "ratio": None,
        "tags": "{'a'}",
    }


def test_json_depth_counts_levels_and_stops_past_a_limit() -> None:
    from mcp_app.protocol.jsonrpc import json_depth

    assert json_depth("x") == 0
    assert json_depth([]) == 1
    assert json_depth({"a": [1, {"b": []}], "c": {}}) == 4
    wide = [{}] * 100_000 + [[[[]]]]
    assert json_depth(wide) == 4
    deep: list[Any] = []
    for _ in range(50_000):
        deep = [deep]
    assert json_depth(deep) == 50_001
    assert json_depth(deep, limit=64) == 65
    assert json_depth(wide, limit=4) == 4
    assert json_depth(wide, limit=3) == 4
