"""Server-sent events framing for MCP response and listen streams."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from ..protocol import jsonrpc

HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache, no-transform",
    # Proxies such as nginx would otherwise hold events back until the stream ends.
    "X-Accel-Buffering": "no",
}


#: Characters JSON leaves as they are but that many line splitters (Python's
#: ``str.splitlines`` among them) take for line ends, which would cut a ``data:`` line.
_LINE_BREAKS = str.maketrans({"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class WireJSONEncoder(DjangoJSONEncoder):
    """Django's encoder (dates, decimals, UUIDs, lazy text), and an enum member as its value."""

    def default(self, o: Any) -> Any:
        if isinstance(o, Enum):
            # As orjson writes it, so a message is written alike by either encoder.
            return o.value
        return super().default(o)


#: What every message is sent with, plain JSON or an event: compact, on one line.
ENCODER = jsonrpc.encoder(cls=WireJSONEncoder, ensure_ascii=False, separators=(",", ":"), fast=True)


def dumps(message: Any) -> str:
    """``message`` as JSON on one line, whichever way a client splits lines."""
    return jsonrpc.encode(message, ENCODER).translate(_LINE_BREAKS)


def as_sent(message: Any) -> Any:
    """``message`` as a stream sends it, read back as plain JSON: dates and decimals as text,
    and what JSON cannot carry replaced as ``jsonrpc.encode`` replaces it."""
    return json.loads(dumps(message))


def event(message: Any, event_id: str | None = None) -> bytes:
    """One ``message`` event carrying a JSON-RPC message."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: message\ndata: {dumps(message)}\n\n".encode()


def priming(event_id: str, retry_ms: int | None = None) -> bytes:
    """An event with an id and empty data, so the client has a ``Last-Event-ID`` to resume from."""
    retry = f"retry: {retry_ms}\n" if retry_ms is not None else ""
    return f"id: {event_id}\n{retry}data: \n\n".encode()


def comment(text: str = "keep-alive") -> bytes:
    """A comment line: ignored by clients, it keeps idle connections open."""
    return f": {text}\n\n".encode()


@dataclass
class Event:
    """One thing a stream carries: a message (with its event id, if resumable), or the end."""

    message: dict[str, Any] | None = None
    id: str | None = None
    close: bool = False

    def encode(self) -> bytes:
        return event(self.message, self.id)
