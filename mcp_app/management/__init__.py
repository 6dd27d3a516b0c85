"""Management commands of ``mcp_app``."""
