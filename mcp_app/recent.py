"""What a process read from the database lately, trusted until a change is announced.

The catalog's generation and initialize-era sessions are read on nearly every call, and
change rarely. A process keeps what it read and drops it when it changes the value itself,
when the delivery backend says another process did, and at the latest ``RECHECK_SECONDS``
after reading it, for changes nothing announces.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .conf import conf

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """Values by key, each trusted for ``RECHECK_SECONDS`` after it was read."""

    def __init__(self, limit: int | None = None) -> None:
        self._lock = threading.Lock()
        self._entries: dict[K, tuple[V, float]] = {}
        # Moved by every forget: a read that started before one must not store its value.
        self._epoch = 0
        self._limit = limit
        self._watching: set[tuple[int, str]] = set()
        _every.add(self)

    def get(self, key: K) -> V | None:
        """The value, if read lately and not forgotten since."""
        entry = self._entries.get(key)
        if entry is None or entry[1] <= time.monotonic():
            return None
        return entry[0]

    def epoch(self) -> int:
        """Take before reading a value; ``store`` it with this."""
        return self._epoch

    def store(self, key: K, value: V, epoch: int) -> None:
        """Keep ``value``, unless something was forgotten since ``epoch`` was taken."""
        ttl = conf.RECHECK_SECONDS
        with self._lock:
            if epoch == self._epoch and ttl > 0:
                if self._limit is not None and len(self._entries) >= self._limit:
                    self._entries.clear()
                self._entries[key] = (value, time.monotonic() + ttl)

    def replace(self, key: K, value: V) -> None:
        """Change a kept value, trusted no longer than the one it replaces."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries[key] = (value, entry[1])

    def forget(self, key: K | None = None) -> None:
        """Drop ``key``'s value (every value by default)."""
        with self._lock:
            self._epoch += 1
            if key is None:
                self._entries.clear()
            else:
                self._entries.pop(key, None)

    def watch(self, channel: str, key_of: Callable[[dict[str, Any]], K]) -> None:
        """Forget ``key_of(message)`` for every message another process publishes on ``channel``."""
        from .delivery import backend
        from .delivery.local import LocalBackend

        delivery = backend()
        token = (id(delivery), channel)
        if token in self._watching or isinstance(delivery, LocalBackend):
            # The in-process backend carries only this process's changes, forgotten already.
            return
        with self._lock:
            if token in self._watching:
                return
            self._watching.add(token)
        delivery.subscribe([channel], functools.partial(self._heard, key_of))

    def _heard(self, key_of: Callable[[dict[str, Any]], K], _channel: str, message: Any) -> None:
        # After a gap, any value may have changed unannounced.
        self.forget(None if message.get("gap") else key_of(message))


#: Every ``Recent``, to be reset in a forked child.
_every: weakref.WeakSet[Recent[Any, Any]] = weakref.WeakSet()


def _forked() -> None:
    # A forked child builds its own delivery backend, with none of the parent's subscriptions:
    # what it keeps is trusted only once it watches for changes again, on the next read.
    for recent in list(_every):
        recent._lock = threading.Lock()
        recent._entries.clear()
        recent._watching.clear()
        recent._epoch += 1


os.register_at_fork(after_in_child=_forked)
