from __future__ import annotations

import json
import threading
import time

import pytest
from django.test import Client

from tests.conftest import sse_messages

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = "application/json, text/event-stream"


def test_probe() -> None:
    c = Client()
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    r = c.post(
        "/mcp", data=json.dumps(body), content_type="application/json", headers={"Accept": ACCEPT}
    )
    print(r.status_code, r.headers, r.json())
    sid = r["Mcp-Session-Id"]
    h = {"Accept": ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "test_tool_with_logging", "arguments": {}},
    }
    r = c.post("/mcp", data=json.dumps(body), content_type="application/json", headers=h)
    print(r.status_code, r.headers, type(r.streaming_content))
    t = time.monotonic()
    content = r.streaming_content
    if hasattr(content, "__aiter__"):
        import asyncio

        async def go():
            async for chunk in content:
                print(time.monotonic() - t, threading.current_thread().name, chunk)

        asyncio.run(go())
    else:
        for chunk in content:
            print(time.monotonic() - t, chunk)
