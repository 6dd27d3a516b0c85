"""The database delivery backend against the test database (SQLite, or PostgreSQL via TEST_DATABASE_URL)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.db.backends.signals import connection_created
from django.test import override_settings
from django.utils import timezone

from mcp_app.delivery.database import DatabaseBackend
from mcp_app.models import DeliveryMessage
from tests.test_delivery_local import Collector

# The backend's threads use their own connections: rows must really be committed.
pytestmark = pytest.mark.django_db(transaction=True)

POLL = 0.1
REORDER = 1.0
WIDE_REORDER = 3.0


def options(**extra: Any) -> dict[str, Any]:
    return {
        **settings.MCP_APP,
        "DELIVERY_POLL_SECONDS": POLL,
        "DELIVERY_REORDER_SECONDS": REORDER,
        **extra,
    }


@pytest.fixture(autouse=True)
def fast_polling() -> Iterator[None]:
    with override_settings(MCP_APP=options()):
        yield


@pytest.fixture
def wide_reorder() -> Iterator[None]:
    """For a row committed late that must still be read within the window, however slowly
    the test's thread gets to commit it."""
    with override_settings(MCP_APP=options(DELIVERY_REORDER_SECONDS=WIDE_REORDER)):
        yield


@pytest.fixture(autouse=True)
def sqlite_readers_take_no_table_locks() -> Iterator[None]:
    """In-memory SQLite shares one cache among the threads' connections, and its table locks
    fail at once (``database table is locked``) where file locks would wait: readers that take
    none keep the test's queries and the backend's threads from failing each other."""
    if connection.vendor != "sqlite":
        yield
        return

    def read_uncommitted(sender: Any, connection: Any, **kwargs: Any) -> None:
        if connection.vendor == "sqlite":
            connection.cursor().execute("PRAGMA read_uncommitted = 1")

    connection_created.connect(read_uncommitted)
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA read_uncommitted = 1")
    try:
        yield
    finally:
        connection_created.disconnect(read_uncommitted)


@pytest.fixture
def backends() -> Iterator[list[DatabaseBackend]]:
    """Backends made by the test; each stands for one process, with its own threads."""
    made: list[DatabaseBackend] = []
    yield made
    # Threads must be gone before the test database is flushed or dropped.
    for backend in made:
        backend.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-delivery")]


@pytest.fixture
def publisher(backends: list[DatabaseBackend]) -> DatabaseBackend:
    backends.append(DatabaseBackend())
    return backends[-1]


@pytest.fixture
def listener(backends: list[DatabaseBackend]) -> DatabaseBackend:
    backends.append(DatabaseBackend())
    return backends[-1]


@pytest.fixture
def channel() -> str:
    return f"test:{uuid.uuid4().hex}"


def wait_until(condition: Any, timeout: float = 5.0, every: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        time.sleep(every)


def test_a_message_reaches_a_subscriber_of_another_backend(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str
) -> None:
    sink = Collector()
    listener.subscribe([channel], sink)
    started = time.monotonic()
    publisher.publish(channel, {"kinds": ["tools"], "text": "héllo", "nested": {"n": [1, 2]}})

    assert sink.wait_for(1) == [
        (channel, {"kinds": ["tools"], "text": "héllo", "nested": {"n": [1, 2]}})
    ]
    assert time.monotonic() - started < POLL + 3.0
    sink.stays(1, 3 * POLL)  # re-reading the reordering window delivers nothing twice


def test_publish_returns_once_the_row_is_committed(
    publisher: DatabaseBackend, channel: str
) -> None:
    publisher.publish(channel, {"n": 1})
    assert DeliveryMessage.objects.filter(channel=channel).count() == 1


def test_a_subscriber_in_the_publishing_process_does_not_wait_for_the_poll(
    publisher: DatabaseBackend, channel: str
) -> None:
    sink = Collector()
    with override_settings(MCP_APP=options(DELIVERY_POLL_SECONDS=30)):
        publisher.subscribe([channel], sink)
        started = time.monotonic()
        publisher.publish(channel, {"n": 1})
        sink.wait_for(1, timeout=5)
        assert time.monotonic() - started < 2


def test_messages_arrive_in_publishing_order(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str
) -> None:
    sink = Collector()
    listener.subscribe([channel], sink)
    for n in range(40):
        publisher.publish(channel, {"n": n})
    assert [m["n"] for _, m in sink.wait_for(40)] == list(range(40))
    sink.stays(40, 3 * POLL)


def test_only_subscribed_channels_are_delivered(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str
) -> None:
    mine, both = Collector(), Collector()
    listener.subscribe([channel], mine)
    listener.subscribe([channel, channel + ":b"], both)
    publisher.publish(channel + ":other", {"n": 0})
    publisher.publish(channel + ":b", {"n": 1})
    publisher.publish(channel, {"n": 2})

    assert both.wait_for(2) == [(channel + ":b", {"n": 1}), (channel, {"n": 2})]
    assert mine.wait_for(1) == [(channel, {"n": 2})]
    mine.stays(1, 3 * POLL)


def test_old_messages_are_not_replayed_to_a_new_poller(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str
) -> None:
    publisher.publish(channel, {"n": "before"})
    sink = Collector()
    listener.subscribe([channel], sink)
    publisher.publish(channel, {"n": "after"})
    assert sink.wait_for(1) == [(channel, {"n": "after"})]
    sink.stays(1, 3 * POLL)


def test_a_new_subscriber_of_a_running_poller_gets_no_earlier_message(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str
) -> None:
    # Rows within the reordering window that no one was subscribed to are not news to it.
    listener.subscribe([channel + ":other"], Collector())
    publisher.publish(channel, {"n": "before"})
    newest = DeliveryMessage.objects.order_by("-id").values_list("id", flat=True)[0]
    wait_until(lambda: listener._top >= newest)  # the running poller has read past it
    sink = Collector()
    listener.subscribe([channel], sink)
    publisher.publish(channel, {"n": "after"})
    assert sink.wait_for(1) == [(channel, {"n": "after"})]
    sink.stays(1, 3 * POLL)


def test_unsubscribe_stops_delivery_and_the_last_one_stops_the_poller(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str
) -> None:
    kept, dropped = Collector(), Collector()
    stop_kept = listener.subscribe([channel], kept)
    stop_dropped = listener.subscribe([channel], dropped)
    assert listener.poller_running()

    stop_dropped()
    publisher.publish(channel, {"n": 1})
    kept.wait_for(1)
    dropped.stays(0, 3 * POLL)
    assert listener.poller_running()

    stop_kept()
    wait_until(lambda: not listener.poller_running())
    publisher.publish(channel, {"n": "while nobody listens"})

    again = Collector()
    listener.subscribe([channel], again)
    assert listener.poller_running()
    publisher.publish(channel, {"n": 2})
    assert again.wait_for(1) == [(channel, {"n": 2})]
    again.stays(1, 3 * POLL)
    assert kept.messages == [{"n": 1}]


def test_a_failing_sink_does_not_stop_the_others(
    publisher: DatabaseBackend,
    listener: DatabaseBackend,
    channel: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(channel: str, message: dict[str, Any]) -> None:
        raise RuntimeError("broken sink")

    sink = Collector()
    listener.subscribe([channel], broken)
    listener.subscribe([channel], sink)
    with caplog.at_level(logging.ERROR, logger="mcp_app"):
        publisher.publish(channel, {"n": 1})
        publisher.publish(channel, {"n": 2})
        assert sink.wait_for(2) == [(channel, {"n": 1}), (channel, {"n": 2})]
    assert f"delivery sink failed on {channel}" in caplog.text


def test_publish_inside_a_transaction_is_not_undone_by_its_rollback(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str
) -> None:
    sink = Collector()
    listener.subscribe([channel], sink)

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        publisher.publish(channel, {"n": "inside"})
        # Delivered while the caller's transaction is still open, like LocalBackend does.
        sink.wait_for(1)
        raise Undo

    assert sink.messages == [{"n": "inside"}]
    assert DeliveryMessage.objects.filter(channel=channel).count() == 1


def test_publish_raises_what_the_insert_raised(publisher: DatabaseBackend, channel: str) -> None:
    with pytest.raises(TypeError):
        publisher.publish(channel, {"not json": object()})
    publisher.publish(channel, {"n": 1})  # the writer goes on
    assert DeliveryMessage.objects.filter(channel=channel).count() == 1


def test_a_row_committed_late_below_seen_ids_is_delivered_once(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str, wide_reorder: None
) -> None:
    """Ids that become visible out of order, as PostgreSQL allows, within the reordering window."""
    sink = Collector()
    listener.subscribe([channel], sink)
    publisher.publish(channel, {"n": 0})
    sink.wait_for(1)
    top = DeliveryMessage.objects.order_by("-id").values_list("id", flat=True)[0]

    DeliveryMessage.objects.create(id=top + 10, channel=channel, message={"n": "high"})
    sink.wait_for(2)
    time.sleep(3 * POLL)  # the poller has moved past top + 10
    DeliveryMessage.objects.create(id=top + 5, channel=channel, message={"n": "late"})

    assert [m["n"] for m in sink.messages[:2]] == [0, "high"]
    assert sink.wait_for(3)[2] == (channel, {"n": "late"})
    sink.stays(3, WIDE_REORDER + 3 * POLL)  # nothing twice, also once the window has passed


def test_a_row_committed_after_the_reordering_window_is_missed(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str
) -> None:
    """The limit of the window, made visible: at most once, never twice."""
    sink = Collector()
    listener.subscribe([channel], sink)
    publisher.publish(channel, {"n": 0})
    sink.wait_for(1)
    top = DeliveryMessage.objects.order_by("-id").values_list("id", flat=True)[0]
    DeliveryMessage.objects.create(id=top + 10, channel=channel, message={"n": "high"})
    sink.wait_for(2)
    # Twice the window: the poller may be held up before the poll that moves its floor.
    time.sleep(2 * REORDER + 4 * POLL)
    DeliveryMessage.objects.create(id=top + 5, channel=channel, message={"n": "too late"})
    sink.stays(2, 4 * POLL)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite commits in id order")
def test_postgresql_transaction_committing_after_a_later_one(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str, wide_reorder: None
) -> None:
    """The real out-of-order commit: a transaction holding a lower id commits last."""
    sink = Collector()
    listener.subscribe([channel], sink)
    inserted, release = threading.Event(), threading.Event()

    def slow_writer() -> None:
        try:
            with transaction.atomic():
                DeliveryMessage.objects.create(channel=channel, message={"n": "first id"})
                inserted.set()
                release.wait(5)
        finally:
            connection.close()

    thread = threading.Thread(target=slow_writer)
    thread.start()
    try:
        assert inserted.wait(5)
        publisher.publish(channel, {"n": "second id"})
        assert sink.wait_for(1) == [(channel, {"n": "second id"})]
        time.sleep(3 * POLL)
    finally:
        release.set()
        thread.join(10)
    assert sink.wait_for(2)[1] == (channel, {"n": "first id"})
    ids = list(
        DeliveryMessage.objects.filter(channel=channel)
        .order_by("created")
        .values_list("id", flat=True)
    )
    assert ids[0] < ids[1]
    sink.stays(2, WIDE_REORDER + 3 * POLL)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs server connections to kill")
def test_connections_the_server_killed_are_replaced(
    publisher: DatabaseBackend,
    listener: DatabaseBackend,
    channel: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Kept connections (CONN_MAX_AGE) are the ones a database restart leaves broken.
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 600)
    sink = Collector()
    listener.subscribe([channel], sink)
    publisher.publish(channel, {"n": 1})
    sink.wait_for(1)

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchall()  # the writer's and the poller's connections
    publisher.publish(channel, {"n": 2})  # would raise on the dead connection
    assert sink.wait_for(2, timeout=10)[1] == (channel, {"n": 2})


def test_the_threads_keep_their_connections_between_polls_and_writes(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str
) -> None:
    assert connection.settings_dict["CONN_MAX_AGE"] == 0  # Django's default
    opened: list[str] = []

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(count)
    try:
        sink = Collector()
        listener.subscribe([channel], sink)
        for n in range(5):
            publisher.publish(channel, {"n": n})
            sink.wait_for(n + 1)
            time.sleep(2 * POLL)
    finally:
        connection_created.disconnect(count)
    # One each: they reconnected at every poll and every write before.
    assert sorted(opened) == ["mcp-delivery-poller", "mcp-delivery-writer"]


def test_clean_deletes_rows_past_retention(publisher: DatabaseBackend, channel: str) -> None:
    publisher.publish(channel, {"n": "old"})
    publisher.publish(channel, {"n": "new"})
    DeliveryMessage.objects.filter(message__n="old").update(
        created=timezone.now() - timedelta(seconds=301)
    )

    assert publisher.clean() == 1
    assert [row.message for row in DeliveryMessage.objects.filter(channel=channel)] == [
        {"n": "new"}
    ]


def test_the_poller_deletes_old_rows_by_itself(
    publisher: DatabaseBackend, listener: DatabaseBackend, channel: str
) -> None:
    publisher.publish(channel, {"n": "old"})
    DeliveryMessage.objects.update(created=timezone.now() - timedelta(seconds=60))
    with override_settings(MCP_APP=options(DELIVERY_RETENTION_SECONDS=2)):
        listener.subscribe([channel], Collector())
        # Looked at now and then: on in-memory SQLite a read locks the table for the delete.
        wait_until(
            lambda: not DeliveryMessage.objects.filter(channel=channel).exists(),
            timeout=10,
            every=0.3,
        )


def test_the_poller_survives_a_failing_poll(
    publisher: DatabaseBackend,
    listener: DatabaseBackend,
    channel: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = Collector()
    listener.subscribe([channel], sink)
    real = DatabaseBackend._newest
    failures = [2]

    def flaky(self: DatabaseBackend, alias: str) -> int:
        if failures[0]:
            failures[0] -= 1
            raise RuntimeError("database went away")
        return real(self, alias)

    with caplog.at_level(logging.WARNING, logger="mcp_app"):
        monkeypatch.setattr(DatabaseBackend, "_newest", flaky)
        publisher.publish(channel, {"n": 1})
        assert sink.wait_for(1, timeout=10) == [(channel, {"n": 1})]
        # Logged once the poll that delivered it has finished.
        wait_until(lambda: "polling works again after 2 failures" in caplog.text)
    assert "polling default failed" in caplog.text


def test_close_stops_the_threads_and_the_backend_works_after(
    publisher: DatabaseBackend, channel: str
) -> None:
    publisher.subscribe([channel], Collector())
    publisher.publish(channel, {"n": 1})
    publisher.close()
    assert not publisher.poller_running()
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-delivery")]

    sink = Collector()
    publisher.subscribe([channel], sink)
    publisher.publish(channel, {"n": 2})
    assert sink.wait_for(1) == [(channel, {"n": 2})]
