"""A queue that threads feed and that sync or async code, on whichever loop, reads."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from typing import Any


class Empty(Exception):
    """Nothing arrived within the timeout."""


class Pipe:
    """Items put from any thread; taken by a blocking ``get`` or an awaited ``aget``.

    The reading loop is looked up when a read starts, not when the pipe is made, so a stream
    body may be iterated on another loop than the view that built it (Django does that when
    it serves an async stream to a WSGI server or its test client).
    """

    def __init__(self) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._ready = threading.Condition()
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Any) -> None:
        with self._ready:
            self._items.append(item)
            self._ready.notify()
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            loop, future = waiter
            # A closed loop means its reader is gone: nothing to wake.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_wake, future)

    def get(self, timeout: float | None = None) -> Any:
        """Raises: Empty, when nothing arrives within ``timeout`` seconds."""
        with self._ready:
            if not self._ready.wait_for(lambda: bool(self._items), timeout):
                raise Empty
            return self._items.popleft()

    async def aget(self, timeout: float | None = None) -> Any:
        """Raises: Empty, when nothing arrives within ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        while True:
            with self._ready:
                if self._items:
                    return self._items.popleft()
                future: asyncio.Future[None] = loop.create_future()
                self._waiter = (loop, future)
            try:
                await asyncio.wait_for(future, timeout)
            except TimeoutError:
                with self._ready:
                    if self._items:
                        return self._items.popleft()
                raise Empty from None


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
