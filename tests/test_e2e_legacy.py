"""End to end on the initialize era: the official ``mcp`` client in legacy mode, real requests."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client, types

from tests.conftest import DemoServer
from tests.test_e2e_client import on_elicit

pytestmark = pytest.mark.e2e


def test_greet_and_two_steps_through_real_elicitation(demo_server: DemoServer) -> None:
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return await on_elicit(context, params)

    async def main() -> None:
        async with Client(demo_server.url, mode="legacy", elicitation_callback=answer) as c:
            assert c.protocol_version == "2025-11-25"
            greet = await c.call_tool("greet", {})
            assert greet.content[0].text == "Hello, Ada!"
            steps = await c.call_tool("two-steps", {})
            assert steps.content[0].text == "Ada likes blue"

    anyio.run(main)
    assert asked == ["Who should I greet?", "Name?", "Color?"]


def test_without_elicitation_the_call_is_an_error_result(demo_server: DemoServer) -> None:
    async def main() -> None:
        async with Client(demo_server.url, mode="legacy") as c:
            result = await c.call_tool("greet", {})
            assert result.is_error
            assert "elicitation" in result.content[0].text

    anyio.run(main)


def test_lists_reads_and_prompts(demo_server: DemoServer) -> None:
    async def main() -> None:
        async with Client(demo_server.url, mode="legacy") as c:
            tools = await c.list_tools()
            assert [t.name for t in tools.tools][:2] == ["add", "logo"]
            added = await c.call_tool("add", {"numbers": [2, 3]})
            assert added.structured_content == {"sum": 5}
            ada = await c.read_resource("people://ada")
            assert "Ada Lovelace" in ada.contents[0].text
            prompt = await c.get_prompt("introduce", {"id": "grace"})
            assert "Grace Hopper" in prompt.messages[0].content.text

    anyio.run(main)


def test_many_calls_waiting_for_answers_at_once_do_not_hold_up_the_answers(
    demo_server: DemoServer,
) -> None:
    # Each call holds a server thread while it waits for its answer; every client answers
    # only once all of them have been asked, which needs more calls waiting at once than a
    # fixed pool of threads (asyncio's default: a few per core) would hold, and the answers
    # served beside them.
    clients = 12
    asked = 0
    everyone_asked = anyio.Event()
    greetings: list[str] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        nonlocal asked
        asked += 1
        if asked == clients:
            everyone_asked.set()
        await everyone_asked.wait()
        return await on_elicit(context, params)

    async def one() -> None:
        async with Client(demo_server.url, mode="legacy", elicitation_callback=answer) as c:
            result = await c.call_tool("greet", {})
            greetings.append(result.content[0].text)

    async def main() -> None:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for _ in range(clients):
                    group.start_soon(one)

    anyio.run(main)
    assert greetings == ["Hello, Ada!"] * clients
