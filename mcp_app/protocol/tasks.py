"""The tasks extension (``io.modelcontextprotocol/tasks``) of 2026-07-28: its wire, free of Django.

A tool that supports tasks may hand its work to a task (``run_as_task``); a client that
declared the extension on its request then gets a task handle (``CreateTaskResult``) and
follows the work with ``tasks/get``, answers its input requests with ``tasks/update`` and
may ``tasks/cancel`` it. Any other client gets the work's result, done in the request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .jsonrpc import InvalidParams, MissingClientCapability

__all__ = ["EXTENSION", "TaskWork", "run_as_task"]

JSON = dict[str, Any]

EXTENSION = "io.modelcontextprotocol/tasks"
#: What a tool declares: never a task, a task when the client can follow one, or only a task.
SUPPORT = ("forbidden", "optional", "required")
METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
WORKING, INPUT_REQUIRED = "working", "input_required"
#: The statuses of a task that has not ended.
OPEN_STATUSES = frozenset({WORKING, INPUT_REQUIRED})
COMPLETED, FAILED, CANCELLED = "completed", "failed", "cancelled"
#: The longest task id there is (the column's length).
TASK_ID_MAX = 64


@dataclass(frozen=True)
class TaskWork:
    """Work a handler hands to a task: ``work(context)`` returns what the handler would."""

    work: Callable[[Any], Any]


def run_as_task(work: Callable[[Any], Any]) -> TaskWork:
    """Return this from a tool that supports tasks to go on as a task.

    ``work`` is called with the request context, in a thread of its own when a task runs it
    (its ``cancelled`` event is set by ``tasks/cancel``; it has the request's answers and state,
    not its transport ``request``, which has been answered), and returns what a handler returns:
    a result, or ``input_required(...)`` to ask the client, which answers with ``tasks/update``
    and ``work`` is called again with the answers. A client that did not declare the tasks
    extension gets the result of ``work`` done at once, as if the handler had returned it.
    """
    if not callable(work):
        raise TypeError("run_as_task() takes the work to run, a callable of the context")
    return TaskWork(work)


def client_follows_tasks(capabilities: Mapping[str, Any]) -> bool:
    """Whether a request's client capabilities declare the tasks extension."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def missing_extension(message: str | None = None) -> MissingClientCapability:
    """-32021, naming the tasks extension as the capability the request needed."""
    return MissingClientCapability(
        {"extensions": {EXTENSION: {}}},
        message or f"Missing required client capability: extensions.{EXTENSION}",
    )


def task_id_of(params: Mapping[str, Any]) -> str:
    """The ``taskId`` of a ``tasks/*`` request.

    Raises:
        InvalidParams: there is none, or it is not a string.
    """
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParams("tasks/* requests need a 'taskId' (a string)")
    if not well_formed_task_id(task_id):
        # No task has such an id; and a database may refuse it in a query (a NUL).
        raise unknown_task(task_id)
    return task_id


def well_formed_task_id(task_id: str) -> bool:
    """Whether some task could have ``task_id``: visible ASCII within the column's length."""
    return len(task_id) <= TASK_ID_MAX and task_id.isascii() and task_id.isprintable()


def input_responses_of(params: Mapping[str, Any]) -> JSON:
    """The ``inputResponses`` of a ``tasks/update`` request.

    Raises:
        InvalidParams: they are missing or not an object.
    """
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise InvalidParams("tasks/update needs 'inputResponses' (an object keyed by request)")
    return responses


def unknown_task(task_id: str) -> InvalidParams:
    return InvalidParams(f"Unknown task: {task_id}", {"taskId": task_id})


def iso(timestamp: Any) -> str:
    """An aware datetime as ISO 8601 in UTC, to the millisecond, with ``Z``."""
    text: str = timestamp.isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def task_fields(
    task_id: str,
    status: str,
    created: Any,
    updated: Any,
    ttl_ms: int | None,
    poll_interval_ms: int,
    status_message: str = "",
) -> JSON:
    """The ``Task`` shape: what every task message carries."""
    task: JSON = {
        "taskId": task_id,
        "status": status,
        "createdAt": iso(created),
        "lastUpdatedAt": iso(updated),
        "ttlMs": ttl_ms,
        "pollIntervalMs": poll_interval_ms,
    }
    if status_message:
        task["statusMessage"] = status_message
    return task


def detailed(
    task: JSON,
    *,
    input_requests: Mapping[str, Any] | None = None,
    result: Any = None,
    error: Any = None,
) -> JSON:
    """A ``DetailedTask``: the task with what its status carries (pending requests, the
    result, or the error)."""
    out = dict(task)
    status = out["status"]
    if status == INPUT_REQUIRED:
        out["inputRequests"] = dict(input_requests or {})
    elif status == COMPLETED:
        # The request's own result, so as its schema has it: a CallToolResult is "complete".
        out["result"] = {**(result if isinstance(result, dict) else {}), "resultType": "complete"}
    elif status == FAILED:
        out["error"] = error if isinstance(error, dict) else {"code": -32603, "message": "Failed"}
    return out


def created(task: JSON) -> JSON:
    """A ``CreateTaskResult``: the task, marked as one in place of the request's result."""
    return {**task, "resultType": "task"}


def task_key(round_number: int, key: str) -> str:
    """The key of an input request on the task's wire: unique over the task's lifetime, as
    the handler may use one key in several rounds."""
    return f"{round_number}.{key}"


def handler_key(wire_key: str) -> str:
    """The handler's own key of an input request the task put on the wire."""
    return wire_key.split(".", 1)[1] if "." in wire_key else wire_key
