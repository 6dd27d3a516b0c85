"""The demo site that serves django-mcp-app's examples and the conformance fixtures."""
