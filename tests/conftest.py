"""Shared fixtures: a real demo server process, and helpers to speak the stateless wire."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODERN = "2026-07-28"


def require_redis_url() -> str:
    """``REDIS_URL``, or a failed test that says how to start the services that set it."""
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.fail(
            "REDIS_URL is not set: start the services with `export $(scripts/services.sh)` "
            "(it prints REDIS_URL=redis://127.0.0.1:6390/0)"
        )
    return url


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not listen on {port} within {timeout}s")


class DemoServer:
    """A demo site served by a real uvicorn (or gunicorn) process on a free local port."""

    def __init__(
        self,
        tmp: Path,
        kind: str = "uvicorn",
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ):
        self.port = free_port()
        self.url = f"http://localhost:{self.port}/mcp"
        self.log = tmp / f"{kind}-{self.port}.log"
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": f"sqlite:///{tmp / 'demo.sqlite3'}",
            "SECRET_KEY": "e2e-secret-key",
            **(env or {}),
        }
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=environment,
            check=True,
        )
        if kind == "uvicorn":
            command = [
                sys.executable,
                "-m",
                "uvicorn",
                "project.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ]
        else:
            command = [
                sys.executable,
                "-m",
                "gunicorn",
                "project.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                "1",
                "--threads",
                "8",
                "--graceful-timeout",
                "1",
                "--log-level",
                "warning",
            ]
        # Later options win over the defaults above.
        command += args or []
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=out, stderr=out)
        wait_for_port(self.port, self.proc)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="session")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    server = DemoServer(tmp_path_factory.mktemp("demo"))
    yield server
    server.stop()


def run_site_script(database: Path, script: str) -> None:
    """Migrate the demo site onto the SQLite file ``database``, then run ``script`` (which
    sets Django up itself) in a Python process of its own, which exits as any would."""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{database}",
        "SECRET_KEY": "site-script-test",
    }
    root = Path(__file__).resolve().parent.parent

    def run(*command: str) -> None:
        subprocess.run(
            [sys.executable, *command], cwd=root, env=environment, check=True, timeout=120
        )

    run("manage.py", "migrate", "--noinput", "-v", "0")
    run("-c", script)


def modern_meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"},
    }
    meta.update(extra)
    return meta


def modern_request(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    request_id: Any = 1,
    capabilities: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """A stateless request body and the headers the wire requires for it."""
    body_params = dict(params or {})
    body_params["_meta"] = {**modern_meta(capabilities), **(meta or {})}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if method in ("tools/call", "prompts/get"):
        headers["Mcp-Name"] = str(body_params.get("name"))
    elif method == "resources/read":
        headers["Mcp-Name"] = str(body_params.get("uri"))
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}
    return body, headers


def dumps(body: Any) -> str:
    return json.dumps(body)


def stream_bytes(response: Any) -> bytes:
    """All of a streaming response's body, whether its iterator is sync or async."""
    content = response.streaming_content
    if hasattr(content, "__aiter__"):
        from asgiref.sync import async_to_sync

        async def collect() -> bytes:
            return b"".join([chunk async for chunk in content])

        return async_to_sync(collect)()
    return b"".join(content)


def sse_messages(response: Any) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an event-stream response, in order."""
    return data_messages(stream_bytes(response))


def data_messages(body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an event stream's bytes, in order."""
    lines = body.decode().splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


@pytest.fixture(autouse=True)
def _fresh_process_state() -> Iterator[None]:
    """Each test reads catalog generations and sessions afresh, and leaves no audit row queued.

    Tests empty and roll back tables without the signals a site's edits send, which a
    running site's workers would only notice after ``RECHECK_SECONDS``.
    """
    from mcp_app import audit, rows, sessions

    rows.forget_generations()
    sessions.forget_sessions()
    yield
    rows.forget_generations()
    sessions.forget_sessions()
    # Audit rows queued by a test that turned deferred writing on are written now, in its
    # own database state, not by the writer thread during some later test.
    if audit.pending():
        audit.flush()


class RecheckClock:
    """The clock ``mcp_app.recent`` expires what was read lately by: it moves only when a
    test says so, so a value is trusted until then however slowly the test runs."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def recheck_clock(monkeypatch: pytest.MonkeyPatch) -> RecheckClock:
    """``RecheckClock``, in place of the one ``mcp_app.recent`` reads."""
    clock = RecheckClock()
    monkeypatch.setattr("mcp_app.recent.time", SimpleNamespace(monotonic=clock.monotonic))
    return clock
