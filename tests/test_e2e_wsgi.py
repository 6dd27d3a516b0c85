"""End to end under WSGI: the demo site in a real gunicorn process with the sync view."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import MODERN, DemoServer
from tests.test_e2e_client import check_calls_progress_and_input

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def wsgi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    server = DemoServer(tmp_path_factory.mktemp("wsgi"), kind="gunicorn", env={"MCP_VIEW": "sync"})
    yield server
    server.stop()


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_calls_progress_and_input_under_gunicorn(wsgi_server: DemoServer, mode: str) -> None:
    check_calls_progress_and_input(wsgi_server, mode)
