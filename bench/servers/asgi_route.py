"""This project's endpoint through ``mcp_app.asgi.route``: served without Django's handler.

The same settings as ``mcp_app/uvicorn`` (``bench.servers.mcp_settings``); only the route in
front of the Django application differs.
"""

from __future__ import annotations

import mcp_app.asgi
from bench.servers.asgi import application as django_application

application = mcp_app.asgi.route(django_application)
