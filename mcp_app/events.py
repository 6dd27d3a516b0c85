"""The event log of resumable streams: events kept for a while, and published as they happen."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from .conf import conf
from .delivery import tell
from .protocol import jsonrpc
from .protocol.jsonrpc import InternalError
from .protocol.modern import visible_ascii
from .transport import sse

logger = logging.getLogger("mcp_app")

if TYPE_CHECKING:
    from .server import Server

JSON = dict[str, Any]


#: Most digits an event number is read with: more than a stream ever has.
SEQ_DIGITS = 18
#: What a stream's log keeps in place of the response to a cancelled request: not a
#: JSON-RPC message, so never sent, but the stream's end all the same.
END: JSON = {"end": "cancelled"}


def is_end(message: JSON) -> bool:
    """Whether a kept ``message`` ends its stream: a response, or the mark of a cancelled one."""
    return message == END or ("id" in message and ("result" in message or "error" in message))


def parse_event_id(event_id: str) -> tuple[str, int] | None:
    """``(stream, seq)`` of an event id, or ``None`` if it is not one of ours."""
    stream, _, seq = event_id.strip().rpartition("-")
    if not stream or not (seq.isascii() and seq.isdigit()) or len(seq) > SEQ_DIGITS:
        return None
    if not visible_ascii(stream):
        # Not a stream id this server made (PostgreSQL refuses a NUL in any query).
        return None
    return stream, int(seq)


class StreamLog:
    """One stream's events: numbered, stored, and published on the stream's channel.

    While its request runs, the process vouches for it (``_leases``): a client resuming a
    stream whose process ended without answering is answered with an error.
    """

    def __init__(self, server: Server, session_id: str, request_id: Any = None) -> None:
        self.server = server
        self.session_id = session_id
        self.request_id = request_id
        self.seq = 0
        self.opened = False
        self.released = False
        #: Its session ended: nothing more is kept (nor published) for a client that is gone.
        self.silenced = False
        # A handler may emit from several threads: each event gets a number of its own, and
        # is queued for writing in that order.
        self._lock = threading.RLock()

    @functools.cached_property
    def stream(self) -> str:
        """The stream's random id, made when first needed: most calls never stream."""
        return secrets.token_hex(8)

    @property
    def channel(self) -> str:
        return stream_channel(self.server, self.session_id, self.stream)

    def silence(self) -> None:
        """Keep nothing more: the stream's session ended, and its events with it."""
        with self._lock:
            self.silenced = True

    def open(self) -> None:
        """Record the stream's start (its priming event), binding it to the session."""
        with self._lock:
            if not self.opened and not self.silenced:
                self.opened = True
                # The request's id, for the error a resuming client gets if no process is
                # left to answer it.
                _write(self.session_id, self.stream, 0, {"request": self.request_id}, None)
                if not self.released:
                    _leases.add(self.stream)

    def release(self) -> None:
        """The request is answered (or will never be, here): no longer vouched for, even if
        its stream opens only now (to record its end)."""
        with self._lock:
            self.released = True
            if self.opened:
                _leases.remove(self.stream)

    def priming_id(self) -> str:
        return f"{self.stream}-0"

    def end(self) -> None:
        """Record that the stream ends without a response (its request was cancelled)."""
        with self._lock:
            if self.silenced:
                return
            self.open()
            self.seq += 1
            _write(self.session_id, self.stream, self.seq, dict(END), self.channel)

    def append(self, message: JSON) -> str:
        """Record ``message``, publish it on the stream's channel, and return its event id.

        It is kept as it is sent: dates and decimals as text, as answers encode them, and a
        value JSON cannot carry as ``jsonrpc.encode`` replaces it.
        """
        kept = sse.as_sent(message)
        with self._lock:
            self.open()
            self.seq += 1
            seq = self.seq
            if not self.silenced:
                _write(self.session_id, self.stream, seq, kept, self.channel)
        return f"{self.stream}-{seq}"


#: Events are written by one thread of their own, on its own database connection, so they
#: are committed at once and in order, whatever transaction the handler that emits them is in
#: (a rolled-back attempt must not take its progress messages with it, and other workers must
#: be able to replay a stream while its call still runs).
_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-events")
WRITE_TIMEOUT = 30.0


def _write(session_id: str, stream: str, seq: int, message: JSON, channel: str | None) -> None:
    future = _writer.submit(_store, session_id, stream, seq, message, channel)
    if _may_hold_the_lock():
        # The caller's transaction may hold the write lock the writer needs (SQLite's is the
        # whole database's): waiting for the write would wait for the caller itself. It is
        # written once that transaction ends, still in order; this process's reads of the
        # stream wait for it (``_written``).
        future.add_done_callback(_logged)
        return
    future.result(WRITE_TIMEOUT)


def _may_hold_the_lock() -> bool:
    from django.db import connections, router

    from .models import StreamEvent

    connection = connections[router.db_for_write(StreamEvent)]
    return connection.vendor == "sqlite" and connection.in_atomic_block


#: Longest a read of a stream waits for this process's event writes still queued.
DRAIN_TIMEOUT = 1.0


def _written() -> None:
    """Wait (a little) for the events this process has queued, so a client resuming a stream
    finds what it was sent."""
    # On timeout the writer waits on a lock a running call holds: read what is there.
    with contextlib.suppress(TimeoutError):
        _writer.submit(_nothing).result(DRAIN_TIMEOUT)


def _nothing() -> None:
    pass


def _logged(future: Future[None]) -> None:
    error = future.exception()
    if error is not None:
        logger.error("Could not keep a stream event for resumption", exc_info=error)


def _store(session_id: str, stream: str, seq: int, message: JSON, channel: str | None) -> None:
    from django.db import connections

    from .models import StreamEvent

    try:
        StreamEvent.objects.create(session_id=session_id, stream=stream, seq=seq, message=message)
    finally:
        # No connection is left open in this thread between writes.
        connections.close_all()
    if channel is not None:
        # A follower that misses it reads it from the table when it resumes.
        tell(channel, {"seq": seq, "message": message})


def stream_channel(server: Server, session_id: str, stream: str) -> str:
    """The channel a session's stream is followed on (scoped by session, so no other reads it)."""
    return server.channel(f"stream:{session_id}:{stream}")


def events_from(session_id: str, stream: str, seq: int) -> list[tuple[int, JSON]] | None:
    """The stream's event ``seq`` and those after it; ``None`` if this session has no such event.

    Event 0 is the stream's priming event, recorded when the stream starts.
    """
    from .models import StreamEvent

    _written()
    rows = list(
        StreamEvent.objects.filter(session_id=session_id, stream=stream, seq__gte=seq)
        .order_by("seq")
        .values_list("seq", "message")
    )
    if not rows or rows[0][0] != seq:
        return None
    return rows


#: How long a stream's request may go unvouched for before a resuming client is told that no
#: process answers it any more. The process running it vouches every quarter of this.
LEASE_SECONDS = 60.0


class _Leases:
    """The streams whose requests run in this process: a thread dates their first event anew
    every quarter of ``LEASE_SECONDS``, while there are any."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.streams: set[str] = set()
        self.thread: threading.Thread | None = None

    def add(self, stream: str) -> None:
        with self.lock:
            self.streams.add(stream)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="mcp-leases", daemon=True)
                self.thread.start()

    def remove(self, stream: str) -> None:
        with self.lock:
            self.streams.discard(stream)

    def _loop(self) -> None:
        from django.db import connections

        from .models import StreamEvent

        while True:
            time.sleep(LEASE_SECONDS / 4)
            with self.lock:
                streams = sorted(self.streams)
                if not streams:
                    self.thread = None
                    return
            try:
                StreamEvent.objects.filter(stream__in=streams, seq=0).update(created=timezone.now())
            except Exception:
                logger.exception("Could not vouch for the streams of running requests")
            finally:
                connections.close_all()


_leases = _Leases()
# A forked child runs none of its parent's requests.
os.register_at_fork(after_in_child=lambda: _Leases.__init__(_leases))


def end_if_abandoned(server: Server, session_id: str, stream: str) -> bool:
    """End a stream whose request no process answers any more (it has no final event, and
    nothing vouched for it or added to it for ``LEASE_SECONDS``) with an internal error
    response; whether it did."""
    from django.db import IntegrityError

    from .models import StreamEvent

    rows = StreamEvent.objects.filter(session_id=session_id, stream=stream)
    last = rows.order_by("-seq").values_list("seq", "message", "created").first()
    first = rows.filter(seq=0).values_list("message", "created").first()
    if last is None or first is None or is_end(last[1]):
        return False
    cutoff = timezone.now() - timedelta(seconds=LEASE_SECONDS)
    if max(first[1], last[2]) >= cutoff:
        return False
    opened = first[0] if isinstance(first[0], dict) else {}
    if "request" in opened:
        error = InternalError("The process serving the request ended before it answered")
        final: JSON = jsonrpc.error_response(opened["request"], error)
    else:
        final = dict(END)  # no id to answer: the stream just ends
    with contextlib.suppress(IntegrityError):  # another client resuming it ended it first
        _write(session_id, stream, last[0] + 1, final, stream_channel(server, session_id, stream))
    return True


def has_events_after(session_id: str, stream: str, seq: int) -> bool:
    """Whether the stream has events after ``seq`` in the log."""
    from .models import StreamEvent

    return StreamEvent.objects.filter(session_id=session_id, stream=stream, seq__gt=seq).exists()


def clean_events() -> int:
    """Remove the events of streams that have had none for ``EVENT_RETENTION_SECONDS``; how
    many went.

    A stream is kept whole while it is in use: a call that let go of its connection and
    works on may add its answer long after its first events, and a client resuming from
    one of those must still find it.
    """
    from django.db.models import Exists, OuterRef

    from .models import StreamEvent

    cutoff = timezone.now() - timedelta(seconds=conf.EVENT_RETENTION_SECONDS)
    recent = StreamEvent.objects.filter(
        session_id=OuterRef("session_id"), stream=OuterRef("stream"), created__gte=cutoff
    )
    return StreamEvent.objects.filter(created__lt=cutoff).exclude(Exists(recent)).delete()[0]


def events_after(session_id: str, stream: str, seq: int) -> list[tuple[int, JSON]] | None:
    """The stream's events after ``seq``; ``None`` if this session has no event ``seq``."""
    found = events_from(session_id, stream, seq)
    return None if found is None else found[1:]
