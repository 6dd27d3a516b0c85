"""Delivery of notifications across threads and processes, through a backend named in settings."""

from __future__ import annotations

import functools

from .base import Backend, Sink

__all__ = ["Backend", "Sink", "backend"]


def backend() -> Backend:
    """The configured backend (``MCP_APP["DELIVERY_BACKEND"]``), one instance per process."""
    from ..conf import conf

    return _load(conf.DELIVERY_BACKEND)


@functools.cache
def _load(path: str) -> Backend:
    from django.utils.module_loading import import_string

    cls = import_string(path)
    return cls()  # type: ignore[no-any-return]
