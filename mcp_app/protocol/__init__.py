"""The MCP protocol core: JSON-RPC, versions, request context and dispatch, with no Django."""
