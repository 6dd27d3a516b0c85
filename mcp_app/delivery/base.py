"""The interface every delivery backend implements: publish to a channel, subscribe with a sink."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

#: Called with ``(channel, message)`` from any thread; it must not block.
Sink = Callable[[str, dict[str, Any]], None]
Unsubscribe = Callable[[], None]


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
