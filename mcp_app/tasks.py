"""Tasks of the 2026-07-28 tasks extension: kept as ``Task`` rows, run by the process that
created them, and answered about by any worker.

The row is written before its ``CreateTaskResult`` is sent, so ``tasks/get`` finds it at once
on every worker. The work runs in a pool thread; when it asks for input the task waits in
``input_required`` without a thread. One watcher thread per process looks after its tasks
every ``WAKE_SECONDS`` (sooner when the delivery backend brings word of a task): it renews
their leases, resumes a waiting task once ``tasks/update`` has answered all its requests,
stops the work of a task that ended elsewhere (cancelled on another worker), and fails a
task that outlived its time to live. A task whose process ended stops being vouched for and
is failed when next asked about. Every write to a task row that may race another comes before
any read of it in its transaction, so SQLite's lock upgrades cannot deadlock.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import DataError, IntegrityError, close_old_connections, router, transaction
from django.utils import timezone

from .conf import conf
from .delivery import backend, tell
from .fields import storable
from .input import InputRequired, checked_answers, expected
from .protocol import jsonrpc
from .protocol import tasks as wire
from .protocol.context import RequestContext
from .protocol.jsonrpc import InternalError, ProtocolError
from .protocol.tasks import TaskWork
from .state import caller_id
from .transport import sse
from .transport.workers import workers

if TYPE_CHECKING:
    from .models import Task
    from .registry import Catalog, ToolDef
    from .transport.http import Endpoint

logger = logging.getLogger("mcp_app")

JSON = dict[str, Any]

#: Seconds a lease vouches for a task; the watcher renews it every quarter of that.
LEASE_SECONDS = 60.0
#: Longest the watcher goes without looking after the process's tasks.
WAKE_SECONDS = 1.0
#: Most rounds of input one task's work may ask for.
MAX_ROUNDS = 50
_OPEN = wire.OPEN_STATUSES


def running() -> frozenset[str]:
    """The ids of this process's tasks that have not ended (working, or waiting for input)."""
    with _watcher.lock:
        return frozenset(_watcher.tasks)


def end_running(message: str) -> int:
    """Fail every task this process runs, with ``message``, and tell its work to stop; how
    many. For a process about to end (a stdio session whose client left, an exit): its tasks
    would otherwise read as working until their lease ran out. Each is written once, without
    the pauses that wait out a database's hiccup: the process has no time for them, and a
    task left unwritten is failed by its lease all the same."""
    with _watcher.lock:
        runners = list(_watcher.tasks.values())
    for runner in runners:
        runner.ctx.cancelled.set()
        runner.end(wire.FAILED, InternalError(message).to_error(), pauses=())
    return len(runners)


def _channel(endpoint: Endpoint, task_id: str) -> str:
    return endpoint.server.channel(f"task:{task_id}")


def _tasks() -> Any:
    """Task rows, read where they are written: a task moves on too fast for a replica."""
    from .models import Task

    return Task.objects.using(router.db_for_write(Task))


def _rows(task_id: str) -> Any:
    return _tasks().filter(pk=task_id)


def keeps_any(endpoint: Endpoint, ctx: RequestContext) -> bool:
    """Whether the caller has tasks on this server not yet past their time to live: their
    methods are served to it even once no tool of the catalog runs as a task."""
    mine = _tasks().filter(
        server=endpoint.server.name, caller=caller_id(ctx.user), expires__gt=timezone.now()
    )
    return bool(mine.exists())


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
        # Kept as the audit trail keeps them: only with AUDIT_ARGUMENTS (personal data).
        arguments=params.get("arguments") if conf.AUDIT_ARGUMENTS else None,
        created=now,
        updated=now,
        ttl_ms=ttl * 1000,
        expires=now + timedelta(seconds=ttl),
        lease_until=now + timedelta(seconds=LEASE_SECONDS),
    )
    runner = _Runner(endpoint, task, tool, work, ctx, params)
    # Started once the row is there for the runner's own connection to see.
    transaction.on_commit(runner.start, using=router.db_for_write(Task), robust=True)
    return wire.created(_task_fields(task, task.status))


def _owned(server: str, caller: str, task_ids: list[str]) -> tuple[list[str], Any]:
    """The well-formed of ``task_ids``, and the open or ended tasks among them of ``caller``
    on ``server``."""
    wanted = [t for t in task_ids if wire.well_formed_task_id(t)]
    rows = _tasks().filter(pk__in=wanted, server=server, caller=caller, expires__gt=timezone.now())
    return wanted, rows


def owned(server: str, caller: str, task_ids: list[str]) -> list[str]:
    """Of ``task_ids``, the open or ended tasks of ``caller`` on ``server``, in that order."""
    wanted, rows = _owned(server, caller, task_ids)
    found = set(rows.values_list("pk", flat=True))
    return [t for t in wanted if t in found]


def states(server: str, caller: str, task_ids: list[str]) -> list[JSON]:
    """As ``owned``, each task as ``tasks/get`` answers it now."""
    wanted, rows = _owned(server, caller, task_ids)
    found = {task.pk: detailed(task) for task in rows}
    return [found[t] for t in wanted if t in found]


def _announce(endpoint: Endpoint, task_id: str, **extra: Any) -> None:
    """Publish the task as it is now, for listen streams that follow it (and ``extra`` for
    the process running it, told even if the task cannot be read)."""
    try:
        task = _rows(task_id).first()
    except Exception:
        # News of a change the row already holds: the database failing to read it back must
        # not fail the work that made it (a poll reads the row).
        logger.exception("Could not read task %s to announce it", task_id)
        task = None
    if task is not None:
        _tell(endpoint, task_id, {**extra, "task": detailed(task)})
    elif extra:
        _tell(endpoint, task_id, extra)


def clean() -> int:
    """Delete the tasks past their time to live (``tasks/get`` no longer finds them); how many."""
    from .models import Task

    return int(Task.objects.filter(expires__lte=timezone.now()).delete()[0])


def _task_fields(task: Task, status: str) -> JSON:
    return wire.task_fields(
        task.id,
        status,
        task.created,
        task.updated,
        task.ttl_ms,
        conf.TASK_POLL_INTERVAL_MS,
        task.status_message,
    )


def detailed(task: Task) -> JSON:
    """What ``tasks/get`` answers: the task and what its status carries."""
    pending = {k: v for k, v in (task.input_requests or {}).items() if k not in task.answers}
    # Every request answered, the work not yet resumed (within WAKE_SECONDS): working again
    # as far as the client can tell, since input_required always names what it waits for.
    status = wire.WORKING if task.status == wire.INPUT_REQUIRED and not pending else task.status
    return wire.detailed(
        _task_fields(task, status), input_requests=pending, result=task.result, error=task.error
    )


# -- the client's requests --------------------------------------------------------------------


def handle(
    endpoint: Endpoint,
    method: str,
    params: Mapping[str, Any],
    ctx: RequestContext,
    catalog: Catalog,
) -> JSON:
    """Answer ``tasks/get``, ``tasks/update`` or ``tasks/cancel``. An update from a caller
    who may no longer use the task's tool (or of a tool gone from ``catalog``) fails the
    task as ``tools/call`` would be refused now, instead of running its next round.

    Raises:
        MissingClientCapability: the request did not declare the tasks extension.
        InvalidParams: no such task for this caller, or malformed params.
    """
    if not ctx.follows_tasks:
        raise wire.missing_extension()
    task_id = wire.task_id_of(params)
    mine = _rows(task_id).filter(
        server=endpoint.server.name, caller=caller_id(ctx.user), expires__gt=timezone.now()
    )
    if method == "tasks/update":
        responses = wire.input_responses_of(params)
        tool = mine.filter(status__in=_OPEN).values_list("tool", flat=True).first()
        if tool is not None and endpoint.engine.visible(catalog.tool_map.get(tool), ctx) is None:
            _withdrawn(endpoint, mine, task_id, tool)
            return {}
        _update(endpoint, task_id, mine, responses)
        return {}
    if method == "tasks/cancel":
        if _finish(mine, wire.CANCELLED, message="Cancelled by the client"):
            _announce(endpoint, task_id, ended=True)
        elif not mine.exists():
            raise wire.unknown_task(task_id)
        return {}
    task = mine.first()
    if task is None:
        raise wire.unknown_task(task_id)
    if task.status in _OPEN and task.lease_until is not None and task.lease_until <= timezone.now():
        _fail_lapsed(endpoint, mine, task_id)
        task.refresh_from_db()
    return detailed(task)


def _withdrawn(endpoint: Endpoint, mine: Any, task_id: str, tool: str) -> None:
    """Fail the task with the error a call of its tool would get now, and tell its process."""
    refused = jsonrpc.InvalidParams(f"Unknown tool: {tool}", {"name": tool})
    if _finish(mine, wire.FAILED, error=refused.to_error(), message=f"Unknown tool: {tool}"):
        _announce(endpoint, task_id, ended=True)


def fail_lapsed(endpoint: Endpoint, task_ids: list[str]) -> None:
    """Fail (and announce) those of ``task_ids`` still open whose process stopped vouching for
    them: a listen stream following them asks at each renewal, as ``tasks/get`` does."""
    lapsed = _tasks().filter(
        pk__in=task_ids,
        server=endpoint.server.name,
        status__in=_OPEN,
        lease_until__lte=timezone.now(),
    )
    for task_id in lapsed.values_list("pk", flat=True):
        _fail_lapsed(endpoint, _rows(task_id), task_id)


def _fail_lapsed(endpoint: Endpoint, rows: Any, task_id: str) -> None:
    ended = InternalError("The process running the task ended before it finished")
    # Its lease is read again in the update: one renewed since it was found lapsed stands.
    lapsed = rows.filter(lease_until__lte=timezone.now())
    if _finish(
        lapsed, wire.FAILED, error=ended.to_error(), message="The process running the task ended"
    ):
        _announce(endpoint, task_id)


def _update(endpoint: Endpoint, task_id: str, mine: Any, responses: Mapping[str, Any]) -> None:
    """Keep the answers to requests the task waits for and has no answer to yet (others are
    ignored), then wake it."""
    from .models import Task

    waiting = mine.filter(status=wire.INPUT_REQUIRED)
    with transaction.atomic(using=router.db_for_write(Task)):
        # Written first: concurrent updates wait for each other (a row lock on PostgreSQL, the
        # write lock on SQLite) and none loses another's answers.
        if not waiting.update(updated=timezone.now()):
            if not mine.exists():
                raise wire.unknown_task(task_id)
            return  # waiting for nothing: acknowledged, and ignored
        current = waiting.values("input_requests", "answers").first()
        outstanding = current["input_requests"] or {}
        answers = dict(current["answers"] or {})
        # Only what is still awaited: an answer kept already is neither checked nor replaced.
        asked, forms = expected({k: v for k, v in outstanding.items() if k not in answers})
        answers.update(checked_answers(responses, asked, forms))
        waiting.update(answers=answers)
    # The task now waits for fewer requests (or none: working again, as tasks/get reads it),
    # which streams that follow it are told, with its process.
    _announce(endpoint, task_id, answered=True)


def _tell(endpoint: Endpoint, task_id: str, message: JSON) -> None:
    """Tell the process running the task at once; the row has it already, and the watcher of
    that process reads it within ``WAKE_SECONDS`` anyway."""
    tell(_channel(endpoint, task_id), message)


def _finish(
    rows: Any,
    status: str,
    *,
    result: JSON | None = None,
    error: JSON | None = None,
    message: str = "",
) -> bool:
    """Move the open task among ``rows`` to a terminal ``status``; whether one was open."""
    return bool(
        rows.filter(status__in=_OPEN).update(
            status=status,
            result=result,
            error=error,
            # A text column: PostgreSQL's holds no NUL, which a client's words in an error may.
            status_message=storable(message),
            input_requests={},
            answers={},
            updated=timezone.now(),
            lease_until=None,
        )
    )


# -- running the work ----------------------------------------------------------------------------


class _Runner:
    """The work of one task: its rounds run in pool threads of the process that created it."""

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
        # A context of its own: the request it came from has been answered (so its transport
        # request is not kept). The first round sees what the handler saw of earlier rounds
        # (their answers and state), as the work run at once would.
        self.ctx = RequestContext(
            method="tools/call",
            params=self.params,
            protocol_version=request_ctx.protocol_version,
            client_capabilities=request_ctx.client_capabilities,
            client_info=request_ctx.client_info,
            user=request_ctx.user,
            server=request_ctx.server,
            input_responses=request_ctx.input_responses,
            state=request_ctx.state,
        )
        self.ctx.follows_tasks = True
        self.ctx.task_id = task.id
        self.ctx.definition = tool
        self.ctx.config = tool.config
        self.started = time.perf_counter()
        self.round = 0
        #: The input requests a parked task waits for, by their keys on the wire.
        self.waiting: dict[str, JSON] | None = None
        #: A round is scheduled or running (the watcher leaves the ending of it to the round).
        self.busy = False
        self.ended = False
        self.ending = threading.Lock()
        self.unsubscribe: Callable[[], None] | None = None

    def start(self) -> None:
        _watcher.add(self)
        try:
            self.unsubscribe = backend().subscribe(
                [_channel(self.endpoint, self.task_id)], self._heard
            )
        except Exception:
            logger.exception("Task %s hears of no cancel but through its row", self.task_id)
        self._schedule(self._round)

    def _schedule(self, run: Callable[[], None]) -> None:
        """Run ``run`` on a pool thread; if none can be had, the task fails."""
        self.busy = True
        try:
            workers.run(run)
        except Exception:
            logger.exception("Could not run task %s", self.task_id)
            self.busy = False
            self.end(wire.FAILED, InternalError("Could not run the task").to_error())

    def _heard(self, channel: str, message: JSON) -> None:
        if message.get("ended"):
            self.ctx.cancelled.set()
        _watcher.wake()

    def _round(self) -> None:
        """One run of the work: its result ends the task; its request for input parks it."""
        self.busy = True
        try:
            # Read after subscribing: an end published before is in the row already.
            if not _rows(self.task_id).filter(status__in=_OPEN).exists():
                self.ctx.cancelled.set()
                self.end(wire.CANCELLED)
                return
            self.round += 1
            answer = self.endpoint.engine.run_work(self.tool, self.work, self.ctx)
            if isinstance(answer, InputRequired):
                self._ask(answer)
            else:
                assert isinstance(answer, dict)
                self.end(wire.COMPLETED, answer)
        except ProtocolError as exc:
            self.end(wire.FAILED, exc.to_error())
        except BaseException as exc:  # CancelledError, SystemExit too: the task must end
            self.endpoint.report(exc, self.ctx)
            self.end(wire.FAILED, InternalError("Internal error").to_error())
        finally:
            self.busy = False
            _let_go_of_connections()

    def _ask(self, answer: InputRequired) -> None:
        missing = answer.required_capabilities(self.ctx.client_capabilities)
        if missing:
            self.end(wire.FAILED, jsonrpc.MissingClientCapability(missing).to_error())
            return
        if self.round > MAX_ROUNDS:
            gave_up = InternalError(f"Gave up after {MAX_ROUNDS} rounds of input")
            self.end(wire.FAILED, gave_up.to_error())
            return
        self.ctx.state = answer.state
        if not answer.requests:
            # Only state: the next round needs nothing from the client.
            self.ctx.input_responses = {}
            self._schedule(self._round)
            return
        requests = {wire.task_key(self.round, k): v for k, v in answer.requests.items()}
        parked = (
            _rows(self.task_id)
            .filter(status__in=_OPEN)
            .update(
                status=wire.INPUT_REQUIRED,
                input_requests=requests,
                answers={},
                round=self.round,
                updated=timezone.now(),
            )
        )
        if not parked:
            self.end(wire.CANCELLED)
            return
        # For the watcher to see only once the row says so.
        self.waiting = requests
        _announce(self.endpoint, self.task_id)

    def resume(self, waiting: dict[str, JSON], answers: JSON) -> None:
        """The client answered every request (the watcher saw it): run the next round here."""
        try:
            resumed = (
                _rows(self.task_id)
                .filter(status=wire.INPUT_REQUIRED)
                .update(status=wire.WORKING, input_requests={}, answers={}, updated=timezone.now())
            )
            if resumed:
                self.ctx.input_responses = {wire.handler_key(k): answers[k] for k in waiting}
                _announce(self.endpoint, self.task_id)
        except Exception as exc:
            # Whatever fails here ends the task: a runner left busy is never ended or failed.
            self.endpoint.report(exc, self.ctx)
            self.busy = False
            self.end(wire.FAILED, InternalError("Internal error").to_error())
            _let_go_of_connections()
            return
        if not resumed:
            self.busy = False
            self.end(wire.CANCELLED)
            _let_go_of_connections()
            return
        self._round()

    def end(
        self, status: str, payload: JSON | None = None, pauses: Sequence[float] | None = None
    ) -> None:
        """Keep how the task ended (unless it ended already: a cancel, an expiry), audit it;
        once, whichever thread gets there first."""
        with self.ending:
            if self.ended:
                return
            self.ended = True
        try:
            status, payload = _kept(self.task_id, status, payload)
            rows = _rows(self.task_id)
            fields: dict[str, Any]
            if status == wire.COMPLETED:
                fields = {"result": payload}
            elif status == wire.FAILED:
                fields = {"error": payload, "message": str((payload or {}).get("message", ""))}
            else:
                status, fields = wire.CANCELLED, {"message": "Cancelled"}
            try:
                done = _persisting(lambda: _finish(rows, status, **fields), pauses)
            except Exception:
                # What it ended with cannot be kept: that it failed, at least, so its client
                # is not left polling a task that reads as working until its lease runs out.
                logger.exception("Could not keep how task %s ended", self.task_id)
                status, payload = wire.FAILED, InternalError("Internal error").to_error()
                done = _finish(rows, status, error=payload, message="Internal error")
            audited: JSON = {"result": payload} if status == wire.COMPLETED else {"error": payload}
            if done:
                _announce(self.endpoint, self.task_id)
            else:
                found = rows.values("status", "error").first() or {}
                status = found.get("status", wire.CANCELLED)
                audited = {"error": found.get("error")}
            if status == wire.CANCELLED:
                audited = {"cancelled": True}
            audited = {"jsonrpc": "2.0", "id": self.task_id, **audited}
            rounds = max(0, self.round - 1)
            self.endpoint.audit(self.ctx, "tools/call", self.params, audited, self.started, rounds)
        except Exception:
            logger.exception("Could not keep how task %s ended", self.task_id)
        finally:
            _watcher.remove(self.task_id)
            if self.unsubscribe is not None:
                self.unsubscribe()


#: Pauses between attempts to keep how a task ended: a result is not lost to a database
#: that is unreachable for a moment (a failover, a restart).
KEEP_RETRY_SECONDS = (0.5, 2.0, 5.0)


def _persisting(write: Callable[[], bool], pauses: Sequence[float] | None = None) -> bool:
    """``write()``, tried again after each of ``pauses`` (``KEEP_RETRY_SECONDS``) while it
    raises what may pass; what the row itself cannot hold is not tried again."""
    for pause in KEEP_RETRY_SECONDS if pauses is None else pauses:
        try:
            return write()
        except (DataError, IntegrityError):
            raise
        except Exception:
            logger.warning("Could not keep how a task ended; trying again", exc_info=True)
            _let_go_of_connections()  # a broken connection is not reused
            time.sleep(pause)
    return write()


def _kept(task_id: str, status: str, payload: JSON | None) -> tuple[str, JSON | None]:
    """``payload`` as the row keeps it: plain JSON, encoded as an answer is (a result JSON
    cannot carry becomes the internal error its answer would have been)."""
    if payload is None:
        return status, None
    message = sse.as_sent(jsonrpc.result_response(task_id, payload))
    if "error" in message:
        return wire.FAILED, message["error"]
    return status, message["result"]


#: Whether ``end_running`` is to run as the process exits (registered with the first task).
_exit_watched = False


class _Watcher:
    """One thread for the process's tasks; see the module's docstring."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tasks: dict[str, _Runner] = {}
        self.thread: threading.Thread | None = None
        self.woken = threading.Event()
        self.renewed = 0.0

    def add(self, runner: _Runner) -> None:
        global _exit_watched
        with self.lock:
            if not _exit_watched:
                # Registered after the audit's own (atexit runs the last first), so the rows
                # of the tasks it ends are still written.
                atexit.register(end_running, "The server shut down before the task ended")
                _exit_watched = True
            self.tasks[runner.task_id] = runner
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="mcp-tasks", daemon=True)
                self.thread.start()

    def remove(self, task_id: str) -> None:
        with self.lock:
            self.tasks.pop(task_id, None)

    def wake(self) -> None:
        self.woken.set()

    def _loop(self) -> None:
        while True:
            self.woken.wait(WAKE_SECONDS)
            self.woken.clear()
            with self.lock:
                watched = dict(self.tasks)
                if not watched:
                    self.thread = None
                    return
            try:
                self._look_after(watched)
            except Exception:
                logger.exception("Could not look after the running tasks")
            _let_go_of_connections()

    def _look_after(self, watched: dict[str, _Runner]) -> None:

        now = timezone.now()
        expired = _tasks().filter(pk__in=list(watched), status__in=_OPEN, expires__lte=now)
        ended = list(expired.values_list("pk", flat=True))
        if ended and _finish(
            expired,
            wire.FAILED,
            error=InternalError("The task outlived its time to live").to_error(),
            message="The task outlived its time to live",
        ):
            for task_id in ended:
                _announce(watched[task_id].endpoint, task_id)
        rows = {
            row["pk"]: row
            for row in _tasks().filter(pk__in=list(watched)).values("pk", "status", "answers")
        }
        for task_id, runner in watched.items():
            row = rows.get(task_id)
            if row is None or row["status"] not in _OPEN:
                # Ended elsewhere (cancelled, expired, deleted): the work is told to stop, and a
                # task with no round under way has nothing left to wait for.
                runner.ctx.cancelled.set()
                if not runner.busy:
                    runner.waiting = None
                    runner.end(wire.CANCELLED)
                continue
            waiting = runner.waiting
            answers = row["answers"] or {}
            if waiting is not None and all(key in answers for key in waiting):
                runner.waiting = None  # resumed once, however soon the watcher looks again
                runner._schedule(functools.partial(runner.resume, waiting, answers))
        if time.monotonic() - self.renewed >= LEASE_SECONDS / 4:
            _tasks().filter(pk__in=list(watched), status__in=_OPEN).update(
                lease_until=now + timedelta(seconds=LEASE_SECONDS)
            )
            self.renewed = time.monotonic()


_watcher = _Watcher()
# A forked child runs none of its parent's tasks, so it must not vouch for them (their leases
# are the parent's to renew), and the parent's thread and lock are not its own.
os.register_at_fork(after_in_child=lambda: _Watcher.__init__(_watcher))


def _let_go_of_connections() -> None:
    """``close_old_connections``, which must not end a thread that serves tasks."""
    try:
        close_old_connections()
    except Exception:
        logger.exception("Could not let go of a task thread's database connections")
