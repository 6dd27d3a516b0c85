"""The demo app: the seed examples and the conformance fixtures, registered from ``mcp.py``."""
