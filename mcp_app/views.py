"""The OAuth 2.0 protected resource metadata view (RFC 9728) and the URL pattern that routes it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, re_path

from . import auth

if TYPE_CHECKING:
    from .server import Server

__all__ = ["WELL_KNOWN", "metadata_path", "protected_resource_metadata"]

WELL_KNOWN = ".well-known/oauth-protected-resource"
#: The document is public and the same for everyone: browser-based clients may read it
#: from any origin, and caches may keep it for a while.
PUBLIC_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Cache-Control": "public, max-age=600",
}


def protected_resource_metadata(request: HttpRequest, resource_path: str = "/mcp") -> HttpResponse:
    """Answer GET with the metadata of the endpoint at ``resource_path``, as JSON.

    Settings give its fields (``MCP_APP["RESOURCE_METADATA"]``); ``resource`` is the
    endpoint's absolute URL on the requested host. OPTIONS answers a CORS preflight.
    """
    if request.method == "OPTIONS":
        response = HttpResponse(status=204, headers=PUBLIC_HEADERS)
        response["Access-Control-Allow-Methods"] = "GET, HEAD, OPTIONS"
        response["Access-Control-Allow-Headers"] = "*"
        return response
    if request.method not in ("GET", "HEAD"):
        return JsonResponse(
            {"error": "method_not_allowed", "error_description": "Use GET."},
            status=405,
            headers={"Allow": "GET, HEAD, OPTIONS"},
        )
    metadata = auth.protected_resource_metadata(request, resource_path)
    return JsonResponse(metadata, headers=PUBLIC_HEADERS, json_dumps_params={"indent": 2})


def metadata_path(server: Server | str, route: str) -> URLPattern:
    """The URL pattern of the metadata of an endpoint routed at ``route``, for the root URLconf.

    For ``path("mcp", site.urls)`` add ``metadata_path(site, "mcp")``: it serves
    ``/.well-known/oauth-protected-resource/mcp`` (RFC 9728 inserts the well-known prefix
    before the endpoint's path), where the endpoint's 401 answers point clients. Named
    ``<server name>-resource-metadata``.

    Raises:
        ValueError: ``route`` is empty.
    """
    clean = route.strip("/")
    if not clean:
        raise ValueError("route is the endpoint's path, such as 'mcp'")
    name = server if isinstance(server, str) else server.name
    return re_path(
        rf"^{re.escape(WELL_KNOWN)}/{re.escape(clean)}/?$",
        protected_resource_metadata,
        kwargs={"resource_path": f"/{clean}"},
        name=f"{name}-resource-metadata",
    )
