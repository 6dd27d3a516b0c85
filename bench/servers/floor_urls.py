"""The floor's one view: reads the request and returns a fixed JSON-RPC result.

It does no MCP work, so what it costs is Django's own request and response handling:
the least any Django view can cost for this call.
"""

from __future__ import annotations

import os
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from bench.wire import FIXED_RESULT


@csrf_exempt
def bare(request: HttpRequest) -> HttpResponse:
    # Read the body as any real endpoint must, so its transfer is part of the floor.
    request.body  # noqa: B018
    return HttpResponse(FIXED_RESULT, content_type="application/json")


@csrf_exempt
async def bare_async(request: HttpRequest) -> HttpResponse:
    # Under ASGI an async view skips Django's thread hop, as mcp_app's async view would
    # like to: the fairest floor for that server.
    request.body  # noqa: B018
    return HttpResponse(FIXED_RESULT, content_type="application/json")


_view: Any = bare_async if os.environ.get("BENCH_VIEW", "sync") == "async" else bare
urlpatterns = [path("mcp", _view)]
