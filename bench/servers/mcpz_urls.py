"""An ``add`` tool on a django-mcpz ``MCPServer``, routed as a view at ``/mcp``.

django-mcpz reads a tool's input schema from a msgspec ``Struct`` annotation; its server
is a synchronous view, which Django runs on a thread under ASGI.
"""

from __future__ import annotations

import msgspec  # type: ignore[import-not-found]
from django.http import HttpRequest
from django.urls import path
from django_mcpz.server import MCPServer, public  # type: ignore[import-not-found]

from bench import wire


class AddParams(msgspec.Struct):  # type: ignore[misc]
    a: int
    b: int


server = MCPServer(name="bench", version="1.0.0", auth=public)


@server.tool(name=wire.ADD_NAME, description=wire.ADD_DESCRIPTION)  # type: ignore[untyped-decorator]
def add(request: HttpRequest, params: AddParams) -> str:
    return wire.add(params.a, params.b)


urlpatterns = [path("mcp", server)]
