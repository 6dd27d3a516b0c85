"""The ASGI application of whichever bench settings ``DJANGO_SETTINGS_MODULE`` names."""

from __future__ import annotations

from django.core.asgi import get_asgi_application

application = get_asgi_application()
