"""gunicorn settings for a test: the hook that hears a preloaded, threaded worker's shutdown."""

from mcp_app.shutdown import post_worker_init  # noqa: F401
