"""Instructions per call, counted by valgrind: a cost the machine's speed does not move.

Requests per second measure what a user gets, but on a shared machine they move by a third
from one run to the next. The number of instructions a call executes moves by a few per
cent: each case here runs in a process of its own under ``valgrind --tool=cachegrind``
twice, after the same warm-up, once with no calls and once with ``--calls``; the difference
over the calls is what one call costs, in every thread of the process (the call pool's and
the audit writer's too).

The cases are the HTTP benchmark's applications called in-process with its ``tools/call`` of
``add`` and its headers, each answer checked: under WSGI the floor (a bare Django view), this
project's Django view and its WSGI route (also without the audit trail), and django-mcpz (from the virtualenv
``bench.run`` makes, ``.tools/bench-venv``); under ASGI, on uvloop,
this project's ASGI route, the official SDK, FastMCP (from the same virtualenv as django-mcpz)
and the raw ASGI app. No HTTP server takes part,
and instructions are not time: the kernel's work (thread hand-overs, sockets) is not counted,
nor how fast each instruction runs. So these ratios explain ``bench.run``'s; they are not
its targets.

The audit writer writes when ``AUDIT_BATCH_SIZE`` rows are waiting, as it does under load,
and the rows left at the end are written before the count stops: valgrind runs the process
some fifty times slower, and the one-second flush would otherwise write smaller batches than
a real run does.

    python -m bench.instructions [--calls 500] [--only KEY ...] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.run import ROOT, ensure_bench_venv, migrate

WARMUP = 300
#: Rows are written in full batches, as under load (see the module).
DEFERRED_AUDIT = {"AUDIT_FLUSH_SECONDS": 3600}


@dataclass(frozen=True)
class Case:
    key: str
    label: str
    app: str  # module:attribute
    settings: str | None = None  # bench.servers.<settings>, for the Django ones
    mcp_app: dict[str, Any] | None = None  # BENCH_MCP_APP, for mcp_app's
    in_bench_venv: bool = False  # django-mcpz's virtualenv, not this project's
    asgi: bool = False
    lifespan: bool = False  # an ASGI application that starts in the lifespan


WSGI_APP, ROUTE = "bench.servers.wsgi:application", "bench.servers.wsgi_route:application"
CASES = (
    Case("floor", "floor: bare Django view", WSGI_APP, "floor_settings"),
    Case("mcp_app/view", "django-mcp-app · Django view", WSGI_APP, "mcp_settings", DEFERRED_AUDIT),
    Case(
        "mcp_app/wsgi", "django-mcp-app · mcp_app.wsgi.route", ROUTE, "mcp_settings", DEFERRED_AUDIT
    ),
    Case(
        "mcp_app/wsgi-no-audit",
        "django-mcp-app · mcp_app.wsgi.route, AUDIT off",
        ROUTE,
        "mcp_settings",
        {"AUDIT": False},
    ),
    Case("mcpz", "django-mcpz · Django view", WSGI_APP, "mcpz_settings", in_bench_venv=True),
    Case(
        "mcp_app/asgi",
        "django-mcp-app · mcp_app.asgi.route",
        "bench.servers.asgi_route:application",
        "mcp_settings",
        DEFERRED_AUDIT,
        asgi=True,
    ),
    Case("sdk", "official SDK (Starlette)", "bench.servers.sdk_app:app", asgi=True, lifespan=True),
    Case(
        "fastmcp",
        "FastMCP (on the official SDK)",
        "bench.servers.fastmcp_app:app",
        in_bench_venv=True,
        asgi=True,
        lifespan=True,
    ),
    Case("raw", "ceiling: raw ASGI app", "bench.servers.raw_asgi:app", asgi=True, lifespan=True),
)
#: Each ratio: a case over another, as ``bench.run`` divides their requests per second (the
#: other's instructions over this one's, so that more is better).
RATIOS = (
    ("mcp_app/wsgi", "floor"),
    # The same without the audit row, which the floor does not write: what the row costs.
    ("mcp_app/wsgi-no-audit", "floor"),
    ("mcp_app/wsgi", "mcpz"),
    ("mcp_app/view", "floor"),
    ("mcp_app/asgi", "sdk"),
)


# -- the child: one case's calls ------------------------------------------------------------


def environ(body: bytes) -> dict[str, Any]:
    """The WSGI environ of the benchmark's call (its body stream read by then)."""
    from bench import wire

    env: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/mcp",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "CONTENT_LENGTH": str(len(body)),
    }
    for name, value in wire.MODERN_HEADERS.items():
        key = name.upper().replace("-", "_")
        env[key if key == "CONTENT_TYPE" else f"HTTP_{key}"] = value
    return env


def child(calls: int) -> None:
    """Warm up, then make ``calls`` calls of the app ``BENCH_APP`` names, each answer checked."""
    import importlib

    if os.environ.get("DJANGO_SETTINGS_MODULE"):
        import django

        django.setup()
    module, _, attribute = os.environ["BENCH_APP"].partition(":")
    application = getattr(importlib.import_module(module), attribute)
    if os.environ["BENCH_KIND"] == "asgi":
        asgi_child(application, calls, os.environ.get("BENCH_LIFESPAN") == "1")
    else:
        wsgi_child(application, calls)


def wsgi_child(application: Any, calls: int) -> None:
    from bench import wire

    body = json.dumps(wire.MODERN_BODY).encode()
    template = environ(body)

    def call() -> None:
        status: list[str] = []
        env = template.copy()
        env["wsgi.input"] = io.BytesIO(body)
        chunks = application(env, lambda s, h, e=None: status.append(s))
        answer = b"".join(chunks)
        if hasattr(chunks, "close"):
            chunks.close()
        if not status[0].startswith("200") or not wire.answers_sum(answer):
            raise SystemExit(f"unexpected answer: {status} {answer[:300]!r}")

    flush = _audit_flush()
    for _ in range(WARMUP):
        call()
    flush()
    for _ in range(calls):
        call()
    flush()


def asgi_child(app: Any, calls: int, lifespan: bool) -> None:
    """As ``child``, for an ASGI application, on uvloop as uvicorn[standard] runs it."""
    import asyncio

    from bench import wire

    body = json.dumps(wire.MODERN_BODY).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000")]
        + [(name.lower().encode(), value.encode()) for name, value in wire.MODERN_HEADERS.items()]
        + [(b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }

    async def call() -> None:
        sent = False
        done = asyncio.Event()
        status: list[int] = []
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()  # the client stays until its answer is complete
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    done.set()

        await app(dict(scope), receive, send)
        answer = b"".join(chunks)
        if status != [200] or not wire.answers_sum(answer):
            raise SystemExit(f"unexpected answer: {status} {answer[:300]!r}")

    async def main() -> None:
        started = asyncio.Event()
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        async def lifespan_send(message: dict[str, Any]) -> None:
            if message["type"] == "lifespan.startup.failed":
                raise SystemExit(f"the application did not start: {message.get('message')}")
            if message["type"] == "lifespan.startup.complete":
                started.set()

        task = None
        if lifespan:
            inbox.put_nowait({"type": "lifespan.startup"})
            task = asyncio.create_task(app({"type": "lifespan"}, inbox.get, lifespan_send))
            await asyncio.wait(
                [task, asyncio.create_task(started.wait())],
                timeout=120,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not started.is_set():
                raise SystemExit(f"the application did not start: {task}")
        flush = _audit_flush()
        for _ in range(WARMUP):
            await call()
        await asyncio.to_thread(flush)
        for _ in range(calls):
            await call()
        await asyncio.to_thread(flush)
        if task is not None:
            inbox.put_nowait({"type": "lifespan.shutdown"})
            await task

    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())


def _audit_flush() -> Any:
    """Write every queued audit row, however long valgrind takes (nothing to do but for
    mcp_app's cases)."""
    if not os.environ.get("BENCH_MCP_APP"):
        return lambda: None
    from mcp_app import audit

    def flush() -> None:
        if not audit.flush(timeout=None) or audit.pending():
            raise SystemExit(f"{audit.pending()} audit rows were left unwritten")

    return flush


# -- the parent: valgrind around each case --------------------------------------------------


def count(case: Case, calls: int, db: Path, bench_python: Path) -> int:
    """Instructions the case's process executed, making ``calls`` calls after the warm-up."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": f"bench.servers.{case.settings}" if case.settings else "",
        "BENCH_DB": str(db),
        "BENCH_CONN_MAX_AGE": "0",
        "BENCH_VIEW": "async" if case.asgi else "sync",
        "BENCH_APP": case.app,
        "BENCH_KIND": "asgi" if case.asgi else "wsgi",
        "BENCH_LIFESPAN": "1" if case.lifespan else "0",
        "BENCH_MCP_APP": json.dumps(case.mcp_app) if case.mcp_app is not None else "",
        "PYTHONPATH": str(ROOT),
    }
    python = bench_python if case.in_bench_venv else Path(sys.executable)
    done = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            str(python),
            "-m",
            "bench.instructions",
            "--child",
            str(calls),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{case.key}: exited {done.returncode}:\n{done.stderr[-2000:]}")
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise RuntimeError(f"{case.key}: no instruction count in valgrind's output")
    return int(found.group(1).replace(",", ""))


def per_call(case: Case, calls: int, bench_python: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        base_db, loaded_db = Path(tmp) / "base.sqlite3", Path(tmp) / "loaded.sqlite3"
        if case.mcp_app is not None:  # the only cases with tables of their own
            migrate(base_db)
            migrate(loaded_db)
        base = count(case, 0, base_db, bench_python)
        loaded = count(case, calls, loaded_db, bench_python)
    return (loaded - base) / calls


def table(results: dict[str, float]) -> str:
    lines = ["| case | instructions per call |", "|---|---|"]
    lines += [f"| {c.label} | {results[c.key]:,.0f} |" for c in CASES if c.key in results]
    lines += ["", "| ratio (the other's instructions ÷ this one's) | value |", "|---|---|"]
    for this, other in RATIOS:
        if this in results and other in results:
            lines.append(f"| {this} ÷ {other} | {results[other] / results[this]:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--only", nargs="*", help="case keys to count (default: all)")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is needed: apt-get install valgrind")
    bench_python = ensure_bench_venv(profile=False)
    results: dict[str, float] = {}
    for case in CASES:
        if args.only and case.key not in args.only:
            continue
        results[case.key] = per_call(case, args.calls, bench_python)
        print(f"{case.key}: {results[case.key]:,.0f} instructions per call", flush=True)
    print()
    print(table(results))
    if args.markdown:
        args.markdown.write_text(table(results) + "\n")


if __name__ == "__main__":
    main()
