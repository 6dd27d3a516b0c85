"""django-mcpz's peer server (run from ``.tools/bench-venv``): no middleware, one view."""

from __future__ import annotations

SECRET_KEY = "bench-only-secret-key"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
# The server object is a plain view: none of django-mcpz's own apps (tokens, OAuth) are
# needed for a public server. The two contrib apps are those every bench settings module
# has, so memory compares fairly.
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "bench.servers.mcpz_urls"
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True
