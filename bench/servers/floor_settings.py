"""The floor: Django with no middleware and one bare view (``floor_urls``)."""

from __future__ import annotations

SECRET_KEY = "bench-only-secret-key"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
# The two contrib apps nearly every site has (mcp_app's stored definitions refer to auth's
# permissions and groups); the same in every bench settings module, so memory compares fairly.
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
# No middleware at all, as in the mcp_app and django-mcpz bench settings, so the three
# differ only in what their view does.
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "bench.servers.floor_urls"
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True
