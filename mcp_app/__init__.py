"""Serve the Model Context Protocol from a Django site: the public API."""

from __future__ import annotations

from .content import (
    audio,
    content,
    embedded_blob,
    embedded_text,
    image,
    resource_link,
    text,
    tool_error,
)
from .exceptions import AlreadyRegistered, DefinitionError, MCPAppError, NotRegistered
from .input import elicit, elicit_url, input_required, roots, sample
from .protocol.context import RequestContext
from .protocol.jsonrpc import ProtocolError, ResourceNotFound
from .protocol.tasks import run_as_task
from .registry import PromptArgument
from .rows import row_handler
from .server import Server, servers, site

__version__ = "0.1.0"

tool = site.tool
resource = site.resource
resource_template = site.resource_template
prompt = site.prompt
add_tool = site.add_tool
add_resource = site.add_resource
add_resource_template = site.add_resource_template
add_prompt = site.add_prompt

__all__ = [
    "AlreadyRegistered",
    "DefinitionError",
    "MCPAppError",
    "NotRegistered",
    "PromptArgument",
    "ProtocolError",
    "RequestContext",
    "ResourceNotFound",
    "Server",
    "add_prompt",
    "add_resource",
    "add_resource_template",
    "add_tool",
    "audio",
    "content",
    "elicit",
    "elicit_url",
    "embedded_blob",
    "embedded_text",
    "image",
    "input_required",
    "prompt",
    "resource",
    "resource_link",
    "resource_template",
    "roots",
    "row_handler",
    "run_as_task",
    "sample",
    "servers",
    "site",
    "text",
    "tool",
    "tool_error",
]
