"""Values a process read lately: trusted for RECHECK_SECONDS unless forgotten first."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_app import delivery
from mcp_app.delivery.base import SinkTable
from mcp_app.recent import Recent
from tests.conftest import RecheckClock


@pytest.fixture(autouse=True)
def recheck(settings: Any) -> None:
    settings.MCP_APP = {**settings.MCP_APP, "RECHECK_SECONDS": 3600}


def test_a_stored_value_is_kept_until_forgotten() -> None:
    recent: Recent[str, int] = Recent()
    recent.store("a", 1, recent.epoch())
    recent.store("b", 2, recent.epoch())
    assert (recent.get("a"), recent.get("b")) == (1, 2)
    recent.forget("a")
    assert (recent.get("a"), recent.get("b")) == (None, 2)
    recent.forget()
    assert recent.get("b") is None


def test_a_read_older_than_a_forget_is_not_kept() -> None:
    recent: Recent[str, int] = Recent()
    epoch = recent.epoch()
    recent.forget("other")
    recent.store("a", 1, epoch)
    assert recent.get("a") is None


def test_values_expire_after_the_recheck_interval(
    settings: Any, recheck_clock: RecheckClock
) -> None:
    settings.MCP_APP = {**settings.MCP_APP, "RECHECK_SECONDS": 5}
    recent: Recent[str, int] = Recent()
    recent.store("a", 1, recent.epoch())
    recheck_clock.now += 4.9
    assert recent.get("a") == 1
    recheck_clock.now += 0.2
    assert recent.get("a") is None


def test_an_interval_of_zero_keeps_nothing(settings: Any) -> None:
    settings.MCP_APP = {**settings.MCP_APP, "RECHECK_SECONDS": 0}
    recent: Recent[str, int] = Recent()
    recent.store("a", 1, recent.epoch())
    assert recent.get("a") is None


def test_replace_changes_only_a_kept_value() -> None:
    recent: Recent[str, int] = Recent()
    recent.replace("a", 5)
    assert recent.get("a") is None
    recent.store("a", 1, recent.epoch())
    recent.replace("a", 2)
    assert recent.get("a") == 2


def test_past_the_limit_the_memory_starts_again() -> None:
    recent: Recent[int, int] = Recent(limit=3)
    for key in range(4):
        recent.store(key, key, recent.epoch())
    assert [recent.get(key) for key in range(4)] == [None, None, None, 3]


def test_a_message_on_the_watched_channel_forgets_its_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Relay(SinkTable):
        subscriptions = 0

        def publish(self, channel: str, message: dict[str, Any]) -> None:
            self._deliver(channel, message)

        def subscribe(self, channels: Any, sink: Any) -> Any:
            Relay.subscriptions += 1
            with self._lock:
                self._add_sinks(list(channels), sink)
            return lambda: None

    relay = Relay()
    monkeypatch.setattr(delivery, "backend", lambda: relay)
    recent: Recent[str, int] = Recent()
    recent.watch("changes", lambda message: message["key"])
    recent.watch("changes", lambda message: message["key"])  # once per channel
    assert Relay.subscriptions == 1
    recent.store("a", 1, recent.epoch())
    recent.store("b", 2, recent.epoch())
    relay.publish("changes", {"key": "a"})
    assert (recent.get("a"), recent.get("b")) == (None, 2)
    # After a gap in delivery any value may have changed unannounced.
    relay.publish("changes", dict(delivery.GAP))
    assert recent.get("b") is None


def test_the_in_process_backend_is_not_watched() -> None:
    # Its messages are this process's own changes, forgotten where they are made.
    recent: Recent[str, int] = Recent()
    recent.watch("changes", lambda message: message["key"])
    recent.store("a", 1, recent.epoch())
    delivery.backend().publish("changes", {"key": "a"})
    assert recent.get("a") == 1


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_watches_again_with_a_backend_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    class Relay(SinkTable):
        def subscribe(self, channels: Any, sink: Any) -> Any:
            return lambda: None

    relay = Relay()
    monkeypatch.setattr(delivery, "backend", lambda: relay)
    recent: Recent[str, int] = Recent()
    recent.watch("changes", lambda message: message["key"])
    recent.store("a", 1, recent.epoch())
    before = delivery._load("mcp_app.delivery.local.LocalBackend")
    pid = os.fork()
    if pid == 0:  # the child
        fresh = delivery._load("mcp_app.delivery.local.LocalBackend") is not before
        ok = fresh and recent.get("a") is None and not recent._watching
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert recent.get("a") == 1 and recent._watching
