"""The demo site's URLs: the admin and the MCP endpoint at ``/mcp``."""

from django.contrib import admin
from django.urls import path

import mcp_app
from mcp_app.views import metadata_path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp", mcp_app.site.urls),
    metadata_path(mcp_app.site, "mcp"),
]
