"""Streams end when their server shuts down gracefully: the signal chain, and real servers."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_app import shutdown
from tests.conftest import DemoServer
from tests.test_delivery_processes import Events, open_listen, open_session_stream


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    state = shutdown._State()
    monkeypatch.setattr(shutdown, "_state", state)
    yield
    # Let its reader thread go (it finds the state no longer current), then close the pipe.
    shutdown.begin()
    monkeypatch.undo()
    state.close()


def called(calls: list[str], expected: list[str]) -> bool:
    """Whether ``calls`` comes to be ``expected`` within a few seconds (the reader's thread
    ends the streams)."""
    deadline = time.monotonic() + 5
    while calls != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return calls == expected


@pytest.fixture
def server_handler() -> Iterator[list[int]]:
    """A server's own SIGTERM handler, which records the signals it gets; restored after."""
    heard: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: heard.append(signum))
    yield heard
    signal.signal(signal.SIGTERM, previous)


def test_watchers_are_called_once_when_the_shutdown_begins() -> None:
    calls: list[str] = []
    shutdown.watch(lambda: calls.append("a"))
    stop = shutdown.watch(lambda: calls.append("b"))
    stop()
    assert not shutdown.begun()
    shutdown.begin()
    assert shutdown.begun()
    assert called(calls, ["a"])
    shutdown.begin()
    time.sleep(0.1)
    assert calls == ["a"]


def test_a_failing_watcher_does_not_keep_the_others_open(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def failing() -> None:
        raise RuntimeError("broken")

    shutdown.watch(failing)
    shutdown.watch(lambda: calls.append("b"))
    shutdown.begin()
    assert called(calls, ["b"])
    assert "Could not end a stream at shutdown" in caplog.text


def test_a_stream_opened_after_the_shutdown_began_ends_at_once() -> None:
    shutdown.begin()
    calls: list[str] = []
    shutdown.watch(lambda: calls.append("late"))
    assert calls == ["late"]


def test_the_signal_reaches_the_watchers_and_then_the_server(server_handler: list[int]) -> None:
    woken = threading.Event()
    shutdown.watch(woken.set)
    assert shutdown.install()
    os.kill(os.getpid(), signal.SIGTERM)
    assert woken.wait(5), "the watchers were not called"
    # The server's handler still runs, after the note: its own shutdown goes on.
    assert server_handler == [signal.SIGTERM]
    assert shutdown.begun()


def test_install_is_idempotent(server_handler: list[int]) -> None:
    assert shutdown.install()
    handler = signal.getsignal(signal.SIGTERM)
    assert shutdown.install()
    assert signal.getsignal(signal.SIGTERM) is handler
    assert shutdown.installed()
    os.kill(os.getpid(), signal.SIGTERM)
    assert server_handler == [signal.SIGTERM]  # called once, not once per install


@pytest.mark.parametrize(
    "default", [signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler], ids=repr
)
def test_the_defaults_are_left_alone(default: Any) -> None:
    previous = signal.signal(signal.SIGTERM, default)
    try:
        assert not shutdown.install([signal.SIGTERM])
        assert signal.getsignal(signal.SIGTERM) is default
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_only_the_main_thread_installs(server_handler: list[int]) -> None:
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(shutdown.install()))
    thread.start()
    thread.join()
    assert result == [False]
    assert not shutdown.installed()


def test_a_signal_before_any_stream_is_noted_for_the_streams_to_come(
    server_handler: list[int],
) -> None:
    shutdown.install()
    os.kill(os.getpid(), signal.SIGTERM)
    assert shutdown.begun()
    calls: list[str] = []
    shutdown.watch(lambda: calls.append("ended"))
    assert calls == ["ended"]


def test_a_forked_child_starts_afresh() -> None:
    shutdown.watch(lambda: None)
    shutdown.begin()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        fresh = not shutdown.begun() and shutdown._state.fds is None
        os.write(write_fd, b"0" if fresh else b"1")
        os._exit(0)
    os.close(write_fd)
    try:
        assert os.read(read_fd, 1) == b"0"
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)


def test_asyncio_runs_sigint_handler_is_left_alone() -> None:
    import asyncio

    async def main() -> bool:
        return shutdown.install([signal.SIGINT])

    # Python's default, under which asyncio.run() sets its own (a shell in the background
    # may have left SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert asyncio.run(main()) is False
        # asyncio.run() took its own handler back, as it only does if it is still the one set.
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_gunicorn_hook_installs(server_handler: list[int]) -> None:
    shutdown.post_worker_init(object())
    assert shutdown.installed()


# -- real servers ----------------------------------------------------------------------------

SERVERS = {
    # The site loads after uvicorn set its handlers: the app registry installs the chain.
    "uvicorn": ("uvicorn", {}, []),
    # gthread: streams run in pool threads; the app registry installs it in the worker.
    "gunicorn-threads": ("gunicorn", {"MCP_VIEW": "sync"}, ["--graceful-timeout", "60"]),
    # Preloaded in the master, whose handlers the worker replaces: the stream, opened in the
    # sync worker's main thread, installs it.
    "gunicorn-preload": (
        "gunicorn",
        {"MCP_VIEW": "sync"},
        ["--graceful-timeout", "60", "--threads", "1", "--workers", "2", "--preload"],
    ),
    # Preloaded, and threaded: only gunicorn's post_worker_init hook can install it.
    "gunicorn-preload-threads": (
        "gunicorn",
        {"MCP_VIEW": "sync"},
        ["--graceful-timeout", "60", "--preload", "--config", "tests/gunicorn_shutdown.py"],
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("name", list(SERVERS))
def test_open_streams_end_and_the_server_exits_at_a_graceful_shutdown(
    name: str, tmp_path: Path
) -> None:
    kind, env, args = SERVERS[name]
    server = DemoServer(tmp_path, kind=kind, env=env, args=args)
    try:
        with ExitStack() as stack:
            client = stack.enter_context(httpx.Client(timeout=httpx.Timeout(5, read=20)))
            listen = open_listen(stack, client, server.url)
            session = open_session_stream(stack, client, server.url)
            started = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            final = _final_message(listen)
            assert final["id"] == 1 and final["result"]["resultType"] == "complete"
            meta = final["result"]["_meta"]
            assert meta["io.modelcontextprotocol/serverInfo"]["name"] == "django-mcp-app"
            session.until_end(within=15)
            # uvicorn raises the signal again once it has shut down, as its default would end it.
            assert server.proc.wait(15) in (0, -signal.SIGTERM)
            # Well within the 60 s a gunicorn worker would otherwise be given.
            assert time.monotonic() - started < 15
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
            pytest.fail(f"{name} did not exit:\n{server.log.read_text()}")


def _final_message(events: Events) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while True:
        kind, item = events.next(deadline, "the listen request's result")
        if kind == "message" and "result" in item:
            return item  # type: ignore[no-any-return]
