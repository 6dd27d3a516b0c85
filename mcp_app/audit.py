"""The audit trail: one ``ToolCall`` row per tool call, resource read and prompt get.

Rows are built in the request's thread and written in batches by a writer thread of the
process, within ``AUDIT_FLUSH_SECONDS`` (``0`` writes each row in the request's thread).
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import DataError, IntegrityError, connections, router, transaction
from django.utils import timezone

from .conf import conf, django_setting, imported
from .fields import storable
from .state import caller_id
from .transport.connections import KEYS_PER_DELETE, drop_if_broken

if TYPE_CHECKING:
    from .models import ToolCall

logger = logging.getLogger("mcp_app")

#: Arguments larger than this (bytes of JSON) are not kept, only their size.
ARGUMENTS_MAX_BYTES = 64 * 1024
#: Longest error text kept.
ERROR_MAX_CHARS = 4000
#: Rows deleted per statement by ``clean``, so no single delete holds locks for long.
CLEAN_BATCH = KEYS_PER_DELETE
#: Shortest wait before a failed write is tried again, so ``AUDIT_FLUSH_SECONDS = 0`` (rows
#: left over from before the setting changed) does not retry in a busy loop.
MIN_RETRY_SECONDS = 1.0
#: Most rows one INSERT statement carries (fewer where the database takes fewer parameters).
#: The writer thread lets go of the GIL for each statement and must wait to get it back
#: from the request threads; fewer, larger statements make fewer such handovers. Pausing
#: between statements (1 ms, so that a request would wait behind one statement at most)
#: measured worse: 50 to 65 µs more processor time per request under either route, and no
#: shorter slowest answers.
INSERT_ROWS = 100
#: The writer keeps its database connection between writes due within this many seconds:
#: opening one for each write (Django's SQLite connection registers its SQL functions, the
#: first query reads the schema) cost about 1 ms of processor time, 2 µs a row of a batch of 500.
KEEP_CONNECTION_SECONDS = 5.0
#: Longest the flush at interpreter exit waits for a write under way.
EXIT_FLUSH_TIMEOUT = 10.0
KEPT = "Could not write %d audit record(s); they are kept and tried again."


def setting(name: str) -> Any:
    """A setting of this module, from ``MCP_APP`` or its default."""
    return getattr(conf, name)


@dataclass
class Record:
    """What the transport knows of one finished call."""

    server: str
    method: str
    name: str
    era: str
    user: Any
    arguments: Any
    duration_ms: float
    # "complete", "error" (an isError result), "input_required", "failed", "cancelled"
    outcome: str
    error: str = ""
    rounds: int = 0


def record(entry: Record) -> None:
    """Audit ``entry`` unless ``AUDIT`` is off: queue its row, or write it if not deferred.

    Runs in the request's worker thread, after the handler's transaction ended. It never
    raises: a row that cannot be written is logged, and the call is answered all the same.
    """
    if not conf.AUDIT:
        return
    try:
        if conf.AUDIT_FLUSH_SECONDS <= 0:
            write(entry)
        else:
            _enqueue(_columns(entry))
    except Exception:
        logger.exception("Could not write the audit record of %s %r", entry.method, entry.name)


def write(entry: Record) -> ToolCall:
    """Write ``entry`` at once, in its own transaction (a savepoint inside an open one).

    Raises:
        DatabaseError: the row could not be written.
    """
    row = _built(_columns(entry))
    alias = _alias()
    # A savepoint: a failed insert must not break a transaction the caller has open.
    with transaction.atomic(using=alias):
        row.save(using=alias)
    return row


#: The columns of a queued row, in the order ``_columns`` gives their values.
COLUMNS = (
    "user_id",
    "caller_id",
    "server",
    "method",
    "name",
    "era",
    "duration_ms",
    "outcome",
    "error",
    "rounds",
    "arguments",
    "created",
)
#: A queued row: its values in ``COLUMNS`` order. A plain tuple of plain values, which the
#: garbage collector stops tracking (unless it holds the call's arguments, with
#: ``AUDIT_ARGUMENTS`` on), so rows waiting in the queue do not make its full passes longer or
#: more frequent.
Columns = tuple[Any, ...]


def _columns(entry: Record) -> Columns:
    """The row's values, made in the request's thread (who called, when)."""
    return (
        # Only the user's key: a queued row holds no user object the request may change.
        _stored_user_id(entry.user),
        caller_id(entry.user)[:100],
        entry.server[:100],
        entry.method[:32],
        # PostgreSQL's text columns hold no NUL (the arguments keep theirs: WireJSONField).
        storable(entry.name[:512]),
        entry.era[:16],
        # To the microsecond, without round(x, 3)'s decimal conversion (1.7 µs a request
        # under load).
        round(float(entry.duration_ms) * 1000) / 1000,
        entry.outcome[:16],
        storable(entry.error[:ERROR_MAX_CHARS]) if entry.error else "",
        max(0, int(entry.rounds)),
        _kept_arguments(entry.arguments) if conf.AUDIT_ARGUMENTS else None,
        # The time of the call, however late the row is written: under USE_TZ, nanoseconds
        # since the epoch, which the writer makes a datetime of (_as_datetime) for a batch of
        # rows at a time, where that code is warm (datetime.now(UTC) cost 1.7 µs a request
        # under load).
        time.time_ns() if django_setting("USE_TZ") else datetime.now(),
    )


#: The start of ``time.time_ns()``.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _as_datetime(when: Any) -> Any:
    """A queued row's time as a datetime: an ``int`` is nanoseconds since the epoch, made a
    time in UTC to the microsecond below, as ``datetime.now(UTC)`` makes it."""
    if when.__class__ is int:
        return _EPOCH + timedelta(microseconds=when // 1000)
    return when


def _built(item: Columns) -> ToolCall:
    from .models import ToolCall

    values = dict(zip(COLUMNS, item, strict=True))
    values["created"] = _as_datetime(values["created"])
    return ToolCall(**values)


def _stored_user_id(user: Any) -> Any:
    """The user's key, if it is a row of the user model (not a JWT ``TokenUser``).

    Only the key is kept: a queued row holds no user object, which the request may still change.
    """
    if not getattr(user, "is_authenticated", False):
        return None
    from django.contrib.auth import get_user_model

    if isinstance(user, get_user_model()) and user.pk is not None:
        return user.pk
    return None


#: Measures the arguments' size. One encoder for every call: ``json.dumps`` with options
#: builds a new one each time, which cost about half of the measuring.
_SIZE_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


def _kept_arguments(arguments: Any) -> Any:
    if arguments is None:
        return None
    size = len(_SIZE_ENCODER.encode(arguments).encode())
    if size > ARGUMENTS_MAX_BYTES:
        return {"$omitted": f"{size} bytes of arguments, over the audit limit"}
    return arguments


# -- deferred writes ---------------------------------------------------------------------------


#: A row in the queue: ``(seq, when queued (time.monotonic()), row)``. A plain tuple,
#: like the row's own values, so the garbage collector stops tracking it.
_Queued = tuple[int, float, Columns]


class _Queue:
    """The rows of this process waiting to be written, and the thread that writes them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        # Held by whoever writes (the thread or a flush()), so batches go out in order.
        self.writing = threading.Lock()
        self.rows: deque[_Queued] = deque()
        self.seq = 0
        self.in_flight = 0
        self.dropped = 0
        self.retry_at = 0.0
        self.thread: threading.Thread | None = None


_queue = _Queue()


def _current() -> _Queue:
    return _queue


def _forked() -> None:
    # A forked child: the parent's rows are the parent's to write, its thread is not here,
    # and its locks may have been held by that thread at the fork.
    global _queue
    _queue = _Queue()


os.register_at_fork(after_in_child=_forked)


def _enqueue(row: Columns) -> None:
    queue = _current()
    batch = conf.AUDIT_BATCH_SIZE
    cap = conf.AUDIT_MAX_PENDING
    with queue.lock:
        queue.seq += 1
        queue.rows.append((queue.seq, time.monotonic(), row))
        if len(queue.rows) > cap:
            _cap(queue, cap)
        if len(queue.rows) in (1, batch):
            queue.changed.notify_all()
        if queue.thread is None:
            queue.thread = threading.Thread(
                target=_run, args=(queue,), name="mcp-audit", daemon=True
            )
            queue.thread.start()


def _cap(queue: _Queue, cap: int) -> None:
    """Drop the oldest rows past ``cap`` (the lock is held): memory must not grow unbounded."""
    over = len(queue.rows) - cap
    for _ in range(over):
        queue.rows.popleft()
    queue.dropped += max(0, over)


def pending() -> int:
    """How many audit rows of this process are waiting to be written (or being written)."""
    queue = _current()
    with queue.lock:
        return len(queue.rows) + queue.in_flight


def flush(timeout: float | None = 10.0) -> bool:
    """Write, in this thread, every row queued so far; whether they are all written now.

    Waits up to ``timeout`` seconds (``None``: as long as it takes) for a write under way by
    the writer thread. Inside an atomic block, the rows are written in its transaction. Rows
    that could not be written are kept for the writer thread to retry.
    """
    queue = _current()
    with queue.lock:
        upto = queue.seq
    if not queue.writing.acquire(timeout=-1 if timeout is None else timeout):
        return False
    try:
        return _drain(queue, upto)
    finally:
        queue.writing.release()


def _run(queue: _Queue) -> None:
    """The writer thread: write the queue when its oldest row is due or a batch is full."""
    try:
        _write_when_due(queue)
    finally:
        # Should the thread end, the next row queued starts another (a liveness check on
        # every row would cost each call more than this).
        with queue.lock:
            queue.thread = None


def _write_when_due(queue: _Queue) -> None:
    kept = False  # whether this thread's connections were left open after its last write
    while True:
        upto = _due(queue, wait_idle=not kept)
        if upto is None:
            # The rows due soon are gone (another thread's flush() wrote them): let go of the
            # connection before waiting for long.
            connections.close_all()
            kept = False
            continue
        written = False
        try:
            with queue.writing:
                written = _drain(queue, upto)
        except Exception:
            logger.exception("The audit writer failed")
            with queue.lock:
                queue.retry_at = time.monotonic() + _retry_seconds()
        kept = written and _due_soon(queue)
        if not kept:
            # No connection is left open while the thread waits for long, nor after a
            # failure: the next write connects afresh.
            connections.close_all()


def _due(queue: _Queue, wait_idle: bool) -> int | None:
    """Wait until the oldest row is due or a batch is full; the last row's ``seq`` then.

    ``None`` if the queue is empty and not ``wait_idle``.
    """
    with queue.lock:
        while True:
            now = time.monotonic()
            due = _head_due(queue, now)
            if due is not None:
                due = max(due, queue.retry_at)
                if due <= now:
                    return queue.seq
                queue.changed.wait(due - now)
            elif wait_idle:
                queue.changed.wait()
            else:
                return None


def _due_soon(queue: _Queue) -> bool:
    """Whether rows are waiting to be written within ``KEEP_CONNECTION_SECONDS``."""
    with queue.lock:
        now = time.monotonic()
        due = _head_due(queue, now)
    return due is not None and due - now <= KEEP_CONNECTION_SECONDS


def _head_due(queue: _Queue, now: float) -> float | None:
    """When the queued rows are due (the lock held): ``now`` for a full batch, else the
    oldest row's time plus ``AUDIT_FLUSH_SECONDS``; ``None`` with none queued."""
    if not queue.rows:
        return None
    if len(queue.rows) >= conf.AUDIT_BATCH_SIZE:
        return now
    return queue.rows[0][1] + conf.AUDIT_FLUSH_SECONDS


def _alias() -> str:
    # write() runs it for every call when rows are not deferred: the model is imported once.
    return str(router.db_for_write(imported("mcp_app.models.ToolCall")))


def _retry_seconds() -> float:
    return max(conf.AUDIT_FLUSH_SECONDS, MIN_RETRY_SECONDS)


def _drain(queue: _Queue, upto: int) -> bool:
    """Write the queued rows up to ``upto`` in batches (``writing`` is held); whether all went."""
    batch_size = conf.AUDIT_BATCH_SIZE
    while True:
        with queue.lock:
            dropped, queue.dropped = queue.dropped, 0
            batch: list[_Queued] = []
            while queue.rows and queue.rows[0][0] <= upto and len(batch) < batch_size:
                batch.append(queue.rows.popleft())
            queue.in_flight = len(batch)
        if dropped:
            logger.error(
                "Dropped the %d oldest audit record(s): more than AUDIT_MAX_PENDING (%d) were "
                "waiting to be written.",
                dropped,
                conf.AUDIT_MAX_PENDING,
            )
        if not batch:
            return True
        try:
            done = _write_batch([queued[2] for queued in batch])
        except Exception:
            logger.exception(KEPT, len(batch))
            done = 0
        with queue.lock:
            queue.in_flight = 0
            if done == len(batch):
                queue.retry_at = 0.0
                continue
            # Put back in front, in order, what is still to write.
            queue.rows.extendleft(reversed(batch[done:]))
            _cap(queue, conf.AUDIT_MAX_PENDING)
            queue.retry_at = time.monotonic() + _retry_seconds()
            queue.changed.notify_all()
        return False


#: Errors of a row that writing it again will not mend: the row is dropped, not retried.
ROW_FAULTS = (IntegrityError, DataError, ValueError, TypeError)


def _write_batch(items: list[Columns]) -> int:
    """Write ``items`` in order; how many are written (or dropped) before a failure that may pass."""
    alias = _alias()
    try:
        # The writer thread keeps its connection between writes (KEEP_CONNECTION_SECONDS).
        drop_if_broken(alias)
        with transaction.atomic(using=alias):
            _insert(items, alias)
        return len(items)
    except Exception:
        # One by one, a row that can never be written does not hold back the others (and a
        # database that is down fails the first row as it failed the batch).
        pass
    rows = [_built(item) for item in items]
    for done, row in enumerate(rows):
        try:
            _write_one(row, alias)
        except ROW_FAULTS:
            logger.exception("Could not write an audit record, dropped: %s", row)
        except Exception:
            # The queue keeps the rows' values; these model instances are dropped.
            logger.exception(KEPT, len(rows) - done)
            return done
    return len(rows)


#: Column types whose Python values the database drivers take as they are.
_PLAIN_TYPES = frozenset(
    {"CharField", "TextField", "FloatField", "PositiveIntegerField", "IntegerField", "ForeignKey"}
)


def _preparers(fields: list[Any], connection: Any) -> list[tuple[int, Callable[[Any], Any]]]:
    """The columns whose values a field must prepare for the database, and how."""
    preparers: list[tuple[int, Callable[[Any], Any]]] = []
    for index, field in enumerate(fields):
        kind = field.get_internal_type()
        if kind in _PLAIN_TYPES:
            continue
        if kind == "DateTimeField":
            preparers.append((index, _datetime_preparer(field, connection)))
        else:
            preparers.append(
                (index, functools.partial(field.get_db_prep_save, connection=connection))
            )
    return preparers


#: Times the adaptation is tried on: microseconds and none, winter and summer.
_PROBES = (
    datetime(2024, 1, 15, 3, 4, 5, 6, tzinfo=UTC),
    datetime(2024, 7, 15, 3, 4, 5, tzinfo=UTC),
)


def _datetime_preparer(field: Any, connection: Any) -> Callable[[Any], Any]:
    """How the writer prepares a row's time (a datetime, or nanoseconds as ``_as_datetime``
    reads them): as ``_datetime`` does, and for a time in UTC on a connection in UTC
    (``timezone.now()`` on a default site) without the field's and the backend's calls, when
    trying them on ``_PROBES`` shows what they make of such a time: the time itself
    (PostgreSQL) or its text without the offset (SQLite, MySQL).

    Adapting a datetime costs a call's audit row more than its insert, and every row of a
    batch has one.
    """
    slow = functools.partial(_datetime, field, connection)
    if getattr(connection, "timezone", None) is not UTC:
        return slow
    adapted = [slow(probe) for probe in _PROBES]
    if all(made is probe for made, probe in zip(adapted, _PROBES, strict=True)):
        return functools.partial(_utc_as_is, slow)
    fast = functools.partial(_utc_as_text, slow)
    if adapted == [fast(probe) for probe in _PROBES]:
        return fast
    return slow


def _utc_as_is(slow: Callable[[Any], Any], value: Any) -> Any:
    value = _as_datetime(value)
    if value.__class__ is datetime and value.tzinfo is UTC:
        return value
    return slow(value)


def _utc_as_text(slow: Callable[[Any], Any], value: Any) -> Any:
    value = _as_datetime(value)
    if value.__class__ is datetime and value.tzinfo is UTC:
        # "2024-01-15 03:04:05.000006+00:00" without "+00:00": the naive time's str().
        return value.isoformat(" ")[:-6]
    return slow(value)


def _datetime(field: Any, connection: Any, value: Any) -> Any:
    # An aware datetime (timezone.now() under USE_TZ) needs only the backend's adaptation; the
    # field's own preparation makes a naive one aware in TIME_ZONE first (and warns).
    value = _as_datetime(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return field.get_db_prep_value(value, connection, prepared=True)
    return field.get_db_prep_save(value, connection)


def _insert(items: list[Columns], alias: str) -> None:
    """Multi-row INSERTs of the values ``bulk_create`` would write (datetimes and JSON prepared
    by their fields), without building and walking a model instance per row."""
    from .models import ToolCall

    connection = connections[alias]
    by_name = {field.attname: field for field in ToolCall._meta.concrete_fields}
    fields = [by_name[name] for name in COLUMNS]
    quote = connection.ops.quote_name
    head = "INSERT INTO {} ({})".format(
        quote(ToolCall._meta.db_table), ", ".join(quote(str(field.column)) for field in fields)
    )
    preparers = _preparers(fields, connection)
    row_marks = "({})".format(", ".join(["%s"] * len(fields)))
    # Many rows per statement (INSERT_ROWS): each statement is a handover of the GIL.
    size = max(1, min(INSERT_ROWS, connection.ops.bulk_batch_size(fields, items)))
    with connection.cursor() as cursor:
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            params: list[Any] = []
            for item in chunk:
                row = list(item)
                for index, prepare in preparers:
                    value = row[index]
                    # None is SQL NULL for every column, the JSON one included.
                    if value is not None:
                        row[index] = prepare(value)
                params += row
            cursor.execute(f"{head} VALUES {', '.join([row_marks] * len(chunk))}", params)


def _write_one(row: ToolCall, alias: str) -> None:
    """Insert ``row`` in a transaction of its own."""
    try:
        with transaction.atomic(using=alias):
            row.save(using=alias, force_insert=True)
    except IntegrityError:
        if row.user_id is None:
            raise
        # The user was deleted since the call: keep the row as SET_NULL would have.
        _unsaved([row])
        row.user = None
        with transaction.atomic(using=alias):
            row.save(using=alias, force_insert=True)


def _unsaved(rows: list[ToolCall]) -> None:
    """Forget the ids a rolled-back insert gave ``rows``, so the next insert picks its own."""
    for row in rows:
        row.pk = None
        row._state.adding = True
        row._state.db = None


@atexit.register
def _flush_at_exit() -> None:
    if pending():
        flush(EXIT_FLUSH_TIMEOUT)


# -- retention ---------------------------------------------------------------------------------


def retention_days() -> int | None:
    """``AUDIT_RETENTION_DAYS`` as a number of days, or ``None`` to keep rows forever."""
    value = setting("AUDIT_RETENTION_DAYS")
    return None if value is None else int(value)


def clean(days: int | None = None) -> int:
    """Delete the rows older than ``days`` (default ``AUDIT_RETENTION_DAYS``); how many went.

    Deletes in batches of ``CLEAN_BATCH``. With no retention set nothing is deleted.

    Raises:
        ValueError: ``days`` is negative.
    """
    from .models import ToolCall

    keep = retention_days() if days is None else days
    if keep is None:
        return 0
    if keep < 0:
        raise ValueError("days must not be negative")
    alias = router.db_for_write(ToolCall)
    try:
        cutoff = timezone.now() - timedelta(days=keep)
    except OverflowError:
        return 0  # further back than dates go: no row is that old
    old = ToolCall.objects.using(alias).filter(created__lt=cutoff)
    removed = 0
    while True:
        batch = list(old.order_by("pk").values_list("pk", flat=True)[:CLEAN_BATCH])
        if not batch:
            return removed
        deleted, _ = ToolCall.objects.using(alias).filter(pk__in=batch).delete()
        removed += deleted
