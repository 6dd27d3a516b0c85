"""The thread-fed pipe read by sync code or by coroutines on any event loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from mcp_app.transport.pipe import Empty, Pipe


def test_items_come_out_in_order_for_a_blocking_reader() -> None:
    pipe = Pipe()
    for n in range(3):
        pipe.put(n)
    assert [pipe.get(0.1) for _ in range(3)] == [0, 1, 2]


def test_a_blocking_reader_times_out() -> None:
    started = time.monotonic()
    with pytest.raises(Empty):
        Pipe().get(0.05)
    assert time.monotonic() - started >= 0.05


def test_a_coroutine_is_woken_by_another_thread() -> None:
    pipe = Pipe()

    async def read() -> object:
        threading.Timer(0.05, pipe.put, args=("late",)).start()
        return await pipe.aget(2)

    assert asyncio.run(read()) == "late"


def test_a_coroutine_times_out() -> None:
    async def read() -> object:
        return await Pipe().aget(0.05)

    with pytest.raises(Empty):
        asyncio.run(read())


def test_the_reading_loop_may_change_between_reads() -> None:
    # Django iterates an async stream body on another loop than the view's.
    pipe = Pipe()
    pipe.put("first")
    assert asyncio.run(pipe.aget(1)) == "first"

    async def second() -> object:
        threading.Timer(0.02, pipe.put, args=("second",)).start()
        return await pipe.aget(2)

    assert asyncio.run(second()) == "second"


def test_putting_after_the_reader_loop_closed_is_harmless() -> None:
    pipe = Pipe()

    async def give_up() -> None:
        with pytest.raises(Empty):
            await pipe.aget(0.01)

    asyncio.run(give_up())
    pipe.put("nobody waits")
    assert pipe.get(0.1) == "nobody waits"
