"""JSON-RPC 2.0 messages and the protocol errors that become error responses."""

from __future__ import annotations

import codecs
import json
import logging
import math
import re
from collections.abc import Callable
from typing import Any, Final

import orjson

logger = logging.getLogger("mcp_app")

JSONDict = dict[str, Any]
RequestId = str | int

PARSE_ERROR: Final = -32700
"""The body is not valid JSON."""
INVALID_REQUEST: Final = -32600
"""The body is JSON but not a valid JSON-RPC request."""
METHOD_NOT_FOUND: Final = -32601
"""The method does not exist on this server (or on this revision)."""
INVALID_PARAMS: Final = -32602
"""The params are invalid: unknown name, bad arguments, bad cursor, bad request state."""
INTERNAL_ERROR: Final = -32603
"""The server failed while handling the request."""
RESOURCE_NOT_FOUND: Final = -32002
"""Initialize-era revisions: the resource does not exist."""
HEADER_MISMATCH: Final = -32020
"""2026-07-28: a required HTTP header is missing, malformed or disagrees with the body."""
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
"""2026-07-28: the request needs a client capability it did not declare."""
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
"""2026-07-28: the requested protocol revision is not served."""


class ProtocolError(Exception):
    """An error that is answered as a JSON-RPC error response.

    Raise it (or a subclass) from a handler to answer with that error instead of a result.
    ``http_status`` is the status used on the stateless HTTP wire.
    """

    code: int = INTERNAL_ERROR
    http_status: int = 200

    def __init__(
        self,
        message: str,
        data: Any = None,
        *,
        code: int | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"

    def to_error(self) -> JSONDict:
        """The ``error`` member of the response."""
        error: JSONDict = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(ProtocolError):
    code = PARSE_ERROR
    http_status = 400


class InvalidRequest(ProtocolError):
    code = INVALID_REQUEST
    http_status = 400


class MethodNotFound(ProtocolError):
    code = METHOD_NOT_FOUND
    http_status = 404


class InvalidParams(ProtocolError):
    code = INVALID_PARAMS


class InternalError(ProtocolError):
    code = INTERNAL_ERROR
    http_status = 500


class ResourceNotFound(ProtocolError):
    """No such resource; the era decides the code (-32002 before 2026-07-28, else -32602)."""

    code = INVALID_PARAMS

    def __init__(self, uri: str) -> None:
        super().__init__("Resource not found", {"uri": uri})
        self.uri = uri


class HeaderMismatch(ProtocolError):
    code = HEADER_MISMATCH
    http_status = 400


class MissingClientCapability(ProtocolError):
    code = MISSING_REQUIRED_CLIENT_CAPABILITY
    http_status = 400

    def __init__(self, required: JSONDict, message: str | None = None) -> None:
        names = capability_names(required) or "none"
        super().__init__(
            message or f"Missing required client capability: {names}",
            {"requiredCapabilities": required},
        )
        self.required = required


def capability_names(capabilities: JSONDict) -> str:
    """``capabilities`` for a message: ``sampling.context, elicitation``."""
    names = []
    for name, value in sorted(capabilities.items()):
        inner = sorted(value) if isinstance(value, dict) else []
        names += [f"{name}.{sub}" for sub in inner] or [name]
    return ", ".join(names)


class UnsupportedProtocolVersion(ProtocolError):
    code = UNSUPPORTED_PROTOCOL_VERSION
    http_status = 400

    def __init__(self, requested: str, supported: list[str]) -> None:
        requested = clip(requested)
        super().__init__(
            f"Unsupported protocol version: {requested}",
            {"supported": supported, "requested": requested},
        )


#: Longest text of a client's value quoted in an error message.
SHOWN_CHARS = 80


def clip(text: str) -> str:
    """``text`` cut to ``SHOWN_CHARS`` for an error message: a client's value may be long."""
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 1]}…"


def result_response(request_id: RequestId | None, result: JSONDict) -> JSONDict:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: RequestId | None, error: ProtocolError) -> JSONDict:
    response: JSONDict = {"jsonrpc": "2.0", "error": error.to_error()}
    if request_id is not None:
        response["id"] = request_id
    return response


def notification(method: str, params: JSONDict | None = None) -> JSONDict:
    message: JSONDict = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def request(request_id: RequestId, method: str, params: JSONDict | None = None) -> JSONDict:
    message: JSONDict = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def valid_id(value: Any) -> bool:
    """MCP ids are strings or integers, never null (and never booleans)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def classify(message: Any) -> str:
    """Tell what a decoded message is: request, notification, response, or invalid.

    Raises:
        InvalidRequest: never; callers decide what an ``"invalid"`` message means.
    """
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return "invalid"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "invalid"
        if "params" in message and not isinstance(message["params"], dict):
            return "invalid"
        if "id" not in message:
            return "notification"
        return "request" if valid_id(message["id"]) else "invalid"
    if "id" in message and (("result" in message) != ("error" in message)):
        return "response" if "result" in message or _error_object(message["error"]) else "invalid"
    return "invalid"


def _error_object(error: Any) -> bool:
    """JSON-RPC's error object: an integer ``code`` and a string ``message``."""
    if not isinstance(error, dict):
        return False
    code = error.get("code")
    return (
        isinstance(code, int)
        and not isinstance(code, bool)
        and isinstance(error.get("message"), str)
    )


# -- parsing ---------------------------------------------------------------------------------

#: UTF-8 text holds no surrogate itself: in a body read as bytes, only an escape can make one.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
#: A lone UTF-16 surrogate, which no UTF-8 text (a page, a JSON answer) can hold.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: Where a lone surrogate may come from in decoded text: an escape, or the character itself
#: (text a caller decoded with ``surrogateescape``).
_MAYBE_SURROGATE = re.compile(f"{_ESCAPED_SURROGATE.pattern}|{LONE_SURROGATE.pattern}")


def _not_json(constant: str) -> Any:
    raise ParseError(f"Parse error: {constant} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        # It would be answered as Infinity, which is not JSON either.
        raise ParseError(f"Parse error: {text[:40]} is out of a double's range")
    return value


#: Made once: ``json.loads`` with hooks builds a decoder per call.
_DECODER = json.JSONDecoder(parse_constant=_not_json, parse_float=_finite)
#: orjson reads an integer past 64 bits as a float (and some 19-digit negatives too), where
#: the standard decoder keeps it whole; a body with a run of 19 digits is left to the latter.
#: orjson refuses what the standard decoder's hooks refuse (NaN, numbers out of a double's
#: range) and lone surrogates, and reads everything else alike, in well under half the time.
#: The run is found with every digit made a zero: a regular expression takes four times longer.
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19


def loads(data: bytes | str) -> Any:
    """Parse one JSON text as RFC 8259 has it, for a message a client sent.

    Bytes must be UTF-8 (a byte order mark is ignored). Python's decoder also takes ``NaN``
    and ``Infinity``, reads a number past a double's range as infinity, and keeps strings
    holding a lone UTF-16 surrogate, which no UTF-8 text (an answer, a database column) can
    hold: all are refused.

    Raises:
        ParseError: the text is not JSON, or not JSON that can be answered.
        RecursionError: the text nests deeper than the decoder can go.
    """
    if isinstance(data, bytes) and _LONG_RUN not in data.translate(_ZERO_DIGITS):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            # Not JSON, or JSON orjson refuses but this reader takes (a byte order mark): the
            # standard decoder below tells which, and why.
            pass
    try:
        if isinstance(data, bytes):
            # The plain codec: "utf-8-sig" is written in Python, and costs ten times more.
            text = data[3:].decode() if data.startswith(codecs.BOM_UTF8) else data.decode()
            maybe = "\\u" in text and _ESCAPED_SURROGATE.search(text) is not None
        else:
            text = data
            maybe = _MAYBE_SURROGATE.search(text) is not None
        value = _DECODER.decode(text)
    except (ValueError, UnicodeDecodeError):
        raise ParseError("Parse error: the body is not valid JSON") from None
    if maybe and any_string_matches(value, LONE_SURROGATE):
        raise ParseError("Parse error: a string holds a lone UTF-16 surrogate")
    return value


def any_string_matches(
    value: Any, pattern: re.Pattern[str] | None, *, non_finite: bool = False
) -> bool:
    """Whether ``pattern`` (if any) is found in any string of JSON ``value``, object keys
    included, or (with ``non_finite``) whether any number in it is NaN or infinite.

    A container met again (a value that holds itself) is not walked twice.
    """
    stack = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if pattern is not None and pattern.search(item):
                return True
        elif isinstance(item, dict | list | tuple):
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            else:
                stack.extend(item)
        elif non_finite and isinstance(item, float) and not math.isfinite(item):
            return True
    return False


def json_depth(value: Any, limit: int | None = None) -> int:
    """How deeply ``value``'s arrays and objects nest (0 for a scalar), found without recursion.

    Past ``limit``, if given, the count stops at ``limit + 1``.
    """
    # Level by level, so that the work per value is done by list operations in C: a body of a
    # million empty objects is walked in a fraction of a second, not in seconds.
    depth = 0
    level = [value]
    while True:
        containers = [item for item in level if isinstance(item, _CONTAINERS)]
        if not containers:
            return depth
        depth += 1
        if limit is not None and depth > limit:
            return depth
        level = []
        for container in containers:
            level.extend(container.values() if isinstance(container, dict) else container)


#: A tuple rather than ``dict | list``: isinstance takes it several times faster.
_CONTAINERS = (dict, list)


# -- encoding ------------------------------------------------------------------------------


#: The attribute marking an encoder ``encode()`` may write with orjson first (made by
#: ``encoder(fast=True)``); read on every message, so a plain attribute, not a weak set.
_FAST = "_mcp_app_orjson"
#: Values of these types (and subclasses of str, int, dict and list) go to the encoder's own
#: ``default`` and formats, by the standard encoder, not in orjson's own form.
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def encoder(*, fast: bool = False, **options: Any) -> json.JSONEncoder:
    """A JSON encoder for messages sent: ``options`` as for ``json.JSONEncoder``, never NaN.

    ``fast``: ``encode()`` writes with orjson whatever orjson writes as this encoder would (the
    same JSON; a float's exponent may be spelled ``1e-7`` rather than ``1e-07``).
    For an encoder whose ``default`` writes a UUID as its text and an enum member as its
    value (as orjson does), with compact separators and non-ASCII kept. Two values are written
    otherwise: an ``orjson.Fragment`` as the raw JSON it holds, and a member of an enum mixed
    with ``str`` or ``int`` whose value differs from its content, as its value.

    Raises:
        ValueError: ``fast`` with options orjson cannot follow.
    """
    cls: type[json.JSONEncoder] = options.pop("cls", json.JSONEncoder)
    by = cls(allow_nan=False, **options)
    if fast:
        if (
            by.indent is not None
            or by.sort_keys
            or by.ensure_ascii
            or (by.item_separator, by.key_separator) != (",", ":")
        ):
            raise ValueError("A fast encoder writes compact JSON with non-ASCII kept")
        setattr(by, _FAST, True)
    return by


def encode(message: Any, by: json.JSONEncoder) -> str:
    """``message`` (one or a batch) as JSON text, by an encoder made with ``encoder()``.

    A handler may put NaN, Infinity or a lone surrogate in what it returns, none of which a
    JSON answer can carry. A response holding one is sent as an internal error for its id;
    any other message (a notification, a request to the client) with ``null`` for such numbers
    and U+FFFD for such characters. Either way it is logged.
    """
    return encode_answer(message, by)[0]


def encode_answer(message: Any, by: json.JSONEncoder) -> tuple[str, bool]:
    """As ``encode``, and whether ``message`` is one response that went as an internal error
    instead (a batch's never counts: it is answered as a whole)."""
    if getattr(by, _FAST, False):
        try:
            data = orjson.dumps(message, option=_PASSTHROUGH)
        except TypeError:
            # orjson.JSONEncodeError: a type or key it leaves to the encoder's default, a number
            # past 64 bits, a lone surrogate, a loop or deep nesting; all below.
            pass
        else:
            # orjson writes NaN and the infinities as null, which are refused below.
            if b"null" not in data:
                return data.decode(), False
    try:
        text = by.encode(message)
    except RecursionError:
        sent = _too_deep(message, by)
    except ValueError:
        # Also raised for a value that holds itself.
        if not any_string_matches(message, None, non_finite=True):
            sent = _unencodable(message, by)
        else:
            sent = _mended(message, by)
    except TypeError:
        sent = _unencodable(message, by)
    else:
        if text.isascii() or not LONE_SURROGATE.search(text):
            return text, False
        sent = _mended(message, by)
    # Only a response is sent as something else: an internal error for its id.
    return sent, _is_response(message)


def _is_response(message: Any) -> bool:
    return isinstance(message, dict) and "id" in message and "method" not in message


def _unencodable(message: Any, by: json.JSONEncoder) -> str:
    """A message holding a value JSON has no form for (a set, an object, a loop).

    A response becomes an internal error for its id; another message goes out with such
    values as their text (and NaN and lone surrogates mended as ``_mended`` does), or, if it
    holds itself, raises ``ValueError``. Either way it is logged.
    """
    return _instead(
        message,
        by,
        "a value JSON cannot carry",
        "its text",
        logger.exception,
    )


def _too_deep(message: Any, by: json.JSONEncoder) -> str:
    """A message nested deeper than Python recurses: an internal error for a response (each
    of a batch on its own); any other message cannot be mended (walking it would recurse).

    Raises:
        ValueError: the message is not a response.
    """
    if isinstance(message, list):
        return "[" + by.item_separator.join(encode(item, by) for item in message) + "]"
    if _is_response(message):
        logger.error(
            "The answer to request %r was nested too deeply to encode; an internal error was "
            "sent instead",
            message["id"],
        )
        return by.encode(error_response(message["id"], InternalError("Internal error")))
    raise ValueError("The message is nested too deeply to encode")


def _mended(message: Any, by: json.JSONEncoder) -> str:
    return _instead(
        message,
        by,
        "NaN, Infinity or a lone surrogate, which JSON cannot carry",
        "null and U+FFFD",
        logger.error,
    )


def _leniently(message: Any, by: json.JSONEncoder) -> str:
    """``message`` as ``by`` encodes it, with NaN and Infinity as ``null``, lone surrogates as
    U+FFFD, and values it has no form for as their text.

    Raises:
        ValueError: the message holds itself.
    """

    def as_text(value: Any) -> Any:
        try:
            return by.default(value)
        except TypeError:
            return str(value)

    lenient = json.JSONEncoder(
        ensure_ascii=by.ensure_ascii,
        separators=(by.item_separator, by.key_separator),
        allow_nan=False,
        default=as_text,
    )
    try:
        return lenient.encode(_sendable(message))
    except RecursionError:
        raise ValueError("Circular reference detected") from None


def _instead(
    message: Any,
    by: json.JSONEncoder,
    held: str,
    sent_with: str,
    log: Callable[..., None],
) -> str:
    """What is sent for a message that cannot go as it is: an internal error for a response
    (each of a batch on its own), any other message as ``_leniently`` encodes it; logged
    either way."""
    if isinstance(message, list):
        return "[" + by.item_separator.join(encode(item, by) for item in message) + "]"
    if _is_response(message):
        log(
            "The answer to request %r held %s; an internal error was sent instead",
            message["id"],
            held,
        )
        return by.encode(error_response(message["id"], InternalError("Internal error")))
    log(
        "A %s message held %s; sent with %s in its place",
        message.get("method") if isinstance(message, dict) else type(message).__name__,
        held,
        sent_with,
    )
    return _leniently(message, by)


def _sendable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_sendable(key): _sendable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_sendable(item) for item in value]
    return value
