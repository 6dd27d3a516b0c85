"""Settings for the test suite: the demo site's apps on an in-memory database."""

from __future__ import annotations

import os
import tempfile

import environ

env = environ.Env()

SECRET_KEY = "tests-secret-key-not-for-production"
SECRET_KEY_FALLBACKS: list[str] = []
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "oauth2_provider",
    "mcp_app",
    "project.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {
    "default": env.db("TEST_DATABASE_URL", default="sqlite://:memory:"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, as sites run SQLite: threads of their own (a task's work, a stream's call)
    # wait for each other's writes there, where the shared in-memory database refuses at once.
    DATABASES["default"]["TEST"] = {
        "NAME": os.path.join(tempfile.gettempdir(), f"mcp_app_tests_{os.getpid()}.sqlite3")
    }
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
STATIC_URL = "static/"
# Audit rows are written in the request's thread: a writer thread on a connection of its own
# would wait on the locks of each test's transaction (tests/test_audit.py tests it deferred).
MCP_APP: dict[str, object] = {
    "VIEW": os.environ.get("MCP_VIEW", "async"),
    "AUDIT_FLUSH_SECONDS": 0,
    # Most tests of input and failures look at what the per-attempt transaction undoes;
    # tests/test_conf.py and tests/test_transport_http.py cover the default (None).
    "ATOMIC": True,
}
