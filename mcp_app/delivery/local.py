"""The in-process backend: publishers call the sinks of this process directly."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from .base import Backend, Sink, SinkTable, Unsubscribe

logger = logging.getLogger("mcp_app")


class LocalBackend(SinkTable, Backend):
    """Delivers within one process; the default, and enough for a single worker."""

    def publish(self, channel: str, message: dict[str, Any]) -> None:
        self._deliver(channel, message)

    def subscribe(self, channels: Iterable[str], sink: Sink) -> Unsubscribe:
        names = list(dict.fromkeys(channels))
        with self._lock:
            token = self._add_sinks(names, sink)

        def unsubscribe() -> None:
            with self._lock:
                self._remove_sinks(names, token)

        return unsubscribe

    def subscriber_count(self, channel: str) -> int:
        with self._lock:
            return len(self._sinks.get(channel, {}))
