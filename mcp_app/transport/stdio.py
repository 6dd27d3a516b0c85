"""MCP over stdio: one JSON-RPC message a line in, one a line out, in either era."""

from __future__ import annotations

import collections
import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, Protocol

from django.db import close_old_connections

from ..conf import conf
from ..delivery import backend
from ..protocol import jsonrpc, modern, versions
from ..protocol.context import RequestContext
from ..protocol.engine import Engine
from ..protocol.jsonrpc import InvalidParams, InvalidRequest, ParseError, ProtocolError
from ..sessions import SessionData
from . import sse
from .http import over_limits
from .legacy import _error as legacy_error
from .legacy import bad_meta, batch_problem, cancels, no_logging, refused_in_batch
from .listen import (
    RESOURCE_KINDS,
    SUBSCRIPTIONS_MAX,
    Renewal,
    fresh_user,
    long_uri,
    too_many,
)

if TYPE_CHECKING:
    from ..server import Server

logger = logging.getLogger("mcp_app")
JSON = dict[str, Any]
#: Gives a request's final message; ``None`` when it gets none (the client cancelled it).
Answer = Callable[[JSON | None], None]
#: Seconds to let calls in flight finish once the input has ended.
DRAIN_SECONDS = 5.0
#: Seconds a call cancelled at the end has to stop, so that its audit row is written: well
#: within the 2 s a client gives between SIGTERM and SIGKILL (the official SDK does).
CANCEL_GRACE_SECONDS = 0.5
#: The most calls of 2025-03-26 batches that run at once, each in a thread of the session's;
#: the others wait their turn, in the order they came, so a batch of thousands of calls
#: starts neither thousands of threads nor as many database connections (over HTTP a batch's
#: calls run one after another). A call in a batch may not ask the client for input, so none
#: waits for the client while it keeps a place. A request on a line of its own gets a thread
#: at once: it may wait for the client, whose next request (a list it needs before it
#: answers) must not wait behind it.
MAX_BATCH_CALLS = 16
#: Longest the wait for the calls to end goes on once ``stop()`` has been called. The wait
#: looks again after each slice, not ended by an exception from ``stop()``: one raised in
#: ``Thread.join()`` may leave the thread marked as ended while it runs (CPython 3.11), so
#: that the next wait, for the cancelled calls' audit rows, would not wait.
JOIN_SLICE_SECONDS = 0.05


class _Stopped(BaseException):
    """Raised by ``StdioServer.stop()`` in the reader's thread to end its wait for a line: a
    BaseException, so that no ``except Exception`` takes it for an error."""


class StdioServer:
    """Serves one client on a pair of streams until its input ends.

    Requests run in threads of the session's (a batch's, ``MAX_BATCH_CALLS`` at most; the
    rest queue), so the reader keeps reading: answers to the server's own requests (initialize era)
    and ``notifications/cancelled`` arrive while a call is waiting. A line is written whole
    under a lock, so messages never interleave.
    """

    def __init__(self, server: Server, infile: IO[str], outfile: IO[str], user: Any = None):
        self.server = server
        self.endpoint = server.endpoint
        self.infile = infile
        self.outfile = outfile
        self.user = user
        self.session: SessionData | None = None
        self._write_lock = threading.Lock()
        self._calls: dict[Any, RequestContext] = {}
        # Taken where a call's thread forgets its id while the reader may reuse or cancel it.
        self._calls_lock = threading.Lock()
        self._listens: dict[Any, Callable[[], None]] = {}
        self._threads: list[threading.Thread] = []
        #: The calls waiting for a thread, first come first served, and how many threads serve
        #: them (both under ``_pool_lock``). Not bounded, since the reader may not wait: a
        #: queued call holds only its closure and context, its message read already.
        self._queued: collections.deque[Callable[[], None]] = collections.deque()
        self._workers = 0
        self._pool_lock = threading.Lock()
        self._renewals = _Renewals()
        #: The requests sent to the client whose answer a call waits for, by their id: the
        #: call's id and context (under ``_calls_lock``, as is ``_input_ended``).
        self._awaiting: dict[Any, tuple[Any, RequestContext]] = {}
        self._input_ended = False
        self._stopping = False
        #: Whether the reader's thread waits for a line, where a stop() may cut the wait short.
        self._waiting = False
        self._reader: threading.Thread | None = None

    def write(self, message: JSON | list[JSON]) -> None:
        line = jsonrpc.encode(message, sse.ENCODER)
        with self._write_lock:
            self.outfile.write(line + "\n")
            self.outfile.flush()

    def caller(self) -> Any:
        """The process's user as stored now: a permission, a group or ``is_active`` changed
        while the process runs counts from the next request, as over HTTP."""
        return fresh_user(self.user)

    def serve(self) -> None:
        """Read until end of input or ``stop()``; then let the calls under way finish, for up
        to ``DRAIN_SECONDS`` (not after ``stop()``), and cancel the rest."""
        self._reader = threading.current_thread()
        try:
            for line in self._lines():
                if line is None:
                    limit = conf.MAX_BODY_BYTES
                    error = InvalidRequest(f"Message over MAX_BODY_BYTES ({limit} characters)")
                    self.write(jsonrpc.error_response(None, error))
                    continue
                if not line.strip():
                    continue
                try:
                    self.receive(line)
                except Exception:  # one bad message must not end the session
                    logger.exception("Error serving a stdio message")
        except _Stopped:
            pass  # stopped while waiting for a line: the session ends as at the end of input
        self._end_input()
        for unsubscribe in list(self._listens.values()):
            unsubscribe()
        self._renewals.stop()
        # Calls under way or queued may finish and answer, unless stop() says to end now; then
        # whatever is left is cancelled, and has a moment to stop and write its audit row.
        self._join(DRAIN_SECONDS, stoppable=True)
        with self._calls_lock:
            left = list(self._calls.values())
        for ctx in left:
            ctx.cancelled.set()
        # The calls still queued are all cancelled now: each ends at once, without running,
        # answered with nothing and audited, whether or not a thread would be free in time.
        self._run_queued()
        if left:
            self._join(CANCEL_GRACE_SECONDS)
        # The process ends with the session: its tasks end now, not when their leases run out.
        from ..tasks import end_running

        ended = end_running("The stdio session ended before the task did")
        if ended:
            logger.warning("Failed %d task(s) still running when the stdio session ended", ended)

    def stop(self, signum: int = 0, frame: FrameType | None = None) -> None:
        """End the session as the end of its input would, and cancel the calls under way
        without waiting for them to finish; a handler for ``SIGTERM`` and ``SIGINT``.

        The reader reads no further line. Run in the reader's thread (a signal handler, in the
        main thread) it also ends the reader's wait for a line; from another thread, the reader
        stops after the line it waits for. A wait for the calls to finish ends within
        ``JOIN_SLICE_SECONDS``.
        """
        self._stopping = True
        if self._waiting and threading.current_thread() is self._reader:
            self._waiting = False  # raised once: a second signal must not end what follows
            raise _Stopped

    def _join(self, seconds: float, stoppable: bool = False) -> None:
        """Wait up to ``seconds`` for the calls' threads (and a renewal under way) to end;
        ``stoppable``: no longer than until ``stop()`` is called."""
        deadline = time.monotonic() + seconds
        for thread in [*self._threads, self._renewals.thread]:
            while thread is not None and thread.is_alive():
                left = deadline - time.monotonic()
                if left <= 0 or (stoppable and self._stopping):
                    return
                thread.join(min(left, JOIN_SLICE_SECONDS))

    def _end_input(self) -> None:
        """No answer can come from the client any more: calls waiting for one end now, as
        do those that ask later, instead of waiting for ``INPUT_TIMEOUT_SECONDS``."""
        with self._calls_lock:
            self._input_ended = True
            waiting = {
                request_id
                for request_id, ctx in self._awaiting.values()
                if self._calls.get(request_id) is ctx  # else cancelled, and woken already
            }
            self._awaiting.clear()
        if self.session is not None:
            for request_id in waiting:
                cancels.add(self.session.id, request_id)

    # -- reading -------------------------------------------------------------------------

    def _lines(self) -> Iterator[str | None]:
        """The input's lines; ``None`` for one longer than ``MAX_BODY_BYTES``, skipped unread."""
        # readline() takes no size past sys.maxsize, and no line could be that long anyway.
        limit = min(conf.MAX_BODY_BYTES, sys.maxsize - 1)
        while True:
            line = self._readline(limit + 1)
            if not line:
                return
            if len(line) <= limit or line.endswith("\n"):
                yield line
                continue
            while line and not line.endswith("\n"):  # the rest of it, a bounded piece at a time
                line = self._readline(limit + 1)
            yield None

    def _readline(self, size: int) -> str:
        """Up to ``size`` characters of a line; ``""`` at the end of input, or once stopped."""
        self._waiting = True
        try:
            return "" if self._stopping else self.infile.readline(size)
        finally:
            self._waiting = False

    def receive(self, line: str) -> None:
        try:
            message = jsonrpc.loads(line)
        except ParseError as exc:
            self.write(jsonrpc.error_response(None, exc))
            return
        except RecursionError:
            self.write(jsonrpc.error_response(None, InvalidRequest("JSON nested too deeply")))
            return
        refused = over_limits(message, line)
        if refused is not None:
            request_id = message["id"] if jsonrpc.classify(message) == "request" else None
            self.write(jsonrpc.error_response(request_id, refused))
            return
        if isinstance(message, list):
            self.batch(message)
        else:
            self.one(message, self._send)

    def one(self, message: Any, send: Answer, interactive: bool = True) -> None:
        """Serve one message; a request's answer (or an invalid message's error) goes to
        ``send``. ``interactive``: whether a request may ask the client for input."""
        kind = jsonrpc.classify(message)
        if kind == "invalid":
            request_id = message.get("id") if isinstance(message, dict) else None
            error = InvalidRequest("Invalid Request")
            send(
                jsonrpc.error_response(request_id if jsonrpc.valid_id(request_id) else None, error)
            )
            return
        try:
            self.dispatch(kind, message, send, interactive)
        except Exception:
            # One bad message must not end the session, nor leave a batch unanswered.
            logger.exception("Error serving %s", message.get("method") or "a stdio message")
            if kind == "request":  # a notification or response gets no answer
                send(jsonrpc.error_response(message["id"], jsonrpc.InternalError("Internal error")))

    def _send(self, final: JSON | None) -> None:
        """Write a request's answer on a line of its own."""
        if final is not None:  # None: the client cancelled the request
            self.write(final)

    def batch(self, messages: list[Any]) -> None:
        """A 2025-03-26 batch: each message served as on its own line, without asking the
        client for input, and the answers written as one array once all are in (by the rules
        of ``LegacyEndpoint.batch``, which serves batches over HTTP)."""
        version = self.session.protocol_version if self.session is not None else None
        problem = batch_problem(version, messages)
        if problem is not None:
            self.write(jsonrpc.error_response(None, problem))
            return
        answers = _Batch(self.write)
        ids: set[tuple[bool, Any]] = set()
        for message in messages:
            refused, error = refused_in_batch(message, ids)
            if refused:
                if error is not None:
                    answers.expect()(error)
            elif jsonrpc.classify(message) in ("request", "invalid"):
                self.one(message, answers.expect(), interactive=False)
            else:
                self.one(message, self._send)  # a notification or response: no answer
        answers.close()

    def dispatch(self, kind: str, message: JSON, send: Answer, interactive: bool = True) -> None:
        if kind == "response":
            if jsonrpc.valid_id(message["id"]):
                with self._calls_lock:
                    self._awaiting.pop(message["id"], None)
            if self.session is not None:
                channel = self.server.channel(f"session:{self.session.id}")
                backend().publish(channel, message)
        elif kind == "notification":
            self.notification(message)
        else:
            self.request(message, send, interactive)

    def notification(self, message: JSON) -> None:
        params = message.get("params") or {}
        request_id = params.get("requestId")
        # Only an id a request can have: ``True`` or ``1.0`` must not cancel request 1.
        if message["method"] == "notifications/cancelled" and jsonrpc.valid_id(request_id):
            # Its id is free at once: the client waits for no answer to it.
            with self._calls_lock:
                ctx = self._calls.get(request_id)
                if ctx is not None:
                    # Set first: a call that ends now must not answer.
                    ctx.cancelled.set()
                    del self._calls[request_id]
            if self.session is not None:
                channel = self.server.channel(f"session:{self.session.id}")
                backend().publish(channel, {"cancel": request_id})
            self.end_listen(request_id)

    def request(self, message: JSON, send: Answer, interactive: bool = True) -> None:
        """Serve a request; on a session, its answer goes to ``send`` (batches have one)."""
        request_id = message["id"]
        if request_id in self._calls or request_id in self._listens:
            # Its answer, or a cancellation, could not be told apart from the other's.
            error = InvalidRequest(f"Request id {request_id!r} is already in use by a request")
            send(jsonrpc.error_response(request_id, error))
            return
        params = message.get("params") or {}
        raw_meta = params.get("_meta")
        meta: JSON = raw_meta if isinstance(raw_meta, dict) else {}
        if self.session is not None:
            # A stream has one session: initialize again is refused there, and the session,
            # its version and subscriptions stay as they are.
            self.legacy_request(message, self.session, send, interactive)
        elif message["method"] == "initialize" and versions.META_PROTOCOL_VERSION not in meta:
            self.initialize(message)
        else:
            self.modern_request(message)

    @contextlib.contextmanager
    def _answering(
        self, request_id: Any, ctx: RequestContext, send: Answer | None = None
    ) -> Iterator[Answer]:
        """A call's thread: whatever ends it, the call is answered (through ``send``, once,
        if only with ``None``) and forgotten.

        Yields the function that sends the final message, after forgetting the id, so a
        client may use the id again as soon as it has the answer.
        """
        send = send or self._send
        sent = False

        def forget() -> None:
            with self._calls_lock:
                # A cancelled call's id may already be another request's.
                if self._calls.get(request_id) is ctx:
                    del self._calls[request_id]
                for key in [k for k, (_rid, asker) in self._awaiting.items() if asker is ctx]:
                    del self._awaiting[key]  # answers it no longer waits for

        def answer(final: JSON | None) -> None:
            nonlocal sent
            forget()
            sent = True
            send(final)

        try:
            yield answer
        except BaseException as exc:  # SystemExit too: it would only end this thread
            logger.error("Error answering request %r", request_id, exc_info=exc)
            if not sent:
                error = jsonrpc.error_response(request_id, jsonrpc.InternalError("Internal error"))
                with contextlib.suppress(Exception):
                    answer(None if ctx.is_cancelled else error)
        finally:
            forget()
            if not sent:  # a batch waits for each of its requests' answers, even none
                with contextlib.suppress(Exception):
                    answer(None)

    def _unstarted(self, ctx: RequestContext, method: str, params: JSON) -> bool:
        """Whether the call was cancelled while it waited for a thread: it then does not run,
        and is answered with nothing and audited as a cancelled call that ran would be."""
        if not ctx.is_cancelled:
            return False
        if method in Engine.INPUT_METHODS:
            self.endpoint.audit(ctx, method, params, {"cancelled": True}, time.perf_counter(), 0)
        return True

    def _spawn(self, target: Callable[[], None], batched: bool = False) -> None:
        """Run a call in a thread of its own; one of a batch (``batched``) in one of at most
        ``MAX_BATCH_CALLS``, else queued for the first that is free. Never waits: the reader
        calls it, and carries what the running calls may wait for (the client's answers, its
        cancels).

        Raises:
            RuntimeError: no thread could be started for the call (it is answered as an
                internal error); a batch's call waits for a thread already running instead.
        """
        with self._pool_lock:
            if batched:
                self._queued.append(target)
                if self._workers >= MAX_BATCH_CALLS:
                    return
            thread = threading.Thread(
                target=self._work if batched else self._run,
                args=() if batched else (target,),
                name="mcp-stdio-call",
                daemon=True,
            )
            try:
                thread.start()
            except RuntimeError:
                if batched and self._workers:
                    logger.exception("Could not start a thread for a stdio call; it waits")
                    return
                if batched:
                    self._queued.remove(target)
                raise
            self._workers += batched
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def _started(self, request_id: Any, run: Callable[[], None], batched: bool = False) -> None:
        """``_spawn(run)`` for the request ``request_id``, whose id is free again if no thread
        could be started for it (it is then answered as an internal error)."""
        try:
            self._spawn(run, batched)
        except RuntimeError:
            with self._calls_lock:
                self._calls.pop(request_id, None)
            raise

    def _work(self) -> None:
        """A call's thread: runs the queued calls until none is left, then ends (so joining
        the threads waits for the queued calls too)."""
        while (target := self._next(worker=True)) is not None:
            self._run(target)

    def _run_queued(self) -> None:
        """Run the calls still queued, in this thread."""
        while (target := self._next(worker=False)) is not None:
            self._run(target)

    def _next(self, worker: bool) -> Callable[[], None] | None:
        """The next queued call; ``None`` once none is left, when a ``worker`` ends."""
        with self._pool_lock:
            if self._queued:
                return self._queued.popleft()
            if worker:
                self._workers -= 1
            return None

    @staticmethod
    def _run(target: Callable[[], None]) -> None:
        """Run a call (answered whatever happens, by ``_answering``). A connection that
        cannot even close is logged: the thread must live on for the queued calls."""
        for step in (close_old_connections, target, close_old_connections):
            try:
                step()
            except Exception:
                logger.exception("Error in a stdio call's thread")

    # -- the stateless wire --------------------------------------------------------------

    def modern_request(self, message: JSON) -> None:
        catalog = self.server.catalog()
        try:
            req = modern.parse(
                message,
                None,
                self.endpoint.engine.knows,
                catalog.tool_map.get,
                logs=self.endpoint.server.options.logging,
            )
        except ProtocolError as exc:
            self.write(jsonrpc.error_response(message["id"], exc))
            return
        if req.method == "server/discover":
            result = self.endpoint.discover(catalog, self.caller())
            self.write(jsonrpc.result_response(req.id, result))
            return
        if req.method == "subscriptions/listen":
            self.listen(req, catalog)
            return
        ctx = self.endpoint.context(req, self.caller(), emit=self.write)
        with self._calls_lock:
            self._calls[req.id] = ctx

        def run() -> None:
            with self._answering(req.id, ctx) as answer:
                if self._unstarted(ctx, req.method, req.params):
                    return
                _status, final = self.endpoint.modern_call(req, ctx, catalog)
                answer(final)

        self._started(req.id, run)

    def listen(self, req: modern.ModernRequest, catalog: Any) -> None:
        try:
            listen = self.endpoint.listen(req, catalog, self.caller())
        except ProtocolError as exc:
            self.write(jsonrpc.error_response(req.id, exc))
            return
        opening = [event.message or {} for event in listen.opening()]
        self._follow(req.id, listen, opening, listen.backlog)

    def _follow(
        self,
        key: Any,
        stream: _Followed,
        opening: list[JSON],
        backlog: Callable[[], list[sse.Event]] | None = None,
        acknowledge: Callable[[], None] | None = None,
    ) -> None:
        """Write ``opening`` and the ``backlog()`` read once subscribed, then what ``stream``
        makes of its deliveries, until ``end_listen(key)``; a stream that renews checks
        access again, as HTTP streams do. ``acknowledge()`` is called before the first of
        them is written (it answers the request that subscribed).

        Subscribed before ``opening`` is written, so that nothing delivered in between is
        lost: what is, is held as it came and made into events only after the backlog, as
        the HTTP streams do, so that a delivery older than the backlog's reading is judged
        against it. Deliveries are made into events and written one at a time.
        """
        # Reentrant: a backend that delivers in the publishing thread may do so from a write.
        lock = threading.RLock()
        held: list[tuple[str, JSON]] | None = []

        def emit(channel: str, message: JSON) -> None:
            for event in stream.notifications(channel, message):
                self.write(event.message or {})

        def sink(channel: str, message: JSON) -> None:
            with lock:
                if held is not None:
                    held.append((channel, message))
                else:
                    emit(channel, message)
            if stream.stale:
                self._renewals.wake()

        unsubscribe = backend().subscribe(stream.channels, sink)
        try:
            first = opening + [event.message or {} for event in (backlog() if backlog else [])]
        except BaseException:
            unsubscribe()  # answered as an error: nothing follows
            raise
        with lock:
            if acknowledge is not None:
                acknowledge()
            for message in first:
                self.write(message)
            for channel, message in held or ():
                emit(channel, message)
            held = None
        forget = self._renewals.add(stream) if stream.renews else None

        def end() -> None:
            unsubscribe()
            if forget is not None:
                forget()

        self._listens[key] = end

    def end_listen(self, request_id: Any) -> None:
        unsubscribe = self._listens.pop(request_id, None)
        if unsubscribe is not None:
            unsubscribe()

    # -- the initialize era --------------------------------------------------------------

    def initialize(self, message: JSON) -> None:
        try:
            session, result = self.endpoint.legacy.handshake(
                message.get("params") or {}, self.caller()
            )
        except ProtocolError as exc:
            self.write(legacy_error(message["id"], exc))
            return
        self.session = session
        self.write(jsonrpc.result_response(message["id"], result))

    def legacy_request(
        self, message: JSON, session: SessionData, send: Answer, interactive: bool = True
    ) -> None:
        """A request on the session, answered through ``send``; ``interactive``: whether it
        may ask the client for input (not inside a batch)."""
        request_id, method = message["id"], message["method"]
        params = message.get("params") or {}
        if method == "ping":
            send(jsonrpc.result_response(request_id, {}))
            return
        if method == "logging/setLevel":
            if not self.server.options.logging:
                send(legacy_error(request_id, no_logging()))
                return
            level = params.get("level")
            if level not in versions.LOG_LEVELS:
                send(legacy_error(request_id, InvalidParams(f"Unknown log level {level!r}")))
                return
            session.log_level = str(level)
            send(jsonrpc.result_response(request_id, {}))
            return
        if method in ("resources/subscribe", "resources/unsubscribe"):
            self.subscription(request_id, method, params, session, send)
            return
        if method == "initialize" or not self.endpoint.engine.knows(method):
            error: ProtocolError = (
                InvalidRequest("The session is already initialized: a stdio stream has one session")
                if method == "initialize"
                else jsonrpc.MethodNotFound(f"Method not found: {jsonrpc.clip(method)}")
            )
            send(legacy_error(request_id, error))
            return
        bad = bad_meta(params)
        if bad is not None:
            send(legacy_error(request_id, bad))
            return
        ctx = self.endpoint.legacy.context(session, method, params, self.caller())
        ctx.interactive = interactive

        def emit(message: JSON) -> None:
            self._emit(request_id, ctx, session, message)

        ctx.emit = emit
        with self._calls_lock:
            self._calls[request_id] = ctx
        catalog = self.server.catalog()

        def run() -> None:
            with self._answering(request_id, ctx, send) as answer:
                if self._unstarted(ctx, method, params):
                    return
                answer(self.endpoint.legacy.call(request_id, method, params, ctx, catalog, session))

        self._started(request_id, run, batched=not interactive)

    def _emit(
        self, request_id: Any, ctx: RequestContext, session: SessionData, message: JSON
    ) -> None:
        """Send what a session's call sends before its answer. A request to the client is
        awaited until its answer comes; once the input has ended none can, and the call
        ends at once."""
        ended = False
        if jsonrpc.classify(message) == "request":
            with self._calls_lock:
                ended = self._input_ended
                if not ended:
                    self._awaiting[message["id"]] = (request_id, ctx)
        if ended:
            # Before it is written: writing may fail once the client has gone.
            cancels.add(session.id, request_id)
        self.write(message)

    def subscription(
        self, request_id: Any, method: str, params: JSON, session: SessionData, send: Answer
    ) -> None:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            send(legacy_error(request_id, InvalidParams(f"{method} needs a 'uri'")))
            return
        key = f"updated:{uri}"
        if method == "resources/subscribe":
            # The bounds of a session over HTTP: each subscription holds a stream here.
            followed = sum(1 for k in self._listens if k.startswith("updated:") and k != key)
            refused = long_uri(uri) or (
                too_many(SUBSCRIPTIONS_MAX) if followed >= SUBSCRIPTIONS_MAX else None
            )
            if refused is not None:
                send(legacy_error(request_id, refused))
                return
        self.end_listen(key)
        legacy = self.endpoint.legacy
        answer = jsonrpc.result_response(request_id, {})
        if method == "resources/subscribe" and not legacy.hides(uri, session, self.user):
            self._follow(
                key,
                _Subscription(self.server, uri, lambda: legacy.hides(uri, session, self.user)),
                [],
                acknowledge=lambda: send(answer),
            )
        else:
            send(answer)


class _Batch:
    """A batch's answers, written as one array once each of its requests has its answer
    (a cancelled one has none, and is left out); nothing is written if none has one."""

    def __init__(self, write: Callable[[list[JSON]], None]) -> None:
        self._write = write
        self._lock = threading.Lock()
        self._answers: list[JSON] = []
        self._open = 1  # the batch itself, until close(): its last request may not be read yet

    def expect(self) -> Answer:
        """The function that gives one request's answer; only its first call counts."""
        with self._lock:
            self._open += 1
        given = threading.Event()

        def answer(final: JSON | None) -> None:
            with self._lock:
                if given.is_set():
                    return
                given.set()
            self._done(final)

        return answer

    def close(self) -> None:
        """Every message of the batch has been read."""
        self._done(None)

    def _done(self, final: JSON | None) -> None:
        with self._lock:
            if final is not None:
                self._answers.append(final)
            self._open -= 1
            if self._open or not self._answers:
                return
            answers = self._answers
        for answer in answers:
            # JSON-RPC 2.0: an entry whose request's id could not be read has the id null (in
            # an array, an entry without one is matched to no request).
            answer.setdefault("id", None)
        self._write(answers)


class _Followed(Protocol):
    """What ``StdioServer._follow`` needs of a stream (a ``Listen`` is one)."""

    @property
    def channels(self) -> list[str]: ...

    def notifications(self, channel: str, message: JSON) -> list[sse.Event]: ...

    renews: bool
    stale: bool

    def renew(self) -> bool: ...


class _Subscription:
    """An initialize-era ``resources/subscribe``: its updates, sent while the caller may read
    the resource (checked again at each renewal, and at once after resources change)."""

    renews = True

    def __init__(self, server: Server, uri: str, hidden: Callable[[], bool]) -> None:
        self.server = server
        self.uri = uri
        self._hidden = hidden
        self.hidden = False
        self.stale = False

    @property
    def channels(self) -> list[str]:
        return [self.server.channel("updated"), self.server.channel("lists")]

    def notifications(self, channel: str, message: JSON) -> list[sse.Event]:
        if channel == self.server.channel("lists"):
            self.stale = self.stale or bool(set(message.get("kinds", ())) & RESOURCE_KINDS)
            return []
        if message.get("uri") == self.uri and not self.hidden:
            notice = jsonrpc.notification("notifications/resources/updated", {"uri": self.uri})
            return [sse.Event(notice)]
        return []

    def renew(self) -> bool:
        self.hidden = self._hidden()
        return True


class _Renewals:
    """The stdio streams that check access again: a thread of their own renews each every
    ``KEEPALIVE_SECONDS``, and a stale one at once. A renewal that fails keeps the stream as
    it was, and is logged once a stream."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        #: Each stream, when it was last renewed, and its renewal.
        self._streams: dict[int, tuple[_Followed, float, Renewal]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = False

    def add(self, stream: _Followed) -> Callable[[], None]:
        key = id(stream)
        with self._lock:
            self._streams[key] = (stream, time.monotonic(), Renewal())
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="mcp-stdio-renewals", daemon=True
                )
                self._thread.start()

        def forget() -> None:
            with self._lock:
                self._streams.pop(key, None)

        return forget

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    @property
    def thread(self) -> threading.Thread | None:
        """The thread that renews, once started: a renewal under way ends with it."""
        return self._thread

    def _run(self) -> None:
        while not self._stopped:
            try:
                wait = self._renew_due()
            except Exception:
                # Reading the settings, say: the thread must live on for the next streams.
                logger.exception("The stdio renewals failed")
                wait = conf.KEEPALIVE_SECONDS
            self._wake.wait(wait)
            self._wake.clear()

    def _renew_due(self) -> float:
        """Renew the streams that are due; how long until the next one is."""
        every = conf.KEEPALIVE_SECONDS
        now = time.monotonic()
        with self._lock:
            due = [
                (key, stream, renewal)
                for key, (stream, renewed, renewal) in self._streams.items()
                if stream.stale or now - renewed >= every
            ]
        try:
            for _key, stream, renewal in due:
                stream.stale = False
                renewal(stream)
        finally:
            with contextlib.suppress(Exception):  # a connection that cannot even close
                close_old_connections()
        with self._lock:
            for key, stream, renewal in due:
                if key in self._streams:
                    self._streams[key] = (stream, now, renewal)
            times = [renewed for _stream, renewed, _renewal in self._streams.values()]
        return max(0.0, min(times) + every - time.monotonic()) if times else every
