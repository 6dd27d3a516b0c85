"""Ending this process's long-lived streams when its server shuts down gracefully.

A listen stream has no end of its own, so a server that waits for open connections before it
exits (uvicorn, a gunicorn worker) would wait for it until its shutdown timeout, or for ever.
Once told of the shutdown, each stream ends as the server would end it otherwise (a listen
request gets its final result) and its client opens a new one, on a worker that stays.

The server is heard through its own signal handlers: ``install()`` puts one in front of each
of them that notes the signal, then calls the server's. Django's app registry installs it
when the process already has a server's handlers (uvicorn and gunicorn set theirs before
they load the site); streams install it when they open in the main thread. Other setups call
``install()`` once the server's handlers are in place (gunicorn's ``post_worker_init`` hook,
say) or ``begin()`` themselves.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, TypeGuard

#: The signals a server shuts down gracefully on.
SIGNALS = (signal.SIGTERM, signal.SIGINT)

Handler = Callable[[int, FrameType | None], Any]


class _State:
    """This process's listeners, and the pipe its signal handler writes to."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.begun = False
        self.callbacks: dict[int, Callable[[], None]] = {}
        self.next_key = 0
        # A signal handler runs between two bytecodes of the main thread, which may hold any
        # lock at that moment: it only writes a byte, and a thread of its own does the rest.
        self.write_fd: int | None = None


_state = _State()


def _forked() -> None:
    # The parent's pipe and thread are not the child's; its handlers, if inherited, find no
    # pipe and only note the signal until the child's first stream makes one.
    global _state
    _state = _State()


os.register_at_fork(after_in_child=_forked)


def begun() -> bool:
    """Whether this process has begun to shut down."""
    return _state.begun


def begin() -> None:
    """End every open stream of this process, and any opened from now on, at once."""
    state = _state
    with state.lock:
        state.begun = True
        callbacks = list(state.callbacks.values())
        state.callbacks.clear()
    for callback in callbacks:
        callback()


def watch(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` (in another thread) once the process begins to shut down, or now if it
    has; returns the function that stops watching."""
    state = _state
    _ensure_reader(state)
    with state.lock:
        if not state.begun:
            key = state.next_key
            state.next_key += 1
            state.callbacks[key] = callback
            return lambda: _unwatch(state, key)
    callback()
    return lambda: None


def _unwatch(state: _State, key: int) -> None:
    with state.lock:
        state.callbacks.pop(key, None)


def _ensure_reader(state: _State) -> None:
    with state.lock:
        if state.write_fd is not None:
            return
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        state.write_fd = write_fd
    threading.Thread(target=_read, args=(state, read_fd), name="mcp-shutdown", daemon=True).start()


def _read(state: _State, read_fd: int) -> None:
    with contextlib.suppress(OSError):
        os.read(read_fd, 1)
    if state is _state:
        begin()


def _signalled() -> None:
    """In the signal handler: note the shutdown, and wake the reader (no lock is taken)."""
    state = _state
    state.begun = True
    if state.write_fd is not None:
        with contextlib.suppress(OSError):
            os.write(state.write_fd, b"\0")


class _Chained:
    """A signal handler that notes the shutdown, then calls the server's own handler."""

    def __init__(self, previous: Handler) -> None:
        self.previous = previous

    def __call__(self, signum: int, frame: FrameType | None) -> Any:
        _signalled()
        return self.previous(signum, frame)


def _is_server_handler(handler: Any) -> TypeGuard[Handler]:
    # Python's own default (KeyboardInterrupt) and the operating system's (the process just
    # ends) are no graceful shutdown that could wait for a stream.
    return callable(handler) and handler is not signal.default_int_handler


def install(signals: Iterable[int] = SIGNALS) -> bool:
    """Hear the server's graceful shutdown: put a handler in front of its own for ``signals``.

    Only in the main thread (the only one that may set signal handlers), and only in front of
    a handler a server set: Python's and the system's defaults are left alone. Idempotent.
    Whether any of ``signals`` is now heard.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    heard = False
    for signum in signals:
        current = signal.getsignal(signum)
        if isinstance(current, _Chained):
            heard = True
        elif _is_server_handler(current):
            signal.signal(signum, _Chained(current))
            heard = True
    return heard


def installed(signum: int = signal.SIGTERM) -> bool:
    """Whether the handler for ``signum`` is this module's."""
    return isinstance(signal.getsignal(signum), _Chained)
