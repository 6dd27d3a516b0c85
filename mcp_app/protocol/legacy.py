"""The initialize-era wire (2025-03-26 to 2025-11-25): negotiation and what differs from 2026-07-28."""

from __future__ import annotations

from typing import Any

from . import versions

JSON = dict[str, Any]

#: Methods only the initialize era serves, besides the engine's common table.
OWN_METHODS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)


def negotiate(requested: Any) -> str:
    """Echo a supported requested version, else answer with the newest initialize-era one."""
    if isinstance(requested, str) and requested in versions.LEGACY:
        return requested
    return versions.LEGACY[0]


def capabilities_for(version: str, capabilities: JSON) -> JSON:
    """Drop what a revision does not know from the server's capabilities."""
    caps = dict(capabilities)
    caps.pop("extensions", None)
    if version < "2025-03-26":
        caps.pop("completions", None)
    return caps


def server_info_for(version: str, info: JSON) -> JSON:
    if version >= "2025-11-25":
        return dict(info)
    # Older revisions know only name, version (and, from 2025-06-18, title).
    keep = ("name", "version", "title") if version >= "2025-06-18" else ("name", "version")
    return {k: v for k, v in info.items() if k in keep}
