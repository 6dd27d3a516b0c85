"""Initialize-era session stores: the database store and the cache store, behind one interface."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.cache import caches
from django.core.cache.backends import base as cache_base
from django.core.cache.backends import locmem
from django.test import override_settings
from django.utils import timezone

from mcp_app import sessions
from mcp_app.models import Session, StreamEvent
from mcp_app.sessions import (
    CacheSessionStore,
    DatabaseSessionStore,
    SessionData,
    SessionStore,
    new_session_id,
)
from tests.conftest import RecheckClock

pytestmark = pytest.mark.django_db

LOCMEM = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "sessions": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "mcp-session-tests",
    },
}


class FakeClock:
    """Seconds since the epoch that only move when a test says so."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """The clock LocMemCache reads for expiry, under the test's control."""
    fake = FakeClock()
    monkeypatch.setattr(locmem, "time", SimpleNamespace(time=fake.time))
    monkeypatch.setattr(cache_base, "time", SimpleNamespace(time=fake.time))
    return fake


@pytest.fixture
def cache_settings() -> Iterator[None]:
    with override_settings(
        CACHES=LOCMEM,
        MCP_APP={
            "SESSION_STORE": "mcp_app.sessions.CacheSessionStore",
            "SESSION_CACHE": "sessions",
            "SESSION_IDLE_SECONDS": 60,
        },
    ):
        caches["sessions"].clear()
        yield
        caches["sessions"].clear()


@pytest.fixture(params=["database", "cache"])
def store(request: pytest.FixtureRequest) -> SessionStore:
    """Each store, configured as a site would configure it."""
    if request.param == "cache":
        request.getfixturevalue("cache_settings")
        return CacheSessionStore()
    return DatabaseSessionStore()


def make(session_id: str = "s" * 43, **changes: Any) -> SessionData:
    data = SessionData(
        id=session_id,
        server="default",
        protocol_version="2025-11-25",
        client_info={"name": "tests", "version": "1"},
        capabilities={"elicitation": {}},
    )
    for name, value in changes.items():
        setattr(data, name, value)
    return data


def age_row(session_id: str, seconds: float) -> None:
    Session.objects.filter(pk=session_id).update(
        last_seen=timezone.now() - timedelta(seconds=seconds)
    )


# -- both stores --------------------------------------------------------------------------------


def test_created_session_is_found_as_it_was_stored(store: SessionStore) -> None:
    data = make()
    store.create(data)
    assert store.get(data.id) == data


def test_exists_says_whether_a_session_is_live(store: SessionStore) -> None:
    assert store.exists(make().id) is False
    store.create(make())
    assert store.exists(make().id) is True
    store.end(make().id)
    assert store.exists(make().id) is False


def test_unknown_session_is_none(store: SessionStore) -> None:
    assert store.get("never-created") is None


def test_update_changes_only_the_named_fields(store: SessionStore) -> None:
    data = make()
    store.create(data)
    store.update(data.id, log_level="error", subscriptions=["test://a"], initialized=True)
    found = store.get(data.id)
    assert found is not None
    assert (found.log_level, found.subscriptions, found.initialized) == (
        "error",
        ["test://a"],
        True,
    )
    assert found.capabilities == {"elicitation": {}}


def test_update_of_an_unknown_session_creates_nothing(store: SessionStore) -> None:
    store.update("never-created", log_level="error")
    assert store.get("never-created") is None


def test_end_removes_the_session_and_says_whether_it_existed(store: SessionStore) -> None:
    data = make()
    store.create(data)
    assert store.end(data.id) is True
    assert store.get(data.id) is None
    assert store.end(data.id) is False


def test_sessions_are_kept_apart(store: SessionStore) -> None:
    first, second = make("a" * 43), make("b" * 43, protocol_version="2025-03-26")
    store.create(first)
    store.create(second)
    store.update(first.id, log_level="debug")
    store.end(first.id)
    assert store.get(second.id) == second


def test_subscribe_adds_and_removes_and_returns_the_list(store: SessionStore) -> None:
    data = make()
    store.create(data)
    assert store.subscribe(data.id, "test://a", on=True) == ["test://a"]
    assert store.subscribe(data.id, "test://b", on=True) == ["test://a", "test://b"]
    assert store.subscribe(data.id, "test://a", on=True) == ["test://b", "test://a"]
    assert store.subscribe(data.id, "test://b", on=False) == ["test://a"]
    found = store.get(data.id)
    assert found is not None and found.subscriptions == ["test://a"]
    assert store.subscribe("never-created", "test://a", on=True) is None


def test_subscribe_reads_the_stored_list_not_a_copy_this_process_remembers() -> None:
    store = DatabaseSessionStore()
    data = make(subscriptions=["test://a"])
    store.create(data)
    assert store.get(data.id) is not None  # remembered here
    # Another process's change whose announcement has not arrived yet.
    Session.objects.filter(pk=data.id).update(subscriptions=["test://a", "test://x"])
    assert store.subscribe(data.id, "test://b", on=True) == ["test://a", "test://x", "test://b"]


def test_base_store_subscribe_reads_then_writes() -> None:
    class Plain(SessionStore):
        def __init__(self) -> None:
            self.data = make(subscriptions=["test://a"])

        def get(self, session_id: str) -> SessionData | None:
            return self.data if session_id == self.data.id else None

        def update(self, session_id: str, **changes: Any) -> None:
            for name, value in changes.items():
                setattr(self.data, name, value)

    plain = Plain()
    assert plain.subscribe(plain.data.id, "test://b", on=True) == ["test://a", "test://b"]
    assert plain.data.subscriptions == ["test://a", "test://b"]
    assert plain.subscribe("other", "test://b", on=True) is None


# -- the database store -------------------------------------------------------------------------


@override_settings(MCP_APP={"SESSION_IDLE_SECONDS": 60})
def test_database_session_idle_too_long_is_gone() -> None:
    store = DatabaseSessionStore()
    store.create(make())
    age_row(make().id, 61)
    assert store.get(make().id) is None


@override_settings(MCP_APP={"SESSION_IDLE_SECONDS": 60})
def test_database_get_restarts_the_idle_clock() -> None:
    store = DatabaseSessionStore()
    store.create(make())
    age_row(make().id, 50)
    assert store.get(make().id) is not None
    assert timezone.now() - Session.objects.get().last_seen < timedelta(seconds=5)
    # So the session lives on past its first deadline.
    age_row(make().id, 30)
    assert store.get(make().id) is not None


@override_settings(MCP_APP={"SESSION_IDLE_SECONDS": 60})
def test_database_exists_leaves_the_idle_clock_alone() -> None:
    store = DatabaseSessionStore()
    store.create(make())
    age_row(make().id, 50)
    assert store.exists(make().id) is True
    assert timezone.now() - Session.objects.get().last_seen > timedelta(seconds=45)
    age_row(make().id, 61)
    assert store.exists(make().id) is False


@override_settings(MCP_APP={"SESSION_IDLE_SECONDS": 60})
def test_database_get_within_a_tenth_of_the_idle_time_does_not_write() -> None:
    # A read from the store, as after RECHECK_SECONDS, writes the clock no more often than
    # a read from memory does.
    store = DatabaseSessionStore()
    store.create(make())
    seen = Session.objects.get().last_seen - timedelta(seconds=5)
    Session.objects.update(last_seen=seen)
    assert store.get(make().id) is not None
    assert Session.objects.get().last_seen == seen
    sessions.forget_sessions()
    later = Session.objects.get().last_seen - timedelta(seconds=2)
    Session.objects.update(last_seen=later)
    assert store.get(make().id) is not None
    assert timezone.now() - Session.objects.get().last_seen < timedelta(seconds=5)


def test_database_session_read_lately_costs_no_query(settings: Any) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    # Read lately however long the test takes between the two reads.
    settings.MCP_APP = {**settings.MCP_APP, "RECHECK_SECONDS": 3600}
    store = DatabaseSessionStore()
    store.create(make())
    assert store.get(make().id) is not None
    with CaptureQueriesContext(connection) as queries:
        found = store.get(make().id)
    assert found == make()
    assert len(queries) == 0
    # What a caller does to its copy is not what the next caller gets.
    assert found is not None
    found.subscriptions.append("x://y")
    assert store.get(make().id) == make()


def test_database_changes_made_here_are_seen_at_once() -> None:
    store = DatabaseSessionStore()
    store.create(make())
    assert store.get(make().id) is not None
    store.update(make().id, log_level="debug")
    found = store.get(make().id)
    assert found is not None and found.log_level == "debug"
    assert store.end(make().id)
    assert store.get(make().id) is None


def test_database_an_unannounced_end_is_seen_after_the_recheck_interval(
    settings: Any, recheck_clock: RecheckClock
) -> None:
    settings.MCP_APP = {**settings.MCP_APP, "RECHECK_SECONDS": 60}
    store = DatabaseSessionStore()
    store.create(make())
    assert store.get(make().id) is not None
    Session.objects.all().delete()  # as another process without a shared backend
    assert store.get(make().id) is not None
    recheck_clock.now += 61
    assert store.get(make().id) is None


def test_database_an_end_announced_by_another_process_is_seen_at_once(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_app import delivery
    from mcp_app.delivery.base import SinkTable

    class Relay(SinkTable):
        def publish(self, channel: str, message: dict[str, Any]) -> None:
            self._deliver(channel, message)

        def subscribe(self, channels: Any, sink: Any) -> Any:
            with self._lock:
                self._add_sinks(list(channels), sink)
            return lambda: None

    relay = Relay()
    monkeypatch.setattr(delivery, "backend", lambda: relay)
    settings.MCP_APP = {**settings.MCP_APP, "RECHECK_SECONDS": 3600}
    store = DatabaseSessionStore()
    store.create(make())
    assert store.get(make().id) is not None
    Session.objects.all().delete()
    assert store.get(make().id) is not None
    relay.publish(sessions.CHANNEL, {"session": make().id})
    assert store.get(make().id) is None


def test_database_a_busy_session_restarts_its_idle_clock_from_memory(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    settings.MCP_APP = {"SESSION_IDLE_SECONDS": 60, "RECHECK_SECONDS": 3600}
    store = DatabaseSessionStore()
    store.create(make())
    assert store.get(make().id) is not None
    age_row(make().id, 50)
    # Read from memory, more than a tenth of the idle time after the clock was written.
    real = time.monotonic
    monkeypatch.setattr(sessions.time, "monotonic", lambda: real() + 7)
    assert store.get(make().id) is not None
    assert timezone.now() - Session.objects.get().last_seen < timedelta(seconds=5)


def test_end_drops_the_sessions_events_only(store: SessionStore) -> None:
    store.create(make("a" * 43))
    store.create(make("b" * 43))
    StreamEvent.objects.create(session_id="a" * 43, stream="s1", seq=1, message={})
    StreamEvent.objects.create(session_id="b" * 43, stream="s2", seq=1, message={})
    store.end("a" * 43)
    assert list(StreamEvent.objects.values_list("session_id", flat=True)) == ["b" * 43]


@override_settings(MCP_APP={"SESSION_IDLE_SECONDS": 60})
def test_database_clean_removes_expired_sessions_and_their_events() -> None:
    store = DatabaseSessionStore()
    for name in "abc":
        store.create(make(name * 43))
        StreamEvent.objects.create(session_id=name * 43, stream=f"s{name}", seq=1, message={})
    age_row("a" * 43, 61)
    age_row("b" * 43, 3600)
    age_row("c" * 43, 30)
    assert store.clean() == 2
    assert list(Session.objects.values_list("pk", flat=True)) == ["c" * 43]
    assert list(StreamEvent.objects.values_list("session_id", flat=True)) == ["c" * 43]
    assert store.clean() == 0


@override_settings(MCP_APP={"SESSION_IDLE_SECONDS": 60})
def test_database_clean_deletes_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mcp_app import sessions

    monkeypatch.setattr(sessions, "CLEAN_BATCH", 2)
    store = DatabaseSessionStore()
    for name in "abcdef":
        store.create(make(name * 43))
        StreamEvent.objects.create(session_id=name * 43, stream=f"s{name}", seq=1, message={})
        age_row(name * 43, 30 if name == "f" else 61)
    with CaptureQueriesContext(connection) as queries:
        assert store.clean() == 5
    deletes = [q["sql"] for q in queries if q["sql"].startswith("DELETE") and "session" in q["sql"]]
    # Two ids a query, for the events and for the sessions: no query binds every expired id.
    assert len(deletes) == 6
    assert list(Session.objects.values_list("pk", flat=True)) == ["f" * 43]
    assert list(StreamEvent.objects.values_list("session_id", flat=True)) == ["f" * 43]


# -- the cache store ----------------------------------------------------------------------------


@pytest.mark.usefixtures("cache_settings")
def test_cache_session_expires_after_the_idle_time(clock: FakeClock) -> None:
    store = CacheSessionStore()
    store.create(make())
    clock.now += 59
    assert store.get(make().id) is not None
    clock.now += 61
    assert store.get(make().id) is None


@pytest.mark.usefixtures("cache_settings")
def test_cache_get_restarts_the_idle_clock(clock: FakeClock) -> None:
    store = CacheSessionStore()
    store.create(make())
    for _ in range(3):
        clock.now += 45
        assert store.get(make().id) is not None


@pytest.mark.usefixtures("cache_settings")
def test_cache_exists_leaves_the_idle_clock_alone(clock: FakeClock) -> None:
    store = CacheSessionStore()
    store.create(make())
    clock.now += 45
    assert store.exists(make().id) is True
    clock.now += 20
    assert store.exists(make().id) is False


@pytest.mark.usefixtures("cache_settings")
def test_cache_update_restarts_the_idle_clock(clock: FakeClock) -> None:
    store = CacheSessionStore()
    store.create(make())
    clock.now += 45
    store.update(make().id, log_level="info")
    clock.now += 45
    found = store.get(make().id)
    assert found is not None and found.log_level == "info"


@pytest.mark.usefixtures("cache_settings")
def test_cache_store_uses_the_configured_cache_under_its_prefix() -> None:
    CacheSessionStore().create(make())
    stored = caches["sessions"].get(CacheSessionStore.prefix + make().id)
    assert stored["protocol_version"] == "2025-11-25"
    assert caches["default"].get(CacheSessionStore.prefix + make().id) is None


@pytest.mark.usefixtures("cache_settings")
def test_cache_clean_leaves_expiry_to_the_cache() -> None:
    store = CacheSessionStore()
    store.create(make())
    assert store.clean() == 0
    assert store.get(make().id) is not None


# -- choosing a store, and ids ------------------------------------------------------------------


def test_database_store_is_the_default() -> None:
    assert isinstance(sessions.store(), DatabaseSessionStore)
    assert sessions.store() is sessions.store()


@pytest.mark.usefixtures("cache_settings")
def test_store_setting_picks_the_cache_store() -> None:
    assert isinstance(sessions.store(), CacheSessionStore)


def test_base_store_is_abstract_and_cleans_nothing() -> None:
    base = SessionStore()
    with pytest.raises(NotImplementedError):
        base.create(make())
    with pytest.raises(NotImplementedError):
        base.get("x")
    with pytest.raises(NotImplementedError):
        base.update("x", log_level="info")
    with pytest.raises(NotImplementedError):
        base.end("x")
    assert base.clean() == 0


def test_new_session_ids_are_random_url_safe_and_long() -> None:
    ids = {new_session_id() for _ in range(50)}
    assert len(ids) == 50
    for session_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", session_id)


@pytest.mark.parametrize(
    ("session_id", "ok"),
    [
        (new_session_id(), True),
        ("!" + "~" * 63, True),
        ("x" * 65, False),
        ("", False),
        ("with space", False),
        ("a\x00b", False),
        ("é", False),
        ("tab\t", False),
    ],
)
def test_well_formed_session_ids_are_visible_ascii_within_the_column(
    session_id: str, ok: bool
) -> None:
    assert sessions.well_formed(session_id) is ok


def test_cache_concurrent_subscriptions_are_all_kept(
    cache_settings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    store = CacheSessionStore()
    data = make()
    store.create(data)
    cache = caches["sessions"]
    original_get = cache.get

    def slow_get(key: str, *args: Any, **kwargs: Any) -> Any:
        found = original_get(key, *args, **kwargs)
        time.sleep(0.01)  # every reader overlaps the others' writes
        return found

    monkeypatch.setattr(cache, "get", slow_get)
    uris = [f"test://{n}" for n in range(8)]
    threads = [
        threading.Thread(target=store.subscribe, args=(data.id, uri), kwargs={"on": True})
        for uri in uris
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = store.get(data.id)
    assert found is not None and sorted(found.subscriptions) == uris


def test_cache_a_session_ended_during_a_change_stays_ended(
    cache_settings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CacheSessionStore()
    data = make()
    store.create(data)
    cache = caches["sessions"]
    original_get = cache.get
    ended: list[bool] = []

    def get_then_end(key: str, *args: Any, **kwargs: Any) -> Any:
        found = original_get(key, *args, **kwargs)
        if key == store.prefix + data.id and not ended:
            ended.append(store.end(data.id))  # a DELETE between the read and the write
        return found

    monkeypatch.setattr(cache, "get", get_then_end)
    store.update(data.id, log_level="info")
    assert ended == [True]
    assert store.get(data.id) is None


def test_cache_a_change_that_could_not_take_the_lock_leaves_the_holders_lock(
    cache_settings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CacheSessionStore()
    data = make()
    store.create(data)
    lock = store.prefix + data.id + ":lock"
    caches["sessions"].set(lock, "held by another change", 60)
    monkeypatch.setattr(sessions, "CACHE_LOCK_SECONDS", 0.05)
    store.update(data.id, log_level="info")  # goes on after the wait
    assert caches["sessions"].get(lock) == "held by another change"
    found = store.get(data.id)
    assert found is not None and found.log_level == "info"
