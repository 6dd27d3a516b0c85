"""This project's endpoint through ``mcp_app.wsgi.route``: served without Django's handler.

The same settings as ``mcp_app/gunicorn`` (``bench.servers.mcp_settings``); only the route in
front of the Django application differs.
"""

from __future__ import annotations

import mcp_app.wsgi
from bench.servers.wsgi import application as django_application

application = mcp_app.wsgi.route(django_application)
