"""What 1000 open ``subscriptions/listen`` streams cost one worker, and how fast an edit reaches them.

Run with ``python -m bench.listen_fanout [--backend local|database|redis|all]`` from the
repository root (the Redis backend needs ``REDIS_URL``: ``export $(scripts/services.sh)``).

For each backend one uvicorn worker of the demo site (``project.asgi:application``) starts on
a loopback port with a fresh SQLite file, configured through the variables
``project/settings.py`` reads (``MCP_DELIVERY_BACKEND``, ``MCP_DELIVERY_POLL_SECONDS``,
``REDIS_URL``). Then, from this one asyncio process, over raw sockets (a small HTTP/1.1 and
SSE reader, so the client's own overhead stays out of the delivery times):

1. a sentinel listen stream is opened and kept, so the backend's threads (database poller,
   Redis listener) exist before the first measurement; the worker's RSS is read
   (``VmRSS`` in ``/proc/<pid>/status``);
2. ``--streams`` listen streams (tool list changes) are opened, at most ``--concurrency`` at
   a time, and each waits for its ``notifications/subscriptions/acknowledged``; the RSS is
   read again: ``(after - before) / streams`` is the memory of one open stream;
3. one edit is triggered and the time until each stream has received
   ``notifications/tools/list_changed`` is recorded:

   * ``tool`` (the default for ``local``): a ``tools/call`` of the demo tool
     ``test_trigger_tool_change`` POSTed to the same worker; the clock starts as it is sent;
   * ``process`` (the default for ``database`` and ``redis``): a separate Python process,
     set up and warmed beforehand, publishes on the server's ``lists`` channel, as another
     worker or a management command would; the clock starts in that process just before
     ``publish`` (``time.monotonic`` is one clock for every process of the machine).

The targets: every stream within 1 s (in-process and Redis), or within the poll interval
plus 1 s (database).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODERN = "2026-07-28"
HOST = "127.0.0.1"
BACKENDS = {
    "local": "mcp_app.delivery.local.LocalBackend",
    "database": "mcp_app.delivery.database.DatabaseBackend",
    "redis": "mcp_app.delivery.redis.RedisBackend",
}
#: Every stream must have the change within this many seconds (plus the poll interval for
#: the database backend).
TARGET = 1.0
#: Bounds of the waits: one stream's opening, the whole opening phase, the server's start.
OPEN_TIMEOUT = 30.0
PHASE_TIMEOUT = 180.0
START_TIMEOUT = 30.0
#: How long past the target the benchmark waits for stragglers before counting them missing.
GRACE = 5.0

# The separate publisher: sets Django up, warms its backend, then publishes on "go".
PUBLISHER = """
import sys, time, django
django.setup()
import mcp_app
from mcp_app.delivery import backend
channel = mcp_app.site.channel("lists")
backend().publish(mcp_app.site.channel("bench-warm-up"), {"kinds": []})
print("ready", flush=True)
if sys.stdin.readline().strip() == "go":
    start = time.monotonic()
    backend().publish(channel, {"kinds": ["tools"]})
    print(f"{start!r} {time.monotonic()!r}", flush=True)
"""


# -- the server -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's (and its children's) open-file limit towards ``wanted``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


class Server:
    """One uvicorn worker of the demo site, on a fresh SQLite file in a temporary directory."""

    def __init__(self, backend: str, poll: float, redis_url: str | None) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="listen-fanout-"))
        self.port = free_port()
        self.log = self.tmp / "uvicorn.log"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": f"sqlite:///{self.tmp / 'demo.sqlite3'}",
            "SECRET_KEY": "bench-secret-key",
            "MCP_DELIVERY_BACKEND": BACKENDS[backend],
            "MCP_DELIVERY_POLL_SECONDS": str(poll),
        }
        if redis_url:
            self.env["REDIS_URL"] = redis_url
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=self.env,
            check=True,
            timeout=120,
        )
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            "project.asgi:application",
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            "--backlog",
            "4096",
        ]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=out, stderr=out)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"uvicorn did not listen within {START_TIMEOUT}s:\n{self.tail()}")

    def rss(self) -> int:
        """The worker's resident set size in bytes."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS in /proc status")

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


# -- a raw HTTP/1.1 event-stream client ---------------------------------------------------------


class StreamClosed(Exception):
    """The server ended the stream."""


class EventStream:
    """One POST answered with ``text/event-stream``, read as JSON-RPC messages."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._buffer = b""
        self._chunked = False

    @classmethod
    async def post(cls, port: int, body: dict[str, Any], headers: dict[str, str]) -> EventStream:
        reader, writer = await asyncio.open_connection(HOST, port)
        stream = cls(reader, writer)
        try:
            await stream._send(port, body, headers)
        except BaseException:
            stream.close()
            raise
        return stream

    async def _send(self, port: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        lines = [
            "POST /mcp HTTP/1.1",
            f"Host: {HOST}:{port}",
            "Content-Type: application/json",
            f"Content-Length: {len(data)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        self._writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        await self._writer.drain()
        head = await self._reader.readuntil(b"\r\n\r\n")
        status, *fields = head.decode("latin-1").split("\r\n")
        found = {
            name.strip().lower(): value.strip()
            for name, _, value in (field.partition(":") for field in fields if field)
        }
        if status.split()[1:2] != ["200"] or not found.get("content-type", "").startswith(
            "text/event-stream"
        ):
            raise RuntimeError(f"not an event stream: {status} {found}")
        self._chunked = "chunked" in found.get("transfer-encoding", "").lower()

    async def _fill(self) -> None:
        """Read more of the body into the buffer. Raises: StreamClosed at its end."""
        if not self._chunked:
            data = await self._reader.read(65536)
            if not data:
                raise StreamClosed
            self._buffer += data
            return
        size_line = await self._reader.readline()
        if not size_line:
            raise StreamClosed
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            raise StreamClosed
        self._buffer += (await self._reader.readexactly(size + 2))[:-2]

    async def message(self) -> dict[str, Any]:
        """The next event carrying data (comments and empty events are skipped)."""
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                await self._fill()
                continue
            event, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
            data = [
                line[5:].removeprefix(b" ")
                for line in event.split(b"\n")
                if line.startswith(b"data:")
            ]
            text = b"\n".join(data).strip()
            if text:
                message: dict[str, Any] = json.loads(text)
                return message

    async def until(self, method: str) -> dict[str, Any]:
        while True:
            message = await self.message()
            if message.get("method") == method:
                return message

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()


def listen_request() -> tuple[dict[str, Any], dict[str, str]]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {
            "notifications": {"toolsListChanged": True},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            },
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen",
    }
    return body, headers


async def open_listen(port: int) -> EventStream:
    body, headers = listen_request()
    stream = await EventStream.post(port, body, headers)
    try:
        ack = await stream.until("notifications/subscriptions/acknowledged")
        if ack["params"]["notifications"] != {"toolsListChanged": True}:
            raise RuntimeError(f"unexpected acknowledgement: {ack}")
    except BaseException:
        stream.close()
        raise
    return stream


# -- triggers -------------------------------------------------------------------------------


async def trigger_with_tool(port: int) -> float:
    """POST ``tools/call test_trigger_tool_change``; when it was sent (monotonic)."""
    name = "test_trigger_tool_change"
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            },
        },
    }
    data = json.dumps(body).encode()
    request = (
        "POST /mcp HTTP/1.1\r\n"
        f"Host: {HOST}:{port}\r\n"
        "Accept: application/json, text/event-stream\r\n"
        "Content-Type: application/json\r\n"
        f"MCP-Protocol-Version: {MODERN}\r\n"
        "Mcp-Method: tools/call\r\n"
        f"Mcp-Name: {name}\r\n"
        f"Content-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + data
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        start = time.monotonic()
        writer.write(request)
        await writer.drain()
        reply = await asyncio.wait_for(reader.read(), OPEN_TIMEOUT)
    finally:
        writer.close()
    head, _, content = reply.partition(b"\r\n\r\n")
    try:
        answer = json.loads(content)
        ok = head.split()[1] == b"200" and not answer["result"].get("isError")
    except (ValueError, KeyError, IndexError, AttributeError):
        ok = False
    if not ok:
        raise RuntimeError(f"the trigger failed: {reply[:500]!r}")
    return start


class Publisher:
    """A separate Python process that publishes one tools change when told to."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, env: dict[str, str]) -> Publisher:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            PUBLISHER,
            cwd=ROOT,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        publisher = cls(proc)
        try:
            line = await publisher._line()
            if line != "ready":
                raise RuntimeError(f"publisher did not start: {line!r}")
        except BaseException:
            await publisher.stop()
            raise
        return publisher

    async def _line(self) -> str:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), START_TIMEOUT)
        if not line:
            assert self.proc.stderr is not None
            error = await asyncio.wait_for(self.proc.stderr.read(), 5)
            raise RuntimeError(f"publisher exited: {error.decode(errors='replace')[-2000:]}")
        return line.decode().strip()

    async def publish(self) -> float:
        """Have it publish; when its ``publish`` began (monotonic)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        await self.proc.stdin.drain()
        start, _end = self._times(await self._line())
        return start

    @staticmethod
    def _times(line: str) -> tuple[float, float]:
        first, second = line.split()
        return float(first), float(second)

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.proc.wait(), 10)


# -- the measurement ------------------------------------------------------------------------


@dataclass
class Result:
    backend: str
    trigger: str
    streams: int
    opened: float  # seconds to open every stream and have every acknowledgement
    rss_before: int
    rss_after: int
    delays: list[float]  # seconds from the trigger to each stream's notification
    target: float

    @property
    def per_stream(self) -> float:
        return (self.rss_after - self.rss_before) / self.streams

    @property
    def missing(self) -> int:
        return self.streams - len(self.delays)

    def quantile(self, q: float) -> float:
        ordered = sorted(self.delays)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else math.nan

    @property
    def passed(self) -> bool:
        return not self.missing and max(self.delays) <= self.target


async def open_all(port: int, count: int, concurrency: int) -> list[EventStream]:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> EventStream:
        async with gate:
            return await asyncio.wait_for(open_listen(port), OPEN_TIMEOUT)

    tasks = [asyncio.ensure_future(one()) for _ in range(count)]
    try:
        done, pending = await asyncio.wait(tasks, timeout=PHASE_TIMEOUT)
        failed = [task for task in done if task.exception() is not None]
        if pending or failed:
            reason = repr(failed[0].exception()) if failed else "time out"
            raise RuntimeError(
                f"only {count - len(pending) - len(failed)} of {count} streams opened ({reason})"
            )
        return [task.result() for task in tasks]
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is None:
                task.result().close()
        raise


async def received(stream: EventStream) -> float:
    await stream.until("notifications/tools/list_changed")
    return time.monotonic()


async def measure(server: Server, args: argparse.Namespace, backend: str) -> Result:
    trigger = args.trigger
    if trigger == "auto":
        trigger = "tool" if backend == "local" else "process"
    target = TARGET + (args.poll if backend == "database" else 0.0)
    streams: list[EventStream] = []
    waiters: list[asyncio.Task[float]] = []
    publisher = await Publisher.start(server.env) if trigger == "process" else None
    try:
        streams.append(await asyncio.wait_for(open_listen(server.port), OPEN_TIMEOUT))  # sentinel
        await asyncio.sleep(0.5)
        before = server.rss()
        started = time.monotonic()
        streams += await open_all(server.port, args.streams, args.concurrency)
        opened = time.monotonic() - started
        await asyncio.sleep(0.5)
        after = server.rss()

        waiters = [asyncio.ensure_future(received(stream)) for stream in streams[1:]]
        await asyncio.sleep(0.1)  # every waiter is reading before the clock starts
        if publisher is not None:
            start = await publisher.publish()
        else:
            start = await trigger_with_tool(server.port)
        done, _pending = await asyncio.wait(waiters, timeout=target + GRACE)
        delays = [
            task.result() - start
            for task in done
            if not task.cancelled() and task.exception() is None
        ]
        return Result(backend, trigger, args.streams, opened, before, after, delays, target)
    finally:
        for task in waiters:
            task.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        for stream in streams:
            stream.close()
        if publisher is not None:
            await publisher.stop()
        await asyncio.sleep(0.2)  # let the transports close before the loop goes


def run_backend(args: argparse.Namespace, backend: str) -> Result:
    server = Server(backend, args.poll, args.redis_url if backend == "redis" else None)
    try:
        server.start()
        return asyncio.run(measure(server, args, backend))
    except BaseException:
        print(f"[{backend}] server log tail:\n{server.tail()}", file=sys.stderr)
        raise
    finally:
        server.stop()


def table(results: list[Result]) -> str:
    mib = 1024 * 1024
    header = (
        f"{'backend':<9} {'trigger':<8} {'streams':>7} {'open s':>7} {'RSS before':>11} "
        f"{'RSS after':>10} {'KiB/stream':>10} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
        f"{'missing':>7} {'target':>7}  verdict"
    )
    rows = [header, "-" * len(header)]
    for r in results:
        worst = max(r.delays) if r.delays else math.nan
        rows.append(
            f"{r.backend:<9} {r.trigger:<8} {r.streams:>7} {r.opened:>7.2f} "
            f"{r.rss_before / mib:>7.1f} MiB {r.rss_after / mib:>6.1f} MiB "
            f"{r.per_stream / 1024:>10.1f} {r.quantile(0.5) * 1000:>7.1f} "
            f"{r.quantile(0.99) * 1000:>7.1f} {worst * 1000:>7.1f} {r.missing:>7} "
            f"{r.target:>6.1f}s  {'PASS' if r.passed else 'FAIL'}"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.listen_fanout", description=__doc__)
    parser.add_argument("--backend", choices=[*BACKENDS, "all"], default="local")
    parser.add_argument("--streams", type=int, default=1000, help="listen streams to open")
    parser.add_argument(
        "--poll", type=float, default=0.5, help="the database backend's poll interval (s)"
    )
    parser.add_argument(
        "--trigger",
        choices=["auto", "tool", "process"],
        default="auto",
        help="auto: the tool for local, a publisher process for database and redis",
    )
    parser.add_argument("--concurrency", type=int, default=100, help="streams opening at once")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL"))
    args = parser.parse_args(argv)
    if args.streams < 1 or args.concurrency < 1:
        parser.error("--streams and --concurrency must be positive")
    backends = list(BACKENDS) if args.backend == "all" else [args.backend]
    if "redis" in backends and not args.redis_url:
        parser.error("the redis backend needs --redis-url or REDIS_URL (scripts/services.sh)")

    limit = raise_fd_limit(args.streams * 2 + 256)
    if limit < args.streams + 64:
        print(
            f"warning: open-file limit {limit} is low for {args.streams} streams", file=sys.stderr
        )
    results = []
    for backend in backends:
        print(f"[{backend}] opening {args.streams} listen streams ...", file=sys.stderr)
        results.append(run_backend(args, backend))
    print(table(results))
    return 0 if all(result.passed for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
