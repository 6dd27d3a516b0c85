"""Turn what a handler returns into the protocol result, in one place for every kind."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping
from typing import Any

from django.utils.functional import Promise

from .content import Content, text
from .protocol.jsonrpc import InternalError

JSON = dict[str, Any]

logger = logging.getLogger("mcp_app")


def _dumps(value: Any) -> str:
    """``value`` as JSON text for a text block.

    Raises:
        InternalError: it holds a value JSON cannot carry (an integer past Python's digit
            limit, a value that holds itself, nesting deeper than Python recurses, a key
            that is no string or number), as an answer holding NaN is sent.
    """
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, TypeError, RecursionError) as exc:
        logger.error("A result holds a value JSON cannot carry: %s", exc)
        raise InternalError("Internal error: the result holds a value JSON cannot carry") from exc


#: The fields each kind of content block must have, and their types.
#: Text may be a lazy translation, which the encoder sends as its text.
_TEXT = (str, Promise)
_BLOCK_FIELDS: dict[str, tuple[tuple[str, Any], ...]] = {
    "text": (("text", _TEXT),),
    "image": (("data", str), ("mimeType", str)),
    "audio": (("data", str), ("mimeType", str)),
    "resource_link": (("uri", str), ("name", _TEXT)),
    "resource": (("resource", Mapping),),
}
#: The keys of a ``CallToolResult`` (``resultType`` as the SDKs' models dump it): a dict of
#: only these, with blocks, is one already.
_RESULT_KEYS = frozenset({"content", "structuredContent", "isError", "_meta", "resultType"})


def _is_block(value: Any) -> bool:
    """Whether ``value`` is a content block: a known ``type`` with that type's fields."""
    if not isinstance(value, Mapping):
        return False
    fields = _BLOCK_FIELDS.get(value.get("type"))  # type: ignore[arg-type]
    return fields is not None and all(isinstance(value.get(k), t) for k, t in fields)


def tool_result(value: Any, *, has_output_schema: bool = False) -> JSON:
    """A handler's return value as a ``CallToolResult``.

    A string is one text block, and so is each string of a list; a content block, or a list
    of them, is the content; a dict of result keys whose ``content`` is blocks is a result as
    it stands; any other dict (or, with an output schema, any JSON value) is structured
    content with its JSON as text; ``content()``/``tool_error()`` give explicit blocks;
    ``None`` is an empty result. With an output schema, a string and ``None`` are structured
    content too (a string, ``null``), for the schema to judge.

    Raises:
        InternalError: the value cannot be turned into a result.
    """
    if value is None:
        return {"content": [], "structuredContent": None} if has_output_schema else {"content": []}
    if isinstance(value, Content):
        result: JSON = {"content": list(value.blocks)}
        if value.structured is not None:
            result["structuredContent"] = value.structured
        if value.is_error:
            result["isError"] = True
        return result
    if isinstance(value, str):
        if has_output_schema:
            return {"content": [text(value)], "structuredContent": value}
        return {"content": [text(value)]}
    if isinstance(value, Mapping):
        blocks = value.get("content")
        if (
            isinstance(blocks, list)
            and value.keys() <= _RESULT_KEYS
            and all(_is_block(block) for block in blocks)
        ):
            return dict(value)
        if not has_output_schema and _is_block(value):
            return {"content": [dict(value)]}
        return {"content": [text(_dumps(value))], "structuredContent": dict(value)}
    if (
        isinstance(value, list | tuple)
        and not has_output_schema
        and all(_is_block(v) or isinstance(v, str) for v in value)
    ):
        return {"content": [text(v) if isinstance(v, str) else dict(v) for v in value]}
    if isinstance(value, bool | int | float | list | tuple):
        payload = list(value) if isinstance(value, tuple) else value
        result = {"content": [text(_dumps(payload))]}
        if has_output_schema:
            result["structuredContent"] = payload
        return result
    raise InternalError(f"a tool returned {type(value).__name__}, which is not a tool result")


def _check_contents(entry: Mapping[str, Any], uri: str) -> None:
    """A content dict clients can read: text, or a base64 blob, not both."""
    if "text" in entry and "blob" in entry:
        raise InternalError(f"resource {uri} returned contents with both 'text' and 'blob'")
    if "text" in entry and not isinstance(entry["text"], str | Promise):
        raise InternalError(f"resource {uri} returned a 'text' that is not a string")
    if "blob" in entry:
        refused = InternalError(f"resource {uri} returned a 'blob' that is not base64 or bytes")
        if not isinstance(entry["blob"], str):
            raise refused
        try:
            # Line breaks allowed, as base64.encodebytes writes them.
            base64.b64decode("".join(entry["blob"].split()), validate=True)
        except (binascii.Error, ValueError):
            raise refused from None


def resource_contents(value: Any, uri: str, mime_type: str | None) -> list[JSON]:
    """A resource handler's return value as ``contents``: text, base64 blob, or content dicts.

    Raises:
        InternalError: the value is neither text, bytes nor content dicts.
    """
    items = value if isinstance(value, list | tuple) else [value]
    contents: list[JSON] = []
    for item in items:
        if isinstance(item, str):
            entry: JSON = {"uri": uri, "text": item}
        elif isinstance(item, bytes | bytearray | memoryview):
            entry = {"uri": uri, "blob": base64.b64encode(bytes(item)).decode("ascii")}
        elif isinstance(item, Mapping) and ("text" in item or "blob" in item):
            entry = {"uri": uri, **item}
            if isinstance(entry.get("blob"), bytes | bytearray | memoryview):
                entry["blob"] = base64.b64encode(bytes(entry["blob"])).decode("ascii")
            _check_contents(entry, uri)
        else:
            raise InternalError(
                f"resource {uri} returned {type(item).__name__}; return str, bytes or content dicts"
            )
        if mime_type and "mimeType" not in entry:
            entry["mimeType"] = mime_type
        contents.append(entry)
    return contents


def _message(item: Any) -> JSON:
    if isinstance(item, str):
        return {"role": "user", "content": text(item)}
    if isinstance(item, Mapping) and item.get("role") in ("user", "assistant"):
        body = item.get("content")
        if isinstance(body, str):
            body = text(body)
        if not _is_block(body):
            raise InternalError("a prompt message's content must be a string or a content block")
        return {**item, "content": dict(body)}  # type: ignore[arg-type]
    raise InternalError(
        "a prompt message must be a string or a dict with role 'user' or 'assistant' and content"
    )


def prompt_result(value: Any, description: str | None) -> JSON:
    """A prompt handler's return value as a ``GetPromptResult``.

    Raises:
        InternalError: the value is not a string, a list of messages, or a dict with messages.
    """
    if isinstance(value, Mapping) and "messages" in value:
        result = dict(value)
        result["messages"] = [_message(m) for m in value["messages"]]
    elif isinstance(value, str):
        result = {"messages": [_message(value)]}
    elif isinstance(value, list | tuple):
        result = {"messages": [_message(m) for m in value]}
    else:
        raise InternalError(
            f"a prompt returned {type(value).__name__}; return str, a list of messages, "
            "or a dict with 'messages'"
        )
    if description and "description" not in result:
        result["description"] = description
    return result


def completion_result(value: Any, limit: int = 100) -> JSON:
    """A completer's return value as ``{"completion": {...}}``, capped at ``limit`` values.

    Raises:
        InternalError: the value is neither a list of strings nor a dict with ``values``.
    """
    if isinstance(value, Mapping):
        values = list(value.get("values") or [])
        total = value.get("total")
        has_more = bool(value.get("hasMore", False))
    elif value is None:
        values, total, has_more = [], None, False
    elif not isinstance(value, str | bytes | Mapping) and hasattr(value, "__iter__"):
        values, total, has_more = list(value), None, False
    else:
        raise InternalError("a completer must return a list of strings or a dict with 'values'")
    values = [str(v) for v in values]
    if len(values) > limit:
        total = total if isinstance(total, int) else len(values)
        values, has_more = values[:limit], True
    completion: JSON = {"values": values, "hasMore": has_more}
    if isinstance(total, int):
        completion["total"] = total
    return {"completion": completion}
