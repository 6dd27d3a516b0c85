"""The in-process backend: publishers call the sinks of this process directly."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from .base import Backend, Sink, Unsubscribe

logger = logging.getLogger("mcp_app")


class LocalBackend(Backend):
    """Delivers within one process; the default, and enough for a single worker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sinks: dict[str, dict[int, Sink]] = {}
        self._next = 0

    def publish(self, channel: str, message: dict[str, Any]) -> None:
        with self._lock:
            sinks = list(self._sinks.get(channel, {}).values())
        for sink in sinks:
            try:
                sink(channel, message)
            except Exception:  # one broken subscriber must not stop the others
                logger.exception("delivery sink failed on %s", channel)

    def subscribe(self, channels: Iterable[str], sink: Sink) -> Unsubscribe:
        names = list(dict.fromkeys(channels))
        with self._lock:
            self._next += 1
            token = self._next
            for name in names:
                self._sinks.setdefault(name, {})[token] = sink

        def unsubscribe() -> None:
            with self._lock:
                for name in names:
                    bucket = self._sinks.get(name)
                    if bucket is not None:
                        bucket.pop(token, None)
                        if not bucket:
                            del self._sinks[name]

        return unsubscribe

    def subscriber_count(self, channel: str) -> int:
        with self._lock:
            return len(self._sinks.get(channel, {}))
