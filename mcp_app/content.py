"""Helpers that build MCP content blocks for tool results and prompt messages."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Content",
    "ToolError",
    "audio",
    "content",
    "embedded_blob",
    "embedded_text",
    "image",
    "resource_link",
    "text",
    "tool_error",
]

Block = dict[str, Any]


def _b64(data: bytes | bytearray | memoryview | str) -> str:
    # Already-encoded text passes through so callers can keep base64 constants.
    if isinstance(data, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(data)).decode("ascii")
    return data


def _extra(block: Block, annotations: dict[str, Any] | None, meta: dict[str, Any] | None) -> Block:
    if annotations:
        block["annotations"] = annotations
    if meta:
        block["_meta"] = meta
    return block


def text(
    value: str, *, annotations: dict[str, Any] | None = None, meta: dict[str, Any] | None = None
) -> Block:
    """A text content block."""
    return _extra({"type": "text", "text": value}, annotations, meta)


def image(
    data: bytes | bytearray | memoryview | str,
    mime_type: str = "image/png",
    *,
    annotations: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Block:
    """An image block; ``data`` is raw bytes or a base64 string."""
    return _extra({"type": "image", "data": _b64(data), "mimeType": mime_type}, annotations, meta)


def audio(
    data: bytes | bytearray | memoryview | str,
    mime_type: str = "audio/wav",
    *,
    annotations: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Block:
    """An audio block; ``data`` is raw bytes or a base64 string."""
    return _extra({"type": "audio", "data": _b64(data), "mimeType": mime_type}, annotations, meta)


def resource_link(
    uri: str,
    name: str,
    *,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    annotations: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Block:
    """A link to a resource the client may read later."""
    block: Block = {"type": "resource_link", "uri": uri, "name": name}
    for key, value in (
        ("title", title),
        ("description", description),
        ("mimeType", mime_type),
        ("size", size),
    ):
        if value is not None:
            block[key] = value
    return _extra(block, annotations, meta)


def embedded_text(
    uri: str,
    value: str,
    mime_type: str | None = "text/plain",
    *,
    annotations: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Block:
    """A resource embedded in the result, with text contents."""
    resource: Block = {"uri": uri, "text": value}
    if mime_type:
        resource["mimeType"] = mime_type
    return _extra({"type": "resource", "resource": resource}, annotations, meta)


def embedded_blob(
    uri: str,
    data: bytes | bytearray | memoryview | str,
    mime_type: str | None = "application/octet-stream",
    *,
    annotations: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Block:
    """A resource embedded in the result, with binary contents."""
    resource: Block = {"uri": uri, "blob": _b64(data)}
    if mime_type:
        resource["mimeType"] = mime_type
    return _extra({"type": "resource", "resource": resource}, annotations, meta)


@dataclass(frozen=True)
class Content:
    """A tool result made of explicit content blocks (see :func:`content`)."""

    blocks: tuple[Block, ...]
    structured: Any = None
    is_error: bool = False


def content(blocks: Block | str | Iterable[Block | str], *, structured: Any = None) -> Content:
    """Return these blocks as a tool's result; strings become text blocks."""
    return Content(_blocks(blocks), structured)


class ToolError(Content):
    """A tool result flagged ``isError: true`` (see :func:`tool_error`)."""


def tool_error(message: Block | str | Iterable[Block | str]) -> ToolError:
    """A failed tool result the model can read and correct itself from."""
    return ToolError(_blocks(message), None, True)


def _blocks(given: Block | str | Iterable[Block | str]) -> tuple[Block, ...]:
    # One string or one block is one block, not the characters or keys it iterates over.
    items = [given] if isinstance(given, str | Mapping) else list(given)
    return tuple(text(b) if isinstance(b, str) else dict(b) for b in items)
