"""The database backend: messages are rows of one table, polled by a thread in every process."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import Max
from django.utils import timezone

from ..conf import conf
from ..transport.connections import drop_if_broken
from .base import Backend, Sink, SinkTable, Unsubscribe

if TYPE_CHECKING:
    from ..models import DeliveryMessage

logger = logging.getLogger("mcp_app")

#: Longest wait of ``publish`` for its row to be written.
PUBLISH_WAIT = 10.0
#: Longest wait of ``subscribe`` for a new poller to learn where the table ends.
START_WAIT = 2.0
#: Seconds before a failed deletion of old rows is tried again.
CLEAN_RETRY = 5.0
#: Longest pause between polls while the database keeps failing.
MAX_BACKOFF = 30.0
#: Above this many channels the poller reads every new row and filters in Python, since
#: databases limit the parameters of one query (SQLite to 999 on old builds).
MAX_IN_CHANNELS = 500


def _alias() -> str:
    return conf.DATABASE_ALIAS


def _model() -> type[DeliveryMessage]:
    # Imported late: backends are built lazily, but this module may be imported before apps load.
    from ..models import DeliveryMessage

    return DeliveryMessage


@dataclass(eq=False)
class _Job:
    channel: str
    message: dict[str, Any]
    waited: bool
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


@dataclass(eq=False)
class _Poller:
    stop: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)
    failing: bool = False
    thread: threading.Thread | None = None


class DatabaseBackend(SinkTable, Backend):
    """Delivers through the ``DeliveryMessage`` table: any Django database, no other service.

    ``publish`` inserts a row through a writer thread of this process, so it never touches the
    caller's connection or transaction. A poller thread, started by the first ``subscribe``
    and stopped when the last sink goes, reads the rows of subscribed channels every
    ``DELIVERY_POLL_SECONDS`` (at once for rows this process wrote) and calls the sinks.

    Ids may become visible out of order (PostgreSQL allocates them before commit), so the
    poller re-reads the ids of the last ``DELIVERY_REORDER_SECONDS``, remembering which it
    delivered: a row committed late within that window is delivered once, in commit order.
    Rows older than ``DELIVERY_RETENTION_SECONDS`` are deleted by whichever thread of any
    process comes to it first. The poller and the writer each keep one connection for as
    long as they run, whatever ``CONN_MAX_AGE`` says, replaced once it fails.
    """

    def __init__(self) -> None:
        super().__init__()
        self._poller: _Poller | None = None
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        # The newest id the poller has read, and by subscription the newest when it began:
        # rows kept for reordering that no one was subscribed to are not news to it.
        self._top = 0
        self._since: dict[int, int] = {}
        # The first deletion comes one turn after start, like every later one.
        self._cleaned = time.monotonic()

    # -- publishing -------------------------------------------------------------------------

    def publish(self, channel: str, message: dict[str, Any]) -> None:
        """Store ``message`` for every process's subscribers to ``channel``.

        Outside a transaction this returns once the row is committed. Inside one (a handler
        run under ``ATOMIC``, say) it returns at once and the row is written on the writer's
        own connection: joining the caller's transaction would hide the row until commit, or
        lose it on rollback, and on SQLite waiting could deadlock on the caller's write lock.
        A failure is then logged, not raised.

        Raises:
            TypeError: ``message`` is not JSON-serializable (outside a transaction).
            DatabaseError: the row could not be inserted (outside a transaction).
            TimeoutError: the row was not written within ``PUBLISH_WAIT`` seconds (it may
                still be: do not publish it again).
        """
        job = _Job(channel, message, waited=not self._in_transaction())
        self._ensure_writer()
        self._jobs.put(job)
        if not job.waited:
            return
        if not job.done.wait(PUBLISH_WAIT):
            # Still queued: it may be written later, so publishing it again could deliver twice.
            raise TimeoutError(
                f"delivery message on {channel} not written within {PUBLISH_WAIT}s; "
                "it stays queued and may still be written"
            )
        if job.error is not None:
            raise job.error

    def _in_transaction(self) -> bool:
        # Attributes only: methods that would connect refuse to run in an event loop's thread.
        wrapper = connections[_alias()]
        return wrapper.in_atomic_block or (
            wrapper.connection is not None and not wrapper.autocommit
        )

    def _ensure_writer(self) -> None:
        with self._lock:
            # A forked child inherits the reference but not the thread.
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(
                    target=self._write_loop, name="mcp-delivery-writer", daemon=True
                )
                self._writer.start()

    def _write_loop(self) -> None:
        alias = _alias()
        try:
            while True:
                job = self._jobs.get()
                # One thread of the process keeps its connection whatever CONN_MAX_AGE says
                # (with 0 it reconnected for every burst), checked before each burst.
                drop_if_broken(alias)
                while job is not None:
                    self._write(alias, job)
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                if job is not None:
                    self._clean_if_due()
                if job is None:
                    return
        finally:
            connections[alias].close()

    def _write(self, alias: str, job: _Job) -> None:
        try:
            self._insert(alias, job)
        except Exception as exc:
            job.error = exc
            if not job.waited:
                logger.exception("delivery: could not store a message on %s", job.channel)
        finally:
            job.done.set()

    def _insert(self, alias: str, job: _Job) -> None:
        # Never retried: an insert that failed late may have committed, and a second one
        # would deliver twice.
        _model().objects.using(alias).create(channel=job.channel, message=job.message)
        with self._lock:
            poller = self._poller if job.channel in self._sinks else None
        if poller is not None:
            poller.wake.set()  # a subscriber in this process need not wait for the next poll

    # -- subscribing ------------------------------------------------------------------------

    def subscribe(self, channels: Iterable[str], sink: Sink) -> Unsubscribe:
        """Call ``sink`` for rows published on ``channels`` from now on, in any process.

        The first subscription of the process starts the poller and waits (up to
        ``START_WAIT`` seconds, and not while the database is known to fail) until it knows
        the newest row, so that what is published after this returns is delivered.
        """
        names = list(dict.fromkeys(channels))
        with self._lock:
            token = self._add_sinks(names, sink)
            self._since[token] = self._top
            poller = self._poller
            if poller is None or poller.thread is None or not poller.thread.is_alive():
                poller = self._start_poller()
        waited = poller.ready.is_set() or poller.failing or poller.ready.wait(START_WAIT)
        if not waited:
            logger.warning("delivery: poller not ready after %ss; subscribing anyway", START_WAIT)

        def unsubscribe() -> None:
            with self._lock:
                self._remove_sinks(names, token)
                self._since.pop(token, None)
                if not self._sinks and self._poller is not None:
                    self._stop_poller(self._poller)

        return unsubscribe

    def _start_poller(self) -> _Poller:
        # Called with the lock held.
        poller = _Poller()
        poller.thread = threading.Thread(
            target=self._poll_loop, args=(poller,), name="mcp-delivery-poller", daemon=True
        )
        self._poller = poller
        poller.thread.start()
        return poller

    def _stop_poller(self, poller: _Poller) -> None:
        # Called with the lock held; the thread sees the event within one query.
        poller.stop.set()
        poller.wake.set()
        if self._poller is poller:
            self._poller = None

    def _poll_loop(self, poller: _Poller) -> None:
        alias = _alias()
        floor: int | None = None  # every id up to here was delivered or is past reordering
        seen: set[int] = set()  # ids above the floor already delivered
        checkpoints: deque[tuple[float, int]] = deque()  # (when, the newest id then)
        failures = 0
        try:
            while not poller.stop.is_set():
                # The poller keeps its connection whatever CONN_MAX_AGE says (with 0 it
                # reconnected at every poll, twice a second); a failed poll closes it.
                try:
                    if floor is None:
                        floor = self._newest(alias)
                        with self._lock:
                            self._top = max(self._top, floor)
                        poller.ready.set()
                    else:
                        floor = self._poll(poller, alias, floor, seen, checkpoints)
                    self._clean_if_due()
                    if failures:
                        logger.warning("delivery: polling works again after %d failures", failures)
                    failures, poller.failing = 0, False
                except Exception:
                    failures += 1
                    poller.failing = True
                    if failures == 1:
                        logger.exception("delivery: polling %s failed; retrying", alias)
                    # A broken connection would fail every later poll; start from a new one.
                    connections[alias].close()
                interval = conf.DELIVERY_POLL_SECONDS
                delay = min(interval * 2**failures, MAX_BACKOFF) if failures else interval
                poller.wake.wait(delay)
                poller.wake.clear()
        finally:
            connections[alias].close()

    def _newest(self, alias: str) -> int:
        top = _model().objects.using(alias).aggregate(top=Max("id"))["top"]
        return int(top or 0)

    def _poll(
        self,
        poller: _Poller,
        alias: str,
        floor: int,
        seen: set[int],
        checkpoints: deque[tuple[float, int]],
    ) -> int:
        """Deliver the new rows of subscribed channels; the new floor."""
        with self._lock:
            channels = set(self._sinks)
        # Rows above ``top`` are left to the next poll, which also checkpoints them.
        top = max(self._newest(alias), floor)
        if channels and top > floor:
            rows = _model().objects.using(alias).filter(id__gt=floor, id__lte=top)
            if len(channels) <= MAX_IN_CHANNELS:
                rows = rows.filter(channel__in=channels)
            for row_id, channel, message in rows.order_by("id").values_list(
                "id", "channel", "message"
            ):
                if row_id in seen or channel not in channels:
                    continue
                seen.add(row_id)
                self._dispatch(poller, channel, message, row_id)
        with self._lock:
            self._top = max(self._top, top)
        now = time.monotonic()
        if not checkpoints or top > checkpoints[-1][1]:
            checkpoints.append((now, top))
        # An id allocated before ``top`` was read has committed (or never will) once the
        # reordering window has passed since: the floor may move up to it.
        window = conf.DELIVERY_REORDER_SECONDS
        while checkpoints and now - checkpoints[0][0] >= window:
            floor = max(floor, checkpoints.popleft()[1])
        seen.difference_update([row_id for row_id in seen if row_id <= floor])
        return floor

    def _dispatch(
        self, poller: _Poller, channel: str, message: dict[str, Any], row_id: int
    ) -> None:
        with self._lock:
            # A poller being replaced must not deliver what its successor will deliver too.
            if poller.stop.is_set():
                return
            since = self._since
            sinks = [
                sink
                for token, sink in self._sinks.get(channel, {}).items()
                if since.get(token, 0) < row_id
            ]
        self._call(sinks, channel, message)

    # -- housekeeping -----------------------------------------------------------------------

    def _clean_if_due(self) -> None:
        every = min(conf.DELIVERY_RETENTION_SECONDS / 2, 60.0)
        now = time.monotonic()
        with self._lock:
            if now - self._cleaned < every:
                return
            self._cleaned = now
        try:
            self.clean()
        except Exception:  # housekeeping must not stop delivery
            logger.exception("delivery: could not delete old messages")
            # Most failures pass (a lock, a reconnect): try again soon, not a whole turn later.
            with self._lock:
                self._cleaned = now - every + min(every, CLEAN_RETRY)

    def clean(self) -> int:
        """Delete the rows older than ``DELIVERY_RETENTION_SECONDS``; how many went.

        The threads call this every half retention (at most every minute); call it yourself
        from a scheduled job if no process of yours subscribes or publishes for long.

        Raises:
            DatabaseError: the delete failed.
        """
        cutoff = timezone.now() - timedelta(seconds=conf.DELIVERY_RETENTION_SECONDS)
        rows = _model().objects.using(_alias()).filter(created__lt=cutoff)
        return int(rows.delete()[0])

    def close(self, timeout: float = 5.0) -> None:
        """Stop this backend's threads, dropping every subscription, and close their connections.

        Waits up to ``timeout`` seconds for each thread. The backend may be used again after.
        """
        with self._lock:
            self._sinks.clear()
            self._since.clear()
            poller, writer = self._poller, self._writer
            if poller is not None:
                self._stop_poller(poller)
            self._writer = None
        if writer is not None:
            self._jobs.put(None)
            writer.join(timeout)
        if poller is not None and poller.thread is not None:
            poller.thread.join(timeout)

    def poller_running(self) -> bool:
        """Whether this process's poller thread is alive (for tests and health checks)."""
        with self._lock:
            poller = self._poller
        return poller is not None and poller.thread is not None and poller.thread.is_alive()
