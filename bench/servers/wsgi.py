"""The WSGI application of whichever bench settings ``DJANGO_SETTINGS_MODULE`` names."""

from __future__ import annotations

from django.core.wsgi import get_wsgi_application

application = get_wsgi_application()
