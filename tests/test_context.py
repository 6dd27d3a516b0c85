"""Tests for mcp_app.protocol.context: what a handler can read and send back."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest

from mcp_app.protocol import versions
from mcp_app.protocol.context import RequestContext


def collecting(**kwargs: Any) -> tuple[RequestContext, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    return RequestContext(emit=sent.append, **kwargs), sent


def test_defaults() -> None:
    ctx = RequestContext()
    assert ctx.method == ""
    assert ctx.params == {}
    assert ctx.protocol_version == versions.MODERN
    assert ctx.client_capabilities == {}
    assert ctx.client_info == {}
    assert ctx.user is None
    assert ctx.request is None
    assert ctx.input_responses == {}
    assert ctx.state is None
    assert ctx.config is None
    assert ctx.definition is None
    assert ctx.is_cancelled is False


def test_values_given_are_kept() -> None:
    ctx = RequestContext(
        method="tools/call",
        params={"name": "t"},
        client_capabilities={"roots": {}},
        client_info={"name": "c"},
        user="u",
        request="r",
        server="s",
        session="sess",
        state={"step": 2},
    )
    assert (ctx.method, ctx.params, ctx.user, ctx.request, ctx.server, ctx.session) == (
        "tools/call",
        {"name": "t"},
        "u",
        "r",
        "s",
        "sess",
    )
    assert ctx.client_capabilities == {"roots": {}}
    assert ctx.client_info == {"name": "c"}
    assert ctx.state == {"step": 2}


@pytest.mark.parametrize(
    ("version", "era"),
    [
        ("2026-07-28", "modern"),
        ("2027-01-01", "modern"),
        ("2025-11-25", "legacy"),
        ("2025-03-26", "legacy"),
    ],
)
def test_era_follows_the_protocol_version(version: str, era: str) -> None:
    assert RequestContext(protocol_version=version).era == era


def test_every_thread_sees_the_one_cancelled_event() -> None:
    import threading

    ctx = RequestContext()
    start = threading.Barrier(8)
    seen: list[threading.Event] = []

    def look() -> None:
        start.wait()
        seen.append(ctx.cancelled)

    threads = [threading.Thread(target=look) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(event) for event in seen}) == 1
    seen[0].set()
    assert ctx.is_cancelled is True


def test_cancellation_is_visible() -> None:
    ctx = RequestContext()
    ctx.cancelled.set()
    assert ctx.is_cancelled is True


# ---------------------------------------------------------------- input responses


def test_input_response_returns_the_answer_or_default() -> None:
    answers = {"confirm": {"action": "accept"}}
    ctx = RequestContext(input_responses=answers)
    assert ctx.input_response("confirm") == {"action": "accept"}
    assert ctx.input_response("other") is None
    assert ctx.input_response("other", "dflt") == "dflt"
    # The context keeps its own copy.
    answers["late"] = 1
    assert ctx.input_response("late") is None


# ---------------------------------------------------------------- progress


def test_progress_without_a_token_sends_nothing() -> None:
    ctx, sent = collecting()
    ctx.report_progress(1, 10, "x")
    assert sent == []


def test_progress_with_a_token_sends_a_notification() -> None:
    ctx, sent = collecting(progress_token="tok")
    ctx.report_progress(1)
    ctx.report_progress(2, 10, "halfway")
    assert sent == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "tok", "progress": 1},
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "tok", "progress": 2, "total": 10, "message": "halfway"},
        },
    ]


def test_progress_is_sent_only_when_it_increases() -> None:
    ctx, sent = collecting(progress_token=0)
    for value in (1, 1, 0.5, 3, 2, 3.5):
        ctx.report_progress(value)
    assert [m["params"]["progress"] for m in sent] == [1, 3, 3.5]
    assert all(m["params"]["progressToken"] == 0 for m in sent)


@pytest.mark.parametrize(
    ("progress", "total"),
    [(float("nan"), None), (float("inf"), None), (1, float("nan")), (Decimal("NaN"), None)],
)
def test_progress_that_no_json_number_carries_is_refused(progress: Any, total: Any) -> None:
    for token in ("t", None):  # a bug, whether or not this client asked for progress
        ctx, sent = collecting(progress_token=token)
        with pytest.raises(ValueError, match="must be a finite number"):
            ctx.report_progress(progress, total)
        assert sent == []
    ctx, sent = collecting(progress_token="t")
    ctx.report_progress(Decimal("1.5"), 3.0)
    assert sent[0]["params"]["progress"] == Decimal("1.5")


def test_progress_after_cancellation_sends_nothing() -> None:
    ctx, sent = collecting(progress_token="t")
    ctx.cancelled.set()
    ctx.report_progress(1)
    assert sent == []


def test_progress_without_emit_is_discarded_silently() -> None:
    RequestContext(progress_token="t").report_progress(1)


# ---------------------------------------------------------------- logging


def test_log_without_a_level_sends_nothing() -> None:
    ctx, sent = collecting()
    ctx.log("emergency", "x")
    assert sent == []


def test_log_filters_below_the_threshold() -> None:
    ctx, sent = collecting(log_level="warning")
    for level in versions.LOG_LEVELS:
        ctx.log(level, level)
    assert [m["params"]["level"] for m in sent] == [
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]
    assert sent[0] == {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "warning", "data": "warning"},
    }


def test_log_at_debug_threshold_sends_everything_with_logger_name() -> None:
    ctx, sent = collecting(log_level="debug")
    ctx.log("debug", {"k": 1}, logger="db")
    assert sent == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "debug", "data": {"k": 1}, "logger": "db"},
        }
    ]


def test_log_after_cancellation_sends_nothing() -> None:
    ctx, sent = collecting(log_level="debug")
    ctx.cancelled.set()
    ctx.log("error", "x")
    assert sent == []


@pytest.mark.parametrize("level", ["warn", "INFO", ""])
def test_unknown_log_level_is_a_value_error_even_without_a_threshold(level: str) -> None:
    for ctx in (RequestContext(), RequestContext(log_level="debug")):
        with pytest.raises(ValueError, match="unknown log level"):
            ctx.log(level, "x")


# ---------------------------------------------------------------- close_stream


def test_close_stream_without_a_hook_does_nothing() -> None:
    ctx = RequestContext()
    assert ctx.close_hook is None
    ctx.close_stream()
    assert ctx.is_cancelled is False


def test_close_stream_calls_the_transport_hook_each_time() -> None:
    closed: list[bool] = []
    ctx = RequestContext()
    ctx.close_hook = lambda: closed.append(True)
    ctx.close_stream()
    ctx.close_stream()
    assert closed == [True, True]


# ---------------------------------------------------------------- run_async


async def double(n: int) -> int:
    await asyncio.sleep(0)
    return n * 2


def test_run_async_uses_the_given_runner() -> None:
    used: list[Any] = []

    def runner(coroutine: Any) -> Any:
        used.append(coroutine)
        return asyncio.run(coroutine)

    assert RequestContext(run_async=runner).run_async(double(4)) == 8
    assert len(used) == 1


def test_run_async_defaults_to_async_to_sync() -> None:
    assert RequestContext().run_async(double(5)) == 10


def test_run_async_propagates_exceptions() -> None:
    async def fail() -> None:
        raise LookupError("nope")

    with pytest.raises(LookupError, match="nope"):
        RequestContext().run_async(fail())
