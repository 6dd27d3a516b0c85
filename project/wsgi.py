"""WSGI entry point for the demo site (``gunicorn project.wsgi``).

``mcp_app.wsgi.route`` serves the MCP endpoint without Django's handler and middleware;
``MCP_WSGI_ROUTE=0`` turns it off, so every request goes through Django's view path.
"""

import os
from typing import Any

from django.core.wsgi import get_wsgi_application

import mcp_app.wsgi

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

application: Any = get_wsgi_application()

if os.environ.get("MCP_WSGI_ROUTE", "1").lower() not in ("0", "false", "no", "off"):
    application = mcp_app.wsgi.route(application)
