"""The in-process delivery backend: fan-out, unsubscribing, broken sinks and many threads at once."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from mcp_app.delivery.local import LocalBackend


class Collector:
    """A sink that records what it is given and lets a test wait, boundedly, for it."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []
        self.times: list[float] = []
        self._changed = threading.Condition()

    def __call__(self, channel: str, message: dict[str, Any]) -> None:
        with self._changed:
            self.items.append((channel, message))
            self.times.append(time.perf_counter())
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = 5.0) -> list[tuple[str, dict[str, Any]]]:
        """The items once there are ``count`` of them; fails the test after ``timeout``."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.items) >= count, timeout):
                pytest.fail(
                    f"got {len(self.items)} of {count} messages in {timeout}s: {self.items}"
                )
            return list(self.items)

    def stays(self, count: int, seconds: float) -> list[tuple[str, dict[str, Any]]]:
        """The items after ``seconds``, asserting no more than ``count`` arrived."""
        time.sleep(seconds)
        with self._changed:
            assert len(self.items) == count, self.items
            return list(self.items)

    @property
    def messages(self) -> list[dict[str, Any]]:
        with self._changed:
            return [message for _, message in self.items]


def test_every_sink_of_a_channel_gets_the_message_once() -> None:
    backend = LocalBackend()
    first, second, other = Collector(), Collector(), Collector()
    backend.subscribe(["a"], first)
    backend.subscribe(["a", "b"], second)
    backend.subscribe(["b"], other)

    backend.publish("a", {"n": 1})

    assert first.items == [("a", {"n": 1})]
    assert second.items == [("a", {"n": 1})]
    assert other.items == []


def test_a_channel_named_twice_delivers_once() -> None:
    backend = LocalBackend()
    sink = Collector()
    backend.subscribe(["a", "a"], sink)
    backend.publish("a", {"n": 1})
    assert sink.items == [("a", {"n": 1})]
    assert backend.subscriber_count("a") == 1


def test_publishing_without_subscribers_is_harmless() -> None:
    backend = LocalBackend()
    backend.publish("nobody", {"n": 1})
    assert backend.subscriber_count("nobody") == 0


def test_unsubscribe_stops_only_that_subscription() -> None:
    backend = LocalBackend()
    kept, dropped = Collector(), Collector()
    backend.subscribe(["a"], kept)
    unsubscribe = backend.subscribe(["a", "b"], dropped)

    unsubscribe()
    unsubscribe()  # a second call changes nothing
    backend.publish("a", {"n": 1})
    backend.publish("b", {"n": 2})

    assert kept.items == [("a", {"n": 1})]
    assert dropped.items == []
    assert backend.subscriber_count("a") == 1
    assert backend.subscriber_count("b") == 0


def test_the_same_sink_subscribed_twice_is_two_subscriptions() -> None:
    backend = LocalBackend()
    sink = Collector()
    first = backend.subscribe(["a"], sink)
    backend.subscribe(["a"], sink)
    backend.publish("a", {"n": 1})
    first()
    backend.publish("a", {"n": 2})
    assert sink.messages == [{"n": 1}, {"n": 1}, {"n": 2}]


def test_a_failing_sink_is_logged_and_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = LocalBackend()
    before, after = Collector(), Collector()

    def broken(channel: str, message: dict[str, Any]) -> None:
        raise RuntimeError("sink is broken")

    backend.subscribe(["a"], before)
    backend.subscribe(["a"], broken)
    backend.subscribe(["a"], after)
    with caplog.at_level(logging.ERROR, logger="mcp_app"):
        backend.publish("a", {"n": 1})

    assert before.items == after.items == [("a", {"n": 1})]
    assert "delivery sink failed on a" in caplog.text


def test_a_sink_may_unsubscribe_itself_while_called() -> None:
    backend = LocalBackend()
    calls: list[dict[str, Any]] = []
    unsubscribe: list[Any] = []

    def once(channel: str, message: dict[str, Any]) -> None:
        calls.append(message)
        unsubscribe[0]()

    unsubscribe.append(backend.subscribe(["a"], once))
    backend.publish("a", {"n": 1})
    backend.publish("a", {"n": 2})
    assert calls == [{"n": 1}]


def test_publishers_and_subscribers_on_many_threads() -> None:
    backend = LocalBackend()
    steady = Collector()
    backend.subscribe(["busy"], steady)
    publishers, per_publisher = 8, 200
    errors: list[BaseException] = []
    stop = threading.Event()

    def publish(number: int) -> None:
        try:
            for seq in range(per_publisher):
                backend.publish("busy", {"from": number, "seq": seq})
        except BaseException as exc:
            errors.append(exc)

    def churn() -> None:
        # Subscriptions coming and going while messages fly must not disturb the others.
        try:
            while not stop.is_set():
                backend.subscribe(["busy", "quiet"], lambda c, m: None)()
        except BaseException as exc:
            errors.append(exc)

    churners = [threading.Thread(target=churn) for _ in range(2)]
    workers = [threading.Thread(target=publish, args=(n,)) for n in range(publishers)]
    for thread in churners + workers:
        thread.start()
    for thread in workers:
        thread.join(30)
    stop.set()
    for thread in churners:
        thread.join(30)

    assert not errors
    assert not any(thread.is_alive() for thread in churners + workers)
    messages = steady.wait_for(publishers * per_publisher)
    assert len(messages) == publishers * per_publisher
    for number in range(publishers):
        seqs = [m["seq"] for _, m in messages if m["from"] == number]
        assert seqs == list(range(per_publisher))  # each publisher's order is kept
    assert backend.subscriber_count("busy") == 1
    assert backend.subscriber_count("quiet") == 0
