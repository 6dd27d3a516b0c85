"""Definitions stored as rows, merged with the code definitions of a server."""

from __future__ import annotations

from .registry import PromptDef, ResourceDef, TemplateDef, ToolDef

Lists = tuple[list[ToolDef], list[ResourceDef], list[TemplateDef], list[PromptDef]]


def generation(server_name: str) -> int:
    """The server's row generation: changes with every committed edit of its rows."""
    return 0


def merge(
    server_name: str,
    tools: list[ToolDef],
    resources: list[ResourceDef],
    templates: list[TemplateDef],
    prompts: list[PromptDef],
) -> Lists:
    """The code definitions with the server's enabled rows applied, in listing order."""
    return tools, resources, templates, prompts
