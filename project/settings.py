"""Settings for the demo site, read from the environment (and an optional ``.env``) by django-environ."""

from __future__ import annotations

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env(
    DEBUG=(bool, False),
    SECRET_KEY=(str, "django-insecure-demo-key-change-me"),
    ALLOWED_HOSTS=(list, ["localhost", "127.0.0.1", "[::1]"]),
    MCP_ALLOWED_ORIGINS=(list, []),
    MCP_VIEW=(str, "async"),
    MCP_DELIVERY_BACKEND=(str, "mcp_app.delivery.local.LocalBackend"),
    MCP_DELIVERY_POLL_SECONDS=(float, 0.5),
    MCP_RECHECK_SECONDS=(float, 1.0),
    REDIS_URL=(str, "redis://127.0.0.1:6379/0"),
)
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

SECRET_KEY = env("SECRET_KEY")
SECRET_KEY_FALLBACKS = env.list("SECRET_KEY_FALLBACKS", default=[])
DEBUG = env("DEBUG")
ALLOWED_HOSTS = env("ALLOWED_HOSTS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
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
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "project.asgi.application"
WSGI_APPLICATION = "project.wsgi.application"

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Many requests write at once (sessions, tasks, the audit writer): readers do not wait
    # for writers in WAL mode, and a writer waits its turn rather than failing at once.
    options = DATABASES["default"].setdefault("OPTIONS", {})
    options.setdefault("timeout", 20)  # unless DATABASE_URL names one
    options.setdefault("init_command", "PRAGMA journal_mode=WAL;")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
MEDIA_URL = "media/"
MEDIA_ROOT = BASE_DIR / "media"

MCP_APP = {
    "ALLOWED_ORIGINS": env("MCP_ALLOWED_ORIGINS"),
    "VIEW": env("MCP_VIEW"),
    "DELIVERY_BACKEND": env("MCP_DELIVERY_BACKEND"),
    "DELIVERY_POLL_SECONDS": env("MCP_DELIVERY_POLL_SECONDS"),
    "RECHECK_SECONDS": env("MCP_RECHECK_SECONDS"),
    "REDIS_URL": env("REDIS_URL"),
    # Unset: Django's middleware decides who calls; e.g. mcp_app.auth.BearerTokenAuthentication.
    "AUTHENTICATION_CLASSES": env.list("MCP_AUTHENTICATION_CLASSES", default=None),
    # E.g. rest_framework.permissions.IsAuthenticated.
    "PERMISSION_CLASSES": env.list("MCP_PERMISSION_CLASSES", default=[]),
    "THROTTLE_CLASSES": env.list("MCP_THROTTLE_CLASSES", default=[]),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="WARNING")},
}
