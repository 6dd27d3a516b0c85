"""A URLconf that makes its own server, which nothing imports but the URLconf itself."""

from __future__ import annotations

from django.urls import path

from mcp_app import Server

made_here = Server("testing-urlconf-only")
made_here.add_tool(lambda arguments, context: "here", name="here")

urlpatterns = [path("only/mcp", made_here.urls)]
