"""Ending this process's long-lived streams when its server shuts down gracefully.

A listen stream has no end of its own, so a server that waits for open connections before it
exits (uvicorn, a gunicorn worker) would wait for it until its shutdown timeout, or for ever.
Once told of the shutdown, each stream ends as the server would end it otherwise (a listen
request gets its final result) and its client opens a new one, on a worker that stays.

The server is heard through its own signal handlers: ``install()`` puts one in front of each
of them that notes the signal, then calls the server's. Django's app registry installs it
when the process already has a server's handlers (uvicorn and gunicorn set theirs before
they load the site); streams install it for ``SIGTERM`` when they open in the main thread.
Elsewhere, point gunicorn's ``post_worker_init`` hook at ``post_worker_init`` below, call
``install()`` once the server's handlers are in place, or call ``begin()``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, TypeGuard

logger = logging.getLogger("mcp_app")

#: The signals a server shuts down gracefully on.
SIGNALS = (signal.SIGTERM, signal.SIGINT)

Handler = Callable[[int, FrameType | None], Any]


class _State:
    """This process's listeners, and the pipe that wakes the thread which ends them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.begun = False
        self.callbacks: dict[int, Callable[[], None]] = {}
        self.next_key = 0
        # begin() may run in a signal handler, between two bytecodes of a thread that holds
        # any lock at that moment: it only writes a byte, and a thread of its own does the rest.
        self.fds: tuple[int, int] | None = None

    def close(self) -> None:
        """Close the pipe (in a forked child, where no thread reads it)."""
        fds, self.fds = self.fds, None
        for fd in fds or ():
            with contextlib.suppress(OSError):
                os.close(fd)


_state = _State()


def _forked() -> None:
    # The parent's thread is not the child's: the child starts afresh, and makes its own pipe
    # when its first stream opens. Its handlers, if inherited, only note the signal till then.
    global _state
    _state.close()
    _state = _State()


os.register_at_fork(after_in_child=_forked)


def begun() -> bool:
    """Whether this process has begun to shut down."""
    return _state.begun


def begin() -> None:
    """End every open stream of this process, and any opened from now on (for good).

    Takes no lock, so a signal handler may call it: the streams end right after, in a thread
    of their own.
    """
    state = _state
    state.begun = True
    if state.fds is not None:
        with contextlib.suppress(OSError):
            os.write(state.fds[1], b"\0")


def watch(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` once the process begins to shut down (in another thread), or now if it
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
        if state.fds is not None:
            return
        state.fds = os.pipe()
        for fd in state.fds:
            os.set_blocking(fd, False)
    threading.Thread(target=_read, args=(state,), name="mcp-shutdown", daemon=True).start()


def _read(state: _State) -> None:
    fds = state.fds
    if fds is None:
        return
    # select() and not a blocking read: gevent and eventlet make select() cooperative, not
    # os.read(), and a worker of theirs must not block on this thread.
    with contextlib.suppress(OSError, ValueError):
        select.select([fds[0]], [], [])
    if state is not _state:
        return  # a test's state, or a parent's
    with state.lock:
        callbacks = list(state.callbacks.values())
        state.callbacks.clear()
    for callback in callbacks:
        try:
            callback()
        except Exception:
            logger.exception("Could not end a stream at shutdown")


class _Chained:
    """A signal handler that notes the shutdown, then calls the server's own handler."""

    def __init__(self, previous: Handler) -> None:
        self.previous = previous

    def __call__(self, signum: int, frame: FrameType | None) -> Any:
        begin()
        return self.previous(signum, frame)


def _is_server_handler(handler: Any) -> TypeGuard[Handler]:
    # Python's own default (KeyboardInterrupt) and the operating system's (the process just
    # ends) are no graceful shutdown that could wait for a stream; nor is asyncio.run()'s
    # SIGINT handler, which it only takes back if it is still the one installed.
    if not callable(handler) or handler is signal.default_int_handler:
        return False
    func = getattr(handler, "func", None)  # a functools.partial
    return getattr(func, "__name__", None) != "_on_sigint"


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
            if signum == signal.SIGTERM:
                # signal.signal() makes the signal interrupt system calls; a graceful stop
                # should not (gunicorn's workers ask for that too): they are restarted.
                signal.siginterrupt(signum, False)
            heard = True
    return heard


def installed(signum: int = signal.SIGTERM) -> bool:
    """Whether the handler for ``signum`` is this module's."""
    return isinstance(signal.getsignal(signum), _Chained)


def post_worker_init(worker: Any) -> None:
    """A gunicorn ``post_worker_init`` hook that installs the handler in each worker: needed
    with ``--preload`` and threaded workers, whose streams run outside the main thread."""
    install()
