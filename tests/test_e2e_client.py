"""End to end: the official ``mcp`` client against the demo site in a real uvicorn process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, types

from tests.conftest import MODERN, DemoServer, modern_request
from tests.test_delivery_processes import open_listen

pytestmark = pytest.mark.e2e


def run(coro_fn: Any) -> Any:
    return anyio.run(coro_fn)


async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
    answers = {
        "Who should I greet?": {"name": "Ada"},
        "Name?": {"name": "Ada"},
        "Color?": {"color": "blue"},
    }
    return types.ElicitResult(action="accept", content=answers[params.message])


def client(server: DemoServer, **kw: Any) -> Client:
    return Client(server.url, mode=MODERN, cache=None, **kw)


def check_calls_progress_and_input(server: DemoServer, mode: str) -> None:
    """A call, a call asking for input and a call reporting progress, in ``mode``."""
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def main() -> None:
        kwargs: dict[str, Any] = {"mode": mode, "elicitation_callback": on_elicit}
        if mode == MODERN:
            kwargs["cache"] = None
        async with Client(server.url, **kwargs) as c:
            added = await c.call_tool("add", {"numbers": [4, 5]})
            assert added.structured_content == {"sum": 9}
            greet = await c.call_tool("greet", {})
            assert greet.content[0].text == "Hello, Ada!"
            await c.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)

    run(main)
    assert progress == [0, 50, 100]


def test_list_call_read_get_complete(demo_server: DemoServer) -> None:
    async def main() -> None:
        async with client(demo_server) as c:
            assert c.protocol_version == MODERN
            tools = await c.list_tools()
            names = [t.name for t in tools.tools]
            assert names[:2] == ["add", "logo"]
            added = await c.call_tool("add", {"numbers": [1, 2]})
            assert added.structured_content == {"sum": 3}
            logo = await c.call_tool("logo", {})
            assert [b.type for b in logo.content] == ["text", "image"]
            bad = await c.call_tool("add", {"numbers": ["x"]})
            assert bad.is_error
            assert (
                bad.content[0].text
                == "Invalid arguments at /numbers/0: expected number, got string"
            )
            readme = await c.read_resource("file:///readme.txt")
            assert "demo site" in readme.contents[0].text
            ada = await c.read_resource("people://ada")
            assert json.loads(ada.contents[0].text)["name"] == "Ada Lovelace"
            prompt = await c.get_prompt("introduce", {"id": "alan"})
            assert "Alan Turing" in prompt.messages[0].content.text
            done = await c.complete(
                types.ResourceTemplateReference(type="ref/resource", uri="people://{id}"),
                {"name": "id", "value": "g"},
            )
            assert done.completion.values == ["grace"]

    run(main)


def test_input_required_dialogues(demo_server: DemoServer) -> None:
    async def main() -> None:
        async with client(demo_server, elicitation_callback=on_elicit) as c:
            greet = await c.call_tool("greet", {})
            assert greet.content[0].text == "Hello, Ada!"
            steps = await c.call_tool("two-steps", {})
            assert steps.content[0].text == "Ada likes blue"

    run(main)


# -- the same site without mcp_app.asgi.route: Django's handler and the async view -----------


@pytest.fixture(scope="module")
def view_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """The demo site with ``MCP_ASGI_ROUTE=0``: every request through Django's handler."""
    server = DemoServer(tmp_path_factory.mktemp("view"), env={"MCP_ASGI_ROUTE": "0"})
    yield server
    server.stop()


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_the_django_view_path_serves_calls_streams_and_input(
    view_server: DemoServer, mode: str
) -> None:
    check_calls_progress_and_input(view_server, mode)


@pytest.mark.parametrize("through", ["route", "view"])
def test_which_path_serves_the_endpoint(
    demo_server: DemoServer, view_server: DemoServer, through: str
) -> None:
    server = demo_server if through == "route" else view_server
    body, headers = modern_request("server/discover")
    response = httpx.post(server.url, json=body, headers=headers, timeout=10)
    assert response.status_code == 200
    assert response.json()["result"]["supportedVersions"] == [MODERN]
    # The site's middleware (XFrameOptionsMiddleware) runs on the view path only.
    assert ("x-frame-options" in response.headers) == (through == "view")


@pytest.fixture(scope="module")
def sync_view_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """The demo site under uvicorn through Django's handler, with the sync view."""
    env = {"MCP_ASGI_ROUTE": "0", "MCP_VIEW": "sync"}
    server = DemoServer(tmp_path_factory.mktemp("sync-view"), env=env)
    yield server
    server.stop()


def check_streams_arrive(server: DemoServer, mode: str) -> None:
    """A listen stream is acknowledged, and calls stream their progress and input requests.

    A server that read a stream whole before sending it would fail both: a listen stream
    never ends, and a session's call waits for the answer to what it has not yet sent.
    """
    with ExitStack() as stack:
        client = stack.enter_context(httpx.Client(timeout=httpx.Timeout(10.0, read=5.0)))
        open_listen(stack, client, server.url)
    check_calls_progress_and_input(server, mode)


def test_the_sync_view_streams_under_an_asgi_server(sync_view_server: DemoServer) -> None:
    # Django's ASGI handler reads a sync stream whole: the view hands the request to the
    # async view's code.
    check_streams_arrive(sync_view_server, "legacy")


def test_a_body_over_the_limit_is_answered_and_the_connection_goes_on(
    demo_server: DemoServer,
) -> None:
    # Through mcp_app.asgi.route: the rest of the body is read and dropped, so the 413 reaches
    # the client rather than a reset, and the connection stays open for its next request.
    from tests.test_e2e_wsgi import oversized_then_called

    assert oversized_then_called(demo_server.url) == (413, True, 200)
