"""The Redis backend: PUBLISH to Redis pub/sub, and one listener thread per process calling the sinks."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..conf import conf
from .base import GAP, Backend, Sink, SinkTable, Unsubscribe

logger = logging.getLogger("mcp_app")

#: Longest wait of ``subscribe`` for Redis to confirm a new channel.
SUBSCRIBE_WAIT = 2.0
#: Bounds of every connect and every command.
SOCKET_TIMEOUT = 5.0
#: Reconnection delays of the listener: doubling from the first up to the last.
BACKOFF_MIN, BACKOFF_MAX = 0.1, 5.0
#: Most channels kept to be sent GAP on, once Redis is back, for publishes refused meanwhile.
MAX_OWED = 10_000


@dataclass(eq=False)
class _Listener:
    control: str
    stop: threading.Event = field(default_factory=threading.Event)
    connected: bool = False
    failing: bool = False
    confirmed: set[str] = field(default_factory=set)  # channels Redis said we subscribe to
    # SUBSCRIBEs and UNSUBSCRIBEs sent on the current connection and not answered yet.
    pending: dict[str, int] = field(default_factory=dict)
    thread: threading.Thread | None = None
    #: Whether it was ever connected: only then can a loss of its connection lose messages.
    confirmed_once: bool = False


class RedisBackend(SinkTable, Backend):
    """Delivers through Redis pub/sub, across processes and machines.

    ``publish`` is one ``PUBLISH`` of the message as JSON. A listener thread, started by the
    first ``subscribe`` and kept for the life of the process (or until ``close``), holds one
    pub/sub connection, subscribes to the channels local sinks want and calls the sinks. It
    changes its subscriptions itself (redis-py's pub/sub object is not thread-safe); a
    ``subscribe`` wakes it through a private control channel and waits for Redis to confirm.

    The listener reconnects with a doubling delay when the connection breaks, logging it,
    and notices a silently dead connection by publishing a heartbeat to itself when idle.
    What is published while it is disconnected is lost, as at-most-once delivery allows;
    once it is back and subscribed again, every sink is sent ``GAP``. Meanwhile ``publish``
    fails at once instead of waiting ``SOCKET_TIMEOUT`` for a Redis known to be unreachable.
    """

    #: Seconds of silence after which the listener checks its connection with a heartbeat.
    heartbeat_seconds = 15.0
    #: Seconds the listener waits for a message before looking at its subscriptions again.
    idle_seconds = 1.0

    def __init__(self, url: str | None = None, prefix: str | None = None) -> None:
        """``url`` and ``prefix`` default to ``REDIS_URL`` and ``REDIS_CHANNEL_PREFIX``."""
        self._url = url
        self._prefix_value = prefix
        super().__init__()
        self._changed = threading.Condition(self._lock)
        self._redis: redis.Redis | None = None
        self._listener: _Listener | None = None
        #: The channels a publish was refused on while the listener reconnected.
        self._owed: set[str] = set()
        # Shown by CLIENT LIST, so an operator can tell whose connections these are.
        self.client_name = f"mcp-delivery-{socket.gethostname()}-{os.getpid()}-{id(self):x}"

    @property
    def _prefix(self) -> str:
        if self._prefix_value is None:
            self._prefix_value = conf.REDIS_CHANNEL_PREFIX
        return self._prefix_value

    def _client(self) -> redis.Redis:
        with self._lock:
            if self._redis is None:
                # No retries: a command retried after a lost reply could deliver twice. The
                # pool replaces connections the server closed before handing them out, and
                # the listener reconnects by itself, with backoff and a log line.
                self._redis = redis.Redis.from_url(
                    self._url or conf.REDIS_URL,
                    decode_responses=True,
                    socket_connect_timeout=SOCKET_TIMEOUT,
                    socket_timeout=SOCKET_TIMEOUT,
                    socket_keepalive=True,
                    client_name=self.client_name,
                    retry=Retry(NoBackoff(), 0),
                )
            return self._redis

    # -- publishing -------------------------------------------------------------------------

    def publish(self, channel: str, message: dict[str, Any]) -> None:
        """Send ``message`` as JSON to every process subscribed to ``channel`` right now.

        Raises:
            TypeError: ``message`` is not JSON-serializable.
            redis.RedisError: Redis could not be reached, or did not answer in time.
        """
        # ASCII escapes: a lone surrogate, which UTF-8 cannot carry, travels as "\ud800" and
        # arrives as it was (as the other backends keep it; the stream that sends it mends it).
        data = json.dumps(message, separators=(",", ":"))
        listener = self._listener
        if listener is not None and listener.failing:
            # A Redis that does not answer would hold every request that tells of a change
            # for SOCKET_TIMEOUT. Its subscribers, in every process, are sent GAP on the
            # channel instead once the listener is back (Redis may have been unreachable
            # from here alone, their listeners never cut off).
            with self._lock:
                if len(self._owed) < MAX_OWED:
                    self._owed.add(channel)
            raise redis.ConnectionError("Redis is unreachable; the listener is reconnecting")
        self._client().publish(self._prefix + channel, data)

    # -- subscribing ------------------------------------------------------------------------

    def subscribe(self, channels: Iterable[str], sink: Sink) -> Unsubscribe:
        """Call ``sink`` for messages published on ``channels`` from now on, in any process.

        Waits (up to ``SUBSCRIBE_WAIT`` seconds, and not while Redis is known to be
        unreachable) until Redis confirms the subscription, so that what is published after
        this returns is delivered.
        """
        names = list(dict.fromkeys(channels))
        with self._lock:
            token = self._add_sinks(names, sink)
            listener = self._listener
            if listener is None or listener.thread is None or not listener.thread.is_alive():
                listener = self._start_listener()
            missing = [name for name in names if name not in listener.confirmed]
            wait = bool(missing) and not listener.failing
            wake = bool(missing) and listener.connected
        if wake:
            self._wake(listener)
        if wait:
            with self._changed:
                confirmed = self._changed.wait_for(
                    lambda: listener.failing or listener.confirmed.issuperset(names),
                    SUBSCRIBE_WAIT,
                )
            if not confirmed:
                logger.warning(
                    "delivery: Redis did not confirm %s within %ss", names, SUBSCRIBE_WAIT
                )

        def unsubscribe() -> None:
            # The listener unsubscribes from Redis when it next wakes; until then it drops
            # the messages of channels nobody here wants.
            with self._lock:
                self._remove_sinks(names, token)

        return unsubscribe

    def _wake(self, listener: _Listener) -> None:
        # On failure the listener is losing its connection too, and resubscribes on return.
        with contextlib.suppress(redis.RedisError):
            self._client().publish(listener.control, "wake")

    def _start_listener(self) -> _Listener:
        # Called with the lock held.
        listener = _Listener(control=f"{self._prefix}mcp-delivery-control:{uuid.uuid4().hex}")
        listener.thread = threading.Thread(
            target=self._listen, args=(listener,), name="mcp-delivery-redis", daemon=True
        )
        self._listener = listener
        listener.thread.start()
        return listener

    def _listen(self, listener: _Listener) -> None:
        delay = BACKOFF_MIN
        lost_at: float | None = None
        # Whether messages may have been lost since the connection broke, which the sinks
        # are told once they are subscribed again.
        gap = False
        while not listener.stop.is_set():
            pubsub: redis.client.PubSub | None = None
            try:
                # Typed through Any: redis-py types these calls in some releases and not others.
                client: Any = self._client()
                pubsub = client.pubsub()
                pubsub.subscribe(listener.control)
                subscribed: set[str] = set()
                last_heard, pinged = time.monotonic(), False
                while not listener.stop.is_set():
                    subscribed = self._reconcile(pubsub, listener, subscribed)
                    if (gap or self._owed) and self._resubscribed(listener):
                        self._deliver_gap(local=gap)
                        gap = False
                    item = pubsub.get_message(timeout=self.idle_seconds)
                    now = time.monotonic()
                    if item is not None:
                        last_heard, pinged = now, False
                        if self._handle(listener, item) and lost_at is not None:
                            logger.warning(
                                "delivery: reconnected to Redis after %.1fs", now - lost_at
                            )
                            lost_at, delay = None, BACKOFF_MIN
                    elif now - last_heard > self.heartbeat_seconds * (2 if pinged else 1):
                        if pinged:
                            raise redis.ConnectionError("no heartbeat back from Redis")
                        self._client().publish(listener.control, "heartbeat")
                        pinged = True
            except Exception as exc:
                with self._changed:
                    listener.connected, listener.failing = False, True
                    listener.confirmed.clear()
                    listener.pending.clear()
                    self._changed.notify_all()
                if listener.stop.is_set():
                    break
                first = lost_at is None
                gap = gap or listener.confirmed_once
                if lost_at is None:
                    lost_at = time.monotonic()
                if not isinstance(exc, (redis.RedisError, OSError)):
                    logger.exception("delivery: Redis listener failed; restarting in %.1fs", delay)
                elif first:
                    logger.warning(
                        "delivery: Redis connection lost (%s); reconnecting in %.1fs", exc, delay
                    )
                else:  # once per outage is enough at warning level
                    logger.debug(
                        "delivery: Redis still unreachable (%s); next try in %.1fs", exc, delay
                    )
                listener.stop.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)
            finally:
                if pubsub is not None:
                    # Closing a broken connection may fail too; it is gone either way.
                    with contextlib.suppress(Exception):
                        pubsub.close()
        with self._changed:
            listener.connected = False
            self._changed.notify_all()

    def _resubscribed(self, listener: _Listener) -> bool:
        """Whether Redis confirmed every channel the sinks want."""
        with self._lock:
            return listener.confirmed.issuperset(self._sinks)

    def _deliver_gap(self, local: bool) -> None:
        """GAP to every process's sinks on the channels a publish was refused on meanwhile,
        and (``local``: the listener lost its connection) to this process's sinks."""
        with self._lock:
            wanted = [(n, list(sinks.values())) for n, sinks in self._sinks.items() if local]
            owed, self._owed = sorted(self._owed), set()
        data = json.dumps(GAP, separators=(",", ":"))
        for index, name in enumerate(owed):
            try:
                self._client().publish(self._prefix + name, data)
            except redis.RedisError:
                with self._lock:
                    self._owed.update(owed[index:])
                logger.warning("delivery: could not tell of messages lost on %s", name)
                break
        for name, sinks in wanted:
            self._call(sinks, name, dict(GAP))

    def _reconcile(
        self, pubsub: redis.client.PubSub, listener: _Listener, subscribed: set[str]
    ) -> set[str]:
        """Bring the connection's subscriptions to what the sinks want; the new set."""
        with self._lock:
            wanted = set(self._sinks)
            gone = subscribed - wanted
            # Forgotten before the UNSUBSCRIBE leaves, so a new subscriber waits for a SUBSCRIBE.
            listener.confirmed -= gone
            new = wanted - subscribed
            for name in new | gone:
                listener.pending[name] = listener.pending.get(name, 0) + 1
        if new:
            pubsub.subscribe(*(self._prefix + name for name in sorted(new)))
        if gone:
            untyped: Any = pubsub
            untyped.unsubscribe(*(self._prefix + name for name in sorted(gone)))
        return wanted

    def _handle(self, listener: _Listener, item: dict[str, Any]) -> bool:
        """Act on one item from the connection; whether it confirmed the control channel."""
        kind, channel = item.get("type"), str(item.get("channel"))
        if kind in ("subscribe", "unsubscribe"):
            with self._changed:
                if channel == listener.control:
                    if kind == "subscribe":
                        listener.connected, listener.failing = True, False
                        listener.confirmed_once = True
                        self._changed.notify_all()
                    return bool(kind == "subscribe")
                name = channel.removeprefix(self._prefix)
                waiting = listener.pending.get(name, 0) - 1
                if waiting > 0:
                    # Answers come in the order sent: an answer followed by commands still
                    # unanswered (a SUBSCRIBE an UNSUBSCRIBE undid) says nothing of now.
                    listener.pending[name] = waiting
                    return False
                listener.pending.pop(name, None)
                if kind == "subscribe" and name in self._sinks:
                    listener.confirmed.add(name)
                    self._changed.notify_all()
            return False
        if kind != "message" or channel == listener.control:
            return False
        name = channel.removeprefix(self._prefix)
        try:
            message = json.loads(item["data"])
        except (TypeError, ValueError):
            logger.warning("delivery: dropped a message on %s that is not JSON", name)
            return False
        self._deliver(name, message)
        return False

    # -- housekeeping -----------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Stop the listener, dropping every subscription, and close the connections.

        Waits up to ``timeout`` seconds for the listener. The backend may be used again after.
        """
        with self._lock:
            self._sinks.clear()
            listener, self._listener = self._listener, None
            client = self._redis
        if listener is not None:
            listener.stop.set()
            if client is not None and listener.connected:
                # Wakes it now; if this fails it stops at its next timeout instead.
                with contextlib.suppress(redis.RedisError):
                    client.publish(listener.control, "stop")
            if listener.thread is not None:
                listener.thread.join(timeout)
        # Only once the listener is gone, or it would make itself a new client.
        with self._lock:
            if self._redis is client:
                self._redis = None
        if client is not None:
            client.close()

    def listener_connected(self) -> bool:
        """Whether the listener holds a working connection (for tests and health checks)."""
        with self._lock:
            return self._listener is not None and self._listener.connected
