"""The error tree: every error the app raises descends from ``MCPAppError``."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import SuspiciousOperation

__all__ = [
    "AlreadyRegistered",
    "DefinitionError",
    "MCPAppError",
    "NotRegistered",
    "SuspiciousRequestState",
]


class MCPAppError(Exception):
    """The root of every error this app raises."""


class DefinitionError(MCPAppError, ValueError):
    """A tool, resource, template or prompt was defined with bad attributes."""


class AlreadyRegistered(DefinitionError):
    """A definition of that kind and name is already registered on the server."""

    def __init__(self, kind: str, name: str, existing: Any, new: Any) -> None:
        super().__init__(
            f"{kind} {name!r} is already registered by {_describe(existing)}; "
            f"cannot register {_describe(new)} under the same name"
        )
        self.kind = kind
        self.name = name


class NotRegistered(MCPAppError, LookupError):
    """No definition of that kind and name is registered on the server."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"{kind} {name!r} is not registered")
        self.kind = kind
        self.name = name


class SuspiciousRequestState(SuspiciousOperation):
    """A ``requestState`` failed verification; logged to ``django.security``."""


def _describe(handler: Any) -> str:
    module = getattr(handler, "__module__", None)
    qualname = getattr(handler, "__qualname__", None)
    if module and qualname:
        return f"{module}.{qualname}"
    return repr(handler)
