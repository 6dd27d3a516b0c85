"""System checks for the app's settings, with stable IDs ``mcp_app.E00x`` and ``mcp_app.W00x``."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, register

from .conf import DEFAULTS, conf


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from django.conf import settings

    errors: list[CheckMessage] = []
    raw = getattr(settings, "MCP_APP", None) or {}
    if not isinstance(raw, dict):
        return [Error("MCP_APP must be a dict.", id="mcp_app.E001")]
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        errors.append(
            Error(
                f"Unknown MCP_APP settings: {', '.join(unknown)}.",
                hint=f"Known settings: {', '.join(sorted(DEFAULTS))}.",
                id="mcp_app.E002",
            )
        )
    if conf.VIEW not in ("async", "sync"):
        errors.append(Error("MCP_APP['VIEW'] must be 'async' or 'sync'.", id="mcp_app.E003"))
    if not isinstance(raw.get("ALLOWED_ORIGINS", []), list | tuple):
        errors.append(Error("MCP_APP['ALLOWED_ORIGINS'] must be a list.", id="mcp_app.E004"))
    if conf.REQUEST_STATE_MAX_AGE_MS <= 0:
        errors.append(
            Error("MCP_APP['REQUEST_STATE_MAX_AGE_MS'] must be positive.", id="mcp_app.E005")
        )
    return errors
