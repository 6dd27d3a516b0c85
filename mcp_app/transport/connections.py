"""Letting go of a thread's stale database connections, as Django does around each request,
and what one statement may bind."""

from __future__ import annotations

import django.db
from django.db import connections

__all__ = ["KEYS_PER_DELETE", "close_old_connections", "drop_if_broken"]

#: Most rows a clean-up deletes by key in one statement: under the 999 values a statement may
#: bind on SQLite before 3.32, which Django still supports.
KEYS_PER_DELETE = 500


def close_old_connections() -> None:
    """What ``django.db.close_old_connections`` does: each database connection this thread
    has opened is closed if it is unusable or past ``CONN_MAX_AGE``.

    The thread's connections are looked up once each: each lookup of Django's per-thread
    store (an asgiref ``Local``) costs about as much as the check itself, and Django's own
    function looks each one up twice. A Django without that store is served by its own.
    """
    local = getattr(connections, "_connections", None)
    if local is None:
        django.db.close_old_connections()
        return
    for alias in connections:
        connection = getattr(local, alias, None)
        if connection is not None:
            connection.close_if_unusable_or_obsolete()


def drop_if_broken(alias: str) -> None:
    """Close this thread's connection to ``alias`` if it is open and no longer works (the
    server restarted, say): for a thread that keeps its connection between uses, whatever
    ``CONN_MAX_AGE`` and ``CONN_HEALTH_CHECKS`` say, and checks it before each use."""
    wrapper = connections[alias]
    if wrapper.connection is not None and not wrapper.is_usable():
        wrapper.close()
