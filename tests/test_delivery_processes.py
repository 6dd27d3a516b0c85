"""Delivery across real processes: two uvicorn workers and a publisher, sharing a database or Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, DemoServer, modern_request, require_redis_url

pytestmark = pytest.mark.e2e

BACKENDS = {
    "database": "mcp_app.delivery.database.DatabaseBackend",
    "redis": "mcp_app.delivery.redis.RedisBackend",
}
#: The default DELIVERY_POLL_SECONDS; Redis needs no polling, so it gets the same bound.
POLL = 0.5
LEGACY = "2025-11-25"

# A third process, like a management command or a worker of another site, announcing a change.
PUBLISH = (
    "import django; django.setup(); import mcp_app; from mcp_app.delivery import backend; "
    "backend().publish(mcp_app.site.channel('lists'), {'kinds': ['tools']})"
)
# A third process adding a tool as a row: the signal announces it through the backend.
ADD_ROW = (
    "import django; django.setup(); from mcp_app.models import Tool; "
    "Tool.objects.create(server='default', name='added-elsewhere', handler='template', "
    "config={'template': 'hello'})"
)


class Workers:
    """Two demo workers on one SQLite file, configured for one delivery backend."""

    def __init__(self, tmp: Path, backend: str) -> None:
        # The variables project/settings.py reads to build MCP_APP.
        # Workers that would not read the catalog generation again for an hour: an edit
        # made elsewhere reaches their catalog through the backend's message alone.
        self.env = {
            "MCP_DELIVERY_BACKEND": BACKENDS[backend],
            "MCP_RECHECK_SECONDS": "3600",
        }
        if backend == "redis":
            self.env["REDIS_URL"] = require_redis_url()
        self.tmp = tmp
        self.a = DemoServer(tmp, env=self.env)
        try:
            self.b = DemoServer(tmp, env=self.env)
        except BaseException:
            self.a.stop()
            raise

    def publish(self, code: str = PUBLISH) -> None:
        """Run ``code`` (by default: publish a tools change) in a separate Python process."""
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": f"sqlite:///{self.tmp / 'demo.sqlite3'}",
            "SECRET_KEY": "e2e-secret-key",
            **self.env,
        }
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr.decode()

    def stop(self) -> None:
        self.a.stop()
        self.b.stop()


@pytest.fixture(params=sorted(BACKENDS))
def workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workers]:
    pair = Workers(tmp_path, request.param)
    yield pair
    pair.stop()


class Events:
    """The events of one open SSE response, read with a deadline."""

    def __init__(self, response: httpx.Response, name: str) -> None:
        assert response.status_code == 200, f"{name}: HTTP {response.status_code}"
        assert response.headers["content-type"].startswith("text/event-stream")
        self.name = name
        self._lines = response.iter_lines()

    def next(self, deadline: float, awaited: str) -> tuple[str, Any]:
        """``("comment", text)`` or ``("message", json)``; fails the test past ``deadline``."""
        while True:
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name}: no {awaited} in time")
            try:
                line = next(self._lines)
            except httpx.ReadTimeout:
                pytest.fail(f"{self.name}: no {awaited}; the stream went silent")
            except StopIteration:
                pytest.fail(f"{self.name}: no {awaited}; the stream ended")
            if line.startswith(":"):
                return "comment", line[1:].strip()
            if line.startswith("data:"):
                return "message", json.loads(line[5:])

    def until(self, method: str, within: float) -> dict[str, Any]:
        """The first message of ``method``, within ``within`` seconds."""
        deadline = time.monotonic() + within
        while True:
            kind, item = self.next(deadline, method)
            if kind == "message" and item.get("method") == method:
                return item  # type: ignore[no-any-return]

    def until_end(self, within: float) -> None:
        """Read on until the server ends the stream, within ``within`` seconds."""
        deadline = time.monotonic() + within
        for _ in self._lines:
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name}: did not end in time")

    def until_comment(self, text: str, within: float) -> None:
        deadline = time.monotonic() + within
        while self.next(deadline, f"comment {text!r}") != ("comment", text):
            pass


def open_listen(stack: ExitStack, client: httpx.Client, url: str) -> Events:
    """A 2026-07-28 ``subscriptions/listen`` stream for tool list changes, acknowledged."""
    body, headers = modern_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
    )
    response = stack.enter_context(client.stream("POST", url, json=body, headers=headers))
    events = Events(response, "listen stream on worker A")
    ack = events.until("notifications/subscriptions/acknowledged", within=10)
    assert ack["params"]["notifications"] == {"toolsListChanged": True}
    return events


def open_session_stream(stack: ExitStack, client: httpx.Client, url: str) -> Events:
    """An initialize-era session's GET stream, once the server has it open."""
    accept = "application/json, text/event-stream"
    init = client.post(
        url,
        headers={"Accept": accept},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "tests", "version": "1"},
            },
        },
    )
    assert init.status_code == 200, init.text
    session = {"Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    done = client.post(
        url,
        headers={"Accept": accept, **session},
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
    assert done.status_code == 202, done.text
    response = stack.enter_context(
        client.stream("GET", url, headers={"Accept": "text/event-stream", **session})
    )
    events = Events(response, "session GET stream on worker B")
    # The stream says it is open once its subscription is in place.
    events.until_comment("stream open", within=10)
    return events


def test_a_change_published_by_a_third_process_reaches_both_workers(workers: Workers) -> None:
    # A read timeout longer than any wait below, so a silent stream fails rather than hangs.
    timeout = httpx.Timeout(10.0, read=POLL + 4.0)
    with ExitStack() as stack:
        client = stack.enter_context(httpx.Client(timeout=timeout))
        listen = open_listen(stack, client, workers.a.url)
        session = open_session_stream(stack, client, workers.b.url)

        workers.publish()
        published = time.monotonic()

        changed = listen.until("notifications/tools/list_changed", within=POLL + 3)
        assert changed["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": 1}
        session.until("notifications/tools/list_changed", within=POLL + 3)
        assert time.monotonic() - published < POLL + 3


def tool_names(client: httpx.Client, url: str) -> list[str]:
    body, headers = modern_request("tools/list", request_id=2)
    response = client.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return [tool["name"] for tool in response.json()["result"]["tools"]]


def test_a_row_added_by_another_process_is_in_both_workers_catalogs(workers: Workers) -> None:
    timeout = httpx.Timeout(10.0, read=POLL + 4.0)
    with ExitStack() as stack:
        client = stack.enter_context(httpx.Client(timeout=timeout))
        # Both workers have read (and now trust) the generation before the edit.
        assert "added-elsewhere" not in tool_names(client, workers.a.url)
        assert "added-elsewhere" not in tool_names(client, workers.b.url)
        listen = open_listen(stack, client, workers.a.url)
        session = open_session_stream(stack, client, workers.b.url)

        workers.publish(ADD_ROW)

        # The message that tells the clients also tells the catalogs: whoever reacts to
        # the notification lists the new tool.
        listen.until("notifications/tools/list_changed", within=POLL + 3)
        assert "added-elsewhere" in tool_names(client, workers.a.url)
        session.until("notifications/tools/list_changed", within=POLL + 3)
        assert "added-elsewhere" in tool_names(client, workers.b.url)
