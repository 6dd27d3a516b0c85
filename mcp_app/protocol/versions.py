"""Protocol revisions the app speaks and the reserved ``_meta`` keys of the stateless revision."""

from __future__ import annotations

from typing import Final

MODERN: Final = "2026-07-28"
#: Initialize-era revisions, newest first: negotiation answers the first one when the
#: client asks for something else.
LEGACY: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
ALL: Final = (MODERN, *LEGACY)
#: What an initialize-era request without ``MCP-Protocol-Version`` is taken to speak.
LEGACY_DEFAULT: Final = "2025-03-26"

PREFIX: Final = "io.modelcontextprotocol/"
META_PROTOCOL_VERSION: Final = PREFIX + "protocolVersion"
META_CLIENT_CAPABILITIES: Final = PREFIX + "clientCapabilities"
META_CLIENT_INFO: Final = PREFIX + "clientInfo"
META_LOG_LEVEL: Final = PREFIX + "logLevel"
META_SERVER_INFO: Final = PREFIX + "serverInfo"
META_SUBSCRIPTION_ID: Final = PREFIX + "subscriptionId"

#: RFC 5424 severities in ascending order, as MCP names them.
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


def is_modern(version: str) -> bool:
    """Whether ``version`` is a stateless (2026-07-28 or later) revision."""
    return version >= MODERN
