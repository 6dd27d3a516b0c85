"""End to end under WSGI: the demo site in a real gunicorn process with the sync view."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import MODERN, DemoServer
from tests.test_e2e_client import check_calls_progress_and_input, check_streams_arrive

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def wsgi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    server = DemoServer(tmp_path_factory.mktemp("wsgi"), kind="gunicorn", env={"MCP_VIEW": "sync"})
    yield server
    server.stop()


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_calls_progress_and_input_under_gunicorn(wsgi_server: DemoServer, mode: str) -> None:
    check_calls_progress_and_input(wsgi_server, mode)


@pytest.fixture(scope="module")
def wsgi_async_view(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    server = DemoServer(
        tmp_path_factory.mktemp("wsgi-async"), kind="gunicorn", env={"MCP_VIEW": "async"}
    )
    yield server
    server.stop()


def test_the_async_view_streams_under_gunicorn(wsgi_async_view: DemoServer) -> None:
    # Django's WSGI handler reads an async stream whole: the view hands the request to the
    # sync view's code.
    check_streams_arrive(wsgi_async_view, MODERN)
