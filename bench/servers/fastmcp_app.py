"""FastMCP (the ``fastmcp`` package): stateless, JSON responses, an ASGI app for uvicorn.

Runs from ``.tools/bench-venv``, where ``bench.run`` installs it beside django-mcpz.
"""

from __future__ import annotations

from fastmcp import FastMCP

from bench import wire

server = FastMCP("bench")


def add(a: int, b: int) -> str:
    return wire.add(a, b)


# output_schema=None: the other servers answer with one text block and no
# structuredContent, so this one must not do the extra work of building both.
server.tool(add, name=wire.ADD_NAME, description=wire.ADD_DESCRIPTION, output_schema=None)


# Stateless with JSON responses: no session, no SSE stream, one response per POST, as the
# 2026-07-28 call is served by the other servers. Its Host and Origin checks stay as
# FastMCP sets them by default.
app = server.http_app(path="/mcp", stateless_http=True, json_response=True)
