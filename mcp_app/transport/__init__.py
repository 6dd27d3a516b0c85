"""Transports that carry MCP messages to the protocol core: streamable HTTP and stdio."""
