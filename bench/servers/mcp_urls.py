"""An ``add`` tool on its own ``mcp_app.Server("bench")`` at ``/mcp``."""

from __future__ import annotations

from typing import Any

from django.urls import path

import mcp_app
from bench import wire

server = mcp_app.Server("bench")


def add(arguments: dict[str, Any], context: mcp_app.RequestContext) -> str:
    return wire.add(arguments["a"], arguments["b"])


server.add_tool(
    add,
    name=wire.ADD_NAME,
    description=wire.ADD_DESCRIPTION,
    input_schema=wire.ADD_INPUT_SCHEMA,
)

urlpatterns = [path("mcp", server.urls)]
