"""What every benchmarked server is asked and must answer: one ``tools/call`` of ``add``.

Standard library only: the django-mcpz servers import this from their own virtualenv.
"""

from __future__ import annotations

import json
from typing import Any

MODERN = "2026-07-28"
LEGACY = "2025-11-25"

#: The one tool every server defines: two integers in, their sum out as one text block.
ADD_NAME = "add"
ADD_DESCRIPTION = "Add two integers."
ADD_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
ARGUMENTS = {"a": 1, "b": 2}
#: What the Lua check and the start-up check look for: a text block holding the sum.
EXPECTED_TEXT = "3"


def add(a: int, b: int) -> str:
    """The tool's body, shared so every server does the same work."""
    return str(a + b)


MODERN_BODY: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {
        "name": ADD_NAME,
        "arguments": ARGUMENTS,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    },
}
MODERN_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN,
    "Mcp-Method": "tools/call",
    "Mcp-Name": ADD_NAME,
}

#: The initialize-era call: no ``_meta``, the session named by a header instead.
LEGACY_BODY: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": ADD_NAME, "arguments": ARGUMENTS},
}


def legacy_headers(session_id: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": LEGACY,
        "Mcp-Session-Id": session_id,
    }


#: The floor's and the ceiling's answer, encoded once: what a server that did no MCP work
#: at all would send back (the same shape the real servers send for this call).
FIXED_RESULT: bytes = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "resultType": "complete",
            "content": [{"type": "text", "text": EXPECTED_TEXT}],
            "isError": False,
        },
    },
    separators=(",", ":"),
).encode()


def answers_sum(body: bytes) -> bool:
    """Whether a response body (JSON, or SSE carrying JSON) holds the expected text block.

    Mirrors the Lua check, which cannot parse JSON and so matches the text block with
    any whitespace after the colon.
    """
    text = body.decode("utf-8", "replace")
    compact = text.replace('": "', '":"')
    return f'"text":"{EXPECTED_TEXT}"' in compact
