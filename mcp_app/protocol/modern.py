"""The stateless 2026-07-28 wire: header and ``_meta`` checks in, ``resultType`` and cache hints out."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ..registry import ToolDef, argument_at, path_text
from . import tasks, versions
from .jsonrpc import (
    HeaderMismatch,
    InvalidParams,
    MethodNotFound,
    UnsupportedProtocolVersion,
    clip,
    valid_id,
)

JSON = dict[str, Any]

SUPPORTED = [versions.MODERN]
#: Methods of the stateless wire beyond the engine's common table.
OWN_METHODS = frozenset({"server/discover", "subscriptions/listen"}) | tasks.METHODS
#: Results that carry ``ttlMs`` and ``cacheScope``.
CACHEABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "resources/read",
    }
)
NAMED = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    **{method: "taskId" for method in sorted(tasks.METHODS)},
}
_BASE64_RE = re.compile(r"^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$")
_VISIBLE = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$|^$")
_TOKEN = re.compile(r"[\x21-\x7e]+")
#: A JSON number: what an ``Mcp-Param-*`` header of a numeric argument may be. Python's own
#: parsers take more (``1_0``, ``+10``, ``inf``), which a gateway reading the header would not.
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def visible_ascii(text: str) -> bool:
    """Whether ``text`` is one or more visible ASCII characters, as session and stream ids are."""
    return _TOKEN.fullmatch(text) is not None


@dataclass
class ModernRequest:
    """A request of the stateless wire, its per-request metadata read and checked."""

    id: Any
    method: str
    params: JSON
    meta: JSON
    version: str
    capabilities: JSON
    client_info: JSON
    log_level: str | None
    progress_token: Any


def shown(value: Any) -> str:
    """``value``'s repr for an error message, cut to ``SHOWN_CHARS``: a header may be long."""
    return clip(repr(value))


def header_value(raw: str) -> str:
    """Decode an MCP header value: trim it, and unwrap the ``=?base64?…?=`` form.

    Raises:
        HeaderMismatch: the value has invalid characters or bad base64.
    """
    value = raw.strip(" \t")
    # Only a complete wrapper is an encoding; anything else is the literal value.
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        match = _BASE64_RE.fullmatch(value)
        if not match or len(match.group(1)) % 4:
            raise HeaderMismatch(f"Malformed base64 header value: {shown(value)}")
        try:
            return base64.b64decode(match.group(1), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise HeaderMismatch(f"Malformed base64 header value: {shown(value)}") from exc
    # What ``_VISIBLE`` matches, once the ends are trimmed: printable ASCII is \x20-\x7e.
    if not (value.isascii() and value.isprintable()):
        raise HeaderMismatch("Header value has characters that must be base64-encoded")
    return value


def encode_header_value(text: str) -> str:
    """A header value as a client sends it: visible ASCII as it is, anything else in base64."""
    if text == "" or (_VISIBLE.fullmatch(text) and not text.startswith("=?base64?")):
        return text
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


def header_text(value: Any) -> str:
    """An argument's value as text for its ``Mcp-Param-*`` header."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def mirrored(headers: Mapping[str, Sequence[str]], arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers a client sends for ``arguments``: each header named in
    ``headers`` with the argument at its path, for the arguments present and not null."""
    sent: dict[str, str] = {}
    for header, path in headers.items():
        value = argument_at(arguments, path)
        if value is not None:
            sent[header] = encode_header_value(header_text(value))
    return sent


def _same(header: str, value: Any) -> bool:
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, (int, float)) and not _NUMBER.fullmatch(header):
        return False
    try:
        # Integers compare exactly; floats numerically.
        if isinstance(value, int):
            return Decimal(header) == value
        if isinstance(value, float):
            return float(header) == value
    except (ValueError, OverflowError, InvalidOperation):
        return False
    if isinstance(value, str):
        return header == value
    return False


def parse(
    message: JSON,
    headers: Mapping[str, str] | None,
    knows: Callable[[str], bool],
    find_tool: Callable[[str], ToolDef | None],
    *,
    logs: bool = True,
) -> ModernRequest:
    """Check a stateless request's headers against its body and read its ``_meta``.

    The order of the checks is the one clients rely on to tell errors apart. ``headers`` is
    ``None`` on transports without them (stdio): only the body is checked. A server that
    does no logging (``logs``) checks the log level but keeps none.

    Raises:
        HeaderMismatch, InvalidParams, UnsupportedProtocolVersion, MethodNotFound.
    """
    method: str = message["method"]
    params: JSON = message.get("params") or {}
    header_version = header_method = None
    if headers is not None:
        header_version = headers.get("mcp-protocol-version")
        header_method = headers.get("mcp-method")
        if header_version is None:
            raise HeaderMismatch("Missing required header: MCP-Protocol-Version")
        if header_method is None:
            raise HeaderMismatch("Missing required header: Mcp-Method")
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidParams(
            "Missing params._meta with the protocol version and client capabilities",
            http_status=400,
        )
    meta_version = meta.get(versions.META_PROTOCOL_VERSION)
    if not isinstance(meta_version, str):
        raise InvalidParams(f"Missing _meta[{versions.META_PROTOCOL_VERSION!r}]", http_status=400)
    capabilities = meta.get(versions.META_CLIENT_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise InvalidParams(
            f"Missing _meta[{versions.META_CLIENT_CAPABILITIES!r}]", http_status=400
        )
    if header_version is not None and header_value(header_version) != meta_version:
        raise HeaderMismatch(
            f"MCP-Protocol-Version header {shown(header_version.strip())} does not match "
            f"_meta protocol version {shown(meta_version)}"
        )
    if header_method is not None and header_value(header_method) != method:
        raise HeaderMismatch(
            f"Mcp-Method header {shown(header_method.strip())} does not match method {shown(method)}"
        )
    if meta_version not in SUPPORTED:
        raise UnsupportedProtocolVersion(meta_version, list(SUPPORTED))
    if method not in OWN_METHODS and not knows(method):
        raise MethodNotFound(f"Method not found: {clip(method)}")
    if headers is not None and method in NAMED:
        _check_name(method, params, headers)
    if headers is not None and method == "tools/call":
        tool = find_tool(str(params.get("name")))
        if tool is not None and tool.header_params:
            _check_params(tool, params.get("arguments"), headers)
    log_level = meta.get(versions.META_LOG_LEVEL)
    if log_level is not None and log_level not in versions.LOG_LEVELS:
        raise InvalidParams(f"Unknown log level {shown(log_level)}", http_status=400)
    progress_token = meta.get("progressToken")
    if progress_token is not None and not valid_id(progress_token):
        raise InvalidParams("_meta.progressToken must be a string or an integer", http_status=400)
    client_info = meta.get(versions.META_CLIENT_INFO)
    return ModernRequest(
        id=message["id"],
        method=method,
        params=params,
        meta=meta,
        version=meta_version,
        capabilities=capabilities,
        client_info=client_info if isinstance(client_info, dict) else {},
        log_level=log_level if logs else None,
        progress_token=progress_token,
    )


def _check_name(method: str, params: JSON, headers: Mapping[str, str]) -> None:
    key = NAMED[method]
    if not isinstance(params.get(key), str):
        # A malformed request, not a header out of step with its body (which -32020 says,
        # and a client answers by listing again).
        raise InvalidParams(f"{method} needs a string 'params.{key}'", http_status=400)
    raw = headers.get("mcp-name")
    if raw is None:
        raise HeaderMismatch(f"Missing required header: Mcp-Name (for {method})")
    if header_value(raw) != params.get(key):
        raise HeaderMismatch(f"Mcp-Name header does not match params.{key}")


def _check_params(tool: ToolDef, arguments: Any, headers: Mapping[str, str]) -> None:
    for header, path in tool.header_params.items():
        value = argument_at(arguments, path)
        raw = headers.get(header)
        if value is None:
            if raw is not None:
                raise HeaderMismatch(
                    f"Header {header} is set but argument {path_text(path)!r} is absent"
                )
            continue
        if raw is None:
            raise HeaderMismatch(f"Missing header {header} for argument {path_text(path)!r}")
        if not _same(header_value(raw), value):
            raise HeaderMismatch(f"Header {header} does not match argument {path_text(path)!r}")


def stamp(result: JSON, server_info: JSON) -> JSON:
    """``result`` with the server's identity in its ``_meta``."""
    out = dict(result)
    meta = dict(out.get("_meta") or {})
    meta[versions.META_SERVER_INFO] = server_info
    out["_meta"] = meta
    return out


def finish(method: str, result: JSON, server_info: JSON, ttl_ms: int, cache_scope: str) -> JSON:
    """Stamp a complete result with ``resultType``, server identity and, where due, cache hints."""
    out = stamp(result, server_info)
    out["resultType"] = "complete"
    if method in CACHEABLE:
        out.setdefault("ttlMs", ttl_ms)
        out.setdefault("cacheScope", cache_scope)
    return out
