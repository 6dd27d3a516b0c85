"""Threads that run calls, kept for reuse, as many as the calls in flight need.

A call may wait minutes for a client's answer (an elicitation, a sampling request), holding
its thread. A bounded pool would make later requests, the answers among them, queue behind
such calls; a new thread per call costs more than the call itself. So the pool grows when
every thread is busy and lets a thread go after it has been idle for a while.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from ..conf import conf

#: asgiref 3.12 and later tag a ``Local``'s data with the thread that set it, and show it in
#: no other thread unless it is moved there, as ``sync_to_async`` moves it. An older asgiref
#: shows a context's ``Local`` data in any thread: nothing to move (``None``).
_LOCAL_DATA: Any = None
with contextlib.suppress(ImportError):
    from asgiref.local import _Storage

    _LOCAL_DATA = _Storage

#: Whether a task run without the caller's ``Local`` data can be given none at all (asgiref
#: 3.12 and later): it then sees every ``Local`` at its default.
LOCALS_STAY_BEHIND = _LOCAL_DATA is not None

__all__ = ["Workers", "holds_data", "workers"]


logger = logging.getLogger("mcp_app")

#: How long an idle thread waits for work before it ends.
IDLE_SECONDS = 60.0


def batch_scheduling() -> bool:
    """Put this thread under Linux's ``SCHED_BATCH`` if ``BATCH_SCHEDULING``; whether it is.

    A thread handed a request is woken while the thread that handed it over (the event loop,
    or another worker) still holds the GIL. Under the default policy the kernel often runs the
    woken thread at once, on the same core, only for it to wait for the GIL and switch back.
    ``SCHED_BATCH`` takes the thread out of that wake-up preemption; it keeps its fair share
    of the processor. Only a thread under the default policy changes: a site that gave its
    process another policy keeps it. Threads and processes started from such a thread inherit
    the policy. Elsewhere, or when the kernel refuses, nothing changes.
    """
    try:
        if not conf.BATCH_SCHEDULING or not hasattr(os, "SCHED_BATCH"):
            return False
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            return False
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except Exception:
        # Never a reason for a thread not to serve: its task is already queued to it.
        logger.debug("SCHED_BATCH not applied", exc_info=True)
        return False
    return True


def _moved(context: contextvars.Context, fn: Callable[[], None], data_too: bool) -> None:
    """``fn()``, run in ``context`` (entered) once its ``Local`` data is this thread's, as
    asgiref moves it; without ``data_too``, once it holds none.

    Merely not moving the data would hide it only until something moves it on purpose:
    asgiref's ``async_to_sync`` moves whatever the context holds, and so does a task this
    one hands to the pool.
    """
    if _LOCAL_DATA is not None:
        thread = threading.get_ident()
        for var, value in list(context.items()):
            if isinstance(value, _LOCAL_DATA):
                var.set(_LOCAL_DATA(thread, value.data if data_too else {}))
    fn()


def holds_data(local: Any) -> bool:
    """Whether asgiref ``Local`` ``local`` may hold data in this thread: ``False`` only when it
    surely holds none (``True`` for anything this cannot look into).

    Asking the ``Local`` for a missing attribute raises and formats an ``AttributeError``
    inside it, which costs ten times as much as looking at its data.
    """
    var = getattr(getattr(local, "_storage", None), "_data", None)
    if _LOCAL_DATA is None or not isinstance(var, contextvars.ContextVar):
        return True
    storage = var.get(None)
    if storage is None:
        return False
    if not isinstance(storage, _LOCAL_DATA):
        return True
    # Another thread's data is not this thread's (asgiref shows it nowhere else).
    return storage.thread_id == threading.get_ident() and bool(storage.data)


class _Thread:
    def __init__(self, pool: Workers) -> None:
        self.pool = pool
        self.tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self.loop, name="mcp-call", daemon=True)
        self.thread.start()

    def loop(self) -> None:
        batch_scheduling()
        task: Callable[[], None] | None = None
        while True:
            try:
                task = self.tasks.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                if self.pool._retire(self):
                    return
                continue
            if task is None:
                return
            try:
                task()
            except BaseException:  # SystemExit too: it would end only this thread
                # A task reports its own outcome; one that fails to must not end the thread
                # the pool counts on.
                logger.exception("A task on an MCP call thread failed")
            del task
            self.pool._idle(self)


class Workers:
    """Run functions on reused threads; never queues behind a busy thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: list[_Thread] = []
        self.started = 0

    def run(self, fn: Callable[[], None], *, locals_too: bool = True) -> None:
        """Run ``fn()`` on a free thread (a new one if none is), in a copy of the caller's
        context; nothing waits for it, so it reports its own outcome.

        The copy carries asgiref ``Local`` data as ``sync_to_async`` carries it: the language,
        time zone, script prefix and URLconf that Django's handler and the site's middleware
        set for the request are the handler's too. With ``locals_too`` false the task's
        copy holds none of them: under ``LOCALS_STAY_BEHIND`` it sees the defaults.
        """
        context = contextvars.copy_context()

        def task() -> None:
            context.run(_moved, context, fn, locals_too)

        self._start(task)

    def _start(self, task: Callable[[], None]) -> None:
        with self._lock:
            worker = self._free.pop() if self._free else None
            if worker is None:
                self.started += 1
        if worker is None:
            worker = _Thread(self)
        worker.tasks.put(task)

    @property
    def idle(self) -> int:
        """Threads waiting for work."""
        return len(self._free)

    def _idle(self, worker: _Thread) -> None:
        with self._lock:
            self._free.append(worker)

    def _retire(self, worker: _Thread) -> bool:
        # Only a thread nobody can hand work to any more may end.
        with self._lock:
            if worker in self._free:
                self._free.remove(worker)
                return True
            return False

    def _forked(self) -> None:
        # A forked child has none of the parent's threads, and the lock may have been held
        # by one of them at the fork.
        self._lock = threading.Lock()
        self._free = []
        self.started = 0


#: The process's pool.
workers = Workers()
os.register_at_fork(after_in_child=workers._forked)
