"""Tests for mcp_app.content: the content-block builders."""

from __future__ import annotations

import base64

from mcp_app.content import (
    Content,
    ToolError,
    audio,
    content,
    embedded_blob,
    embedded_text,
    image,
    resource_link,
    text,
    tool_error,
)

ANNOTATIONS = {"audience": ["user"], "priority": 0.5}
META = {"example.com/key": "value"}


def test_text_block_is_minimal_without_extras() -> None:
    assert text("hello") == {"type": "text", "text": "hello"}


def test_text_block_carries_annotations_and_meta() -> None:
    block = text("hi", annotations=ANNOTATIONS, meta=META)
    assert block == {"type": "text", "text": "hi", "annotations": ANNOTATIONS, "_meta": META}


def test_empty_annotations_and_meta_are_left_out() -> None:
    assert text("hi", annotations={}, meta={}) == {"type": "text", "text": "hi"}


def test_image_encodes_bytes_as_base64_with_default_png_type() -> None:
    block = image(b"\x89PNG")
    assert block == {
        "type": "image",
        "data": base64.b64encode(b"\x89PNG").decode("ascii"),
        "mimeType": "image/png",
    }


def test_image_passes_an_already_encoded_string_through() -> None:
    block = image("AAAA", "image/gif", annotations=ANNOTATIONS)
    assert block["data"] == "AAAA"
    assert block["mimeType"] == "image/gif"
    assert block["annotations"] == ANNOTATIONS


def test_audio_encodes_bytes_with_default_wav_type() -> None:
    block = audio(b"RIFF", meta=META)
    assert block == {
        "type": "audio",
        "data": "UklGRg==",
        "mimeType": "audio/wav",
        "_meta": META,
    }


def test_audio_keeps_string_data_and_custom_type() -> None:
    assert audio("QUJD", "audio/mpeg")["data"] == "QUJD"
    assert audio("QUJD", "audio/mpeg")["mimeType"] == "audio/mpeg"


def test_resource_link_has_only_required_fields_by_default() -> None:
    assert resource_link("file:///a.txt", "a") == {
        "type": "resource_link",
        "uri": "file:///a.txt",
        "name": "a",
    }


def test_resource_link_includes_every_optional_field_given() -> None:
    block = resource_link(
        "file:///a.txt",
        "a",
        title="A",
        description="The A file",
        mime_type="text/plain",
        size=0,
        annotations=ANNOTATIONS,
        meta=META,
    )
    assert block == {
        "type": "resource_link",
        "uri": "file:///a.txt",
        "name": "a",
        "title": "A",
        "description": "The A file",
        "mimeType": "text/plain",
        "size": 0,  # zero is a real size, not "absent"
        "annotations": ANNOTATIONS,
        "_meta": META,
    }


def test_embedded_text_defaults_to_text_plain() -> None:
    assert embedded_text("memo://1", "body") == {
        "type": "resource",
        "resource": {"uri": "memo://1", "text": "body", "mimeType": "text/plain"},
    }


def test_embedded_text_without_mime_type_omits_it() -> None:
    block = embedded_text("memo://1", "body", None, annotations=ANNOTATIONS)
    assert block["resource"] == {"uri": "memo://1", "text": "body"}
    assert block["annotations"] == ANNOTATIONS


def test_embedded_blob_encodes_bytes_with_default_octet_stream() -> None:
    assert embedded_blob("bin://1", b"\x00\x01") == {
        "type": "resource",
        "resource": {"uri": "bin://1", "blob": "AAE=", "mimeType": "application/octet-stream"},
    }


def test_embedded_blob_keeps_base64_string_and_may_omit_mime_type() -> None:
    block = embedded_blob("bin://1", "AAE=", None, meta=META)
    assert block == {
        "type": "resource",
        "resource": {"uri": "bin://1", "blob": "AAE="},
        "_meta": META,
    }


def test_content_turns_strings_into_text_blocks_and_keeps_dicts() -> None:
    img = image(b"x")
    result = content(["one", img], structured={"n": 1})
    assert isinstance(result, Content)
    assert not isinstance(result, ToolError)
    assert result.blocks == ({"type": "text", "text": "one"}, img)
    assert result.structured == {"n": 1}
    assert result.is_error is False


def test_content_accepts_any_iterable() -> None:
    result = content(iter(["a", "b"]))
    assert result.blocks == (text("a"), text("b"))
    assert result.structured is None


def test_tool_error_from_a_message_is_one_error_text_block() -> None:
    result = tool_error("it broke")
    assert isinstance(result, ToolError)
    assert isinstance(result, Content)
    assert result.blocks == (text("it broke"),)
    assert result.is_error is True
    assert result.structured is None


def test_tool_error_from_a_list_mixes_strings_and_blocks() -> None:
    link = resource_link("file:///log", "log")
    result = tool_error(["see the log", link])
    assert result.blocks == (text("see the log"), link)
    assert result.is_error is True
