"""Input requests answered on another worker: the answer travels through the delivery backend.

Two real uvicorn workers, A and B, share one SQLite file (so either knows every session) and
one delivery backend. A call on A asks the client for input; the client answers, or cancels,
by POSTing to B, and the call on A must hear it within a poll interval and a little more.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import DemoServer, require_redis_url

pytestmark = pytest.mark.e2e

BACKENDS = {
    "database": "mcp_app.delivery.database.DatabaseBackend",
    "redis": "mcp_app.delivery.redis.RedisBackend",
}
#: The workers' DELIVERY_POLL_SECONDS (only the database backend polls).
POLL = 0.5
#: How long past the poll interval a message may take to cross from B to A.
SLACK = 4.0
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


class Pair:
    """Workers A and B of the demo site on one SQLite file and one delivery backend."""

    def __init__(self, tmp: Path, backend: str) -> None:
        env = {"MCP_DELIVERY_BACKEND": BACKENDS[backend], "MCP_DELIVERY_POLL_SECONDS": str(POLL)}
        if backend == "redis":
            env["REDIS_URL"] = require_redis_url()
        self.a = DemoServer(tmp, env=env)
        try:
            self.b = DemoServer(tmp, env=env)
        except BaseException:
            self.a.stop()
            raise

    def stop(self) -> None:
        try:
            self.a.stop()
        finally:
            self.b.stop()


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pair]:
    workers = Pair(tmp_path_factory.mktemp(f"cross-{request.param}"), request.param)
    yield workers
    workers.stop()


class EventStream:
    """The JSON-RPC messages of one SSE response, read under a deadline."""

    def __init__(self, response: httpx.Response, name: str) -> None:
        assert response.status_code == 200, f"{name}: HTTP {response.status_code}"
        content_type = response.headers.get("content-type", "")
        assert content_type.startswith("text/event-stream"), f"{name}: {content_type}"
        self.name = name
        self._lines = response.iter_lines()
        self.seen: list[dict[str, Any]] = []

    def _event(self, deadline: float, awaited: str) -> dict[str, Any] | None:
        """The next event's message; ``None`` for an event without data (priming, comments)."""
        data: list[str] = []
        while True:
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name}: no {awaited} in time; saw {self.seen}")
            try:
                line = next(self._lines)
            except httpx.ReadTimeout:
                pytest.fail(f"{self.name}: no {awaited}; the stream went silent; saw {self.seen}")
            except StopIteration:
                pytest.fail(f"{self.name}: no {awaited}; the stream ended; saw {self.seen}")
            if line == "":
                text = "\n".join(data).strip()
                if not text:
                    return None
                message: dict[str, Any] = json.loads(text)
                self.seen.append(message)
                return message
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))

    def ended(self, within: float) -> list[dict[str, Any]]:
        """The messages left until the stream ends, which it must within ``within`` seconds."""
        deadline = time.monotonic() + within
        left: list[dict[str, Any]] = []
        while True:
            try:
                message = self._event(deadline, "end of the stream")
            except pytest.fail.Exception as failed:
                if "the stream ended" in str(failed):
                    return left
                raise
            if message is not None:
                left.append(message)

    def until(self, within: float, awaited: str, match: Any) -> dict[str, Any]:
        """The first message for which ``match(message)`` holds, within ``within`` seconds."""
        deadline = time.monotonic() + within
        while True:
            message = self._event(deadline, awaited)
            if message is not None and match(message):
                return message

    def final(self, request_id: Any, within: float) -> dict[str, Any]:
        """The response to ``request_id``; the stream must end right after it."""
        message = self.until(
            within,
            f"response to request {request_id!r}",
            lambda m: m.get("id") == request_id and ("result" in m or "error" in m),
        )
        try:
            rest = list(self._lines)  # bounded by the client's read timeout
        except httpx.ReadTimeout:
            pytest.fail(f"{self.name}: the stream stayed open after the response")
        assert not any(line.startswith("data:") for line in rest), f"{self.name}: {rest}"
        return message


class Session:
    """An initialize-era session opened on one worker, usable on any."""

    def __init__(self, client: httpx.Client, url: str) -> None:
        init = client.post(
            url,
            headers={"Accept": ACCEPT},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "cross-worker-tests", "version": "1"},
                },
            },
        )
        assert init.status_code == 200, init.text
        assert init.json()["result"]["protocolVersion"] == LEGACY
        self.client = client
        self.headers = {
            "Accept": ACCEPT,
            "Content-Type": "application/json",
            "Mcp-Session-Id": init.headers["mcp-session-id"],
            "MCP-Protocol-Version": LEGACY,
        }
        self.send(url, {"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, url: str, message: dict[str, Any]) -> None:
        """POST a notification or a response; the server must accept it with 202."""
        reply = self.client.post(url, headers=self.headers, content=json.dumps(message))
        assert reply.status_code == 202, f"{url}: HTTP {reply.status_code} {reply.text}"

    def call_greet(self, stack: ExitStack, url: str, request_id: int) -> EventStream:
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "greet", "arguments": {}},
        }
        response = stack.enter_context(
            self.client.stream("POST", url, headers=self.headers, content=json.dumps(body))
        )
        return EventStream(response, f"tools/call greet on worker A ({url})")


def elicitation(stream: EventStream) -> dict[str, Any]:
    request = stream.until(
        10, "elicitation/create", lambda m: m.get("method") == "elicitation/create"
    )
    assert "id" in request, request
    assert request["params"]["requestedSchema"]["properties"] == {"name": {"type": "string"}}
    return request


def client_for_streams() -> httpx.Client:
    # The read timeout outlasts every wait below, so a silent stream fails instead of hanging.
    return httpx.Client(timeout=httpx.Timeout(10.0, read=POLL + SLACK + 1.0))


def test_an_answer_posted_to_b_completes_the_call_held_on_a(pair: Pair) -> None:
    with ExitStack() as stack:
        client = stack.enter_context(client_for_streams())
        session = Session(client, pair.a.url)
        stream = session.call_greet(stack, pair.a.url, request_id=2)
        request = elicitation(stream)

        answered = time.monotonic()
        session.send(
            pair.b.url,
            {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"action": "accept", "content": {"name": "Ada"}},
            },
        )
        final = stream.final(2, within=POLL + SLACK)
        took = time.monotonic() - answered

        assert "error" not in final, final
        result = final["result"]
        assert not result.get("isError"), result
        assert [c.get("text") for c in result["content"]] == ["Hello, Ada!"]
        assert took < POLL + SLACK, f"the answer took {took:.2f}s to reach worker A"


def test_a_cancellation_posted_to_b_ends_the_call_held_on_a(pair: Pair) -> None:
    with ExitStack() as stack:
        client = stack.enter_context(client_for_streams())
        session = Session(client, pair.a.url)
        stream = session.call_greet(stack, pair.a.url, request_id=3)
        elicitation(stream)

        cancelled = time.monotonic()
        session.send(
            pair.b.url,
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 3, "reason": "the user gave up"},
            },
        )
        left = stream.ended(within=POLL + SLACK)
        took = time.monotonic() - cancelled

        # The elicitation is withdrawn, and the cancelled request gets no response.
        assert [message.get("method") for message in left] == ["notifications/cancelled"], left
        assert took < POLL + SLACK, f"the cancellation took {took:.2f}s to reach worker A"
