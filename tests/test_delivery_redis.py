"""The Redis delivery backend against a real redis-server at ``REDIS_URL`` (see scripts/services.sh)."""

from __future__ import annotations

import logging
import math
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from mcp_app.delivery import GAP
from mcp_app.delivery import redis as redis_backend
from mcp_app.delivery.redis import SOCKET_TIMEOUT, SUBSCRIBE_WAIT, RedisBackend
from tests.conftest import free_port, require_redis_url
from tests.test_delivery_local import Collector


@pytest.fixture(scope="module")
def redis_url() -> str:
    url = require_redis_url()
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.fail(f"no Redis answers at REDIS_URL={url} ({exc}): run scripts/services.sh")
    return url


@pytest.fixture
def prefix() -> str:
    # Pub/sub channels are server-wide: a prefix per test keeps parallel runs apart.
    return f"test-{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def backends() -> Iterator[list[RedisBackend]]:
    """Backends made by the test; each stands for one process, with its own connections."""
    made: list[RedisBackend] = []
    yield made
    for backend in made:
        backend.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-delivery")]


@pytest.fixture
def make(redis_url: str, prefix: str, backends: list[RedisBackend]) -> Any:
    def make(url: str = redis_url, prefix: str = prefix) -> RedisBackend:
        backends.append(RedisBackend(url, prefix=prefix))
        return backends[-1]

    return make


def numsub(url: str, channel: str) -> int:
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        return int(dict(client.pubsub_numsub(channel))[channel.encode()])
    finally:
        client.close()


def wait_until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        time.sleep(0.02)


def test_a_message_reaches_a_subscriber_of_another_backend(make: Any) -> None:
    publisher, listener = make(), make()
    sink = Collector()
    listener.subscribe(["lists"], sink)
    message = {"kinds": ["tools"], "text": "héllo ✓", "nested": {"n": [1, 2.5, None, True]}}

    publisher.publish("lists", message)

    assert sink.wait_for(1) == [("lists", message)]
    sink.stays(1, 0.2)


def test_what_other_backends_keep_arrives_as_it_was_sent(make: Any) -> None:
    publisher, listener = make(), make()
    sink = Collector()
    listener.subscribe(["odd"], sink)
    # A handler's notification may hold these; the in-process and database backends keep
    # them (the stream that sends it out mends them), so this one must not refuse them.
    message = {"text": "lone \ud800 and NUL \x00", "numbers": [float("inf"), -float("inf")]}
    publisher.publish("odd", message)
    publisher.publish("odd", {"nan": float("nan")})
    (_, first), (_, second) = sink.wait_for(2)
    assert first == message
    assert math.isnan(second["nan"])


def test_subscribe_returns_once_redis_confirmed_it(make: Any, redis_url: str, prefix: str) -> None:
    listener = make()
    listener.subscribe(["a", "b"], Collector())
    assert listener.listener_connected()
    assert numsub(redis_url, prefix + "a") == 1
    assert numsub(redis_url, prefix + "b") == 1


def test_messages_arrive_in_publishing_order(make: Any) -> None:
    publisher, listener = make(), make()
    sink = Collector()
    listener.subscribe(["ordered"], sink)
    for n in range(200):
        publisher.publish("ordered", {"n": n})
    assert [m["n"] for _, m in sink.wait_for(200)] == list(range(200))


def test_only_subscribed_channels_and_only_this_prefix(make: Any, prefix: str) -> None:
    publisher, listener = make(), make()
    stranger = make(prefix=prefix + "other:")
    mine, both, theirs = Collector(), Collector(), Collector()
    listener.subscribe(["a"], mine)
    listener.subscribe(["a", "b"], both)
    stranger.subscribe(["a"], theirs)

    publisher.publish("c", {"n": 0})
    publisher.publish("b", {"n": 1})
    publisher.publish("a", {"n": 2})

    assert both.wait_for(2) == [("b", {"n": 1}), ("a", {"n": 2})]
    assert mine.wait_for(1) == [("a", {"n": 2})]
    theirs.stays(0, 0.2)


def test_a_subscriber_in_the_publishing_process_gets_it_too(make: Any) -> None:
    backend = make()
    sink = Collector()
    backend.subscribe(["self"], sink)
    backend.publish("self", {"n": 1})
    assert sink.wait_for(1) == [("self", {"n": 1})]


def test_unsubscribe_stops_delivery_and_leaves_the_redis_channel(
    make: Any, redis_url: str, prefix: str
) -> None:
    publisher, listener = make(), make()
    kept, dropped = Collector(), Collector()
    stop_kept = listener.subscribe(["a"], kept)
    stop_dropped = listener.subscribe(["a"], dropped)

    stop_dropped()
    publisher.publish("a", {"n": 1})
    kept.wait_for(1)
    dropped.stays(0, 0.2)

    stop_kept()
    # The listener unsubscribes at its next wake-up, within its idle timeout.
    wait_until(lambda: numsub(redis_url, prefix + "a") == 0, timeout=listener.idle_seconds + 3)
    publisher.publish("a", {"n": 2})

    again = Collector()
    listener.subscribe(["a"], again)
    assert numsub(redis_url, prefix + "a") == 1
    publisher.publish("a", {"n": 3})
    assert again.wait_for(1) == [("a", {"n": 3})]
    assert kept.messages == [{"n": 1}]


def test_a_failing_sink_does_not_stop_the_others(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    publisher, listener = make(), make()

    def broken(channel: str, message: dict[str, Any]) -> None:
        raise RuntimeError("broken sink")

    sink = Collector()
    listener.subscribe(["a"], broken)
    listener.subscribe(["a"], sink)
    with caplog.at_level(logging.ERROR, logger="mcp_app"):
        publisher.publish("a", {"n": 1})
        publisher.publish("a", {"n": 2})
        assert sink.wait_for(2) == [("a", {"n": 1}), ("a", {"n": 2})]
    assert "delivery sink failed on a" in caplog.text


def test_a_message_that_is_not_json_is_dropped_with_a_warning(
    make: Any, redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    publisher, listener = make(), make()
    sink = Collector()
    listener.subscribe(["a"], sink)
    with caplog.at_level(logging.WARNING, logger="mcp_app"):
        raw = redis.Redis.from_url(redis_url)
        raw.publish(prefix + "a", b"{not json")
        raw.close()
        publisher.publish("a", {"n": 1})
        assert sink.wait_for(1) == [("a", {"n": 1})]
    assert "not JSON" in caplog.text


def test_publish_refuses_what_json_cannot_carry(make: Any) -> None:
    with pytest.raises(TypeError):
        make().publish("a", {"n": object()})


def test_the_listener_reconnects_after_losing_its_connection(
    make: Any, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    publisher, listener = make(), make()
    sink = Collector()
    listener.subscribe(["a"], sink)
    publisher.publish("a", {"n": 1})
    sink.wait_for(1)

    with caplog.at_level(logging.WARNING, logger="mcp_app"):
        admin = redis.Redis.from_url(redis_url, decode_responses=True)
        try:
            ids = [
                c["id"]
                for c in admin.client_list()
                if c["name"] == listener.client_name and int(c.get("sub", 0)) > 0
            ]
            assert ids
            for client_id in ids:
                admin.client_kill_filter(_id=client_id)
        finally:
            admin.close()
        wait_until(lambda: "reconnected to Redis" in caplog.text)
    assert "Redis connection lost" in caplog.text
    assert listener.listener_connected()
    # What was published meanwhile may be lost: the sink is told so once subscribed again.
    assert sink.wait_for(2)[1] == ("a", GAP)
    assert numsub(redis_url, listener._prefix + "a") == 1
    publisher.publish("a", {"n": 2})
    assert sink.wait_for(3)[2] == ("a", {"n": 2})


class OwnRedis:
    """A redis-server of the test's own, to stop and start again without disturbing others."""

    def __init__(self, tmp: Path) -> None:
        if shutil.which("redis-server") is None:
            pytest.fail("redis-server is not installed: run scripts/services.sh")
        self.port = free_port()
        self.tmp = tmp
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port)]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.tmp)]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.answers)

    def answers(self) -> bool:
        try:
            return bool(redis.Redis.from_url(self.url, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def test_the_listener_comes_back_after_redis_restarts(
    make: Any, own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    publisher, listener = make(url=own_redis.url), make(url=own_redis.url)
    sink = Collector()
    listener.subscribe(["a"], sink)
    publisher.publish("a", {"n": 1})
    sink.wait_for(1)

    with caplog.at_level(logging.WARNING, logger="mcp_app"):
        own_redis.stop()
        wait_until(lambda: not listener.listener_connected())
        with pytest.raises(redis.ConnectionError):
            publisher.publish("a", {"n": "lost"})
        own_redis.start()
        wait_until(listener.listener_connected, timeout=10)
    assert caplog.text.count("Redis connection lost") == 1  # once per outage
    assert "reconnected to Redis" in caplog.text
    assert sink.wait_for(2)[1] == ("a", GAP)
    publisher.publish("a", {"n": 2})
    assert sink.wait_for(3)[2] == ("a", {"n": 2})
    sink.stays(3, 0.2)


def test_publish_fails_at_once_while_the_listener_finds_redis_unreachable(
    make: Any, own_redis: OwnRedis
) -> None:
    backend = make(url=own_redis.url)
    backend.heartbeat_seconds = 0.2
    backend.subscribe(["a"], Collector())
    # Stopped, not killed: a Redis that does not answer, as across a network partition.
    assert own_redis.proc is not None
    own_redis.proc.send_signal(signal.SIGSTOP)
    try:
        # The listener's heartbeat goes unanswered for SOCKET_TIMEOUT.
        wait_until(lambda: backend._listener.failing, timeout=SOCKET_TIMEOUT + 3)
        started = time.monotonic()
        with pytest.raises(redis.ConnectionError, match="unreachable"):
            backend.publish("a", {"n": 1})
        assert time.monotonic() - started < 0.5
    finally:
        own_redis.proc.send_signal(signal.SIGCONT)


def test_a_publish_refused_while_reconnecting_is_owed_as_a_gap_to_other_processes(
    make: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the publisher's own listener is cut off: the other process's never is, so only
    # the publisher can tell it that a message on the channel was lost.
    monkeypatch.setattr(redis_backend, "BACKOFF_MIN", 1.0)
    publisher, other = make(), make()
    mine, theirs = Collector(), Collector()
    publisher.subscribe(["b"], mine)
    other.subscribe(["a"], theirs)
    admin = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        for client in admin.client_list():
            if client["name"] == publisher.client_name and int(client.get("sub", 0)) > 0:
                admin.client_kill_filter(_id=client["id"])
    finally:
        admin.close()
    wait_until(lambda: publisher._listener.failing)
    with pytest.raises(redis.ConnectionError, match="unreachable"):
        publisher.publish("a", {"n": "refused"})
    assert theirs.wait_for(1, timeout=10) == [("a", GAP)]
    assert mine.wait_for(1) == [("b", GAP)]  # its own sinks are told too


def test_without_redis_publish_raises_and_subscribe_does_not_hang(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    nowhere = make(url="redis://127.0.0.1:1/0")
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        nowhere.publish("a", {"n": 1})
    with caplog.at_level(logging.WARNING, logger="mcp_app"):
        nowhere.subscribe(["a"], Collector())
        nowhere.subscribe(["b"], Collector())  # returns at once: Redis is known to be down
        wait_until(lambda: "Redis connection lost" in caplog.text)
    assert time.monotonic() - started < SUBSCRIBE_WAIT + 3
    assert not nowhere.listener_connected()


def test_an_idle_listener_checks_its_connection_without_dropping_it(
    make: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    publisher, listener = make(), make()
    # The echo of a heartbeat has this long to come back: ample on a busy machine.
    listener.heartbeat_seconds = 1.0
    listener.idle_seconds = 0.1
    client = listener._client()  # the one the listener publishes its heartbeats with
    send = client.publish
    heartbeats: list[float] = []

    def publish(channel: str, data: Any) -> Any:
        if data == "heartbeat":
            heartbeats.append(time.monotonic())
        return send(channel, data)

    monkeypatch.setattr(client, "publish", publish)
    sink = Collector()
    with caplog.at_level(logging.WARNING, logger="mcp_app"):
        listener.subscribe(["a"], sink)
        # A second heartbeat goes out only once the first came back (else the listener
        # reconnects, and logs it, first).
        wait_until(lambda: len(heartbeats) >= 2, timeout=10)
        publisher.publish("a", {"n": 1})
        assert sink.wait_for(1) == [("a", {"n": 1})]
    assert "connection lost" not in caplog.text


def test_close_stops_the_listener_and_the_backend_works_after(make: Any) -> None:
    backend = make()
    backend.subscribe(["a"], Collector())
    backend.close()
    assert not backend.listener_connected()
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-delivery")]

    sink = Collector()
    backend.subscribe(["a"], sink)
    backend.publish("a", {"n": 2})
    assert sink.wait_for(1) == [("a", {"n": 2})]


def test_url_and_prefix_come_from_settings(
    redis_url: str, prefix: str, backends: list[RedisBackend], settings: Any
) -> None:
    settings.MCP_APP = {**settings.MCP_APP, "REDIS_URL": redis_url, "REDIS_CHANNEL_PREFIX": prefix}
    backend = RedisBackend()
    backends.append(backend)
    sink = Collector()
    backend.subscribe(["a"], sink)
    assert numsub(redis_url, prefix + "a") == 1
    backend.publish("a", {"n": 1})
    assert sink.wait_for(1) == [("a", {"n": 1})]


def test_the_answer_to_a_subscribe_undone_since_confirms_nothing() -> None:
    """SUBSCRIBE x, its last sink leaves (UNSUBSCRIBE x), a new sink comes: the answer to
    the first SUBSCRIBE, read late, must not tell the new sink that x is subscribed."""
    from mcp_app.delivery.redis import _Listener

    class Wire:
        def __init__(self) -> None:
            self.sent: list[tuple[str, tuple[str, ...]]] = []

        def subscribe(self, *names: str) -> None:
            self.sent.append(("subscribe", names))

        def unsubscribe(self, *names: str) -> None:
            self.sent.append(("unsubscribe", names))

    backend = RedisBackend(url="redis://127.0.0.1:1/0", prefix="p:")
    listener = _Listener(control="p:control")
    wire = Wire()
    answer = {"type": "subscribe", "channel": "p:x"}
    with backend._lock:
        token = backend._add_sinks(["x"], Collector())
    subscribed = backend._reconcile(wire, listener, set())  # type: ignore[arg-type]
    with backend._lock:
        backend._remove_sinks(["x"], token)
    subscribed = backend._reconcile(wire, listener, subscribed)  # type: ignore[arg-type]
    with backend._lock:
        backend._add_sinks(["x"], Collector())
    backend._handle(listener, answer)  # the first SUBSCRIBE's answer, read late
    assert "x" not in listener.confirmed
    backend._reconcile(wire, listener, subscribed)  # type: ignore[arg-type]
    assert wire.sent == [
        ("subscribe", ("p:x",)),
        ("unsubscribe", ("p:x",)),
        ("subscribe", ("p:x",)),
    ]
    backend._handle(listener, {"type": "unsubscribe", "channel": "p:x"})
    backend._handle(listener, answer)  # the last SUBSCRIBE's answer
    assert "x" in listener.confirmed
