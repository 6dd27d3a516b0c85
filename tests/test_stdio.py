"""MCP over stdio: the transport driven line by line, and the official client end to end."""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from mcp import Client, types
from mcp.client.stdio import StdioServerParameters

import mcp_app
from mcp_app.transport import stdio
from mcp_app.transport.listen import Listen
from mcp_app.transport.stdio import StdioServer
from tests.conftest import ROOT, modern_meta

pytestmark = pytest.mark.django_db(transaction=True)


class Lines(io.StringIO):
    """An output stream whose lines can be read back as messages."""

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.getvalue().splitlines() if line]


def serve(*messages: dict[str, Any] | str) -> list[dict[str, Any]]:
    lines = "".join((m if isinstance(m, str) else json.dumps(m)) + "\n" for m in messages)
    out = Lines()
    StdioServer(mcp_app.site, io.StringIO(lines), out).serve()
    return out.messages()


def request(request_id: Any, method: str, params: dict[str, Any] | None = None, **meta: Any):
    body = dict(params or {})
    body["_meta"] = {**modern_meta(), **meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}


def initialize(version: str = "2025-11-25") -> dict[str, Any]:
    """An initialize-era client's first request."""
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


def by_id(messages: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for m in messages if "id" in m}


class Held(io.StringIO):
    """Input whose lines after the first ``given`` are read only once ``until`` is set: a
    cancel then reaches a call whose handler has started (one cancelled before does not run)."""

    def __init__(self, messages: list[Any], given: int, until: threading.Event) -> None:
        super().__init__("".join(json.dumps(m) + "\n" for m in messages))
        self.given, self.until = given, until

    def readline(self, size: int | None = -1) -> str:
        if self.given == 0:
            assert self.until.wait(10), "the handler did not start"
        self.given -= 1
        return super().readline(size)


def test_discover_list_and_call_without_headers() -> None:
    out = by_id(
        serve(
            request(1, "server/discover"),
            request(2, "tools/call", {"name": "add", "arguments": {"numbers": [2, 3]}}),
        )
    )
    assert out[1]["result"]["supportedVersions"] == ["2026-07-28"]
    assert out[2]["result"]["structuredContent"] == {"sum": 5}


def test_bad_lines_get_errors_and_the_session_goes_on() -> None:
    out = serve("{nope", "[1, 2]", request(3, "ping"), request(4, "tools/list"))
    assert out[0]["error"]["code"] == -32700
    assert out[1]["error"]["code"] == -32600
    assert by_id(out)[3]["error"]["code"] == -32601  # removed on the stateless revision
    assert by_id(out)[4]["result"]["tools"][0]["name"] == "add"


def test_a_request_that_fails_before_its_call_is_answered_with_its_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> Any:
        raise RuntimeError("the catalog failed")

    monkeypatch.setattr(mcp_app.site, "catalog", broken)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {}}}
    out = serve(request(41, "tools/list"), cancel)
    # The request gets its own id; the notification gets nothing.
    assert out == [
        {"jsonrpc": "2.0", "id": 41, "error": {"code": -32603, "message": "Internal error"}}
    ]


def test_an_id_in_use_is_refused() -> None:
    listen = request(5, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    out = serve(listen, listen)
    errors = [m for m in out if "error" in m]
    assert errors == [
        {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": -32600, "message": "Request id 5 is already in use by a request"},
        }
    ]


def test_a_handler_that_exits_its_thread_still_gets_an_answer() -> None:
    own = mcp_app.Server("stdio-exits", rows=False)

    @own.tool()
    def leave(arguments: dict[str, Any], context: Any) -> str:
        raise SystemExit(3)

    out = Lines()
    line = json.dumps(request(9, "tools/call", {"name": "leave"})) + "\n"
    try:
        StdioServer(own, io.StringIO(line), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-exits", None)
    assert out.messages() == [
        {"jsonrpc": "2.0", "id": 9, "error": {"code": -32603, "message": "Internal error"}}
    ]


def test_a_line_over_max_body_bytes_is_refused_unread_and_the_session_goes_on(
    settings: Any,
) -> None:
    settings.MCP_APP = {**settings.MCP_APP, "MAX_BODY_BYTES": 300}
    huge = json.dumps(request(1, "tools/call", {"name": "add", "arguments": {"x": "y" * 5000}}))
    out = serve(huge, request(2, "tools/list"))
    assert out[0] == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Message over MAX_BODY_BYTES (300 characters)"},
    }
    assert by_id(out)[2]["result"]["tools"][0]["name"] == "add"


def test_missing_meta_is_refused() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    assert serve(message)[0]["error"]["code"] == -32602


def test_progress_arrives_before_the_result() -> None:
    out = serve(request(7, "tools/call", {"name": "test_tool_with_progress"}, progressToken="t"))
    progress = [m["params"]["progress"] for m in out if m.get("method") == "notifications/progress"]
    assert progress == [0, 50, 100]
    assert out[-1]["id"] == 7


def test_input_required_then_answered() -> None:
    first = serve(
        request(
            1,
            "tools/call",
            {"name": "greet"},
            **{"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}},
        )
    )[0]["result"]
    assert first["resultType"] == "input_required"
    answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    params = {"name": "greet", "inputResponses": answer, "requestState": first["requestState"]}
    second = serve(request(2, "tools/call", params))[0]["result"]
    assert second["content"][0]["text"] == "Hello, Ada!"


def test_listen_acknowledges_and_streams_until_cancelled() -> None:
    reader, writer = os.pipe()
    inbox = os.fdopen(reader, "r")
    feed = os.fdopen(writer, "w")
    out = Lines()
    server = StdioServer(mcp_app.site, inbox, out)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    feed.write(
        json.dumps(
            request(9, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        )
        + "\n"
    )
    feed.flush()
    deadline = time.monotonic() + 5
    while not out.messages() and time.monotonic() < deadline:
        time.sleep(0.01)
    mcp_app.site.add_tool(lambda a, c: "x", name="stdio_temporary")
    mcp_app.site.remove_tool("stdio_temporary")
    feed.write(
        json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
        )
        + "\n"
    )
    feed.close()
    thread.join(5)
    methods = [m["method"] for m in out.messages()]
    assert methods[0] == "notifications/subscriptions/acknowledged"
    assert "notifications/tools/list_changed" in methods
    assert all(
        m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 9 for m in out.messages()
    )


def test_a_change_made_while_the_acknowledgement_is_written_follows_it() -> None:
    own = mcp_app.Server("stdio-listen-window", rows=False)

    class Out(Lines):
        def write(self, text: str) -> int:
            written = super().write(text)
            if "subscriptions/acknowledged" in text:
                # A change lands while the client is still reading the acknowledgement.
                own.add_tool(lambda a, c: "x", name="arrived")
            return written

    listen = request(4, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    out = Out()
    try:
        StdioServer(own, io.StringIO(json.dumps(listen) + "\n"), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-listen-window", None)
    methods = [m.get("method") for m in out.messages()]
    assert methods == [
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
    ]


def test_a_cancel_naming_no_valid_request_id_cancels_nothing() -> None:
    own = mcp_app.Server("stdio-cancel-other", rows=False)

    @own.tool()
    def hold(arguments: dict[str, Any], context: Any) -> str:
        return "cancelled" if context.cancelled.wait(1.0) else "ran on"

    call = request(1, "tools/call", {"name": "hold"})
    cancels = [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": other}}
        for other in (True, 1.0, [1])
    ]
    lines = "".join(json.dumps(m) + "\n" for m in [call, *cancels])
    out = Lines()
    try:
        StdioServer(own, io.StringIO(lines), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-cancel-other", None)
    # True == 1 and 1.0 == 1 in Python, but neither is request 1's id.
    assert by_id(out.messages())[1]["result"]["content"][0]["text"] == "ran on"


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_a_cancelled_request_gets_no_response(era: str) -> None:
    own = mcp_app.Server("stdio-cancel", rows=False)
    started = threading.Event()

    @own.tool()
    def hold(arguments: dict[str, Any], context: Any) -> str:
        started.set()
        context.cancelled.wait(10)
        return "stopped"

    call: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    if era == "modern":
        call = request(7, "tools/call", {"name": "hold"})
        opening: list[dict[str, Any]] = []
    else:
        call["params"] = {"name": "hold"}
        opening = [
            initialize(),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ]
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    out = Lines()
    began = time.monotonic()
    try:
        StdioServer(own, Held([*opening, call, cancel], len(opening) + 1, started), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-cancel", None)
    assert time.monotonic() - began < 5
    assert 7 not in by_id(out.messages())
    from mcp_app.models import ToolCall

    row = ToolCall.objects.get(server="stdio-cancel", name="hold")
    assert (row.outcome, row.error) == ("cancelled", "Cancelled by the client; not sent: complete")


def test_a_task_started_before_the_cancel_is_still_answered() -> None:
    from mcp_app import run_as_task, tasks
    from mcp_app.protocol.tasks import EXTENSION

    own = mcp_app.Server("stdio-cancel-task", rows=False)
    started = threading.Event()

    @own.tool(task="optional")
    def job(arguments: dict[str, Any], context: Any) -> Any:
        started.set()
        context.cancelled.wait(10)  # the cancel comes while the task is being made
        return run_as_task(lambda task: "done")

    caps = {"extensions": {EXTENSION: {}}}
    call = request(8, "tools/call", {"name": "job"})
    call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = caps
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}}
    out = Lines()
    try:
        StdioServer(own, Held([call, cancel], 1, started), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-cancel-task", None)
    # The task runs on: the client needs its id to follow or cancel it.
    answer = by_id(out.messages())[8]
    assert answer["result"]["resultType"] == "task", answer
    # Its thread writes how it ended; the test's database is emptied only once it has.
    deadline = time.monotonic() + 10
    while answer["result"]["taskId"] in tasks.running():
        assert time.monotonic() < deadline, "the task did not end"
        time.sleep(0.01)


class TaskSession:
    """A stdio session on a server of one task tool, fed through a pipe as a client would."""

    def __init__(self, name: str, work: Any) -> None:
        from mcp_app import run_as_task
        from mcp_app.protocol.tasks import EXTENSION

        self.name = name
        self.server = mcp_app.Server(name, rows=False)

        @self.server.tool(task="optional")
        def job(arguments: dict[str, Any], context: Any) -> Any:
            return run_as_task(work)

        self.caps = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}}}
        reader, writer = os.pipe()
        self.feed = os.fdopen(writer, "w")
        self.out = Lines()
        stdio = StdioServer(self.server, os.fdopen(reader, "r"), self.out)
        self.thread = threading.Thread(target=stdio.serve, daemon=True)
        self.thread.start()

    def send(self, message: dict[str, Any]) -> None:
        if "params" in message and "_meta" in message["params"]:
            message["params"]["_meta"].update(self.caps)
        self.feed.write(json.dumps(message) + "\n")
        self.feed.flush()

    def messages(self, count: int, seconds: float = 5) -> list[dict[str, Any]]:
        deadline = time.monotonic() + seconds
        while len(self.out.messages()) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.out.messages()

    def ended_task(self) -> str:
        from mcp_app import tasks

        self.send(request(1, "tools/call", {"name": "job"}))
        task_id = str(self.messages(1)[0]["result"]["taskId"])
        deadline = time.monotonic() + 10
        while task_id in tasks.running() and time.monotonic() < deadline:
            time.sleep(0.01)
        return task_id

    def listen(self, task_id: str) -> None:
        self.send(request(2, "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}))

    def close(self) -> None:
        self.feed.close()
        self.thread.join(5)
        mcp_app.server.servers.pop(self.name, None)


def test_a_listen_stream_sends_a_followed_task_that_ended_before_it_opened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_app import tasks
    from mcp_app.delivery import tell

    session = TaskSession("stdio-listen-task", lambda task: "done")
    try:
        task_id = session.ended_task()
        read = tasks.states

        def states(server: str, caller: str, task_ids: list[str]) -> list[Any]:
            now = read(server, caller, task_ids)
            # Published from another thread while the stream opens: an older state of the
            # task (an announcement that read the row before it ended), which says less.
            older = {**now[0], "status": "working", "lastUpdatedAt": "2000-01-01T00:00:00.000Z"}
            elsewhere = threading.Thread(
                target=tell, args=(session.server.channel(f"task:{task_id}"), {"task": older})
            )
            elsewhere.start()
            elsewhere.join()
            return now

        monkeypatch.setattr(tasks, "states", states)
        session.listen(task_id)
        written = session.messages(4, seconds=2)[1:]
        session.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        )
    finally:
        session.close()
    assert written[0]["method"] == "notifications/subscriptions/acknowledged"
    # The state it has, once, and not the older one after it.
    assert [m["params"]["status"] for m in written[1:]] == ["completed"]


def test_a_listen_stream_whose_backlog_fails_leaves_no_subscription(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_app import tasks
    from mcp_app.delivery import backend

    session = TaskSession("stdio-listen-fails", lambda task: "done")
    try:
        task_id = session.ended_task()

        def states(server: str, caller: str, task_ids: list[str]) -> list[Any]:
            raise RuntimeError("the database is down")

        monkeypatch.setattr(tasks, "states", states)
        session.listen(task_id)
        answer = session.messages(2)[1]
    finally:
        session.close()
    assert answer["id"] == 2 and answer["error"]["code"] == -32603
    channel = session.server.channel(f"task:{task_id}")
    assert backend().subscriber_count(channel) == 0  # type: ignore[attr-defined]


def test_tasks_still_running_when_the_session_ends_are_failed_at_once() -> None:
    from mcp_app import run_as_task, tasks
    from mcp_app.models import Task
    from mcp_app.protocol.tasks import EXTENSION

    own = mcp_app.Server("stdio-task-left", rows=False)
    working, stopped = threading.Event(), threading.Event()

    @own.tool(task="optional")
    def long_job(arguments: dict[str, Any], context: Any) -> Any:
        def work(task: Any) -> str:
            working.set()
            if task.cancelled.wait(10):
                stopped.set()
            return "finished"

        return run_as_task(work)

    call = request(9, "tools/call", {"name": "long_job"})
    caps = {"extensions": {EXTENSION: {}}}
    call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = caps
    reader, writer = os.pipe()
    inbox, feed = os.fdopen(reader, "r"), os.fdopen(writer, "w")
    out = Lines()
    session = threading.Thread(target=StdioServer(own, inbox, out).serve, daemon=True)
    session.start()
    try:
        feed.write(json.dumps(call) + "\n")
        feed.flush()
        assert working.wait(5)
        started = time.monotonic()
        feed.close()  # the client leaves while the work runs
        session.join(10)
    finally:
        mcp_app.server.servers.pop("stdio-task-left", None)
    task_id = by_id(out.messages())[9]["result"]["taskId"]
    # Not left "working" for the lease's 60 s: failed as the session ended, its work told.
    assert task_id not in tasks.running()
    row = Task.objects.get(pk=task_id)
    assert (row.status, row.error["message"]) == (
        "failed",
        "The stdio session ended before the task did",
    )
    assert stopped.wait(5)
    assert time.monotonic() - started < 5


def test_a_cancelled_requests_id_is_free_at_once() -> None:
    own = mcp_app.Server("stdio-cancel-reuse", rows=False)
    release = threading.Event()

    @own.tool()
    def hold(arguments: dict[str, Any], context: Any) -> str:
        release.wait(10)  # a handler that does not look at the cancel
        return "stopped"

    @own.tool()
    def quick(arguments: dict[str, Any], context: Any) -> str:
        release.set()
        return "quick"

    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    messages = [request(7, "tools/call", {"name": "hold"}), cancel]
    messages.append(request(7, "tools/call", {"name": "quick"}))
    lines = "".join(json.dumps(m) + "\n" for m in messages)
    out = Lines()
    try:
        StdioServer(own, io.StringIO(lines), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-cancel-reuse", None)
    answers = [m for m in out.messages() if m.get("id") == 7]
    assert [a["result"]["content"][0]["text"] for a in answers] == ["quick"]


class Running:
    """Counts the handlers running at once, the most that ever did, and all that ran."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = self.ran = 0

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.ran += 1
            self.most = max(self.most, self.now)

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.now -= 1


def _wait_for(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _batch_session(*batches: list[Any]) -> list[Any]:
    """A 2025-03-26 session's lines: its initialization, then ``batches``."""
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    return [initialize("2025-03-26"), initialized, *batches]


def _call(request_id: Any, name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name}}


def test_at_most_max_batch_calls_of_a_batch_run_at_once_and_each_is_answered() -> None:
    own = mcp_app.Server("stdio-pool", rows=False)
    running = Running()

    @own.tool()
    def busy(arguments: dict[str, Any], context: Any) -> str:
        with running:
            time.sleep(0.05)
        return "done"

    count = 10 * stdio.MAX_BATCH_CALLS
    messages = _batch_session([_call(i, "busy") for i in range(2, count + 2)])
    out = Lines()
    lines = "".join(json.dumps(m) + "\n" for m in messages)
    try:
        StdioServer(own, io.StringIO(lines), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-pool", None)
    (answers,) = [m for m in out.messages() if isinstance(m, list)]
    done = [a for a in answers if a["result"]["content"][0]["text"] == "done"]
    assert len(done) == count == running.ran
    assert 1 < running.most <= stdio.MAX_BATCH_CALLS


def test_calls_on_lines_of_their_own_never_wait_behind_calls_waiting_for_the_client() -> None:
    from mcp_app import elicit, input_required

    own = mcp_app.Server("stdio-pool-ask", rows=False)

    @own.tool()
    def ask(arguments: dict[str, Any], context: Any) -> Any:
        answer = context.input_response("name")
        if not isinstance(answer, dict):
            return input_required({"name": elicit("Who?", {"properties": {"name": {}}})})
        return f"Hello, {answer['content']['name']}!"

    many = stdio.MAX_BATCH_CALLS + 4
    feed, out, session, send = _piped(own)

    def asked() -> list[str]:
        return [m["id"] for m in out.messages() if m.get("method") == "elicitation/create"]

    try:
        init = initialize()
        init["params"]["capabilities"] = {"elicitation": {}}
        send(init)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        calls = range(10, 10 + many)
        for i in calls:
            send(_call(i, "ask"))
        # Every call asks at once; the client then needs the tools' list before it answers,
        # which must not wait behind the calls waiting for it.
        _wait_for(lambda: len(asked()) == many)
        send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        _wait_for(lambda: "list" in by_id(out.messages()), seconds=5)
        for question in asked():
            result = {"action": "accept", "content": {"name": "Ada"}}
            send({"jsonrpc": "2.0", "id": question, "result": result})
        _wait_for(lambda: all(i in by_id(out.messages()) for i in calls))
    finally:
        feed.close()
        session.join(10)
        mcp_app.server.servers.pop("stdio-pool-ask", None)
    final = by_id(out.messages())
    assert [final[i]["result"]["content"][0]["text"] for i in calls] == ["Hello, Ada!"] * many


def _piped(
    server: Any,
) -> tuple[IO[str], Lines, threading.Thread, Callable[[dict[str, Any]], None]]:
    """A session of ``server`` served in a thread from a pipe: the pipe's writing end (close
    it to end the input), the output, the thread, and a function sending one message."""
    reader, writer = os.pipe()
    feed, out = os.fdopen(writer, "w"), Lines()
    session = threading.Thread(
        target=StdioServer(server, os.fdopen(reader, "r"), out).serve, daemon=True
    )
    session.start()

    def send(message: dict[str, Any]) -> None:
        feed.write(json.dumps(message) + "\n")
        feed.flush()

    return feed, out, session, send


def _queued_behind_a_full_pool(name: str, hold: Callable[[Any], object]) -> tuple[Any, Running]:
    """A server of ``hold`` (which takes a place while it runs ``hold(context)``) and ``queued``
    (counted by the ``Running`` given back)."""
    own = mcp_app.Server(name, rows=False)
    ran = Running()

    @own.tool(name="hold")
    def holding(arguments: dict[str, Any], context: Any) -> str:
        hold(context)
        return "held"

    @own.tool()
    def queued(arguments: dict[str, Any], context: Any) -> str:
        with ran:
            return "ran"

    return own, ran


def test_a_queued_call_cancelled_before_it_starts_never_runs() -> None:
    from mcp_app.models import ToolCall

    release = threading.Event()
    held = Running()

    def hold(context: Any) -> None:
        with held:
            release.wait(10)

    own, ran = _queued_behind_a_full_pool("stdio-pool-cancel", hold)
    places = stdio.MAX_BATCH_CALLS
    feed, out, session, send = _piped(own)
    try:
        batch = [*(_call(i, "hold") for i in range(2, places + 2)), _call("late", "queued")]
        for message in _batch_session(batch):
            send(message)
        _wait_for(lambda: held.now == places)
        send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "late"}}
        )
        # Answered by the reader itself, once it has read the cancel.
        send({"jsonrpc": "2.0", "id": "seen", "method": "ping"})
        _wait_for(lambda: "seen" in by_id(out.messages()))
        release.set()
        feed.close()
        session.join(10)
    finally:
        mcp_app.server.servers.pop("stdio-pool-cancel", None)
    (answers,) = [m for m in out.messages() if isinstance(m, list)]
    assert ran.ran == 0 and "late" not in by_id(answers)
    assert [a["result"]["content"][0]["text"] for a in answers] == ["held"] * places
    row = ToolCall.objects.get(server="stdio-pool-cancel", name="queued")
    assert (row.outcome, row.error) == ("cancelled", "")


def test_calls_still_queued_when_the_drain_ends_are_cancelled_without_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_app.models import ToolCall

    monkeypatch.setattr(stdio, "DRAIN_SECONDS", 0.2)
    own, ran = _queued_behind_a_full_pool("stdio-pool-drain", lambda c: c.cancelled.wait(10))
    places = stdio.MAX_BATCH_CALLS
    batch = [_call(i, "hold") for i in range(2, places + 2)]
    messages = _batch_session(batch + [_call(f"q{i}", "queued") for i in range(3)])
    out = Lines()
    started = time.monotonic()
    try:
        StdioServer(own, io.StringIO("".join(json.dumps(m) + "\n" for m in messages)), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-pool-drain", None)
    assert time.monotonic() - started < 5
    assert ran.ran == 0 and [m for m in out.messages() if m.get("id") != 1] == []
    rows = ToolCall.objects.filter(server="stdio-pool-drain")
    assert sorted((row.name, row.outcome) for row in rows) == sorted(
        [("hold", "cancelled")] * places + [("queued", "cancelled")] * 3
    )


def test_an_initialize_era_subscription_to_a_hidden_resource_tells_nothing() -> None:
    own = mcp_app.Server("stdio-hidden", rows=False)

    @own.resource("memo://hidden", name="hidden", permission=lambda user: False)
    def hidden(context: Any) -> str:
        return "hidden"

    @own.resource("memo://open", name="open")
    def opened(context: Any) -> str:
        return "open"

    @own.tool()
    def poke(arguments: dict[str, Any], context: Any) -> str:
        own.notify_resource_updated("memo://hidden")
        own.notify_resource_updated("memo://open")
        return "poked"

    def subscribe(request_id: int, uri: str) -> dict[str, Any]:
        params = {"uri": uri}
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "resources/subscribe",
            "params": params,
        }

    poking = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "poke"}}
    messages = [initialize(), subscribe(2, "memo://hidden"), subscribe(3, "memo://open"), poking]
    out = Lines()

    class Input(io.StringIO):
        """The messages, then the end of input once the updates had time to arrive."""

        def readline(self, size: int | None = -1) -> str:
            line = super().readline(size)
            if not line:
                deadline = time.monotonic() + 3
                while "memo://open" not in out.getvalue() and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(0.1)  # and a little longer, for an update that should not come
            return line

    try:
        StdioServer(own, Input("".join(json.dumps(m) + "\n" for m in messages)), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-hidden", None)
    answers = by_id(out.messages())
    # Both subscriptions are acknowledged alike; only the readable resource is announced.
    assert answers[2]["result"] == answers[3]["result"] == {}
    updated = [
        m["params"]["uri"] for m in out.messages() if m.get("method", "").endswith("updated")
    ]
    assert updated == ["memo://open"]


def test_initialize_era_session_and_set_level() -> None:
    init = initialize("2025-06-18")
    out = by_id(
        serve(
            init,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            {"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "loud"}},
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "resources/read",
                "params": {"uri": "people://nobody"},
            },
            {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "greet"}},
        )
    )
    assert out[1]["result"]["protocolVersion"] == "2025-06-18"
    assert out[2]["result"] == {}
    assert out[3]["error"]["code"] == -32602
    assert out[4]["error"]["code"] == -32002
    assert out[5]["result"]["isError"] is True  # no elicitation capability declared


def test_dates_and_decimals_are_answered_as_over_http() -> None:
    import datetime
    from decimal import Decimal

    import mcp_app

    def priced(arguments: dict[str, Any], context: Any) -> Any:
        return {"price": Decimal("9.99"), "on": datetime.date(2026, 11, 30)}

    mcp_app.site.add_tool(priced, name="priced_over_stdio")
    try:
        out = by_id(serve(request(8, "tools/call", {"name": "priced_over_stdio"})))
    finally:
        mcp_app.site.remove_tool("priced_over_stdio")
    assert out[8]["result"]["structuredContent"] == {"price": "9.99", "on": "2026-11-30"}


def test_initialize_era_refuses_set_level_without_logging_and_a_bad_progress_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mcp_app

    monkeypatch.setattr(mcp_app.site.options, "logging", False)
    init = initialize()
    call = {"name": "test_simple_text", "_meta": {"progressToken": {"a": 1}}}
    out = by_id(
        serve(
            init,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "info"}},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call},
        )
    )
    assert "logging" not in out[1]["result"]["capabilities"]
    assert out[2]["error"]["code"] == -32601
    assert out[3]["error"]["code"] == -32602


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_the_http_limits_on_nesting_and_tool_arguments_hold_over_stdio(era: str) -> None:
    def call(request_id: int, arguments: dict[str, Any]) -> dict[str, Any]:
        if era == "2026-07-28":
            return request(request_id, "tools/call", {"name": "add", "arguments": arguments})
        params = {"name": "add", "arguments": arguments}
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    opening = [] if era == "2026-07-28" else [initialize(era)]
    deep = call(2, {"numbers": _nested(900)})
    large = call(3, {"numbers": [1] * 700_000})  # over 2 MB as JSON
    out = by_id(serve(*opening, deep, large, call(4, {"numbers": [1, 2]})))
    # Answered as over HTTP, each with its request's id, and the session goes on.
    assert out[2]["error"] == {"code": -32600, "message": "JSON nested deeper than 64 levels"}
    assert out[3]["error"] == {"code": -32602, "message": "Tool arguments over 1048576 bytes"}
    assert out[4]["result"]["structuredContent"] == {"sum": 3}


@pytest.mark.parametrize("limit", [10**30, sys.maxsize])
def test_any_max_body_bytes_lets_stdio_read(settings: Any, limit: int) -> None:
    settings.MCP_APP = {**settings.MCP_APP, "MAX_BODY_BYTES": limit}
    out = by_id(serve(request(1, "tools/list")))
    assert out[1]["result"]["tools"][0]["name"] == "add"


def _lines_out(out: list[Any]) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """The array lines (batches' answers, each sorted by id) and the other lines."""
    arrays = [
        sorted(m, key=lambda a: (str(a["id"]), "error" in a)) for m in out if isinstance(m, list)
    ]
    return arrays, [m for m in out if not isinstance(m, list)]


def test_a_2025_03_26_session_takes_batches() -> None:
    from mcp_app import input_required, roots

    own = mcp_app.Server("stdio-batch", rows=False)

    @own.tool()
    def where(arguments: dict[str, Any], context: Any) -> Any:
        return input_required({"roots": roots()})

    init = initialize("2025-03-26")
    init["params"]["capabilities"] = {"roots": {}}

    def message(request_id: Any, method: str, **params: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    batches = [
        [message(5, "ping"), message(6, "tools/list")],
        [],
        [message(7, "initialize", **init["params"]), message(8, "ping"), message(8, "ping")],
        # Neither a notification nor a response is answered, so neither is the batch.
        [initialized, {"jsonrpc": "2.0", "id": "elicit-1", "result": {"action": "decline"}}],
        # A request in a batch cannot ask the client for input.
        [message(9, "tools/call", name="where")],
        [7, [message(10, "ping")]],
    ]
    lines_in = [json.dumps(m) for m in [init, initialized, *batches]]
    out = Lines()
    try:
        StdioServer(own, io.StringIO("".join(line + "\n" for line in lines_in)), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-batch", None)
    arrays, lines = _lines_out(out.messages())
    assert by_id(lines)[1]["result"]["protocolVersion"] == "2025-03-26"
    assert [m for m in lines if "id" not in m] == [
        {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Empty batch"}}
    ]
    by_first = {batch[0]["id"]: batch for batch in arrays}
    assert sorted(by_first, key=str) == [5, 7, 9, None]
    pinged, listed = by_first[5]
    assert pinged == {"jsonrpc": "2.0", "id": 5, "result": {}}
    assert listed["id"] == 6 and listed["result"]["tools"][0]["name"] == "where"
    assert by_first[7] == [
        {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {"code": -32600, "message": "initialize cannot be batched"},
        },
        {"jsonrpc": "2.0", "id": 8, "result": {}},
        {
            "jsonrpc": "2.0",
            "id": 8,
            "error": {"code": -32600, "message": "Request id used twice in the batch"},
        },
    ]
    (greeted,) = by_first[9]
    assert greeted["result"]["isError"] is True
    assert greeted["result"]["content"][0]["text"] == (
        "Input cannot be asked for inside a batch; send the request on its own"
    )
    assert by_first[None] == [
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Nested batch"}},
    ]


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25", None])
def test_batches_are_refused_on_other_revisions(version: str | None) -> None:
    batch = json.dumps([{"jsonrpc": "2.0", "id": 5, "method": "ping"}])
    out = serve(*([initialize(version)] if version else []), batch)
    assert out[-1] == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Batches are accepted only on 2025-03-26"},
    }


def test_a_second_initialize_is_refused_and_the_session_kept() -> None:
    again = {**initialize("2025-11-25"), "id": 2}
    lines = "".join(json.dumps(m) + "\n" for m in [initialize("2025-06-18"), again])
    out = Lines()
    stdio = StdioServer(mcp_app.site, io.StringIO(lines), out)
    stdio.serve()
    assert by_id(out.messages())[2] == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {
            "code": -32600,
            "message": "The session is already initialized: a stdio stream has one session",
        },
    }
    assert stdio.session is not None and stdio.session.protocol_version == "2025-06-18"


def test_a_call_that_asks_the_client_once_its_input_ended_ends_at_once() -> None:
    from mcp_app import elicit, input_required
    from mcp_app.models import ToolCall

    own = mcp_app.Server("stdio-ask-late", rows=False)
    ended = threading.Event()

    @own.tool()
    def late(arguments: dict[str, Any], context: Any) -> Any:
        ended.wait(5)  # asks only once the client has closed its input
        return input_required({"name": elicit("Who?")})

    class Input(io.StringIO):
        def readline(self, size: int | None = -1) -> str:
            line = super().readline(size)
            if not line:
                ended.set()
            return line

    init = initialize()
    init["params"]["capabilities"] = {"elicitation": {}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "late"}}
    out = Lines()
    started = time.monotonic()
    try:
        StdioServer(own, Input("".join(json.dumps(m) + "\n" for m in [init, call])), out).serve()
    finally:
        mcp_app.server.servers.pop("stdio-ask-late", None)
    # No answer can come: the call does not wait for one, nor hold the drain.
    assert time.monotonic() - started < stdio.DRAIN_SECONDS
    assert 2 not in by_id(out.messages())
    assert ToolCall.objects.get(server="stdio-ask-late").outcome == "cancelled"


# -- end to end with the official client ----------------------------------------------


@pytest.fixture(scope="module")
def stdio_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stdio") / "db.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{path}",
    }
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    return path


async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
    answers = {
        "Who should I greet?": {"name": "Ada"},
        "Name?": {"name": "Ada"},
        "Color?": {"color": "blue"},
    }
    return types.ElicitResult(action="accept", content=answers[params.message])


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_official_client_over_stdio(stdio_db: Path, mode: str) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{stdio_db}",
    }
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp_stdio"], env=env, cwd=str(ROOT)
    )

    async def main() -> None:
        extra: dict[str, Any] = {"cache": None} if mode != "legacy" else {}
        with anyio.fail_after(60):
            await session(extra)

    async def session(extra: dict[str, Any]) -> None:
        async with Client(params, mode=mode, elicitation_callback=on_elicit, **extra) as c:
            assert c.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
            tools = await c.list_tools()
            assert tools.tools[0].name == "add"
            added = await c.call_tool("add", {"numbers": [1, 2]})
            assert added.structured_content == {"sum": 3}
            greet = await c.call_tool("greet", {})
            assert greet.content[0].text == "Hello, Ada!"
            steps = await c.call_tool("two-steps", {})
            assert steps.content[0].text == "Ada likes blue"

    anyio.run(main)


@pytest.mark.e2e
def test_the_command_reads_and_writes_utf_8_whatever_the_locale(stdio_db: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{stdio_db}",
        "PYTHONIOENCODING": "ascii",  # a locale whose streams cannot carry the answer
    }
    call = request(2, "tools/call", {"name": "greet", "arguments": {"name": "Łukasz"}})
    lines = b"\xff\n" + json.dumps(call).encode() + b"\n"
    done = subprocess.run(
        [sys.executable, "manage.py", "mcp_stdio"],
        cwd=ROOT,
        env=env,
        input=lines,
        capture_output=True,
        timeout=60,
    )
    out = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]
    # A byte that is not UTF-8 is a parse error, and the session goes on.
    assert out[0]["error"]["code"] == -32700
    assert out[1]["id"] == 2 and "Łukasz" in out[1]["result"]["content"][0]["text"]


@pytest.mark.e2e
def test_output_to_stdout_other_than_messages_goes_to_stderr(stdio_db: Path) -> None:
    # tests.stdio_stdout_settings logs to a handler bound to sys.stdout, and a subprocess of
    # the command writes to its descriptor 1: neither may fall between protocol messages.
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.stdio_stdout_settings",
        "DATABASE_URL": f"sqlite:///{stdio_db}",
    }
    tampered = request(1, "tools/call", {"name": "greet", "requestState": "not-signed"})
    lines = "".join(json.dumps(m) + "\n" for m in [tampered, request(2, "tools/list")])
    # And code that kept the stdout object from before writes to it without flushing.
    env.pop("PYTHONUNBUFFERED", None)
    script = (
        "import subprocess, sys; from django.core.management import execute_from_command_line\n"
        "import mcp_app.transport.stdio as s; original = s.StdioServer.serve; kept = sys.stdout\n"
        "def serve(self):\n"
        "    subprocess.run(['echo', 'from a subprocess'], check=True)\n"
        "    try:\n"
        "        return original(self)\n"
        "    finally:\n"
        "        kept.write('through a kept stdout\\n')  # after the last flush by logging\n"
        "s.StdioServer.serve = serve\n"
        "execute_from_command_line(['manage.py', 'mcp_stdio'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        input=lines.encode(),
        capture_output=True,
        timeout=60,
    )
    # Every line is a message (answered in any order).
    out = by_id([json.loads(line) for line in done.stdout.decode().splitlines()])
    assert sorted(out) == [1, 2]
    assert out[1]["error"]["code"] == -32602
    assert "requestState failed verification for tools/call" in done.stderr.decode()
    assert "from a subprocess" in done.stderr.decode()
    assert "through a kept stdout" in done.stderr.decode()


class Command:
    """``manage.py mcp_stdio`` in a process of its own, on the module's database, spoken to
    line by line as a client does."""

    def __init__(self, db: Path, stderr: Path) -> None:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": f"sqlite:///{db}",
            # SIGABRT then writes every thread's stack to stderr: see ``wait``.
            "PYTHONFAULTHANDLER": "1",
        }
        self.stderr = stderr
        with stderr.open("wb") as errors:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "mcp_stdio"],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
            )
        self.received: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.received.put(json.loads(line))

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def next(self) -> dict[str, Any]:
        return self.received.get(timeout=60)

    def wait(self, timeout: float) -> int:
        """The command's exit status, once it exits within ``timeout`` seconds.

        Raises:
            AssertionError: it did not; the message has every thread's stack at that moment.
        """
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(timeout=10)
            stacks = self.stderr.read_text()
            raise AssertionError(f"still running after {timeout} s:\n{stacks}") from None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


def _audit_rows(db: Path, after: int = 0) -> list[tuple[int, str, str]]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        query = "SELECT id, name, outcome FROM mcp_app_toolcall WHERE id > ? ORDER BY id"
        return list(connection.execute(query, (after,)))


@pytest.mark.e2e
@pytest.mark.parametrize("end", ["SIGTERM", "SIGINT", "end of input"])
def test_the_command_ends_gracefully_on_sigterm_sigint_or_the_end_of_input(
    stdio_db: Path, tmp_path: Path, end: str
) -> None:
    before = max([row[0] for row in _audit_rows(stdio_db)], default=0)
    command = Command(stdio_db, tmp_path / "stderr")
    try:
        init = initialize()
        init["params"]["capabilities"] = {"elicitation": {}}
        command.send(init)
        assert command.next()["id"] == 1
        command.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        add = {"name": "add", "arguments": {"numbers": [1, 2]}}
        command.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": add})
        assert command.next()["result"]["structuredContent"] == {"sum": 3}
        # A call that waits for the client's answer, which never comes.
        command.send(
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "greet"}}
        )
        assert command.next()["method"] == "elicitation/create"
        started = time.monotonic()
        if end == "end of input":
            assert command.process.stdin is not None
            command.process.stdin.close()
        else:
            command.process.send_signal(getattr(signal, end))
        returncode = command.wait(30)
        took = time.monotonic() - started
    finally:
        command.close()
    errors = command.stderr.read_text()
    assert returncode == 0, errors
    assert "Traceback" not in errors
    # The waiting call ended at once: it did not hold the drain.
    assert took < stdio.DRAIN_SECONDS
    # The finished call's audit row was queued (AUDIT_FLUSH_SECONDS) and is written all the
    # same, and so is the waiting call's.
    assert [row[1:] for row in _audit_rows(stdio_db, before)] == [
        ("add", "complete"),
        ("greet", "cancelled"),
    ]


def _start_a_slow_call(command: Command) -> None:
    """Initialize the command's session and start a call that runs a minute (id 2)."""
    command.send(initialize())
    assert command.next()["id"] == 1
    command.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    slow = {"name": "slow_compute", "arguments": {"seconds": 60}}
    command.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": slow})


def _ended_cancelling_the_slow_call(
    command: Command, returncode: int, took: float, stdio_db: Path, before: int
) -> None:
    """The command exited cleanly within 2 s, the slow call audited as cancelled."""
    errors = command.stderr.read_text()
    assert returncode == 0, errors
    assert "Traceback" not in errors
    assert took < 2
    assert [row[1:] for row in _audit_rows(stdio_db, before)] == [("slow_compute", "cancelled")]


@pytest.mark.e2e
def test_sigterm_while_the_calls_drain_cancels_them_at_once(stdio_db: Path, tmp_path: Path) -> None:
    # The official SDK closes the input, waits 2 s, sends SIGTERM, and kills 2 s later.
    before = max([row[0] for row in _audit_rows(stdio_db)], default=0)
    command = Command(stdio_db, tmp_path / "stderr")
    try:
        _start_a_slow_call(command)
        assert command.process.stdin is not None
        command.process.stdin.close()
        time.sleep(1)  # the drain is under way
        started = time.monotonic()
        command.process.send_signal(signal.SIGTERM)
        returncode = command.wait(30)
        took = time.monotonic() - started
    finally:
        command.close()
    _ended_cancelling_the_slow_call(command, returncode, took, stdio_db, before)


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_signals_repeated_while_the_command_ends_are_ignored(
    stdio_db: Path, tmp_path: Path, name: str
) -> None:
    signum = getattr(signal, name)
    before = max([row[0] for row in _audit_rows(stdio_db)], default=0)
    command = Command(stdio_db, tmp_path / "stderr")
    try:
        _start_a_slow_call(command)
        command.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert command.next()["id"] == 3  # the call has been read
        started = time.monotonic()
        # An impatient client, or a person pressing ^C again and again, till the process ends.
        while command.process.poll() is None and time.monotonic() - started < 30:
            command.process.send_signal(signum)
            time.sleep(0.005)
        returncode = command.wait(30)
        took = time.monotonic() - started
    finally:
        command.close()
    _ended_cancelling_the_slow_call(command, returncode, took, stdio_db, before)


def test_signals_are_given_back_after_the_command_unless_the_process_ends_with_it() -> None:
    from mcp_app.management.commands.mcp_stdio import SIGNALS, _handled

    before = [signal.getsignal(signum) for signum in SIGNALS]
    stopped: list[int] = []
    try:
        # As under call_command in a program that goes on: a repeated signal is ignored while
        # the command ends, and the program's own handlers are in place again after.
        with _handled(SIGNALS, lambda signum, frame: stopped.append(signum)):
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        assert stopped == [signal.SIGTERM]
        assert [signal.getsignal(signum) for signum in SIGNALS] == before
        # As manage.py mcp_stdio: ignored to the end of the process.
        with _handled(SIGNALS, lambda signum, frame: None, process_ends=True):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
        assert [signal.getsignal(signum) for signum in SIGNALS] == [signal.SIG_IGN] * 2
    finally:
        for signum, handler in zip(SIGNALS, before, strict=True):
            signal.signal(signum, handler)


class Renewals:
    """Counts the renewals of stdio streams (which check access again, in a thread of their
    own), so a test can wait for one that began after a change instead of sleeping."""

    def __init__(self) -> None:
        self.started = 0
        self.finished_from = 0  # the highest start number of a renewal that has finished
        self.changed = threading.Condition()

    def wrap(self, original: Callable[[Any], bool]) -> Callable[[Any], bool]:
        def renew(stream: Any) -> bool:
            with self.changed:
                self.started += 1
                number = self.started
            try:
                return original(stream)
            finally:
                with self.changed:
                    self.finished_from = max(self.finished_from, number)
                    self.changed.notify_all()

        return renew

    def mark(self) -> int:
        """The renewals begun so far."""
        with self.changed:
            return self.started

    def wait_after(self, mark: int, timeout: float = 10.0) -> None:
        """Wait until a renewal that began after ``mark`` has finished."""
        with self.changed:
            assert self.changed.wait_for(lambda: self.finished_from > mark, timeout)


@pytest.fixture
def renewals(monkeypatch: pytest.MonkeyPatch) -> Renewals:
    counted = Renewals()
    for cls in (Listen, stdio._Subscription):
        monkeypatch.setattr(cls, "renew", counted.wrap(cls.renew))
    return counted


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("when", ["renewed", "resources change"])
def test_a_subscription_checks_access_again_while_it_lasts(
    era: str, when: str, settings: Any, renewals: Renewals
) -> None:
    # Renewed every KEEPALIVE_SECONDS; or at once when resources change, long before that.
    keepalive = 0.1 if when == "renewed" else 60.0
    settings.MCP_APP = {**settings.MCP_APP, "KEEPALIVE_SECONDS": keepalive}
    allowed = {"now": True}
    own = mcp_app.Server("stdio-recheck", rows=False)

    @own.resource("memo://changing", name="changing", permission=lambda user: allowed["now"])
    def changing(context: Any) -> str:
        return "changing"

    reader, writer = os.pipe()
    feed = os.fdopen(writer, "w")
    out = Lines()
    server = StdioServer(own, os.fdopen(reader, "r"), out)
    thread = threading.Thread(target=server.serve, daemon=True)

    def send(message: dict[str, Any]) -> None:
        feed.write(json.dumps(message) + "\n")
        feed.flush()

    def updates_after(change: Any) -> int:
        """How many updates of the resource the client is sent after ``change`` and a renewal."""
        before = len(out.messages())
        change()
        mark = renewals.mark()
        if when == "resources change":
            n = len(own.catalog().resources)
            own.add_resource(lambda context: "x", uri=f"memo://other-{n}", name=f"other-{n}")
        renewals.wait_after(mark)
        own.notify_resource_updated("memo://changing")
        time.sleep(0.2)
        return sum(
            1 for m in out.messages()[before:] if m.get("method", "").endswith("resources/updated")
        )

    try:
        thread.start()
        if era == "2026-07-28":
            send(
                request(
                    2,
                    "subscriptions/listen",
                    {"notifications": {"resourceSubscriptions": ["memo://changing"]}},
                )
            )
        else:
            send(initialize(era))
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            send(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "resources/subscribe",
                    "params": {"uri": "memo://changing"},
                }
            )
        deadline = time.monotonic() + 5
        while not any(m.get("id") == 2 or "method" in m for m in out.messages()):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert updates_after(lambda: None) == 1
        assert updates_after(lambda: allowed.update(now=False)) == 0  # restricted since
        assert updates_after(lambda: allowed.update(now=True)) == 1  # readable again
    finally:
        feed.close()
        thread.join(5)
        mcp_app.server.servers.pop("stdio-recheck", None)
    assert not thread.is_alive()


@pytest.mark.parametrize("withdrawn", ["permission", "user made inactive"])
@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_a_permission_withdrawn_while_the_process_runs_counts_from_the_next_request(
    era: str, withdrawn: str
) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("operator")
    viewing = Permission.objects.get(codename="view_user")
    user.user_permissions.add(viewing)
    own = mcp_app.Server("stdio-operator", rows=False)
    own.add_tool(lambda arguments, context: "ok", name="audit-log", permission="auth.view_user")

    reader, writer = os.pipe()
    feed = os.fdopen(writer, "w")
    out = Lines()
    server = StdioServer(own, os.fdopen(reader, "r"), out, user=user)
    thread = threading.Thread(target=server.serve, daemon=True)

    def tools(request_id: int) -> list[str]:
        if era == "2026-07-28":
            message = request(request_id, "tools/list")
        else:
            message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
        feed.write(json.dumps(message) + "\n")
        feed.flush()
        deadline = time.monotonic() + 5
        while request_id not in by_id(out.messages()):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        return [t["name"] for t in by_id(out.messages())[request_id]["result"]["tools"]]

    try:
        thread.start()
        if era != "2026-07-28":
            feed.write(json.dumps(initialize(era)) + "\n")
            feed.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        assert tools(2) == ["audit-log"]
        if withdrawn == "permission":
            user.user_permissions.remove(viewing)
        else:
            user.is_active = False
            user.save()
        assert tools(3) == []
    finally:
        feed.close()
        thread.join(5)
        mcp_app.server.servers.pop("stdio-operator", None)
    assert not thread.is_alive()


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_the_capabilities_offered_follow_what_the_process_s_user_may_use_now(era: str) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("briefer")
    viewing = Permission.objects.get(codename="view_user")
    own = mcp_app.Server("stdio-briefer", rows=False)
    own.add_prompt(
        lambda arguments, context: "brief",
        name="brief",
        arguments=["topic"],
        complete={"topic": lambda value, arguments, context: ["budget"]},
        permission="auth.view_user",
    )

    def capabilities(request_id: int) -> dict[str, Any]:
        if era == "2026-07-28":
            first = request(request_id, "server/discover")
        else:
            first = {**initialize(era), "id": request_id}
        out = Lines()
        StdioServer(own, io.StringIO(json.dumps(first) + "\n"), out, user=user).serve()
        return by_id(out.messages())[request_id]["result"]["capabilities"]  # type: ignore[no-any-return]

    try:
        assert "completions" not in capabilities(1)
        # Granted while the process runs (the user object it holds is not told).
        user.user_permissions.add(viewing)
        assert "completions" in capabilities(2)
    finally:
        mcp_app.server.servers.pop("stdio-briefer", None)


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_a_failing_read_of_the_process_s_user_is_an_internal_error_and_serving_goes_on(
    era: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from django.contrib.auth import get_user_model
    from django.db import DatabaseError

    user = get_user_model().objects.create_user("unread")
    own = mcp_app.Server("stdio-unread", rows=False)
    own.add_tool(lambda arguments, context: "ok", name="echo")
    read = stdio.fresh_user
    failures = [DatabaseError("the database is down")] * 3

    def flaky(user: Any) -> Any:
        if failures:
            raise failures.pop()
        return read(user)

    monkeypatch.setattr(stdio, "fresh_user", flaky)
    if era == "2026-07-28":
        first = [request(1, "server/discover"), request(2, "subscriptions/listen")]
        first += [request(3, "tools/list"), request(4, "tools/list")]
    else:
        first = [{**initialize(era), "id": n} for n in (1, 2, 3, 4)]
    out = Lines()
    lines = "".join(json.dumps(message) + "\n" for message in first)
    StdioServer(own, io.StringIO(lines), out, user=user).serve()
    try:
        answers = by_id(out.messages())
        for request_id in (1, 2, 3):
            assert answers[request_id]["error"] == {"code": -32603, "message": "Internal error"}
        assert "result" in answers[4], answers[4]
        assert "the database is down" in caplog.text
    finally:
        mcp_app.server.servers.pop("stdio-unread", None)


class _Renewed:
    """A stream that counts its renewals; the first ``failures`` of them raise."""

    channels: list[str] = []
    renews = True
    stale = False

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.renewals = 0

    def notifications(self, channel: str, message: dict[str, Any]) -> list[Any]:
        return []

    def renew(self) -> bool:
        self.renewals += 1
        if self.renewals <= self.failures:
            raise RuntimeError("the database is down")
        return True


def test_a_renewal_that_fails_keeps_the_stream_and_is_logged_once(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_app.transport.stdio import _Renewals

    settings.MCP_APP = {**settings.MCP_APP, "KEEPALIVE_SECONDS": 0.05}

    renewals = _Renewals()
    stream = _Renewed(failures=3)
    forget = renewals.add(stream)
    deadline = time.monotonic() + 5
    while stream.renewals < 5:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    forget()
    renewals.stop()
    assert caplog.text.count("Could not renew a stream; it stays open") == 1


def test_the_renewals_thread_outlives_a_failing_pass(
    settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_app.transport.stdio import _Renewals

    settings.MCP_APP = {**settings.MCP_APP, "KEEPALIVE_SECONDS": 0.05}
    passes: list[int] = []
    renew_due = _Renewals._renew_due

    def failing_once(self: _Renewals) -> float:
        passes.append(1)
        if len(passes) == 1:
            raise RuntimeError("the settings could not be read")
        return renew_due(self)

    monkeypatch.setattr(_Renewals, "_renew_due", failing_once)

    renewals = _Renewals()
    stream = _Renewed()
    renewals.add(stream)
    deadline = time.monotonic() + 5
    while stream.renewals < 2:
        assert time.monotonic() < deadline, "the renewals stopped"
        time.sleep(0.01)
    renewals.stop()
    assert renewals.thread is not None
    renewals.thread.join(5)
    assert "The stdio renewals failed" in caplog.text


def test_an_inactive_user_is_refused_at_start() -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import CommandError, call_command

    get_user_model().objects.create_user("left", is_active=False)
    with pytest.raises(CommandError, match="The user 'left' is inactive"):
        call_command("mcp_stdio", user="left")


def test_a_session_follows_a_bounded_number_of_resources_by_bounded_uris(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_app.transport import stdio

    monkeypatch.setattr(stdio, "SUBSCRIPTIONS_MAX", 2)

    def subscribe(request_id: int, uri: str) -> dict[str, Any]:
        params = {"uri": uri}
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "resources/subscribe",
            "params": params,
        }

    messages = [
        initialize(),
        subscribe(2, "memo://1"),
        subscribe(3, "memo://2"),
        subscribe(4, "memo://1"),  # followed already: still two
        subscribe(5, "memo://3"),
        subscribe(6, "memo://" + "x" * 2048),
    ]
    answers = by_id(serve(*messages))
    assert answers[2]["result"] == answers[3]["result"] == answers[4]["result"] == {}
    assert answers[5]["error"] == {
        "code": -32602,
        "message": "At most 2 resources are followed at once",
    }
    assert "at most 2048 characters" in answers[6]["error"]["message"]
