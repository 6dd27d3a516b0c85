"""The interface every delivery backend implements: publish to a channel, subscribe with a sink."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

#: Called with ``(channel, message)`` from any thread; it must not block.
Sink = Callable[[str, dict[str, Any]], None]
Unsubscribe = Callable[[], None]

#: Delivered to every sink once a backend is back after losing its connection: messages on
#: the sink's channels may have been lost meanwhile, so what it follows is to be read again.
GAP: dict[str, Any] = {"gap": True}

logger = logging.getLogger("mcp_app")


class Backend:
    """Carries small JSON messages from publishers to subscribed sinks.

    ``publish`` may be called from any thread of any process sharing the backend; every sink
    subscribed to the channel at that moment, in any of those processes, is called once with
    the message. Delivery is at most once: a subscriber that was not there misses it.
    """

    def publish(self, channel: str, message: dict[str, Any]) -> None:
        raise NotImplementedError

    def subscribe(self, channels: Iterable[str], sink: Sink) -> Unsubscribe:
        """Start calling ``sink`` for messages on ``channels``; call the result to stop."""
        raise NotImplementedError


class SinkTable:
    """This process's sinks by channel: the bookkeeping every backend shares.

    ``_lock`` also guards whatever else a backend keeps (its poller, its listener), so the
    ``_add_sinks``/``_remove_sinks`` helpers expect it held; ``_deliver`` takes it itself.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sinks: dict[str, dict[int, Sink]] = {}
        self._next = 0

    def _add_sinks(self, names: list[str], sink: Sink) -> int:
        self._next += 1
        for name in names:
            self._sinks.setdefault(name, {})[self._next] = sink
        return self._next

    def _remove_sinks(self, names: list[str], token: int) -> None:
        for name in names:
            bucket = self._sinks.get(name)
            if bucket is not None:
                bucket.pop(token, None)
                if not bucket:
                    del self._sinks[name]

    def _deliver(self, channel: str, message: dict[str, Any]) -> None:
        with self._lock:
            sinks = list(self._sinks.get(channel, {}).values())
        self._call(sinks, channel, message)

    @staticmethod
    def _call(sinks: list[Sink], channel: str, message: dict[str, Any]) -> None:
        for sink in sinks:
            try:
                sink(channel, message)
            except Exception:  # one broken subscriber must not stop the others
                logger.exception("delivery sink failed on %s", channel)
