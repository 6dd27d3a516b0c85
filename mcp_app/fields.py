"""Model fields of the app."""

from __future__ import annotations

import json
import re
from typing import Any

from django.db import models
from django.db.models.fields.json import KeyTransform

from .protocol.jsonrpc import any_string_matches

#: The one key of the wrapper a value is stored in when the database could not hold it as is.
WRAPPED = "$mcp_app.json"


class WireJSONField(models.JSONField):
    """A ``JSONField`` for what clients send, which may hold NUL characters.

    PostgreSQL's ``jsonb`` refuses a string with a NUL (or a lone surrogate) in it, and a
    NaN or an infinite number, which SQLite's JSON check refuses too. Such a
    value is stored as its JSON text inside a one-key wrapper (``{"$mcp_app.json": "..."}``),
    where the NUL is six plain characters, and read back unwrapped: nothing is lost, on any
    database. A value that looks like the wrapper itself is wrapped too, so reading never
    mistakes one for the other. Key lookups (``message__key``) do not see inside a wrapped
    value.
    """

    def get_prep_value(self, value: Any) -> Any:
        if value is not None and _needs_wrapping(value):
            value = {WRAPPED: json.dumps(value, cls=self.encoder)}
        return super().get_prep_value(value)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        if isinstance(expression, KeyTransform) or not _is_wrapper(value):
            # A key's value is part of a stored value, never a wrapper this field made.
            return value
        try:
            return json.loads(value[WRAPPED], cls=self.decoder)
        except ValueError:
            # Stored in the wrapper's shape by a plain JSONField, before this field.
            return value


def _is_wrapper(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(WRAPPED), str)


def _needs_wrapping(value: Any) -> bool:
    return _is_wrapper(value) or holds_unstorable(value)


#: What no PostgreSQL text or jsonb value holds: NUL, and lone UTF-16 surrogates (which no
#: UTF-8 text holds; a pair is one character in Python).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with U+FFFD for every NUL and lone surrogate."""
    # ASCII text holds no surrogate, and is checked for NUL without the regex.
    if text.isascii() and "\x00" not in text:
        return text
    return _UNSTORABLE.sub("\ufffd", text)


def holds_unstorable(value: Any) -> bool:
    """Whether JSON ``value`` has a NUL or a lone surrogate in any string (keys included), or
    a NaN or infinite number, which is not JSON (a handler's, or Python's parser's)."""
    return any_string_matches(value, _UNSTORABLE, non_finite=True)


class OrderedJSONField(models.JSONField):
    """A ``JSONField`` whose objects keep their keys in the order they were written.

    A database whose JSON type is binary (PostgreSQL's ``jsonb``; Django's
    ``has_native_json_field``) sorts an object's keys, and a tool's schema would list its
    properties in another order than its author's, which clients lay their forms out by.
    There the value is stored as its JSON text, a ``jsonb`` string, and read back parsed; a
    value stored before, an object, reads as it is. Key lookups (``schema__type``) do not see inside such a string; for a value whose
    root may itself be a string, use a plain ``JSONField``.
    """

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if value is None or hasattr(value, "as_sql") or not _sorts_keys(connection):
            return super().get_db_prep_value(value, connection, prepared)
        if not prepared:
            value = self.get_prep_value(value)
        return connection.ops.adapt_json_value(json.dumps(value, cls=self.encoder), self.encoder)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        if isinstance(value, str) and not isinstance(expression, KeyTransform):
            try:
                return json.loads(value, cls=self.decoder)
            except ValueError:
                return value
        return value


def _sorts_keys(connection: Any) -> bool:
    return bool(connection.features.has_native_json_field)
