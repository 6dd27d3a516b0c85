"""The tasks extension's wire, without Django: shapes, keys and the checks of params."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from mcp_app.protocol import tasks
from mcp_app.protocol.jsonrpc import InvalidParams

CREATED = datetime(2026, 11, 30, 10, 30, 0, 123456, tzinfo=UTC)
UPDATED = datetime(2026, 11, 30, 10, 31, 0, tzinfo=UTC)


def task(status: str, message: str = "") -> dict[str, Any]:
    return tasks.task_fields("t1", status, CREATED, UPDATED, 60000, 1000, message)


def test_run_as_task_takes_a_callable() -> None:
    work = tasks.run_as_task(lambda ctx: "x")
    assert isinstance(work, tasks.TaskWork) and work.work(None) == "x"
    with pytest.raises(TypeError):
        tasks.run_as_task("not callable")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("capabilities", "follows"),
    [
        ({"extensions": {tasks.EXTENSION: {}}}, True),
        ({"extensions": {tasks.EXTENSION: {"x": 1}}}, True),
        ({"extensions": {}}, False),
        ({"extensions": {tasks.EXTENSION: True}}, False),
        ({"extensions": [tasks.EXTENSION]}, False),
        ({}, False),
    ],
)
def test_a_client_follows_tasks_when_it_declares_the_extension(
    capabilities: dict[str, Any], follows: bool
) -> None:
    assert tasks.client_follows_tasks(capabilities) is follows


def test_the_missing_extension_error_names_it() -> None:
    error = tasks.missing_extension()
    assert error.code == -32021
    assert error.data == {"requiredCapabilities": {"extensions": {tasks.EXTENSION: {}}}}


@pytest.mark.parametrize("params", [{}, {"taskId": ""}, {"taskId": 5}, {"taskId": None}])
def test_a_task_id_is_a_non_empty_string(params: dict[str, Any]) -> None:
    with pytest.raises(InvalidParams, match="taskId"):
        tasks.task_id_of(params)
    assert tasks.task_id_of({"taskId": "t"}) == "t"


@pytest.mark.parametrize("responses", [None, [], "x", 1])
def test_input_responses_are_an_object(responses: Any) -> None:
    with pytest.raises(InvalidParams, match="inputResponses"):
        tasks.input_responses_of({"inputResponses": responses})
    assert tasks.input_responses_of({"inputResponses": {}}) == {}


def test_an_unknown_task_is_invalid_params_naming_it() -> None:
    error = tasks.unknown_task("t9")
    assert (error.code, error.data) == (-32602, {"taskId": "t9"})


def test_the_task_shape_has_iso_times_in_utc_and_integer_milliseconds() -> None:
    assert task("working") == {
        "taskId": "t1",
        "status": "working",
        "createdAt": "2026-11-30T10:30:00.123Z",
        "lastUpdatedAt": "2026-11-30T10:31:00.000Z",
        "ttlMs": 60000,
        "pollIntervalMs": 1000,
    }
    assert task("cancelled", "by the client")["statusMessage"] == "by the client"


def test_a_detailed_task_carries_what_its_status_carries() -> None:
    requests = {"1.q": {"method": "elicitation/create", "params": {}}}
    result = {"content": []}
    error = {"code": -32603, "message": "no"}
    full = {"input_requests": requests, "result": result, "error": error}
    assert tasks.detailed(task("working"), **full) == task("working")
    assert tasks.detailed(task("input_required"), **full)["inputRequests"] == requests
    # The request's own result, as its schema has it (a CallToolResult is "complete").
    assert tasks.detailed(task("completed"), **full)["result"] == {
        **result,
        "resultType": "complete",
    }
    assert tasks.detailed(task("failed"), **full)["error"] == error
    assert tasks.detailed(task("cancelled"), **full) == task("cancelled")
    assert tasks.detailed(task("failed"))["error"]["code"] == -32603


def test_a_created_task_is_marked_as_one() -> None:
    created = tasks.created(task("working"))
    assert created["resultType"] == "task" and created["taskId"] == "t1"


def test_wire_keys_are_per_round_and_map_back_to_the_handlers_keys() -> None:
    assert tasks.task_key(1, "q") == "1.q" != tasks.task_key(2, "q")
    assert tasks.handler_key("2.q") == "q"
    assert tasks.handler_key("3.a.b") == "a.b"
    assert tasks.handler_key("plain") == "plain"
