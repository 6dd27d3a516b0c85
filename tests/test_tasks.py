"""Tasks of the 2026-07-28 tasks extension, through the endpoint: creation, polling, input,
cancellation, expiry, the caller they belong to, and what clients that do not follow tasks get."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import path
from django.utils import timezone

import mcp_app
from mcp_app import (
    ProtocolError,
    RequestContext,
    elicit,
    input_required,
    run_as_task,
    tasks,
    tool_error,
)
from mcp_app.models import Task, ToolCall
from mcp_app.protocol.tasks import EXTENSION
from mcp_app.testing import MCPClient
from project.urls import urlpatterns as site_patterns
from tests.conftest import modern_request, run_site_script

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

JSON = dict[str, Any]
FOLLOWS: JSON = {"elicitation": {}, "extensions": {EXTENSION: {}}}

jobs = mcp_app.Server("tasks-tests", rows=False)
#: Released by tests that hold a task's work in "working".
gate = threading.Event()


@jobs.tool(name="sync-only")
def sync_only(arguments: JSON, context: RequestContext) -> str:
    return "done at once"


@jobs.tool(name="slow", task="optional")
def slow(arguments: JSON, context: RequestContext) -> Any:
    def work(task: RequestContext) -> str:
        if task.cancelled.wait(float(arguments.get("seconds", 0))):
            return "stopped"
        return f"slept {arguments.get('seconds', 0)}"

    return run_as_task(work)


@jobs.tool(name="gated", task="optional")
def gated(arguments: JSON, context: RequestContext) -> Any:
    def work(task: RequestContext) -> str:
        gate.wait(10)
        return "through the gate"

    return run_as_task(work)


#: Whether callers may use "while-permitted"; tests that withdraw it put it back.
permit = {"on": True}


@jobs.tool(name="while-permitted", task="optional", permission=lambda user: permit["on"])
def while_permitted(arguments: JSON, context: RequestContext) -> Any:
    def work(task: RequestContext) -> Any:
        if not task.input_responses:
            return input_required({"go": elicit("Go on?")})
        return "went on"

    return run_as_task(work)


@jobs.tool(name="only-a-task", task="required")
def only_a_task(arguments: JSON, context: RequestContext) -> Any:
    return run_as_task(lambda task: "ran as a task")


@jobs.tool(name="tool-error", task="optional")
def tool_error_job(arguments: JSON, context: RequestContext) -> Any:
    return run_as_task(lambda task: tool_error("the job failed"))


@jobs.tool(name="raises", task="optional")
def raises(arguments: JSON, context: RequestContext) -> Any:
    def work(task: RequestContext) -> Any:
        raise RuntimeError("the disk is full")

    return run_as_task(work)


@jobs.tool(name="protocol-error", task="optional")
def protocol_error(arguments: JSON, context: RequestContext) -> Any:
    # The client's own words, as an error may quote them (a path, a name).
    quoted = f" {arguments['path']}" if "path" in arguments else ""

    def work(task: RequestContext) -> Any:
        raise ProtocolError(f"the backend refused{quoted}", code=-32603)

    return run_as_task(work)


@jobs.tool(name="exits", task="optional")
def exits(arguments: JSON, context: RequestContext) -> Any:
    import asyncio

    kinds = {"cancelled": asyncio.CancelledError, "exit": SystemExit}

    async def work(task: RequestContext) -> Any:
        raise kinds[arguments["kind"]]()

    return run_as_task(work)


@jobs.tool(name="asks-twice", task="optional")
def asks_twice(arguments: JSON, context: RequestContext) -> Any:
    form = {"type": "object", "properties": {"v": {"type": "string"}}}

    def work(task: RequestContext) -> Any:
        first = task.input_response("q")
        if task.state is None:
            # The same key in two rounds: the task's wire keys differ.
            return input_required({"q": elicit("First?", form)}, state={"round": 1})
        if task.state == {"round": 1}:
            return input_required({"q": elicit("Second?", form)}, state={"round": 2, "a": first})
        return f"{task.state['a']['content']['v']} then {first['content']['v']}"

    return run_as_task(work)


@jobs.tool(name="two-at-once", task="optional")
def two_at_once(arguments: JSON, context: RequestContext) -> Any:
    def work(task: RequestContext) -> Any:
        if not task.input_responses:
            return input_required({"a": elicit("A?"), "b": elicit("B?")})
        return json.dumps(sorted(task.input_responses))

    return run_as_task(work)


@jobs.tool(name="needs-sampling", task="optional")
def needs_sampling(arguments: JSON, context: RequestContext) -> Any:
    sample = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    return run_as_task(lambda task: input_required({"s": sample}))


@jobs.tool(name="async-work", task="optional")
def async_work(arguments: JSON, context: RequestContext) -> Any:
    async def work(task: RequestContext) -> str:
        return "from a coroutine"

    return run_as_task(work)


@jobs.tool(name="asks-first", task="required")
def asks_first(arguments: JSON, context: RequestContext) -> Any:
    answer = context.input_response("name")
    if answer is None:
        return input_required({"name": elicit("Name?")})
    return run_as_task(lambda task: f"Hello, {answer['content']['name']}!")


@jobs.tool(name="asks-then-works", task="optional")
def asks_then_works(arguments: JSON, context: RequestContext) -> Any:
    if context.input_response("name") is None:
        return input_required({"name": elicit("Name?")}, state={"asked": True})

    def work(task: RequestContext) -> str:
        # What the handler saw of its rounds, read by the work: in a task as at once.
        return f"Hello, {task.input_response('name')['content']['name']}! state={task.state}"

    return run_as_task(work)


plain = mcp_app.Server("tasks-tests-plain", rows=False)


@plain.tool(name="plain")
def plain_tool(arguments: JSON, context: RequestContext) -> str:
    return "plain"


#: A server whose one task tool a test removes.
passing = mcp_app.Server("tasks-tests-passing", rows=False)

urlpatterns = [
    *site_patterns,
    path("jobs/mcp", jobs.urls),
    path("plain/mcp", plain.urls),
    path("passing/mcp", passing.urls),
]


@pytest.fixture(autouse=True)
def tasks_end_with_the_test() -> Iterator[None]:
    gate.clear()
    yield
    # No work left running into the next test (its database is flushed).
    gate.set()
    for task_id in tasks.running():
        Task.objects.filter(pk=task_id).update(status="cancelled")
    deadline = time.monotonic() + 10
    while tasks.running() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not tasks.running()


def post(
    method: str,
    params: JSON | None = None,
    *,
    capabilities: JSON | None = None,
    client: Client | None = None,
    url: str = "/jobs/mcp",
    headers: JSON | None = None,
) -> Any:
    body, wire_headers = modern_request(method, params, capabilities=capabilities)
    if "taskId" in (params or {}):
        wire_headers["Mcp-Name"] = params["taskId"]  # type: ignore[index]
    wire_headers.update(headers or {})
    return (client or Client()).post(
        url, data=json.dumps(body), content_type="application/json", headers=wire_headers
    )


def call(name: str, arguments: JSON | None = None, **kwargs: Any) -> JSON:
    response = post("tools/call", {"name": name, "arguments": arguments or {}}, **kwargs)
    return response.json()  # type: ignore[no-any-return]


def start(name: str, arguments: JSON | None = None, **kwargs: Any) -> str:
    result = call(name, arguments, capabilities=FOLLOWS, **kwargs)["result"]
    assert result["resultType"] == "task", result
    return str(result["taskId"])


def get(task_id: str, **kwargs: Any) -> JSON:
    response = post("tasks/get", {"taskId": task_id}, capabilities=FOLLOWS, **kwargs)
    return response.json()  # type: ignore[no-any-return]


def until(
    task_id: str, done: Callable[[JSON], bool], seconds: float = 10.0, url: str = "/jobs/mcp"
) -> JSON:
    deadline = time.monotonic() + seconds
    while True:
        task = get(task_id, url=url)["result"]
        if done(task) or time.monotonic() > deadline:
            return task
        time.sleep(0.05)


def parked(task_id: str, seconds: float = 10.0, url: str = "/jobs/mcp") -> None:
    """Until the task waits for input and has announced it: its runner's round is over."""
    until(task_id, lambda t: t["status"] == "input_required", seconds, url)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        runner = tasks._watcher.tasks.get(task_id)
        if runner is None or not runner.busy:
            return
        time.sleep(0.01)
    raise AssertionError(f"task {task_id} did not finish its round")


def terminal(task_id: str) -> JSON:
    return until(task_id, lambda t: t["status"] in ("completed", "failed", "cancelled"))


def update(task_id: str, responses: Any) -> Any:
    params = {"taskId": task_id, "inputResponses": responses}
    return post("tasks/update", params, capabilities=FOLLOWS)


def cancel(task_id: str, **kwargs: Any) -> Any:
    return post("tasks/cancel", {"taskId": task_id}, capabilities=FOLLOWS, **kwargs)


# -- creating a task ----------------------------------------------------------------------------


def test_a_client_that_follows_tasks_gets_a_task_handle_it_can_poll_at_once() -> None:
    result = call("gated", capabilities=FOLLOWS)["result"]
    assert result["resultType"] == "task"
    assert result["status"] == "working"
    assert set(result) >= {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
    assert result["ttlMs"] == 3600 * 1000 and result["pollIntervalMs"] == 1000
    assert result["createdAt"].endswith("Z") and "T" in result["createdAt"]
    for absent in ("task", "result", "error", "inputRequests", "requestState", "ttl", "content"):
        assert absent not in result
    # Durable before the handle was sent: the next request finds it.
    got = get(result["taskId"])["result"]
    assert got["resultType"] == "complete"
    assert (got["taskId"], got["status"]) == (result["taskId"], "working")
    assert "result" not in got
    gate.set()
    done = terminal(result["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "through the gate"}]
    assert done["result"]["resultType"] == "complete"
    assert "_meta" not in done["result"]


def test_a_client_that_does_not_follow_tasks_gets_the_result_in_the_request() -> None:
    result = call("slow", {"seconds": 0})["result"]
    assert result["resultType"] == "complete"
    assert result["content"] == [{"type": "text", "text": "slept 0"}]
    assert not Task.objects.exists()


def test_a_tool_without_task_support_answers_in_the_request_for_everyone() -> None:
    result = call("sync-only", capabilities=FOLLOWS)["result"]
    assert result["resultType"] == "complete" and "taskId" not in result


def test_a_task_only_tool_refuses_a_client_that_does_not_follow_tasks() -> None:
    response = post("tools/call", {"name": "only-a-task", "arguments": {}})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    task_id = start("only-a-task")
    assert terminal(task_id)["result"]["content"][0]["text"] == "ran as a task"


def test_the_extension_is_advertised_by_servers_with_task_tools_only() -> None:
    caps = post("server/discover").json()["result"]["capabilities"]
    assert caps["extensions"] == {EXTENSION: {}}
    assert "tasks" not in caps
    caps = post("server/discover", url="/plain/mcp").json()["result"]["capabilities"]
    assert "extensions" not in caps


def test_async_work_runs_too() -> None:
    assert terminal(start("async-work"))["result"]["content"][0]["text"] == "from a coroutine"


# -- how work ends ---------------------------------------------------------------------------------


@pytest.mark.parametrize("capabilities", [FOLLOWS, {}])
@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_a_server_that_offers_no_tasks_serves_no_task_methods(
    method: str, capabilities: JSON
) -> None:
    response = post(method, {"taskId": "abc"}, capabilities=capabilities, url="/plain/mcp")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601


def test_a_task_tool_the_caller_may_not_use_offers_it_no_task_methods() -> None:
    allowed = {"on": False}

    def hidden(arguments: JSON, context: RequestContext) -> Any:
        return run_as_task(lambda task: "hidden")

    passing.add_tool(
        hidden, name="hidden-task-tool", task="optional", permission=lambda user: allowed["on"]
    )
    try:
        # As on a server with no task tool: no extension, and the methods are not served.
        discovered = post("server/discover", url="/passing/mcp").json()["result"]
        assert "extensions" not in discovered["capabilities"]
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            refused = post(method, {"taskId": "abc"}, capabilities=FOLLOWS, url="/passing/mcp")
            assert (refused.status_code, refused.json()["error"]["code"]) == (404, -32601)
        allowed["on"] = True
        discovered = post("server/discover", url="/passing/mcp").json()["result"]
        assert EXTENSION in discovered["capabilities"]["extensions"]
        unknown = post("tasks/get", {"taskId": "abc"}, capabilities=FOLLOWS, url="/passing/mcp")
        assert unknown.json()["error"]["code"] == -32602
    finally:
        passing.remove_tool("hidden-task-tool")


def test_a_caller_keeps_the_task_methods_for_its_tasks_once_no_tool_runs_as_one() -> None:
    def asks(arguments: JSON, context: RequestContext) -> Any:
        return run_as_task(lambda task: input_required({"go": elicit("Go on?")}))

    passing.add_tool(asks, name="last-task-tool", task="optional")
    task_id = start("last-task-tool", url="/passing/mcp")
    parked(task_id, url="/passing/mcp")
    passing.remove_tool("last-task-tool")
    assert (
        "extensions"
        not in (post("server/discover", url="/passing/mcp").json()["result"]["capabilities"])
    )
    # Its update fails it, as a call of the tool would be refused now, and it can be read.
    answer = {"1.go": {"action": "decline"}}
    params = {"taskId": task_id, "inputResponses": answer}
    assert post("tasks/update", params, capabilities=FOLLOWS, url="/passing/mcp").status_code == 200
    failed = get(task_id, url="/passing/mcp")["result"]
    assert (failed["status"], failed["error"]["message"]) == (
        "failed",
        "Unknown tool: last-task-tool",
    )
    # Another caller, with no task here, is not served them.
    other = Client()
    other.force_login(get_user_model().objects.create_user("someone-else"))
    refused = post(
        "tasks/get", {"taskId": task_id}, capabilities=FOLLOWS, url="/passing/mcp", client=other
    )
    assert (refused.status_code, refused.json()["error"]["code"]) == (404, -32601)


def test_a_tool_error_completes_the_task_with_an_error_result() -> None:
    done = terminal(start("tool-error"))
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True


def test_an_exception_in_the_work_is_an_error_result_as_for_a_handler() -> None:
    done = terminal(start("raises"))
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "the disk is full"


def test_a_protocol_error_fails_the_task_with_the_error() -> None:
    done = terminal(start("protocol-error"))
    assert done["status"] == "failed"
    assert done["error"] == {"code": -32603, "message": "the backend refused"}
    assert "result" not in done


def test_an_error_quoting_a_nul_fails_the_task_on_every_database() -> None:
    task_id = start("protocol-error", {"path": "a\x00b"})
    done = terminal(task_id)
    assert done["status"] == "failed"
    # The answer keeps the client's words; the text column (no NUL on PostgreSQL) a stand-in.
    assert done["error"] == {"code": -32603, "message": "the backend refused a\x00b"}
    assert Task.objects.get(pk=task_id).status_message == "the backend refused a\ufffdb"


def test_a_task_whose_ending_cannot_be_kept_is_failed_not_left_working(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.db import DataError

    finish = tasks._finish

    def refuses_errors(rows: Any, status: str, **fields: Any) -> bool:
        if fields.get("message") == "the backend refused":
            raise DataError("value too long")
        return finish(rows, status, **fields)

    monkeypatch.setattr(tasks, "_finish", refuses_errors)
    started = time.monotonic()
    done = terminal(start("protocol-error"))
    assert done["status"] == "failed"
    assert done["error"] == {"code": -32603, "message": "Internal error"}
    # What the row cannot hold is not tried again (KEEP_RETRY_SECONDS would take 7.5 s).
    assert time.monotonic() - started < 5


def test_tasks_ended_as_the_process_goes_are_written_once_without_pauses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.db import OperationalError

    task_id = start("gated")
    tries: list[str] = []

    def unreachable(rows: Any, status: str, **fields: Any) -> bool:
        tries.append(status)
        raise OperationalError("the database is gone")

    monkeypatch.setattr(tasks, "_finish", unreachable)
    started = time.monotonic()
    assert tasks.end_running("The server shut down before the task ended") == 1
    # One try and the fallback's, no pauses: an exit has no 7.5 s to give each task.
    assert time.monotonic() - started < 1
    assert tries == ["failed", "failed"]
    assert task_id not in tasks.running()


@pytest.mark.parametrize("kind", ["cancelled", "exit"])
def test_work_that_raises_what_is_no_exception_fails_the_task(kind: str) -> None:
    done = terminal(start("exits", {"kind": kind}))
    assert done["status"] == "failed"
    assert done["error"]["code"] == -32603


def test_the_task_is_audited_as_one_call_when_it_ends() -> None:
    terminal(start("slow", {"seconds": 0}))
    deadline = time.monotonic() + 5
    while not ToolCall.objects.filter(name="slow").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    row = ToolCall.objects.get(name="slow")
    assert (row.method, row.outcome, row.era, row.rounds) == ("tools/call", "complete", "modern", 0)


# -- input -----------------------------------------------------------------------------------------


def test_input_is_asked_on_the_task_and_answered_by_update() -> None:
    task_id = start("asks-twice")
    first = until(task_id, lambda t: t["status"] == "input_required")
    assert list(first["inputRequests"]) == ["1.q"]
    assert first["inputRequests"]["1.q"]["params"]["message"] == "First?"
    ack = update(task_id, {"1.q": {"action": "accept", "content": {"v": "red"}}})
    assert ack.json()["result"] == {
        "resultType": "complete",
        "_meta": ack.json()["result"]["_meta"],
    }
    second = until(task_id, lambda t: "2.q" in t.get("inputRequests", {}))
    # The key of each round is new, so an answer is never taken for another question.
    assert list(second["inputRequests"]) == ["2.q"]
    update(task_id, {"2.q": {"action": "accept", "content": {"v": "blue"}}})
    assert terminal(task_id)["result"]["content"][0]["text"] == "red then blue"


def test_a_partial_update_keeps_the_task_waiting_for_the_rest() -> None:
    task_id = start("two-at-once")
    asked = until(task_id, lambda t: t["status"] == "input_required")
    assert sorted(asked["inputRequests"]) == ["1.a", "1.b"]
    update(task_id, {"1.a": {"action": "accept", "content": {}}, "never-asked": {}})
    partly = get(task_id)["result"]
    assert partly["status"] == "input_required"
    assert list(partly["inputRequests"]) == ["1.b"]
    update(task_id, {"1.b": {"action": "decline"}})
    assert terminal(task_id)["result"]["content"][0]["text"] == '["a", "b"]'


def test_a_malformed_answer_to_a_waiting_request_is_invalid_params() -> None:
    task_id = start("two-at-once")
    until(task_id, lambda t: t["status"] == "input_required")
    refused = update(task_id, {"1.a": {"action": "accept"}, "1.b": {"action": "sure"}})
    assert refused.json()["error"] == {
        "code": -32602,
        "message": "Invalid inputResponses['1.b']: an elicitation's answer needs 'action': "
        "accept, decline or cancel",
    }
    # Nothing of the update was kept.
    assert sorted(get(task_id)["result"]["inputRequests"]) == ["1.a", "1.b"]
    update(task_id, {"1.a": {"action": "decline"}, "1.b": {"action": "decline"}})
    assert terminal(task_id)["status"] == "completed"


def test_an_accepted_form_that_does_not_fit_its_schema_is_invalid_params() -> None:
    task_id = start("asks-twice")
    until(task_id, lambda t: t["status"] == "input_required")
    refused = update(task_id, {"1.q": {"action": "accept", "content": {"v": 7}}})
    assert refused.json()["error"] == {
        "code": -32602,
        "message": "Invalid inputResponses['1.q']: its content does not fit the form asked "
        "for: at /v: expected string, got integer",
    }
    assert list(get(task_id)["result"]["inputRequests"]) == ["1.q"]


def test_an_answer_sent_again_malformed_does_not_spoil_the_update() -> None:
    task_id = start("two-at-once")
    until(task_id, lambda t: t["status"] == "input_required")
    update(task_id, {"1.a": {"action": "decline"}})
    # 1.a is answered already: sent again, even malformed, it is neither checked nor kept.
    update(task_id, {"1.a": {"action": "sure"}, "1.b": {"action": "decline"}})
    assert terminal(task_id)["status"] == "completed"


def test_a_null_answer_in_an_update_counts_as_missing() -> None:
    task_id = start("two-at-once")
    until(task_id, lambda t: t["status"] == "input_required")
    update(task_id, {"1.a": None, "1.b": {"action": "decline"}})
    assert list(get(task_id)["result"]["inputRequests"]) == ["1.a"]
    update(task_id, {"1.a": {"action": "decline"}})
    assert terminal(task_id)["status"] == "completed"


def test_concurrent_partial_updates_keep_every_answer() -> None:
    task_id = start("two-at-once")
    until(task_id, lambda t: t["status"] == "input_required")
    threads = [
        threading.Thread(target=update, args=(task_id, {key: {"action": "decline"}}))
        for key in ("1.a", "1.b")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert terminal(task_id)["status"] == "completed"


def test_update_of_a_task_that_waits_for_nothing_is_acknowledged_and_ignored() -> None:
    task_id = start("gated")
    assert update(task_id, {"x": {}}).json()["result"]["resultType"] == "complete"
    gate.set()
    assert terminal(task_id)["status"] == "completed"


def test_update_needs_input_responses_as_an_object() -> None:
    task_id = start("gated")
    response = post("tasks/update", {"taskId": task_id}, capabilities=FOLLOWS)
    assert response.json()["error"]["code"] == -32602


def test_input_the_client_cannot_give_fails_the_task() -> None:
    done = terminal(start("needs-sampling"))
    assert done["status"] == "failed"
    assert done["error"]["code"] == -32021


def test_input_asked_before_the_task_is_a_multi_round_trip_of_the_request() -> None:
    first = call("asks-first", capabilities=FOLLOWS)["result"]
    assert first["resultType"] == "input_required" and "taskId" not in first
    params = {
        "name": "asks-first",
        "arguments": {},
        "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": first.get("requestState"),
    }
    params = {k: v for k, v in params.items() if v is not None}
    second = post("tools/call", params, capabilities=FOLLOWS).json()["result"]
    assert second["resultType"] == "task" and "requestState" not in second
    assert terminal(second["taskId"])["result"]["content"][0]["text"] == "Hello, Ada!"


@pytest.mark.parametrize("capabilities", [FOLLOWS, {"elicitation": {}}], ids=["task", "at-once"])
def test_the_work_sees_the_answers_and_state_of_the_requests_rounds(capabilities: JSON) -> None:
    first = call("asks-then-works", capabilities=capabilities)["result"]
    params = {
        "name": "asks-then-works",
        "arguments": {},
        "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": first["requestState"],
    }
    second = post("tools/call", params, capabilities=capabilities).json()["result"]
    result = terminal(second["taskId"])["result"] if "taskId" in second else second
    assert result["content"][0]["text"] == "Hello, Ada! state={'asked': True}"


# -- cancelling --------------------------------------------------------------------------------------


def test_cancel_ends_the_task_cancelled_and_tells_the_work() -> None:
    task_id = start("slow", {"seconds": 60})
    started = time.monotonic()
    ack = cancel(task_id).json()["result"]
    assert ack["resultType"] == "complete"
    assert not {"taskId", "status", "result", "error"} & set(ack)
    assert get(task_id)["result"]["status"] == "cancelled"
    # The work saw its cancelled event and ended long before its 60 seconds.
    deadline = time.monotonic() + 5
    while not ToolCall.objects.filter(name="slow").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert time.monotonic() - started < 10
    assert ToolCall.objects.get(name="slow").outcome == "cancelled"
    assert get(task_id)["result"]["status"] == "cancelled"


def test_cancelling_a_waiting_task_ends_its_wait() -> None:
    task_id = start("two-at-once")
    until(task_id, lambda t: t["status"] == "input_required")
    cancel(task_id)
    done = get(task_id)["result"]
    assert done["status"] == "cancelled" and "inputRequests" not in done


def test_cancelling_an_ended_task_is_acknowledged_the_same() -> None:
    task_id = start("slow", {"seconds": 0})
    assert terminal(task_id)["status"] == "completed"
    assert cancel(task_id).json()["result"]["resultType"] == "complete"
    assert get(task_id)["result"]["status"] == "completed"


# -- whose task, and for how long ------------------------------------------------------------------------


def test_unknown_tasks_are_invalid_params() -> None:
    for method in ("tasks/get", "tasks/cancel"):
        response = post(method, {"taskId": "no-such-task"}, capabilities=FOLLOWS)
        assert response.json()["error"]["code"] == -32602
    response = update("no-such-task", {})
    assert response.json()["error"]["code"] == -32602


def test_a_task_belongs_to_its_caller() -> None:
    ada = Client()
    ada.force_login(get_user_model().objects.create_user("ada"))
    task_id = start("gated", client=ada)
    assert get(task_id, client=ada)["result"]["status"] == "working"
    bob = Client()
    bob.force_login(get_user_model().objects.create_user("bob"))
    for client in (bob, Client()):
        assert get(task_id, client=client)["error"]["code"] == -32602
        assert cancel(task_id, client=client).json()["error"]["code"] == -32602
    assert get(task_id, client=ada)["result"]["status"] == "working"


def test_a_task_past_its_time_to_live_is_unknown() -> None:
    task_id = start("slow", {"seconds": 0})
    terminal(task_id)
    Task.objects.filter(pk=task_id).update(expires=timezone.now() - timedelta(seconds=1))
    assert get(task_id)["error"]["code"] == -32602


def test_a_task_whose_process_stopped_vouching_for_it_is_failed() -> None:
    task_id = start("gated")
    Task.objects.filter(pk=task_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    done = get(task_id)["result"]
    assert done["status"] == "failed"
    assert "ended before it finished" in done["error"]["message"]
    gate.set()
    time.sleep(0.2)
    # What the work ends with later does not change a task that has ended.
    assert get(task_id)["result"]["status"] == "failed"


def test_a_task_failed_for_want_of_its_lease_is_announced() -> None:
    from mcp_app.testing import MCPClient

    client = MCPClient(jobs, capabilities=FOLLOWS)
    task_id = start("gated")
    Task.objects.filter(pk=task_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    got = client.listen({"taskIds": [task_id]}, count=2, during=lambda: get(task_id))
    # As it was when the stream opened, then its failure.
    opened, sent = got["notifications"]
    assert opened["params"]["status"] == "working"
    assert sent["params"]["status"] == "failed"
    gate.set()


def test_a_listen_stream_fails_a_followed_task_whose_process_ended(settings: Any) -> None:
    from mcp_app import tasks
    from mcp_app.testing import MCPClient

    settings.MCP_APP = {**settings.MCP_APP, "KEEPALIVE_SECONDS": 0.1}
    client = MCPClient(jobs, capabilities=FOLLOWS)
    task_id = start("gated")
    runner = tasks._watcher.tasks[task_id]
    # As if its process had ended: nothing renews its lease, which has run out.
    tasks._watcher.remove(task_id)
    Task.objects.filter(pk=task_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    # Nobody polls: the stream's own renewal finds the lapsed lease.
    got = client.listen({"taskIds": [task_id]}, count=2)
    opened, sent = got["notifications"]
    assert opened["params"]["status"] == "working"
    assert sent["params"]["status"] == "failed"
    assert "ended before it finished" in sent["params"]["error"]["message"]
    gate.set()
    # The round, which the watcher no longer counts, still writes its end: not while the
    # test's database is flushed (on PostgreSQL the two deadlocked).
    deadline = time.monotonic() + 10
    while runner.busy and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not runner.busy


def test_a_lease_renewed_since_it_was_found_lapsed_stands() -> None:
    from mcp_app import tasks

    task_id = start("gated")
    Task.objects.filter(pk=task_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    lapsed = tasks._rows(task_id)  # found lapsed; then its process renews the lease
    Task.objects.filter(pk=task_id).update(lease_until=timezone.now() + timedelta(seconds=60))
    tasks._fail_lapsed(jobs.endpoint, lapsed, task_id)
    assert Task.objects.get(pk=task_id).status == "working"
    gate.set()
    assert terminal(task_id)["status"] == "completed"


def test_a_task_whose_every_request_is_answered_is_working_until_it_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_app.delivery import backend

    task_id = start("two-at-once")
    until(task_id, lambda t: t["status"] == "input_required")
    # The news of the answers has not reached the process running the task yet.
    monkeypatch.setattr(backend(), "publish", lambda channel, message: None)
    update(task_id, {"1.a": {"action": "decline"}, "1.b": {"action": "decline"}})
    got = get(task_id)["result"]
    # input_required always names what it waits for: with nothing left, the task is working.
    assert (got["status"], got.get("inputRequests")) in [("working", None), ("completed", None)]
    assert terminal(task_id)["status"] == "completed"


def test_a_database_error_while_resuming_fails_the_task_rather_than_leaving_it_working(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.db import OperationalError

    from mcp_app import tasks

    task_id = start("two-at-once")
    until(task_id, lambda t: t["status"] == "input_required")
    real = tasks._announce
    armed = threading.Event()

    def flaky(endpoint: Any, announced: str, **extra: Any) -> None:
        if armed.is_set() and threading.current_thread().name == "mcp-call":
            armed.clear()
            raise OperationalError("server closed the connection unexpectedly")
        real(endpoint, announced, **extra)

    monkeypatch.setattr(tasks, "_announce", flaky)
    armed.set()
    update(task_id, {"1.a": {"action": "decline"}, "1.b": {"action": "decline"}})
    assert terminal(task_id)["status"] == "failed"
    # Let go of once its end is kept (just after the row says so).
    deadline = time.monotonic() + 5
    while task_id in tasks.running():
        assert time.monotonic() < deadline, "the task's runner was never let go of"
        time.sleep(0.02)


def test_a_result_is_kept_through_a_moment_without_the_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.db import OperationalError

    from mcp_app import tasks

    monkeypatch.setattr(tasks, "KEEP_RETRY_SECONDS", (0.05, 0.05))
    real = tasks._finish
    failures = iter([True])

    def flaky(rows: Any, status: str, **fields: Any) -> bool:
        if status == "completed" and next(failures, False):
            raise OperationalError("the database restarted")
        return real(rows, status, **fields)

    monkeypatch.setattr(tasks, "_finish", flaky)
    task_id = start("slow", {"seconds": 0})
    done = terminal(task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "slept 0"


# -- the wire ----------------------------------------------------------------------------------------


def test_task_methods_need_the_extension_declared_on_the_request() -> None:
    task_id = start("gated")
    for method, params in (
        ("tasks/get", {"taskId": task_id}),
        ("tasks/cancel", {"taskId": task_id}),
        ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
    ):
        error = post(method, params).json()["error"]
        assert error["code"] == -32021
        assert error["data"]["requiredCapabilities"] == {"extensions": {EXTENSION: {}}}


def test_task_methods_name_the_task_in_mcp_name() -> None:
    task_id = start("gated")
    mismatched = post(
        "tasks/get", {"taskId": task_id}, capabilities=FOLLOWS, headers={"Mcp-Name": "x"}
    )
    assert mismatched.status_code == 400
    assert mismatched.json()["error"]["code"] == -32020


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
def test_the_first_tasks_methods_are_not_served(method: str) -> None:
    assert post(method, {"taskId": "x"}, capabilities=FOLLOWS).json()["error"]["code"] == -32601


def test_a_legacy_task_param_makes_no_task_of_a_tool_without_support() -> None:
    params = {"name": "sync-only", "arguments": {}, "task": {"ttl": 1000}}
    result = post("tools/call", params, capabilities=FOLLOWS).json()["result"]
    assert result["resultType"] == "complete"


def test_task_methods_are_unknown_on_an_initialize_era_session() -> None:
    from mcp_app.testing import MCPClient, MCPClientError

    client = MCPClient(jobs, versions=["2025-11-25"])
    assert MCPClient.text(client.call_tool("slow", {"seconds": 0})) == "slept 0"
    with pytest.raises(MCPClientError) as caught:
        client.request("tasks/get", {"taskId": "x"})
    assert caught.value.code == -32601
    with pytest.raises(MCPClientError) as caught:
        client.call_tool("only-a-task")
    assert caught.value.code == -32602
    assert "runs only as a task, which needs 2026-07-28" in caught.value.message
    # It cannot be called here, so it is not listed here.
    listed = [tool["name"] for tool in client.list_tools()["tools"]]
    assert "only-a-task" not in listed and "slow" in listed
    client.close()


def test_a_long_running_task_keeps_its_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    lease = 2.0  # renewed every half second: a watcher held up for a while still renews in time
    monkeypatch.setattr(tasks, "LEASE_SECONDS", lease)
    monkeypatch.setattr(tasks, "WAKE_SECONDS", 0.05)
    task_id = start("gated")
    row = Task.objects.get(pk=task_id)
    # Once a renewal made after the first lease ended is in (one that runs past two leases
    # from the start): without renewals, tasks/get would fail the task by then.
    renewed_past = row.created + timedelta(seconds=2 * lease)
    deadline = time.monotonic() + 8  # the gated work ends by itself after 10 s
    while Task.objects.get(pk=task_id).lease_until <= renewed_past:  # type: ignore[operator]
        assert time.monotonic() < deadline, "the lease was not renewed"
        time.sleep(0.05)
    assert get(task_id)["result"]["status"] == "working"
    gate.set()
    assert terminal(task_id)["status"] == "completed"


def test_a_task_cancelled_where_no_message_reaches_its_process_is_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks, "WAKE_SECONDS", 0.05)
    task_id = start("slow", {"seconds": 60})
    # As another worker does it, with a delivery backend that does not reach this one.
    Task.objects.filter(pk=task_id).update(status="cancelled")
    deadline = time.monotonic() + 5
    while task_id in tasks.running() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert task_id not in tasks.running()
    assert get(task_id)["result"]["status"] == "cancelled"


# -- what the work ends with, and what the task keeps ------------------------------------------


@jobs.tool(name="dated", task="optional")
def dated(arguments: JSON, context: RequestContext) -> Any:
    import datetime
    from decimal import Decimal

    value = {"on": datetime.date(2026, 11, 30), "price": Decimal("9.99")}
    if arguments.get("set"):
        value["tags"] = {"a"}  # type: ignore[assignment]
    return run_as_task(lambda task: value)


@jobs.tool(name="in-a-transaction", task="optional")
def in_a_transaction(arguments: JSON, context: RequestContext) -> Any:
    from django.db import connection

    return run_as_task(lambda task: {"atomic": connection.in_atomic_block})


def test_a_result_with_dates_and_decimals_is_kept_as_it_is_answered() -> None:
    done = terminal(start("dated"))
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {"on": "2026-11-30", "price": "9.99"}


def test_a_result_json_cannot_carry_fails_the_task_as_its_answer_would() -> None:
    done = terminal(start("dated", {"set": True}))
    assert done["status"] == "failed"
    assert done["error"] == {"code": -32603, "message": "Internal error"}
    assert done["statusMessage"] == "Internal error"


def test_the_work_runs_outside_any_transaction(settings: Any) -> None:
    settings.MCP_APP = {**settings.MCP_APP, "ATOMIC": True}
    done = terminal(start("in-a-transaction"))
    # A task may run for minutes: it is not held in one transaction (it opens its own).
    assert done["result"]["structuredContent"] == {"atomic": False}


def test_a_task_past_its_time_to_live_is_failed_and_its_work_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks, "WAKE_SECONDS", 0.05)
    task_id = start("slow", {"seconds": 60})
    Task.objects.filter(pk=task_id).update(expires=timezone.now())
    deadline = time.monotonic() + 5
    while task_id in tasks.running() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert task_id not in tasks.running()
    row = Task.objects.get(pk=task_id)
    assert row.status == "failed" and "time to live" in row.error["message"]


def test_a_waiting_task_holds_no_thread() -> None:
    from mcp_app.transport.workers import workers

    started = [start("two-at-once") for _ in range(10)]
    for task_id in started:
        until(task_id, lambda t: t["status"] == "input_required")

    def busy() -> int:
        alive = sum(t.name == "mcp-call" and t.is_alive() for t in threading.enumerate())
        return alive - workers.idle

    deadline = time.monotonic() + 5
    while busy() and time.monotonic() < deadline:
        time.sleep(0.02)
    # Ten tasks wait for their client: every thread they ran on went back to the pool.
    assert busy() == 0
    for task_id in started:
        cancel(task_id)


def test_an_answer_from_a_caller_who_may_no_longer_use_the_tool_fails_the_task() -> None:
    from mcp_app.delivery import backend

    task_id = start("while-permitted")
    parked(task_id)
    heard: list[JSON] = []
    stop = backend().subscribe([jobs.channel(f"task:{task_id}")], lambda _, m: heard.append(m))
    permit["on"] = False
    try:
        assert update(task_id, {"1.go": {"action": "accept", "content": {}}}).status_code == 200
        failed = get(task_id)["result"]
        assert failed["status"] == "failed"
        assert failed["error"] == {
            "code": -32602,
            "message": "Unknown tool: while-permitted",
            "data": {"name": "while-permitted"},
        }
        # Its process is told at once (its watcher would also see the row within
        # WAKE_SECONDS), and runs no further round.
        deadline = time.monotonic() + 5
        while not any(m.get("ended") for m in heard) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert any(m.get("ended") for m in heard)
        while task_id in tasks.running() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert task_id not in tasks.running()
        assert get(task_id)["result"]["status"] == "failed"
    finally:
        permit["on"] = True
        stop()
    # Still permitted, the same answer runs the next round.
    other = start("while-permitted")
    parked(other)
    update(other, {"1.go": {"action": "accept", "content": {}}})
    assert terminal(other)["result"]["content"][0]["text"] == "went on"


def test_an_answer_already_given_is_not_replaced() -> None:
    task_id = start("two-at-once")
    until(task_id, lambda t: t["status"] == "input_required")
    update(task_id, {"1.a": {"action": "accept", "content": {}}})
    update(task_id, {"1.a": {"action": "decline"}})
    assert Task.objects.get(pk=task_id).answers == {"1.a": {"action": "accept", "content": {}}}


def test_a_task_failed_for_want_of_its_lease_is_audited_as_failed() -> None:
    task_id = start("gated")
    Task.objects.filter(pk=task_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert get(task_id)["result"]["status"] == "failed"
    gate.set()
    deadline = time.monotonic() + 5
    while not ToolCall.objects.filter(name="gated").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    row = ToolCall.objects.get(name="gated")
    assert row.outcome == "failed" and "ended before it finished" in row.error


@pytest.mark.parametrize("task_id", ["ab\x00cd", "x" * 65, "naïve", "tab\tid"])
def test_a_task_id_no_task_can_have_is_unknown_without_a_query(task_id: str) -> None:
    import base64

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    header = "=?base64?" + base64.b64encode(task_id.encode()).decode() + "?="
    with CaptureQueriesContext(connection) as queries:
        response = post(
            "tasks/get", {"taskId": task_id}, capabilities=FOLLOWS, headers={"Mcp-Name": header}
        )
    assert response.json()["error"]["code"] == -32602
    assert not [q for q in queries if "mcp_app_task" in q["sql"]]


def test_listening_for_task_ids_needs_the_extension() -> None:
    refused = post("subscriptions/listen", {"notifications": {"taskIds": ["t"]}})
    assert refused.json()["error"]["code"] == -32021
    malformed = post(
        "subscriptions/listen", {"notifications": {"taskIds": "t"}}, capabilities=FOLLOWS
    )
    assert malformed.json()["error"]["code"] == -32602


def test_a_task_that_cannot_get_a_thread_fails_and_is_let_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_thread(fn: Any) -> None:
        raise RuntimeError("can't start new thread")

    from types import SimpleNamespace

    # Only the tasks' pool: the request itself still runs.
    monkeypatch.setattr(tasks, "workers", SimpleNamespace(run=no_thread))
    task_id = start("slow", {"seconds": 0})
    assert task_id not in tasks.running()
    done = get(task_id)["result"]
    assert done["status"] == "failed" and done["statusMessage"] == "Could not run the task"


def test_a_task_ends_once_whichever_thread_ends_it() -> None:
    task_id = start("gated")
    runner = tasks._watcher.tasks[task_id]
    threads = [threading.Thread(target=runner.end, args=("cancelled",)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    gate.set()
    time.sleep(0.2)
    assert ToolCall.objects.filter(name="gated").count() == 1


def test_update_and_cancel_are_answered_when_the_backend_cannot_carry_the_news(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_app.delivery import backend

    task_id = start("two-at-once")
    until(task_id, lambda t: t["status"] == "input_required")

    def down(channel: str, message: Any) -> None:
        raise ConnectionError("the backend is down")

    monkeypatch.setattr(backend(), "publish", down)
    answer = {"action": "decline"}
    assert update(task_id, {"1.a": answer, "1.b": answer}).status_code == 200
    # The watcher reads the answers from the row.
    assert terminal(task_id)["status"] == "completed"
    other = start("gated")
    assert cancel(other).status_code == 200
    assert get(other)["result"]["status"] == "cancelled"


def test_an_update_wakes_the_task_even_when_the_task_cannot_be_read_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_app import tasks
    from mcp_app.delivery import backend

    heard: list[JSON] = []
    task_id = "t-unreadable"
    endpoint = jobs.endpoint
    unsubscribe = backend().subscribe(
        [tasks._channel(endpoint, task_id)], lambda channel, message: heard.append(message)
    )

    def unreadable(task_id: str) -> Any:
        raise ConnectionError("the database is gone")

    monkeypatch.setattr(tasks, "_rows", unreadable)
    try:
        tasks._announce(endpoint, task_id, answered=True)
    finally:
        unsubscribe()
    assert heard == [{"answered": True}]


def test_a_listen_stream_follows_the_callers_tasks_it_asked_for() -> None:
    from mcp_app.testing import MCPClient

    client = MCPClient(jobs, capabilities=FOLLOWS)
    task_id = start("two-at-once")
    # The row says input_required before the announcement goes out: a stream opened between
    # the two would hear it.
    parked(task_id)

    def answer() -> None:
        update(task_id, {"1.a": {"action": "decline"}, "1.b": {"action": "decline"}})

    got = client.listen({"taskIds": [task_id, "someone-elses"]}, count=3, during=answer)
    # Only the caller's own tasks are followed.
    assert got["acknowledged"]["notifications"] == {"taskIds": [task_id]}
    sent = [n for n in got["notifications"] if n["method"] == "notifications/tasks"]
    # As it was when the stream opened, then each change.
    assert [n["params"]["status"] for n in sent] == ["input_required", "working", "completed"]
    done = sent[-1]["params"]
    assert done["taskId"] == task_id
    assert done["result"]["content"][0]["text"] == '["a", "b"]'
    assert done["_meta"]["io.modelcontextprotocol/subscriptionId"] is not None


def test_a_partial_update_reaches_a_stream_that_follows_the_task() -> None:
    from mcp_app.testing import MCPClient

    client = MCPClient(jobs, capabilities=FOLLOWS)
    task_id = start("two-at-once")
    parked(task_id)

    def answer_one() -> None:
        update(task_id, {"1.a": {"action": "decline"}})

    got = client.listen({"taskIds": [task_id]}, count=2, during=answer_one)
    opened, partly = got["notifications"]
    assert sorted(opened["params"]["inputRequests"]) == ["1.a", "1.b"]
    # What tasks/get reads now: still waiting, for the one request left.
    assert partly["params"]["status"] == "input_required"
    assert list(partly["params"]["inputRequests"]) == ["1.b"]
    update(task_id, {"1.b": {"action": "decline"}})
    assert terminal(task_id)["status"] == "completed"


def test_a_cancel_reaches_a_stream_that_follows_the_task() -> None:
    from mcp_app.testing import MCPClient

    client = MCPClient(jobs, capabilities=FOLLOWS)
    task_id = start("gated")
    got = client.listen({"taskIds": [task_id]}, count=2, during=lambda: cancel(task_id))
    opened, sent = got["notifications"]
    assert opened["params"]["status"] == "working"
    assert (sent["method"], sent["params"]["status"]) == ("notifications/tasks", "cancelled")


def test_a_task_that_ended_before_the_stream_opened_is_sent_at_once() -> None:
    from mcp_app.testing import MCPClient

    client = MCPClient(jobs, capabilities=FOLLOWS)
    task_id = start("slow", {"seconds": 0})
    deadline = time.monotonic() + 10
    while get(task_id)["result"]["status"] == "working" and time.monotonic() < deadline:
        time.sleep(0.02)
    # Ended before the client listened: a client that follows tasks only by listening
    # would otherwise wait for ever.
    got = client.listen({"taskIds": [task_id]}, count=1, timeout=3)
    [sent] = got["notifications"]
    assert sent["params"]["taskId"] == task_id
    assert sent["params"]["status"] == "completed"


def test_a_task_keeps_its_arguments_only_as_the_audit_trail_does(settings: Any) -> None:
    task_id = start("slow", {"seconds": 0})
    assert Task.objects.get(pk=task_id).arguments is None
    settings.MCP_APP = {**settings.MCP_APP, "AUDIT_ARGUMENTS": True}
    task_id = start("slow", {"seconds": 0})
    assert Task.objects.get(pk=task_id).arguments == {"seconds": 0}


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_vouches_for_none_of_its_parents_tasks() -> None:
    import os

    from mcp_app import tasks as module

    runner = object.__new__(module._Runner)
    runner.task_id = "parent-task"
    with module._watcher.lock:
        module._watcher.tasks["parent-task"] = runner
    try:
        pid = os.fork()
        if pid == 0:  # the child
            os._exit(0 if module.running() == frozenset() else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert module.running() == frozenset({"parent-task"})
    finally:
        module._watcher.remove("parent-task")


def test_the_test_client_follows_a_task_with_its_requests() -> None:
    # tasks/get, tasks/update and tasks/cancel carry the task id in Mcp-Name.
    with MCPClient(jobs, capabilities=FOLLOWS) as client:
        started = client.request("tools/call", {"name": "slow", "arguments": {"seconds": 30}})
        assert started["resultType"] == "task"
        task_id = started["taskId"]
        assert client.request("tasks/get", {"taskId": task_id})["status"] == "working"
        client.request("tasks/cancel", {"taskId": task_id})
        assert client.request("tasks/get", {"taskId": task_id})["status"] == "cancelled"


# -- the process ending -------------------------------------------------------------------------


def test_a_process_that_exits_fails_the_tasks_it_runs_and_audits_them(tmp_path: Any) -> None:
    import sqlite3

    database = tmp_path / "exit.sqlite3"
    # A task of an hour, started through the site's endpoint; then the process ends.
    script = f"""
import json
import django
django.setup()
from django.test import Client
from tests.conftest import modern_request
body, headers = modern_request(
    "tools/call",
    {{"name": "slow_compute", "arguments": {{"seconds": 3600}}}},
    capabilities={{"extensions": {{{EXTENSION!r}: {{}}}}}},
)
answer = Client().post(
    "/mcp", json.dumps(body), content_type="application/json", headers=headers,
    HTTP_HOST="localhost",
).json()
assert answer["result"]["resultType"] == "task", answer
"""
    run_site_script(database, script)
    with sqlite3.connect(database) as db:
        tasks_rows = list(db.execute("SELECT status, status_message FROM mcp_app_task"))
        audited = list(db.execute("SELECT name, outcome FROM mcp_app_toolcall"))
    assert tasks_rows == [("failed", "The server shut down before the task ended")]
    assert [name for name, _ in audited] == ["slow_compute"]
