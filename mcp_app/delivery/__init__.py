"""Delivery of notifications across threads and processes, through a backend named in settings."""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

from .base import GAP, Backend, Sink

__all__ = ["GAP", "Backend", "Sink", "backend", "tell"]

logger = logging.getLogger("mcp_app")


def backend() -> Backend:
    """The configured backend (``MCP_APP["DELIVERY_BACKEND"]``), one instance per process."""
    from ..conf import conf

    return _load(conf.DELIVERY_BACKEND)


@functools.cache
def _load(path: str) -> Backend:
    from django.utils.module_loading import import_string

    cls = import_string(path)
    return cls()  # type: ignore[no-any-return]


# A forked child (a preforking server's worker) builds its own: the parent's backend has
# threads, queued messages and subscribers that are the parent's, and locks they may hold.
os.register_at_fork(after_in_child=_load.cache_clear)


def tell(channel: str, message: dict[str, Any]) -> None:
    """Publish ``message`` on ``channel``; a backend failure is logged, not raised.

    For news sent after the change it tells of is made (a row written, a session ended):
    the request that made it is answered all the same, and whoever misses the news reads
    the change from the database later.
    """
    try:
        backend().publish(channel, message)
    except Exception:
        logger.exception("Could not publish on %s; its listeners learn of it later", channel)
