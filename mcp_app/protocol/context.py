"""The request context handed to every handler: who asks, in which era, and how to report back."""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine, Mapping
from decimal import Decimal
from math import isfinite
from typing import Any

from . import jsonrpc, versions
from .tasks import client_follows_tasks

Emit = Callable[[dict[str, Any]], None]
#: Held while a context makes its ``cancelled`` event, so two threads never make two.
_MAKING = threading.Lock()


def discard(message: dict[str, Any]) -> None:
    """Where notifications go when the response is plain JSON: nowhere."""


class RequestContext:
    """What a handler knows about the request it serves, and what it can send back.

    Handlers read ``arguments`` from their first parameter; everything else is here.
    """

    def __init__(
        self,
        *,
        method: str = "",
        params: Mapping[str, Any] | None = None,
        protocol_version: str = versions.MODERN,
        client_capabilities: Mapping[str, Any] | None = None,
        client_info: Mapping[str, Any] | None = None,
        user: Any = None,
        request: Any = None,
        server: Any = None,
        session: Any = None,
        emit: Emit | None = None,
        log_level: str | None = None,
        progress_token: str | int | None = None,
        input_responses: Mapping[str, Any] | None = None,
        state: Any = None,
        run_async: Callable[[Coroutine[Any, Any, Any]], Any] | None = None,
    ) -> None:
        self.method = method
        self.params: Mapping[str, Any] = params or {}
        self.protocol_version = protocol_version
        self.client_capabilities: Mapping[str, Any] = client_capabilities or {}
        self.client_info: Mapping[str, Any] = client_info or {}
        #: The authenticated caller (a Django user, ``AnonymousUser``, or ``None``).
        self.user = user
        #: The transport's request object (a Django ``HttpRequest`` over HTTP), if any.
        self.request = request
        self.server = server
        self.session = session
        self.emit: Emit = emit or discard
        self.log_level = log_level
        self.progress_token = progress_token
        self.input_responses: dict[str, Any] = dict(input_responses or {})
        #: The state the handler passed to ``input_required`` on the previous round.
        self.state = state
        #: The row's ``config`` for definitions stored as data; ``None`` for code.
        self.config: Any = None
        self.definition: Any = None
        #: The exception the handler itself raised, if it did (the engine sets it): what may
        #: be told to the client, where an error of the server's own is not.
        self.handler_error: BaseException | None = None
        #: Exceptions the server's own work raised through this context's methods (sending a
        #: notification: its event store, its delivery backend), however a handler passes them on.
        self._server_errors: tuple[BaseException, ...] = ()
        self._cancelled: threading.Event | None = None
        self._run_async = run_async
        self._last_progress: float | None = None
        #: False where the client cannot be asked anything (a 2025-03-26 batch).
        self.interactive = True
        #: False where the answer cannot be an event stream (the client's ``Accept`` takes
        #: JSON only): notifications are left out, and the client cannot be asked anything.
        self.streams = True
        #: Set by transports that can end the response early while the request goes on.
        self.close_hook: Callable[[], None] | None = None
        self._follows_tasks: bool | None = None
        #: The task this context runs the work of, when it does.
        self.task_id: str | None = None

    @property
    def cancelled(self) -> threading.Event:
        """Set when the client cancels the request or goes away; a long handler checks it."""
        # Made on first use: most requests are never cancelled nor asked whether they were.
        event = self._cancelled
        if event is None:
            with _MAKING:
                event = self._cancelled
                if event is None:
                    event = self._cancelled = threading.Event()
        return event

    @property
    def follows_tasks(self) -> bool:
        """Whether the client can follow a task (it declared the tasks extension on a
        2026-07-28 request), so work a tool hands to a task goes on as one."""
        follows = self._follows_tasks
        if follows is None:
            follows = self._follows_tasks = self.era == "modern" and client_follows_tasks(
                self.client_capabilities
            )
        return follows

    @follows_tasks.setter
    def follows_tasks(self, value: bool) -> None:
        self._follows_tasks = value

    @property
    def era(self) -> str:
        """``"modern"`` for 2026-07-28 and later, ``"legacy"`` for initialize-era sessions."""
        return "modern" if versions.is_modern(self.protocol_version) else "legacy"

    @property
    def is_cancelled(self) -> bool:
        """True once the client has gone away or cancelled; long handlers should stop."""
        # Asking makes no event: one that was never made was never set.
        event = self._cancelled
        return event is not None and event.is_set()

    def input_response(self, key: str, default: Any = None) -> Any:
        """The client's answer to the input request ``key``, or ``default``."""
        return self.input_responses.get(key, default)

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the client asked for progress; else do nothing.

        Raises:
            ValueError: ``progress`` or ``total`` is not a finite number (no JSON number
                carries NaN or infinity, and the notification requires one).
        """
        for name, value in (("progress", progress), ("total", total)):
            if isinstance(value, float | Decimal) and not isfinite(value):
                raise ValueError(f"{name} must be a finite number, not {value!r}")
        if self.progress_token is None or self.is_cancelled:
            return
        if self._last_progress is not None and progress <= self._last_progress:
            # Progress must increase on the wire; a handler that repeats itself is not an error.
            return
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._send(jsonrpc.notification("notifications/progress", params))

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` at ``level`` if the client asked for that level.

        Raises:
            ValueError: ``level`` is not one of the MCP log levels.
        """
        if level not in versions.LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; use one of {versions.LOG_LEVELS}")
        threshold = self.log_level
        if threshold is None or self.is_cancelled:
            return
        if versions.LOG_LEVELS.index(level) < versions.LOG_LEVELS.index(threshold):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._send(jsonrpc.notification("notifications/message", params))

    def close_stream(self) -> None:
        """Let go of the client's connection now; the client resumes the stream later.

        On initialize-era sessions (2025-11-25 polling) the response stream ends here and the
        client reconnects with ``Last-Event-ID`` to get the rest. Elsewhere it does nothing.
        """
        if self.close_hook is not None:
            self._server_work(self.close_hook)

    def _send(self, message: dict[str, Any]) -> None:
        self._server_work(self.emit, message)

    def _server_work(self, work: Callable[..., None], *args: Any) -> None:
        """``work(*args)``, what it raises kept as the server's own (``raised_by_server``)."""
        try:
            work(*args)
        except Exception as exc:
            self._server_errors += (exc,)
            raise

    def raised_by_server(self, exc: BaseException) -> bool:
        """Whether ``exc`` came from the server's own work done for the handler (sending its
        notifications), not from the handler's code: its message may say what clients must
        not read (a database's host and user)."""
        return any(exc is known for known in self._server_errors)

    def run_async(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run an async handler to completion from the engine's (synchronous) thread."""
        if self._run_async is not None:
            return self._run_async(coroutine)
        from asgiref.sync import async_to_sync

        async def runner() -> Any:
            return await coroutine

        return async_to_sync(runner)()
