"""Model fields of the app."""

from __future__ import annotations

import json
from typing import Any

from django.db import models

#: The one key of the wrapper a value is stored in when the database could not hold it as is.
WRAPPED = "$mcp_app.json"


class WireJSONField(models.JSONField):
    """A ``JSONField`` for what clients send, which may hold NUL characters.

    PostgreSQL's ``jsonb`` refuses a string with a NUL in it. Such a value is stored as its
    JSON text inside a one-key wrapper (``{"$mcp_app.json": "..."}``), where the NUL is six
    plain characters, and read back unwrapped: nothing is lost, on any database. A value that
    looks like the wrapper itself is wrapped too, so reading never mistakes one for the other.
    """

    def get_prep_value(self, value: Any) -> Any:
        if value is not None and _needs_wrapping(value):
            value = {WRAPPED: json.dumps(value, cls=self.encoder)}
        return super().get_prep_value(value)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        if _is_wrapper(value):
            return json.loads(value[WRAPPED], cls=self.decoder)
        return value


def _is_wrapper(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(WRAPPED), str)


def _needs_wrapping(value: Any) -> bool:
    return _is_wrapper(value) or holds_nul(value)


def holds_nul(value: Any) -> bool:
    """Whether JSON ``value`` has a NUL character in any of its strings, keys included."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False
