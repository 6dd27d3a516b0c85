"""End to end under WSGI: the demo site in a real gunicorn process, through ``mcp_app.wsgi.route``
(the demo's default) and through Django's handler and the sync view."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import MODERN, DemoServer, modern_request
from tests.test_e2e_client import check_calls_progress_and_input, check_streams_arrive

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=["route", "view"])
def wsgi_server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[DemoServer]:
    env = {"MCP_VIEW": "sync", "MCP_WSGI_ROUTE": "1" if request.param == "route" else "0"}
    server = DemoServer(tmp_path_factory.mktemp("wsgi"), kind="gunicorn", env=env)
    yield server
    server.stop()


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_calls_progress_and_input_under_gunicorn(wsgi_server: DemoServer, mode: str) -> None:
    check_calls_progress_and_input(wsgi_server, mode)


@pytest.fixture(scope="module")
def wsgi_async_view(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    server = DemoServer(
        tmp_path_factory.mktemp("wsgi-async"),
        kind="gunicorn",
        env={"MCP_VIEW": "async", "MCP_WSGI_ROUTE": "0"},
    )
    yield server
    server.stop()


def test_the_async_view_streams_under_gunicorn(wsgi_async_view: DemoServer) -> None:
    # Django's WSGI handler reads an async stream whole: the view hands the request to the
    # sync view's code.
    check_streams_arrive(wsgi_async_view, MODERN)


def post_chunked(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """POST ``body`` with ``Transfer-Encoding: chunked`` (no Content-Length), in two chunks."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        half = len(body) // 2
        connection.request(
            "POST",
            parts.path,
            body=iter([body[:half], body[half:]]),
            headers={"Content-Type": "application/json", **headers},
            encode_chunked=True,
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_chunked_body_is_read_under_gunicorn(wsgi_server: DemoServer) -> None:
    body, headers = modern_request("tools/call", {"name": "add", "arguments": {"numbers": [2, 3]}})
    status, answer = post_chunked(wsgi_server.url, json.dumps(body).encode(), headers)
    assert status == 200, answer
    assert json.loads(answer)["result"]["structuredContent"] == {"sum": 5}


def test_a_chunked_body_over_the_limit_is_413_under_gunicorn(wsgi_server: DemoServer) -> None:
    body, headers = modern_request("tools/call", {"name": "add", "arguments": {"numbers": [2, 3]}})
    padded = json.dumps({**body, "padding": "x" * 3 * 1024 * 1024}).encode()
    status, answer = post_chunked(wsgi_server.url, padded, headers)
    assert status == 413, answer
    assert json.loads(answer)["error"]["code"] == -32600


def oversized_then_called(url: str) -> tuple[int, bool, int]:
    """On one connection, POST a body over the limit (its length declared), then a call; the
    first status, whether the second went on the same connection, and its status."""
    parts = urlsplit(url)
    body, headers = modern_request("tools/call", {"name": "add", "arguments": {"numbers": [2, 3]}})
    headers = {"Content-Type": "application/json", **headers}
    big = json.dumps({**body, "padding": "x" * 3 * 1024 * 1024}).encode()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=20)
    try:
        connection.request("POST", parts.path, body=big, headers=headers)
        refused = connection.getresponse()
        refused.read()
        said = refused.getheader("Connection")
        kept = connection.sock
        connection.request("POST", parts.path, body=json.dumps(body).encode(), headers=headers)
        answered = connection.getresponse()
        answered.read()
        # The same connection, not a new one http.client opened after a close.
        return refused.status, said != "close" and connection.sock is kept, answered.status
    finally:
        connection.close()


def test_a_body_over_the_limit_is_answered_and_the_connection_goes_on(
    wsgi_server: DemoServer,
) -> None:
    assert oversized_then_called(wsgi_server.url) == (413, True, 200)


def post_raw_bytes(url: str, head: dict[str, str], raw: bytes) -> tuple[int, bytes]:
    """POST ``raw`` as the body's bytes on the wire, whatever they are; the status and body."""
    parts = urlsplit(url)
    lines = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.hostname}:{parts.port}"]
    lines += [f"{name}: {value}" for name, value in head.items()]
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + raw)
        sock.shutdown(socket.SHUT_WR)  # what a client cut short does
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize(
    "raw",
    [
        b"zz\r\n0123\r\n0\r\n\r\n",  # not a chunk size
        b"2\r\n{}XX0\r\n\r\n",  # no CRLF after the chunk's data
        b'40\r\n{"jsonrpc"',  # shorter than it said, and the client stops sending
    ],
)
def test_a_chunked_body_that_cannot_be_read_is_400_under_gunicorn(
    wsgi_server: DemoServer, raw: bytes
) -> None:
    _, headers = modern_request("tools/call", {"name": "add", "arguments": {"numbers": [2, 3]}})
    head = {"Content-Type": "application/json", "Transfer-Encoding": "chunked", **headers}
    status, answer = post_raw_bytes(wsgi_server.url, head, raw)
    assert status == 400, answer
    assert b"the request body could not be read" in answer


@pytest.fixture(scope="module")
def single_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """gunicorn's sync worker alone: one process, one thread, one request at a time."""
    server = DemoServer(
        tmp_path_factory.mktemp("wsgi-single"),
        kind="gunicorn",
        env={"MCP_VIEW": "sync"},
        args=["--threads", "1", "--worker-class", "sync"],
    )
    yield server
    server.stop()


def legacy_session(url: str, client: httpx.Client) -> dict[str, str]:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "tests", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    response = client.post(url, json=initialize, headers=accept)
    assert response.status_code == 200, response.text
    headers = {
        **accept,
        "Mcp-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert client.post(url, json=initialized, headers=headers).status_code == 202
    return headers


def test_a_server_of_one_worker_offers_no_get_stream(single_worker: DemoServer) -> None:
    with httpx.Client(timeout=10) as client:
        headers = legacy_session(single_worker.url, client)
        started = time.monotonic()
        response = client.get(single_worker.url, headers=headers)
        assert response.status_code == 405
        assert response.headers["allow"] == "POST, DELETE"
        assert "one request at a time" in response.json()["error"]["message"]
        # The worker is free for the next request at once.
        ping = client.post(
            single_worker.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers
        )
        assert ping.status_code == 200
        assert time.monotonic() - started < 5


def test_a_server_of_one_worker_does_not_wait_for_an_answer_it_cannot_get(
    single_worker: DemoServer,
) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet"}}
    with httpx.Client(timeout=10) as client:
        headers = legacy_session(single_worker.url, client)
        started = time.monotonic()
        response = client.post(single_worker.url, json=call, headers=headers)
        assert time.monotonic() - started < 5
    messages = [
        json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")
    ] or [response.json()]
    final = messages[-1]
    assert final["id"] == 1
    text = json.dumps(final)
    assert "this server answers one request at a time" in text
    # No elicitation request was sent: the client would answer it in vain.
    assert not any(m.get("method") == "elicitation/create" for m in messages)


def test_a_server_of_one_worker_refuses_a_listen_stream(single_worker: DemoServer) -> None:
    listen, headers = modern_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id=7
    )
    discover, discover_headers = modern_request("server/discover")
    with httpx.Client(timeout=10) as client:
        started = time.monotonic()
        response = client.post(single_worker.url, json=listen, headers=headers)
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == -32600
        assert "one request at a time" in error["message"]
        after = client.post(single_worker.url, json=discover, headers=discover_headers)
        assert after.status_code == 200
        assert time.monotonic() - started < 5


def test_a_refused_body_that_stops_coming_frees_the_one_worker_in_drain_seconds(
    single_worker: DemoServer,
) -> None:
    from mcp_app.transport.views import DRAIN_SECONDS

    parts = urlsplit(single_worker.url)
    body, headers = modern_request("tools/list")
    head = {"Content-Type": "application/json", "Content-Length": "5000000", **headers}
    lines = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.hostname}:{parts.port}"]
    lines += [f"{name}: {value}" for name, value in head.items()]
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        # 5 MB said, a few hundred bytes sent, and the connection held open.
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + json.dumps(body).encode())
        started = time.monotonic()
        with httpx.Client(timeout=30) as client:
            # gunicorn's sync worker serves one request at a time: this one waits its turn.
            after = client.post(single_worker.url, json=body, headers=headers)
        waited = time.monotonic() - started
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    assert after.status_code == 200 and "tools" in after.json()["result"]
    assert DRAIN_SECONDS - 1 < waited < DRAIN_SECONDS + 5
    assert answer.startswith(b"HTTP/1.1 413"), answer
