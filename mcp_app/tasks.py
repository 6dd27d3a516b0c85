"""Tasks of the 2026-07-28 tasks extension: kept as ``Task`` rows, run by a thread of the process
that created them, and answered about by any worker.

The row is written before its ``CreateTaskResult`` is sent, so ``tasks/get`` finds it at once
on every worker. The thread running the work vouches for it with a lease it renews; a task
whose lease ran out (its process ended) is failed when next asked about. ``tasks/update``
stores the client's answers in the row and wakes the thread through the delivery backend
(and the thread reads the row again every ``WAKE_SECONDS`` in any case). ``tasks/cancel``
makes the task cancelled at once and sets the work's ``cancelled`` event.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections, router, transaction
from django.utils import timezone

from .conf import conf
from .delivery import backend
from .input import InputRequired
from .protocol import jsonrpc
from .protocol import tasks as wire
from .protocol.context import RequestContext
from .protocol.jsonrpc import InternalError, ProtocolError
from .protocol.tasks import TaskWork
from .state import caller_id
from .transport.workers import workers

if TYPE_CHECKING:
    from .models import Task
    from .registry import ToolDef
    from .transport.http import Endpoint

logger = logging.getLogger("mcp_app")

JSON = dict[str, Any]

#: Seconds a lease vouches for a running task; the thread renews it well before.
LEASE_SECONDS = 60.0
#: Longest a waiting task's thread goes without reading its row again.
WAKE_SECONDS = 1.0
#: Most rounds of input one task's work may ask for.
MAX_ROUNDS = 50
_OPEN = (wire.WORKING, wire.INPUT_REQUIRED)


_running: set[str] = set()
_running_lock = threading.Lock()


def running() -> frozenset[str]:
    """The ids of the tasks whose work this process is running (or about to)."""
    with _running_lock:
        return frozenset(_running)


class _Watcher:
    """One thread for the process's running tasks: every ``WAKE_SECONDS`` it tells the work of
    a task that ended elsewhere (cancelled on another worker, whatever the delivery backend)
    and renews the leases of the others."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.contexts: dict[str, RequestContext] = {}
        self.thread: threading.Thread | None = None

    def add(self, task_id: str, ctx: RequestContext) -> None:
        with self.lock:
            self.contexts[task_id] = ctx
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="mcp-tasks", daemon=True)
                self.thread.start()

    def remove(self, task_id: str) -> None:
        with self.lock:
            self.contexts.pop(task_id, None)

    def _loop(self) -> None:
        renewed = time.monotonic()
        while True:
            time.sleep(WAKE_SECONDS)
            with self.lock:
                watched = dict(self.contexts)
                if not watched:
                    self.thread = None
                    return
            try:
                renewed = self._check(watched, renewed)
            except Exception:
                logger.exception("Could not check the running tasks")
            finally:
                close_old_connections()

    @staticmethod
    def _check(watched: dict[str, RequestContext], renewed: float) -> float:
        from .models import Task

        rows = Task.objects.filter(pk__in=list(watched), status__in=_OPEN)
        still_open = set(rows.values_list("pk", flat=True))
        for task_id, ctx in watched.items():
            if task_id not in still_open:
                ctx.cancelled.set()
        if time.monotonic() - renewed >= LEASE_SECONDS / 4:
            rows.update(lease_until=timezone.now() + timedelta(seconds=LEASE_SECONDS))
            renewed = time.monotonic()
        return renewed


_watcher = _Watcher()


def _channel(endpoint: Endpoint, task_id: str) -> str:
    return endpoint.server.channel(f"task:{task_id}")


def start(
    endpoint: Endpoint,
    tool: ToolDef,
    work: TaskWork,
    ctx: RequestContext,
    params: Mapping[str, Any],
) -> JSON:
    """Create the task (a row, written before this returns) and start its work; the
    ``CreateTaskResult`` to answer with."""
    from .models import Task

    now = timezone.now()
    ttl = conf.TASK_TTL_SECONDS
    task = Task.objects.create(
        id=secrets.token_urlsafe(24),
        server=endpoint.server.name,
        tool=tool.name,
        caller=caller_id(ctx.user),
        status=wire.WORKING,
        arguments=params.get("arguments"),
        created=now,
        updated=now,
        ttl_ms=ttl * 1000,
        expires=now + timedelta(seconds=ttl),
        lease_until=now + timedelta(seconds=LEASE_SECONDS),
    )
    runner = _Runner(endpoint, task, tool, work, ctx, params)
    with _running_lock:
        _running.add(task.id)
    # Run once the row is there for the runner's own connection to see.
    transaction.on_commit(
        lambda: workers.run(runner.run), using=router.db_for_write(Task), robust=True
    )
    return wire.created(_task_fields(task))


def _task_fields(task: Task) -> JSON:
    return wire.task_fields(
        task.id,
        task.status,
        task.created,
        task.updated,
        task.ttl_ms,
        conf.TASK_POLL_INTERVAL_MS,
        task.status_message,
    )


def detailed(task: Task) -> JSON:
    """What ``tasks/get`` answers: the task and what its status carries."""
    pending = {k: v for k, v in (task.input_requests or {}).items() if k not in task.answers}
    return wire.detailed(
        _task_fields(task), input_requests=pending, result=task.result, error=task.error
    )


# -- the client's requests --------------------------------------------------------------------


def handle(endpoint: Endpoint, method: str, params: Mapping[str, Any], ctx: RequestContext) -> JSON:
    """Answer ``tasks/get``, ``tasks/update`` or ``tasks/cancel``.

    Raises:
        MissingClientCapability: the request did not declare the tasks extension.
        InvalidParams: no such task for this caller, or malformed params.
    """
    if not ctx.follows_tasks:
        raise wire.missing_extension()
    task_id = wire.task_id_of(params)
    if method == "tasks/update":
        responses = wire.input_responses_of(params)
        _update(endpoint, _found(endpoint, task_id, ctx), responses)
        return {}
    if method == "tasks/cancel":
        _cancel(endpoint, _found(endpoint, task_id, ctx))
        return {}
    return detailed(_found(endpoint, task_id, ctx))


def _found(endpoint: Endpoint, task_id: str, ctx: RequestContext) -> Task:
    """The caller's task, failed first if its process stopped vouching for it.

    Raises:
        InvalidParams: unknown, another caller's, or past its time to live.
    """
    from .models import Task

    now = timezone.now()
    task = Task.objects.filter(
        pk=task_id, server=endpoint.server.name, caller=caller_id(ctx.user)
    ).first()
    if task is None or (task.expires is not None and task.expires <= now):
        raise wire.unknown_task(task_id)
    if task.status in _OPEN and task.lease_until is not None and task.lease_until <= now:
        ended = InternalError("The server process running the task ended before it finished")
        _finish(task.id, wire.FAILED, error=ended.to_error())
        task.refresh_from_db()
    return task


def _update(endpoint: Endpoint, task: Task, responses: Mapping[str, Any]) -> None:
    """Keep the answers to requests the task waits for (others are ignored), then wake it."""
    from .models import Task

    if task.status != wire.INPUT_REQUIRED:
        return
    rows = Task.objects.filter(pk=task.id, status=wire.INPUT_REQUIRED)
    with transaction.atomic(using=router.db_for_write(Task)):
        # Written first, so concurrent partial updates wait for each other (a row lock on
        # PostgreSQL, the write lock on SQLite) and none loses another's answers.
        if not rows.update(updated=timezone.now()):
            return
        current = rows.values("input_requests", "answers").first()
        if current is None:
            return
        outstanding = current["input_requests"] or {}
        answers = dict(current["answers"] or {})
        answers.update({k: v for k, v in responses.items() if k in outstanding})
        rows.update(answers=answers)
    backend().publish(_channel(endpoint, task.id), {"answered": True})


def _cancel(endpoint: Endpoint, task: Task) -> None:
    """Cancelled at once (the work is told, and what it ends with is not kept)."""
    if task.status in _OPEN:
        _finish(task.id, wire.CANCELLED, message="Cancelled by the client")
    backend().publish(_channel(endpoint, task.id), {"cancel": True})


def _finish(
    task_id: str,
    status: str,
    *,
    result: JSON | None = None,
    error: JSON | None = None,
    message: str = "",
) -> bool:
    """Move an open task to a terminal ``status``; whether it was still open."""
    from .models import Task

    return bool(
        Task.objects.filter(pk=task_id, status__in=_OPEN).update(
            status=status,
            result=result,
            error=error,
            status_message=message,
            input_requests={},
            answers={},
            updated=timezone.now(),
            lease_until=None,
        )
    )


# -- running the work ----------------------------------------------------------------------------


class _Runner:
    """The work of one task, in a pool thread of the process that created it."""

    def __init__(
        self,
        endpoint: Endpoint,
        task: Task,
        tool: ToolDef,
        work: TaskWork,
        request_ctx: RequestContext,
        params: Mapping[str, Any],
    ) -> None:
        self.endpoint = endpoint
        self.task_id = task.id
        self.expires = task.expires
        self.tool = tool
        self.work = work
        self.params = dict(params)
        # A context of its own: the request it came from has been answered.
        self.ctx = RequestContext(
            method="tools/call",
            params=self.params,
            protocol_version=request_ctx.protocol_version,
            client_capabilities=request_ctx.client_capabilities,
            client_info=request_ctx.client_info,
            user=request_ctx.user,
            server=request_ctx.server,
        )
        self.ctx.follows_tasks = True
        self.ctx.task_id = task.id
        self.ctx.definition = tool
        self.ctx.config = tool.config
        self.woken = threading.Event()

    def _sink(self, channel: str, message: JSON) -> None:
        if message.get("cancel"):
            self.ctx.cancelled.set()
        self.woken.set()

    def run(self) -> None:
        from .models import Task

        started = time.perf_counter()
        unsubscribe = backend().subscribe([_channel(self.endpoint, self.task_id)], self._sink)
        _watcher.add(self.task_id, self.ctx)
        outcome: tuple[str, JSON | None] = (wire.CANCELLED, None)
        rounds = 0
        try:
            # Read after subscribing: a cancel published before is in the row already.
            if not Task.objects.filter(pk=self.task_id, status__in=_OPEN).exists():
                self.ctx.cancelled.set()
            outcome, rounds = self._rounds()
        except ProtocolError as exc:
            outcome = (wire.FAILED, exc.to_error())
        except Exception as exc:
            self.endpoint.report(exc, self.ctx)
            outcome = (wire.FAILED, InternalError("Internal error").to_error())
        finally:
            unsubscribe()
            _watcher.remove(self.task_id)
            try:
                self._end(*outcome, started=started, rounds=rounds)
            finally:
                close_old_connections()
                with _running_lock:
                    _running.discard(self.task_id)

    def _rounds(self) -> tuple[tuple[str, JSON | None], int]:
        for round_number in range(1, MAX_ROUNDS + 1):
            if self.ctx.is_cancelled:
                return (wire.CANCELLED, None), round_number - 1
            answer = self.endpoint.atomically(
                lambda: self.endpoint.engine.run_work(self.tool, self.work, self.ctx)
            )
            if not isinstance(answer, InputRequired):
                assert isinstance(answer, dict)
                return (wire.COMPLETED, answer), round_number - 1
            missing = answer.required_capabilities(self.ctx.client_capabilities)
            if missing:
                exc = jsonrpc.MissingClientCapability(missing)
                return (wire.FAILED, exc.to_error()), round_number - 1
            answers = self._ask(round_number, answer)
            if answers is None:
                return (wire.CANCELLED, None), round_number
            self.ctx.input_responses = answers
            self.ctx.state = answer.state
        error = InternalError(f"Gave up after {MAX_ROUNDS} rounds of input")
        return (wire.FAILED, error.to_error()), MAX_ROUNDS

    def _ask(self, round_number: int, answer: InputRequired) -> JSON | None:
        """Put the work's input requests on the task and wait for all their answers; the
        answers by the work's own keys, or ``None`` when the task ended meanwhile."""
        from .models import Task

        requests = {wire.task_key(round_number, k): v for k, v in answer.requests.items()}
        rows = Task.objects.filter(pk=self.task_id, status__in=_OPEN)
        if not rows.update(
            status=wire.INPUT_REQUIRED,
            input_requests=requests,
            answers={},
            round=round_number,
            updated=timezone.now(),
        ):
            return None
        while True:
            self.woken.wait(WAKE_SECONDS)
            self.woken.clear()
            found = Task.objects.filter(pk=self.task_id).values("status", "answers").first()
            if found is None or found["status"] != wire.INPUT_REQUIRED or self.ctx.is_cancelled:
                return None
            got = found["answers"] or {}
            if all(key in got for key in requests):
                break
            if self.expires is not None and timezone.now() >= self.expires:
                return None
        if not rows.update(
            status=wire.WORKING, input_requests={}, answers={}, updated=timezone.now()
        ):
            return None
        return {wire.handler_key(k): got[k] for k in requests}

    def _end(self, status: str, payload: JSON | None, *, started: float, rounds: int) -> None:
        if status == wire.COMPLETED:
            done = _finish(self.task_id, status, result=payload)
            message = jsonrpc.result_response(self.task_id, payload or {})
        elif status == wire.FAILED:
            done = _finish(self.task_id, status, error=payload)
            message = {"jsonrpc": "2.0", "id": self.task_id, "error": payload}
        else:
            done = _finish(self.task_id, wire.CANCELLED, message="Cancelled")
            message = {"cancelled": True}
        if not done:
            # Cancelled (or failed for want of its lease) before the work ended: that stays.
            message = {"cancelled": True}
        self.endpoint.audit(self.ctx, "tools/call", self.params, message, started, rounds)
