"""The official Python SDK's ``MCPServer``: stateless, JSON responses, an ASGI app for uvicorn."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from bench import wire

server = MCPServer("bench", version="1.0.0", log_level="WARNING")


# structured_output=False: the other servers answer with one text block and no
# structuredContent, so this one must not do the extra work of building both.
@server.tool(name=wire.ADD_NAME, description=wire.ADD_DESCRIPTION, structured_output=False)
def add(a: int, b: int) -> str:
    return wire.add(a, b)


# Stateless with JSON responses: no session, no SSE stream, one response per POST, as the
# 2026-07-28 call is served by the other servers.
app = server.streamable_http_app(stateless_http=True, json_response=True)
