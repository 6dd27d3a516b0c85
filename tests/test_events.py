"""The event log of resumable streams: numbering, storage, publication, replay and clean-up."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

import mcp_app
from mcp_app import events
from mcp_app.delivery import backend
from mcp_app.events import (
    END,
    StreamLog,
    clean_events,
    end_if_abandoned,
    events_after,
    is_end,
    parse_event_id,
)
from mcp_app.models import StreamEvent

# Events are written on a connection of their own, outside the test's transaction.
pytestmark = pytest.mark.django_db(transaction=True)

OWNER = "o" * 43
OTHER = "x" * 43


def note(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": n}}


@pytest.fixture
def log() -> StreamLog:
    return StreamLog(mcp_app.site, OWNER)


@pytest.fixture
def published(log: StreamLog) -> Iterator[list[dict[str, Any]]]:
    """What the log publishes on its stream's channel."""
    seen: list[dict[str, Any]] = []
    unsubscribe = backend().subscribe([log.channel], lambda channel, message: seen.append(message))
    yield seen
    unsubscribe()


# -- event ids ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_id", "parsed"),
    [
        ("abc-3", ("abc", 3)),
        ("0f1e2d3c4b5a6978-0", ("0f1e2d3c4b5a6978", 0)),
        ("with-dashes-12", ("with-dashes", 12)),
        ("  padded-7 \t", ("padded", 7)),
    ],
)
def test_event_ids_parse_into_stream_and_number(event_id: str, parsed: tuple[str, int]) -> None:
    assert parse_event_id(event_id) == parsed


@pytest.mark.parametrize(
    "event_id",
    [
        *["", "abc", "-3", "abc-", "abc-1.5", "abc-x", "abc-+1", "7", "a\x00b-3", "a b-3", "é-3"],
        # int() of over 4300 digits raises; no stream gets near 19.
        "abc-" + "9" * 19,
        "abc-" + "9" * 5000,
    ],
)
def test_other_event_ids_are_not_ours(event_id: str) -> None:
    assert parse_event_id(event_id) is None


def test_superscript_digits_are_not_an_event_number() -> None:
    assert parse_event_id("abc-²") is None


# -- the log ------------------------------------------------------------------------------------


def test_log_numbers_events_from_one_after_its_priming_id(log: StreamLog) -> None:
    assert re.fullmatch(r"[0-9a-f]{16}", log.stream)
    assert log.priming_id() == f"{log.stream}-0"
    ids = [log.append(note(n)) for n in range(3)]
    assert ids == [f"{log.stream}-1", f"{log.stream}-2", f"{log.stream}-3"]
    assert [parse_event_id(event_id) for event_id in ids] == [(log.stream, n) for n in (1, 2, 3)]


def test_log_stores_each_event_for_its_session(log: StreamLog) -> None:
    log.append(note(1))
    log.append(note(2))
    rows = StreamEvent.objects.order_by("seq")
    assert [(r.session_id, r.stream, r.seq, r.message) for r in rows] == [
        (OWNER, log.stream, 0, {"request": None}),
        (OWNER, log.stream, 1, note(1)),
        (OWNER, log.stream, 2, note(2)),
    ]


def test_log_publishes_each_event_on_its_streams_channel(
    log: StreamLog, published: list[dict[str, Any]]
) -> None:
    assert log.channel == f"mcp:default:stream:{OWNER}:{log.stream}"
    log.append(note(1))
    log.append(note(2))
    assert published == [{"seq": 1, "message": note(1)}, {"seq": 2, "message": note(2)}]


def test_end_of_a_cancelled_request_is_kept_and_published_after_the_priming_event(
    log: StreamLog, published: list[dict[str, Any]]
) -> None:
    log.end()
    rows = StreamEvent.objects.order_by("seq")
    assert [(r.seq, r.message) for r in rows] == [(0, {"request": None}), (1, END)]
    assert published == [{"seq": 1, "message": END}]


@pytest.mark.parametrize(
    ("message", "ends"),
    [
        (END, True),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, True),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}}, True),
        ({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}}, False),
        (note(1), False),
        ({}, False),
    ],
)
def test_a_stream_ends_with_a_response_or_the_end_of_a_cancelled_request(
    message: dict[str, Any], ends: bool
) -> None:
    assert is_end(message) is ends


def test_two_logs_of_one_session_are_separate_streams() -> None:
    first, second = StreamLog(mcp_app.site, OWNER), StreamLog(mcp_app.site, OWNER)
    assert first.stream != second.stream and first.channel != second.channel
    first.append(note(1))
    assert second.append(note(2)) == f"{second.stream}-1"


# -- replay -------------------------------------------------------------------------------------


def test_events_after_the_priming_id_are_the_whole_stream(log: StreamLog) -> None:
    for n in range(1, 4):
        log.append(note(n))
    assert events_after(OWNER, log.stream, 0) == [(1, note(1)), (2, note(2)), (3, note(3))]


def test_events_after_an_event_are_the_ones_that_followed(log: StreamLog) -> None:
    for n in range(1, 4):
        log.append(note(n))
    assert events_after(OWNER, log.stream, 1) == [(2, note(2)), (3, note(3))]
    assert events_after(OWNER, log.stream, 3) == []


def test_stream_of_another_log_is_not_replayed(log: StreamLog) -> None:
    log.append(note(1))
    other = StreamLog(mcp_app.site, OWNER)
    other.append(note(9))
    assert events_after(OWNER, log.stream, 0) == [(1, note(1))]


def test_event_of_an_unknown_stream_is_none() -> None:
    assert events_after(OWNER, "feedfacefeedface", 4) is None


def test_event_of_another_sessions_stream_is_none(log: StreamLog) -> None:
    log.append(note(1))
    log.append(note(2))
    assert events_after(OTHER, log.stream, 1) is None


def test_priming_id_of_another_sessions_stream_is_none(log: StreamLog) -> None:
    log.append(note(1))
    assert events_after(OTHER, log.stream, 0) is None


def test_event_number_past_the_end_of_the_stream_is_none(log: StreamLog) -> None:
    log.append(note(1))
    assert events_after(OWNER, log.stream, 99) is None


# -- clean-up -----------------------------------------------------------------------------------


def age_events(stream: str, seconds: float) -> None:
    StreamEvent.objects.filter(stream=stream).update(
        created=timezone.now() - timedelta(seconds=seconds)
    )


@override_settings(MCP_APP={"EVENT_RETENTION_SECONDS": 600})
def test_clean_events_removes_events_past_retention_only() -> None:
    old, recent = StreamLog(mcp_app.site, OWNER), StreamLog(mcp_app.site, OTHER)
    old.append(note(1))
    old.append(note(2))
    recent.append(note(3))
    age_events(old.stream, 601)
    age_events(recent.stream, 599)
    # Two events and the stream's priming record.
    assert clean_events() == 3
    assert set(StreamEvent.objects.values_list("stream", flat=True)) == {recent.stream}
    assert clean_events() == 0


def test_clean_events_follows_the_retention_setting(log: StreamLog) -> None:
    log.append(note(1))
    age_events(log.stream, 120)
    with override_settings(MCP_APP={"EVENT_RETENTION_SECONDS": 600}):
        assert clean_events() == 0
    with override_settings(MCP_APP={"EVENT_RETENTION_SECONDS": 60}):
        assert clean_events() == 2  # the event and the stream's priming record


@override_settings(MCP_APP={"EVENT_RETENTION_SECONDS": 600})
def test_a_stream_with_a_recent_event_is_kept_whole(log: StreamLog) -> None:
    log.append(note(1))
    age_events(log.stream, 601)  # its call let go of the connection, and worked on quietly
    log.append(note(2))  # then answered
    assert clean_events() == 0
    assert [seq for seq, _ in events_after(OWNER, log.stream, 0) or []] == [1, 2]


def test_events_emitted_from_many_threads_have_ids_of_their_own(log: StreamLog) -> None:
    import threading

    ids: list[str] = []

    def emit() -> None:
        for n in range(20):
            ids.append(log.append(note(n)))

    threads = [threading.Thread(target=emit) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 120
    # Each id names the message it was sent with.
    stored = dict(events_after(OWNER, log.stream, 0) or [])
    assert sorted(stored) == list(range(1, 121))


def test_cleaned_stream_can_no_longer_be_resumed(log: StreamLog) -> None:
    log.append(note(1))
    age_events(log.stream, 10_000)
    clean_events()
    assert events_after(OWNER, log.stream, 1) is None


# -- requests no process answers any more ---------------------------------------------------------


def _dated(stream: str, seconds_ago: float) -> None:
    StreamEvent.objects.filter(stream=stream).update(
        created=timezone.now() - timedelta(seconds=seconds_ago)
    )


def test_a_running_requests_stream_is_vouched_for_until_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(events, "LEASE_SECONDS", 0.4)
    monkeypatch.setattr(events, "_leases", events._Leases())  # one of its own, on that clock
    log = StreamLog(mcp_app.site, OWNER, request_id=7)
    log.append(note(1))
    _dated(log.stream, 3600)
    time.sleep(0.3)
    first = StreamEvent.objects.get(stream=log.stream, seq=0)
    assert timezone.now() - first.created < timedelta(seconds=1)
    log.release()
    deadline = time.monotonic() + 2
    while events._leases.thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert events._leases.thread is None  # nothing left to vouch for
    _dated(log.stream, 3600)
    time.sleep(0.3)
    first.refresh_from_db()
    assert timezone.now() - first.created > timedelta(seconds=3000)


def test_a_stream_opened_after_its_release_is_not_vouched_for() -> None:
    # A cancelled call that never streamed opens its stream only to record its end.
    log = StreamLog(mcp_app.site, OWNER, request_id=3)
    log.release()
    log.end()
    assert log.stream not in events._leases.streams


def test_a_stream_no_process_answers_ends_with_an_error_once(
    published: list[dict[str, Any]], log: StreamLog
) -> None:
    lost = StreamLog(mcp_app.site, OWNER, request_id="call-7")
    lost.append(note(1))
    lost.release()  # as if its process had ended
    assert not end_if_abandoned(mcp_app.site, OWNER, lost.stream)  # still within its lease
    _dated(lost.stream, events.LEASE_SECONDS + 1)
    assert end_if_abandoned(mcp_app.site, OWNER, lost.stream)
    answer = {
        "jsonrpc": "2.0",
        "id": "call-7",
        "error": {
            "code": -32603,
            "message": "The process serving the request ended before it answered",
        },
    }
    assert events_after(OWNER, lost.stream, 1) == [(2, answer)]
    assert not end_if_abandoned(mcp_app.site, OWNER, lost.stream)  # it has its end now


def test_a_stream_that_ended_or_is_not_ours_is_left_alone(log: StreamLog) -> None:
    log.append({"jsonrpc": "2.0", "id": 1, "result": {}})
    log.release()
    _dated(log.stream, events.LEASE_SECONDS + 1)
    assert not end_if_abandoned(mcp_app.site, OWNER, log.stream)
    assert not end_if_abandoned(mcp_app.site, OTHER, log.stream)
    assert not end_if_abandoned(mcp_app.site, OWNER, "0123456789abcdef")
