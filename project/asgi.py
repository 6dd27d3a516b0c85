"""ASGI entry point for the demo site (``uvicorn project.asgi:application``)."""

import os

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

application = get_asgi_application()

if settings.DEBUG:
    # Serve the admin's static files in the demo, as runserver would.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    application = ASGIStaticFilesHandler(application)
