"""``manage.py`` commands: ``mcp_clean``."""
