"""This project's endpoint, bench-only: mcp_app alone, no middleware, DEBUG off.

``BENCH_VIEW`` picks ``MCP_APP["VIEW"]`` (``sync`` under gunicorn, ``async`` under
uvicorn) and ``BENCH_DB`` the SQLite file that ``bench.run`` migrates before starting.
Everything else is the product's default, so the numbers are what a new site gets.
"""

from __future__ import annotations

import json
import os


def _conn_max_age(value: str) -> int | None:
    return None if value.lower() == "none" else int(value)


SECRET_KEY = "bench-only-secret-key"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
# The two contrib apps nearly every site has (mcp_app's stored definitions refer to auth's
# permissions and groups); the same in every bench settings module, so memory compares fairly.
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "mcp_app"]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "bench.servers.mcp_urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        # A file, not ":memory:": the async view runs calls on pool threads, each with its
        # own connection, and initialize-era sessions must be found by all of them.
        "NAME": os.environ.get("BENCH_DB", "bench-mcp.sqlite3"),
        # Django's default (0: a new connection per request) unless BENCH_CONN_MAX_AGE says
        # otherwise ("none" keeps connections open), to weigh connecting against querying.
        "CONN_MAX_AGE": _conn_max_age(os.environ.get("BENCH_CONN_MAX_AGE", "0")),
        # SQLite's own journal unless BENCH_SQLITE_INIT says otherwise (for example
        # "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"), to weigh what commits cost.
        "OPTIONS": {"init_command": os.environ.get("BENCH_SQLITE_INIT", "")},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
# BENCH_MCP_APP (JSON) overrides product settings for an A/B run, e.g. '{"AUDIT": false}';
# the table in docs/benchmarks.md is measured without it.
MCP_APP = {
    "VIEW": os.environ.get("BENCH_VIEW", "async"),
    **json.loads(os.environ.get("BENCH_MCP_APP", "{}")),
}
