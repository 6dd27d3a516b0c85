"""End to end under WSGI: the demo site in a real gunicorn process with the sync view."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.conftest import MODERN, DemoServer
from tests.test_e2e_client import on_elicit

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def wsgi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    server = DemoServer(tmp_path_factory.mktemp("wsgi"), kind="gunicorn", env={"MCP_VIEW": "sync"})
    yield server
    server.stop()


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_calls_progress_and_input_under_gunicorn(wsgi_server: DemoServer, mode: str) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def main() -> None:
        kwargs: dict[str, Any] = {"mode": mode, "elicitation_callback": on_elicit}
        if mode == MODERN:
            kwargs["cache"] = None
        async with Client(wsgi_server.url, **kwargs) as c:
            added = await c.call_tool("add", {"numbers": [4, 5]})
            assert added.structured_content == {"sum": 9}
            greet = await c.call_tool("greet", {})
            assert greet.content[0].text == "Hello, Ada!"
            await c.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)

    anyio.run(main)
    assert progress == [0, 50, 100]
