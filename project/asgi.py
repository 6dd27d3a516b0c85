"""ASGI entry point for the demo site (``uvicorn project.asgi:application``).

``mcp_app.asgi.route`` serves the MCP endpoint without Django's handler and middleware;
``MCP_ASGI_ROUTE=0`` turns it off, so every request goes through Django's async view path.
"""

import os
from typing import Any

from django.conf import settings
from django.core.asgi import get_asgi_application

import mcp_app.asgi

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

application: Any = get_asgi_application()

if settings.DEBUG:
    # Serve the admin's static files in the demo, as runserver would.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    application = ASGIStaticFilesHandler(application)

if os.environ.get("MCP_ASGI_ROUTE", "1").lower() not in ("0", "false", "no", "off"):
    application = mcp_app.asgi.route(application)
