"""App configuration: discovers ``mcp.py`` modules in installed apps once the registry is ready."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class SimpleMCPAppConfig(AppConfig):
    """The app without autodiscovery of ``mcp.py`` modules."""

    name = "mcp_app"
    verbose_name = "MCP"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            checks,  # noqa: F401  registers the system checks
            shutdown,
            signals,  # noqa: F401  connects the row-change receivers
        )

        # Under uvicorn and gunicorn, whose signal handlers are set before they load the site.
        shutdown.install()


class MCPAppConfig(SimpleMCPAppConfig):
    """The default: also imports every installed app's ``mcp`` module."""

    default = True

    def ready(self) -> None:
        super().ready()
        autodiscover_modules("mcp")
