"""Tests for mcp_app.results: handler return values turned into protocol results."""

from __future__ import annotations

import base64
from collections import OrderedDict
from typing import Any

import pytest

from mcp_app.content import content, image, text, tool_error
from mcp_app.protocol.jsonrpc import INTERNAL_ERROR, InternalError
from mcp_app.results import completion_result, prompt_result, resource_contents, tool_result

# ---------------------------------------------------------------- tool_result


def test_none_is_an_empty_tool_result() -> None:
    assert tool_result(None) == {"content": []}


def test_string_is_one_text_block() -> None:
    assert tool_result("hi") == {"content": [{"type": "text", "text": "hi"}]}


def test_plain_dict_is_structured_content_with_compact_json_text() -> None:
    result = tool_result({"sum": 3, "name": "Zoë"})
    assert result == {
        "content": [{"type": "text", "text": '{"sum":3,"name":"Zoë"}'}],
        "structuredContent": {"sum": 3, "name": "Zoë"},
    }


def test_structured_content_is_a_copy_of_the_returned_mapping() -> None:
    value = OrderedDict(a=1)
    result = tool_result(value)
    assert type(result["structuredContent"]) is dict
    assert result["structuredContent"] == {"a": 1}


def test_dict_with_content_list_is_taken_as_a_complete_result() -> None:
    value = {"content": [text("x")], "isError": True}
    result = tool_result(value)
    assert result == value
    assert result is not value


def test_dict_with_non_list_content_is_structured_content() -> None:
    result = tool_result({"content": "not blocks"})
    assert result["structuredContent"] == {"content": "not blocks"}
    assert result["content"] == [text('{"content":"not blocks"}')]


def test_non_json_values_in_a_dict_are_rendered_with_str() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing!"

    result = tool_result({"t": Thing()})
    assert result["content"] == [text('{"t":"thing!"}')]


def test_content_helper_gives_its_blocks_and_structured_content() -> None:
    result = tool_result(content(["a", image(b"x")], structured={"k": 1}))
    assert result == {
        "content": [text("a"), image(b"x")],
        "structuredContent": {"k": 1},
    }


def test_content_helper_without_structured_content_has_only_blocks() -> None:
    assert tool_result(content(["a"])) == {"content": [text("a")]}


def test_a_record_with_a_content_field_is_structured_not_a_result() -> None:
    record = {"title": "t", "content": ["p1", "p2"]}
    result = tool_result(record)
    assert result["structuredContent"] == record
    assert result["content"] == [text('{"title":"t","content":["p1","p2"]}')]
    # Result keys only, but content that is not blocks: still a record.
    assert "structuredContent" in tool_result({"content": [{"type": "user"}]})


def test_one_block_is_the_content_and_rows_with_a_type_are_not_blocks() -> None:
    assert tool_result(image(b"png")) == {"content": [image(b"png")]}
    rows = [{"type": "user", "name": "bob"}]
    assert tool_result(rows) == {"content": [text('[{"type":"user","name":"bob"}]')]}
    assert tool_result({"type": "text"})["structuredContent"] == {"type": "text"}


def test_one_block_or_string_given_to_the_helpers_is_one_block() -> None:
    assert tool_result(tool_error(text("bad input")))["content"] == [text("bad input")]
    assert tool_result(content("hello"))["content"] == [text("hello")]
    assert tool_result(content(text("hello")))["content"] == [text("hello")]


def test_bytes_like_data_is_base64() -> None:
    encoded = base64.b64encode(b"png").decode()
    assert image(bytearray(b"png"), "image/png")["data"] == encoded
    assert image(memoryview(b"png"), "image/png")["data"] == encoded


def test_tool_error_sets_is_error() -> None:
    assert tool_result(tool_error("bad")) == {"content": [text("bad")], "isError": True}


def test_list_of_blocks_and_strings_is_the_content() -> None:
    block = image(b"x")
    assert tool_result(["a", block]) == {"content": [text("a"), block]}


def test_empty_list_is_empty_content() -> None:
    assert tool_result([]) == {"content": []}


def test_list_that_is_not_all_blocks_becomes_json_text_without_structure() -> None:
    assert tool_result([1, "a"]) == {"content": [text('[1,"a"]')]}


def test_tuple_with_output_schema_is_structured_as_a_list() -> None:
    result = tool_result(("a", "b"), has_output_schema=True)
    assert result == {"content": [text('["a","b"]')], "structuredContent": ["a", "b"]}


def test_list_of_strings_with_output_schema_is_structured_not_blocks() -> None:
    result = tool_result(["a"], has_output_schema=True)
    assert result["structuredContent"] == ["a"]


@pytest.mark.parametrize(
    ("value", "rendered"),
    [(3, "3"), (2.5, "2.5"), (True, "true"), (False, "false")],
)
def test_scalar_without_output_schema_is_text_only(value: object, rendered: str) -> None:
    assert tool_result(value) == {"content": [text(rendered)]}


@pytest.mark.parametrize("value", [3, 2.5, False])
def test_scalar_with_output_schema_is_also_structured(value: object) -> None:
    result = tool_result(value, has_output_schema=True)
    assert result["structuredContent"] == value
    assert result["structuredContent"] is value


def test_a_string_with_output_schema_is_its_text_and_its_structured_content() -> None:
    assert tool_result("hi") == {"content": [text("hi")]}
    assert tool_result("hi", has_output_schema=True) == {
        "content": [text("hi")],
        "structuredContent": "hi",
    }


def test_none_with_output_schema_is_null_structured_content() -> None:
    assert tool_result(None) == {"content": []}
    assert tool_result(None, has_output_schema=True) == {"content": [], "structuredContent": None}


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, object()])
def test_unsupported_tool_result_is_an_internal_error(value: object) -> None:
    with pytest.raises(InternalError) as info:
        tool_result(value)
    assert info.value.code == INTERNAL_ERROR
    assert type(value).__name__ in info.value.message
    assert "not a tool result" in info.value.message


# ---------------------------------------------------------------- resource_contents


def test_string_resource_is_text_contents_with_mime_type() -> None:
    assert resource_contents("hello", "memo://1", "text/plain") == [
        {"uri": "memo://1", "text": "hello", "mimeType": "text/plain"}
    ]


def test_string_resource_without_mime_type_has_none() -> None:
    assert resource_contents("hello", "memo://1", None) == [{"uri": "memo://1", "text": "hello"}]


@pytest.mark.parametrize("data", [b"\x00\xff", bytearray(b"\x00\xff"), memoryview(b"\x00\xff")])
def test_binary_resource_is_a_base64_blob(data: bytes) -> None:
    assert resource_contents(data, "bin://1", None) == [{"uri": "bin://1", "blob": "AP8="}]


def test_content_dict_is_merged_under_the_uri_and_blob_bytes_encoded() -> None:
    contents = resource_contents(
        [{"text": "a", "mimeType": "text/markdown"}, {"blob": b"\x01"}], "x://1", "text/plain"
    )
    assert contents == [
        {"uri": "x://1", "text": "a", "mimeType": "text/markdown"},
        {"uri": "x://1", "blob": base64.b64encode(b"\x01").decode(), "mimeType": "text/plain"},
    ]


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ({"text": 5}, "a 'text' that is not a string"),
        ({"text": "a", "blob": b"x"}, "both 'text' and 'blob'"),
        ({"blob": "not base64!!"}, "a 'blob' that is not base64 or bytes"),
        ({"blob": 12}, "a 'blob' that is not base64 or bytes"),
    ],
)
def test_content_dict_clients_could_not_read_is_an_internal_error(
    item: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InternalError, match=problem):
        resource_contents(item, "x://1", None)


def test_content_dict_with_lazy_text_or_a_blob_in_lines_is_read() -> None:
    from django.utils.translation import gettext_lazy

    lazy = resource_contents({"text": gettext_lazy("Hello")}, "x://1", None)
    assert str(lazy[0]["text"]) == "Hello"
    lines = base64.encodebytes(b"x" * 100).decode()
    assert resource_contents({"blob": lines}, "x://1", None)[0]["blob"] == lines


def test_content_dict_may_name_its_own_uri() -> None:
    contents = resource_contents({"uri": "x://child", "text": "a"}, "x://1", None)
    assert contents == [{"uri": "x://child", "text": "a"}]


def test_list_of_mixed_items_keeps_order() -> None:
    contents = resource_contents(("a", b"b"), "x://1", None)
    assert contents == [{"uri": "x://1", "text": "a"}, {"uri": "x://1", "blob": "Yg=="}]


@pytest.mark.parametrize("value", [42, {"neither": "text nor blob"}, ["ok", None]])
def test_unsupported_resource_value_is_an_internal_error(value: object) -> None:
    with pytest.raises(InternalError, match=r"resource x://1 returned \w+; return str, bytes"):
        resource_contents(value, "x://1", None)


# ---------------------------------------------------------------- prompt_result


def test_string_prompt_is_one_user_message() -> None:
    assert prompt_result("Say hi", None) == {
        "messages": [{"role": "user", "content": text("Say hi")}]
    }


def test_prompt_description_is_filled_in() -> None:
    assert prompt_result("x", "Greets")["description"] == "Greets"


def test_list_prompt_mixes_strings_and_message_dicts() -> None:
    result = prompt_result(
        ["q", {"role": "assistant", "content": "a"}, {"role": "user", "content": image(b"i")}],
        None,
    )
    assert result == {
        "messages": [
            {"role": "user", "content": text("q")},
            {"role": "assistant", "content": text("a")},
            {"role": "user", "content": image(b"i")},
        ]
    }


def test_message_dict_keeps_extra_keys() -> None:
    result = prompt_result([{"role": "user", "content": "q", "_meta": {"k": 1}}], None)
    assert result["messages"][0]["_meta"] == {"k": 1}


def test_dict_with_messages_keeps_its_own_description_and_extras() -> None:
    result = prompt_result({"description": "own", "messages": ["q"], "_meta": {"k": 1}}, "fallback")
    assert result == {
        "description": "own",
        "messages": [{"role": "user", "content": text("q")}],
        "_meta": {"k": 1},
    }


def test_dict_with_messages_gets_fallback_description_when_it_has_none() -> None:
    assert prompt_result({"messages": ("q",)}, "fallback")["description"] == "fallback"


def test_empty_description_is_not_added() -> None:
    assert "description" not in prompt_result("x", "")


@pytest.mark.parametrize("value", [42, None, {"no": "messages"}])
def test_unsupported_prompt_value_is_an_internal_error(value: object) -> None:
    with pytest.raises(InternalError, match="a prompt returned"):
        prompt_result(value, None)


@pytest.mark.parametrize(
    "message",
    [{"role": "system", "content": "x"}, {"content": "x"}, 42],
)
def test_message_without_a_valid_role_is_refused(message: object) -> None:
    with pytest.raises(InternalError, match="role 'user' or 'assistant'"):
        prompt_result([message], None)


@pytest.mark.parametrize("body", [None, 42, {"text": "no type"}])
def test_message_content_must_be_string_or_block(body: object) -> None:
    with pytest.raises(InternalError, match="content must be a string or a content block"):
        prompt_result([{"role": "user", "content": body}], None)


# ---------------------------------------------------------------- completion_result


def test_list_completion_is_stringified_and_not_more() -> None:
    assert completion_result(["a", 2]) == {"completion": {"values": ["a", "2"], "hasMore": False}}


def test_none_completion_is_empty() -> None:
    assert completion_result(None) == {"completion": {"values": [], "hasMore": False}}


def test_generator_completion_is_consumed() -> None:
    result = completion_result(v for v in ("x", "y"))
    assert result["completion"]["values"] == ["x", "y"]


def test_dict_completion_keeps_total_and_has_more() -> None:
    result = completion_result({"values": ["a"], "total": 10, "hasMore": True})
    assert result == {"completion": {"values": ["a"], "hasMore": True, "total": 10}}


def test_dict_completion_with_no_values_is_empty() -> None:
    assert completion_result({"values": None}) == {"completion": {"values": [], "hasMore": False}}


def test_over_limit_is_capped_with_has_more_and_total() -> None:
    result = completion_result([str(i) for i in range(150)])
    completion = result["completion"]
    assert completion["values"] == [str(i) for i in range(100)]
    assert completion["hasMore"] is True
    assert completion["total"] == 150


def test_over_limit_keeps_a_given_total() -> None:
    result = completion_result({"values": list("abcd"), "total": 99}, limit=2)
    assert result == {"completion": {"values": ["a", "b"], "hasMore": True, "total": 99}}


def test_exactly_at_limit_is_not_capped() -> None:
    completion = completion_result(list("ab"), limit=2)["completion"]
    assert completion == {"values": ["a", "b"], "hasMore": False}


def test_non_integer_total_is_dropped() -> None:
    assert "total" not in completion_result({"values": ["a"], "total": "many"})["completion"]


@pytest.mark.parametrize("value", [42, 1.5])
def test_unsupported_completion_is_an_internal_error(value: object) -> None:
    with pytest.raises(InternalError, match="a completer must return"):
        completion_result(value)


def test_lazy_text_and_an_sdk_models_dump_are_results_as_before() -> None:
    from django.utils.translation import gettext_lazy

    lazy = {"content": [text(gettext_lazy("Not found"))], "isError": True}
    assert tool_result(lazy) == lazy
    dumped = {"content": [text("x")], "isError": True, "resultType": "complete"}
    assert tool_result(dumped)["isError"] is True and "structuredContent" not in tool_result(dumped)


@pytest.mark.parametrize("value", [{"n": 10**5000}, [10**5000], {(1, 2): "a tuple key"}])
def test_a_value_json_cannot_carry_is_an_internal_error_not_a_crash(value: object) -> None:
    with pytest.raises(InternalError, match="the result holds a value JSON cannot carry"):
        tool_result(value, has_output_schema=True)


def test_a_result_nested_deeper_than_python_recurses_is_an_internal_error() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InternalError, match="the result holds a value JSON cannot carry"):
        tool_result({"deep": deep}, has_output_schema=True)
