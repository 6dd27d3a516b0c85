"""Letting go of a thread's stale connections: what Django's ``close_old_connections`` does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import django.db
import pytest
from django.db import connections

from mcp_app.transport.connections import close_old_connections, drop_if_broken

pytestmark = pytest.mark.django_db(transaction=True)


def in_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` run in a new thread (whose connections are its own), its result or failure."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # raised again in the test's thread
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_a_connection_past_its_age_is_closed() -> None:
    def run() -> tuple[bool, bool]:
        connection = connections["default"]
        connection.ensure_connection()
        opened = connection.connection is not None
        connection.close_at = time.monotonic() - 1
        close_old_connections()
        return opened, connection.connection is None

    assert in_thread(run) == (True, True)


SETUPS: dict[str, Callable[[Any], None]] = {
    "past its age": lambda c: setattr(c, "close_at", time.monotonic() - 1),
    "persistent": lambda c: setattr(c, "close_at", None),
    "within its age": lambda c: setattr(c, "close_at", time.monotonic() + 60),
    "after an error": lambda c: setattr(c, "errors_occurred", True),
    "left outside autocommit": lambda c: c.set_autocommit(False),
}


@pytest.mark.parametrize("setup", SETUPS)
def test_each_connection_ends_as_under_djangos_own_function(setup: str) -> None:
    def run(close: Callable[[], None]) -> bool:
        connection = connections["default"]
        connection.ensure_connection()
        SETUPS[setup](connection)
        close()
        return connection.connection is None

    assert in_thread(lambda: run(close_old_connections)) == in_thread(
        lambda: run(django.db.close_old_connections)
    )


def test_a_persistent_usable_connection_stays_open() -> None:
    def run() -> bool:
        connection = connections["default"]
        connection.ensure_connection()
        connection.close_at = None  # CONN_MAX_AGE = None
        close_old_connections()
        return connection.connection is not None

    assert in_thread(run)


def test_another_threads_connection_is_left_alone() -> None:
    opened = threading.Event()
    checked = threading.Event()

    def other() -> bool:
        connection = connections["default"]
        connection.ensure_connection()
        connection.close_at = time.monotonic() - 1
        opened.set()
        checked.wait(30)
        return connection.connection is not None

    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(in_thread(other)))
    thread.start()
    assert opened.wait(30)
    try:
        close_old_connections()
    finally:
        checked.set()
        thread.join(30)
    assert result == [True]


def test_a_thread_that_made_no_connection_is_given_none() -> None:
    def run() -> bool:
        close_old_connections()
        return hasattr(connections._connections, "default")  # type: ignore[attr-defined]

    assert in_thread(run) is False


def test_a_django_without_its_per_thread_store_is_served_by_its_own_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(django.db, "close_old_connections", lambda: calls.append(1))
    monkeypatch.delattr(type(connections), "_connections", raising=False)
    monkeypatch.delattr(connections, "_connections")
    close_old_connections()
    assert calls == [1]


def test_drop_if_broken_closes_only_an_open_connection_that_no_longer_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def check(usable: bool) -> tuple[bool, bool]:
        wrapper = connections["default"]
        drop_if_broken("default")
        never_opened = wrapper.connection is None
        wrapper.ensure_connection()
        monkeypatch.setattr(wrapper, "is_usable", lambda: usable)
        drop_if_broken("default")
        return never_opened, wrapper.connection is not None

    # Nothing is opened to be checked; a working connection is kept, a broken one closed.
    assert in_thread(lambda: check(usable=True)) == (True, True)
    assert in_thread(lambda: check(usable=False)) == (True, False)
