"""Side-by-side HTTP benchmark: this project's MCP endpoint against its floor, ceiling and peers.

Run with ``make bench`` (or ``.venv/bin/python -m bench.run``). Every server answers the same
2026-07-28 ``tools/call`` of a one-tool ``add`` server; each runs pinned to core 0
(``taskset -c 0``) and is driven from core 1 by ``wrk`` with ``bench/call.lua``, which checks
every response body. The servers take turns: a warm-up, then rounds in an order that rotates
between rounds, so drift in the machine's speed falls on all of them alike. Medians of
req/s, p50 and p99 latency are reported with the server process's peak RSS (VmHWM) and
the ratios the product targets are stated in (see ``docs/benchmarks.md``).

Every load loop is bounded in time (``wrk -d``, a deadline for the whole run) and in count
(a cap on responses per run), and sends only to 127.0.0.1. Every server started here is
stopped before exit, on errors too.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from bench import wire

ROOT = Path(__file__).resolve().parent.parent
LUA = ROOT / "bench" / "call.lua"
BENCH_VENV = ROOT / ".tools" / "bench-venv"
PROFILE_OUT = ROOT / ".tools" / "bench-profile.txt"
MCPZ_VERSION = "1.2.0"
FASTMCP_VERSION = "4.1.6"
SERVER_CORE = 0
LOAD_CORE = 1
HOST = "127.0.0.1"  # the only address this harness ever sends to

#: This project's servers, which --variant runs again with other environment.
OWN_SERVERS = ("mcp_app/gunicorn", "mcp_app/wsgi", "mcp_app/uvicorn", "mcp_app/asgi")

# How a product target bounds its ratio.
AT_LEAST, AT_MOST = ">=", "<="


class BenchError(Exception):
    """A precondition or a server failed: the run cannot give numbers."""


@dataclass
class Run:
    """One wrk run against one target, as the Lua ``done()`` hook reported it."""

    requests: int
    duration_us: int
    responses: int
    bad: int
    connect: int
    read: int
    write: int
    status: int
    timeout: int
    p50_us: int
    p90_us: int
    p99_us: int
    max_us: int
    mean_us: float
    capped: bool = False
    first_bad: str = ""
    #: Share of core 0's time spent by processes other than this server during the run:
    #: the machine is shared, and a busy neighbour on the server's core lowers its numbers.
    other_cpu: float = 0.0
    #: The same for core 1 less wrk's own time: a neighbour there slows the load generator,
    #: which matters for the fastest servers.
    other_load_cpu: float = 0.0
    #: The server's own CPU time (user and system, its worker included) per response, in µs:
    #: what a request costs it, whatever the load generator and the network add to the wait.
    server_cpu_us: float = 0.0
    #: The share of the run's wall time the server spent on a CPU: below 100 % it also waited.
    server_busy: float = 0.0

    @property
    def disturbed(self) -> float:
        return max(self.other_cpu, self.other_load_cpu)

    @property
    def rps(self) -> float:
        return self.requests / (self.duration_us / 1e6) if self.duration_us else 0.0

    @property
    def problems(self) -> list[str]:
        """Why this run cannot count: any error, any bad response, or the count cap reached."""
        found = []
        if self.bad:
            found.append(f"{self.bad} bad responses (first: {self.first_bad[:160]!r})")
        for name in ("connect", "read", "write", "status", "timeout"):
            if getattr(self, name):
                found.append(f"{getattr(self, name)} {name} errors")
        if self.capped:
            found.append("the response cap was reached, so req/s is not measured")
        if self.requests == 0:
            found.append("no requests completed")
        return found


@dataclass
class Target:
    """One server configuration and, once started, its process and results."""

    key: str
    label: str
    family: str  # floor | mcp_app | mcpz | sdk | fastmcp | raw
    server: str  # gunicorn | uvicorn
    python: Path
    app: str
    env: dict[str, str] = field(default_factory=dict)
    mode: str = "modern"  # which call the Lua script sends: modern or legacy
    lifespan: str = "off"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    session_id: str = ""
    warmup: Run | None = None
    runs: list[Run] = field(default_factory=list)
    peak_rss_kib: int | None = None

    def command(self) -> list[str]:
        pin = ["taskset", "-c", str(SERVER_CORE)]
        if self.server == "gunicorn":
            # The sync worker, one process, one thread: WSGI as most Django sites deploy it.
            return [
                *pin,
                str(self.python),
                "-m",
                "gunicorn",
                self.app,
                "--bind",
                f"{HOST}:{self.port}",
                "--workers",
                "1",
                "--threads",
                "1",
                "--worker-class",
                "sync",
                "--log-level",
                "warning",
            ]
        return [
            *pin,
            str(self.python),
            "-m",
            "uvicorn",
            self.app,
            "--host",
            HOST,
            "--port",
            str(self.port),
            # uvicorn[standard]'s fast paths, named so both virtualenvs surely use them.
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--lifespan",
            self.lifespan,
            "--no-access-log",
            "--log-level",
            "warning",
        ]

    def serving_pid(self) -> int:
        """The process that answers requests: gunicorn's worker, or uvicorn itself."""
        assert self.proc is not None
        pid = self.proc.pid  # taskset execs the server, so this is the server's own pid
        if self.server != "gunicorn":
            return pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) != 1:
            raise BenchError(f"{self.key}: expected one gunicorn worker, found {children}")
        return int(children[0])

    @property
    def valid(self) -> bool:
        # The warm-up counts too: an error there is an error of this server.
        checked = [run for run in (self.warmup, *self.runs) if run is not None]
        return bool(self.runs) and not any(run.problems for run in checked)

    def median(self, attribute: str) -> float:
        return statistics.median(float(getattr(run, attribute)) for run in self.runs)


def _fail(message: str) -> NoReturn:
    raise BenchError(message)


# -- preconditions ------------------------------------------------------------------------


def check_cores() -> None:
    cores = os.sched_getaffinity(0)
    if not {SERVER_CORE, LOAD_CORE} <= cores:
        _fail(
            f"needs cores {SERVER_CORE} and {LOAD_CORE} (server and load generator apart); "
            f"this process may use {sorted(cores)}"
        )


def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    # wrk is Debian's package of that name; install it the ordinary way when we may.
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("wrk is missing: apt-get install -y wrk", flush=True)

        def apt_get(*words: str, check: bool) -> int:
            command = ["apt-get", *words]
            done = subprocess.run(command, stdout=subprocess.DEVNULL, timeout=600, check=check)
            return done.returncode

        # An old package list may not know wrk yet: update once, then try again.
        if apt_get("install", "-y", "wrk", check=False):
            apt_get("update", check=True)
            apt_get("install", "-y", "wrk", check=True)
        found = shutil.which("wrk")
    if not found:
        _fail("wrk is not installed: apt-get install -y wrk")
    return found


def bench_venv_requirements(profile: bool) -> list[str]:
    """The peers apart from the project's venv (django-mcpz, FastMCP), with the same Django
    and servers."""
    requirements = [
        f"django-mcpz=={MCPZ_VERSION}",
        f"fastmcp=={FASTMCP_VERSION}",
        f"Django=={metadata.version('django')}",
        f"gunicorn=={metadata.version('gunicorn')}",
        f"uvicorn[standard]=={metadata.version('uvicorn')}",
    ]
    if profile:
        requirements.append("py-spy")
    return requirements


def ensure_bench_venv(profile: bool) -> Path:
    python = BENCH_VENV / "bin" / "python"
    marker = BENCH_VENV / ".bench-requirements.json"
    wanted = bench_venv_requirements(profile)
    if python.exists() and marker.exists():
        have = json.loads(marker.read_text())
        if set(wanted) <= set(have):
            return python
    if not python.exists():
        print(f"creating {BENCH_VENV.relative_to(ROOT)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True, timeout=300)
    print(f"installing into {BENCH_VENV.relative_to(ROOT)}: {' '.join(wanted)}", flush=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *wanted],
        check=True,
        timeout=900,
    )
    marker.write_text(json.dumps(wanted))
    return python


def migrate(db: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.servers.mcp_settings",
        "BENCH_DB": str(db),
    }
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )


# -- the servers ----------------------------------------------------------------------------


def targets(peer_python: Path, db: Path, variants: Sequence[Sequence[str]] = ()) -> list[Target]:
    main = Path(sys.executable)
    wsgi, asgi = "bench.servers.wsgi:application", "bench.servers.asgi:application"

    def django(family: str, settings: str, python: Path, label: str) -> list[Target]:
        base = {"DJANGO_SETTINGS_MODULE": f"bench.servers.{settings}", "BENCH_DB": str(db)}
        return [
            Target(
                f"{family}/gunicorn",
                f"{label} · gunicorn",
                family,
                "gunicorn",
                python,
                wsgi,
                {**base, "BENCH_VIEW": "sync"},
            ),
            Target(
                f"{family}/uvicorn",
                f"{label} · uvicorn",
                family,
                "uvicorn",
                python,
                asgi,
                {**base, "BENCH_VIEW": "async"},
            ),
        ]

    found = [
        *django("floor", "floor_settings", main, "floor: bare Django view"),
        *django("mcp_app", "mcp_settings", main, "django-mcp-app"),
        *django("mcpz", "mcpz_settings", peer_python, f"django-mcpz {MCPZ_VERSION}"),
        Target(
            "sdk/uvicorn",
            f"official SDK mcp {metadata.version('mcp')} · uvicorn",
            "sdk",
            "uvicorn",
            main,
            "bench.servers.sdk_app:app",
            lifespan="on",  # its session manager's task group starts in the lifespan
        ),
        Target(
            "fastmcp/uvicorn",
            f"FastMCP {FASTMCP_VERSION} · uvicorn",
            "fastmcp",
            "uvicorn",
            peer_python,
            "bench.servers.fastmcp_app:app",
            lifespan="on",  # as the official SDK's, which it serves through
        ),
        Target(
            "raw/uvicorn",
            "ceiling: raw ASGI app · uvicorn",
            "raw",
            "uvicorn",
            main,
            "bench.servers.raw_asgi:app",
            lifespan="on",
        ),
    ]
    # The same settings, the endpoint served by mcp_app's route for the server instead of
    # Django's handler: each right after the Django view path it stands beside.
    for server, kind in (("gunicorn", "wsgi"), ("uvicorn", "asgi")):
        base = next(t for t in found if t.key == f"mcp_app/{server}")
        found.insert(
            found.index(base) + 1,
            Target(
                f"mcp_app/{kind}",
                f"django-mcp-app · {server} · mcp_app.{kind}.route",
                "mcp_app",
                server,
                main,
                f"bench.servers.{kind}_route:application",
                dict(base.env),
            ),
        )
    mcp_uvicorn = next(t for t in found if t.key == "mcp_app/uvicorn")
    # A process of its own for the initialize-era call, so each process's peak RSS is
    # that of one kind of call.
    found.append(
        Target(
            "mcp_app/uvicorn/initialize-era",
            "django-mcp-app · uvicorn · initialize-era call",
            "mcp_app",
            "uvicorn",
            main,
            asgi,
            dict(mcp_uvicorn.env),
            mode="legacy",
        )
    )
    # Variants of this project's servers with other environment (BENCH_MCP_APP,
    # BENCH_CONN_MAX_AGE), measured in the same rotation so the comparison is fair.
    for name, *assignments in variants:
        extra = dict(assignment.split("=", 1) for assignment in assignments)
        for base in [t for t in found if t.key in OWN_SERVERS]:
            found.append(
                Target(
                    f"{base.key}/{name}",
                    f"{base.label} · {name}",
                    base.family,
                    base.server,
                    base.python,
                    base.app,
                    {**base.env, **extra},
                )
            )
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def start(target: Target, tmp: Path) -> None:
    target.port = free_port()
    target.log = tmp / f"{target.key.replace('/', '-')}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **target.env}
    with target.log.open("wb") as out:
        # A session of its own, so stop() can end the server and any child it forks.
        target.proc = subprocess.Popen(
            target.command(),
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_until_listening(target: Target, timeout: float = 60.0) -> None:
    assert target.proc is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if target.proc.poll() is not None:
            _fail(f"{target.key} exited with {target.proc.returncode}:\n{log_tail(target)}")
        try:
            with socket.create_connection((HOST, target.port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    _fail(f"{target.key} did not listen within {timeout:.0f}s:\n{log_tail(target)}")


def stop(target: Target) -> None:
    proc = target.proc
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def log_tail(target: Target, lines: int = 30) -> str:
    if target.log is None or not target.log.exists():
        return "(no log)"
    return "\n".join(target.log.read_text(errors="replace").splitlines()[-lines:])


def post(port: int, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        connection.request("POST", "/mcp", body=json.dumps(body), headers=headers)
        response = connection.getresponse()
        found = {name.lower(): value for name, value in response.getheaders()}
        return response.status, found, response.read()
    finally:
        connection.close()


def open_session(target: Target) -> str:
    """Initialize once, as an initialize-era client does, and return the session's id."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": wire.LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    accept = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    status, headers, body = post(target.port, initialize, accept)
    session_id = headers.get("mcp-session-id", "")
    if status != 200 or not session_id:
        _fail(f"{target.key}: initialize answered {status} {body[:300]!r}")
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, body = post(target.port, initialized, wire.legacy_headers(session_id))
    if status != 202:
        _fail(f"{target.key}: notifications/initialized answered {status} {body[:300]!r}")
    return session_id


def check_answer(target: Target) -> None:
    """One call by hand before any load, so a misconfigured server fails loudly and early."""
    if target.mode == "legacy":
        target.session_id = open_session(target)
        body, headers = wire.LEGACY_BODY, wire.legacy_headers(target.session_id)
    else:
        body, headers = wire.MODERN_BODY, wire.MODERN_HEADERS
    status, _, answer = post(target.port, body, headers)
    if status != 200 or not wire.answers_sum(answer):
        _fail(f"{target.key} answered {status} {answer[:300]!r}\n{log_tail(target)}")


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    _fail(f"no VmHWM for {pid}")


def core_times(core: int) -> tuple[int, int]:
    """(busy, total) clock ticks of one core: busy is user, nice and system time."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{core} "):
            ticks = [int(value) for value in line.split()[1:]]
            return sum(ticks[:3]), sum(ticks)
    _fail(f"no cpu{core} in /proc/stat")


def process_ticks(target: Target) -> int:
    """User and system ticks of the server and its children (gunicorn's worker)."""
    assert target.proc is not None
    pids = [target.proc.pid]
    with contextlib.suppress(OSError):
        children = Path(f"/proc/{pids[0]}/task/{pids[0]}/children").read_text().split()
        pids += [int(child) for child in children]
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            # Fields after the command name, which may hold spaces: utime, stime are 14, 15.
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])
    return total


@contextlib.contextmanager
def serving(all_targets: Sequence[Target], tmp: Path) -> Iterator[None]:
    """Start every server; stop every one of them on the way out, whatever happened."""
    try:
        for target in all_targets:
            start(target, tmp)
        for target in all_targets:
            wait_until_listening(target)
            check_answer(target)
        yield
    finally:
        for target in all_targets:
            stop(target)


# -- load -----------------------------------------------------------------------------------


RESULT_LINE = re.compile(r"^BENCH_RESULT (\{.*\})$", re.MULTILINE)
FIRST_BAD_LINE = re.compile(r"^BENCH_FIRST_BAD (.*)$", re.MULTILINE)


def wrk_command(target: Target, args: argparse.Namespace, duration: int) -> list[str]:
    """wrk on the load core for ``duration`` seconds, with the call the target is asked."""
    # The count bound: far above what one core serves (it only stops a runaway loop).
    script_args = [target.mode, str(duration * args.cap_per_second)]
    if target.mode == "legacy":
        script_args.append(target.session_id)
    return [
        "taskset",
        "-c",
        str(LOAD_CORE),
        args.wrk,
        "-t",
        str(args.threads),
        "-c",
        str(args.connections),
        "-d",
        f"{duration}s",
        "--timeout",
        "5s",
        "--latency",
        "-s",
        str(LUA),
        f"http://{HOST}:{target.port}/mcp",
        "--",
        *script_args,
    ]


def drive(target: Target, args: argparse.Namespace, seconds: float) -> Run:
    duration = max(1, round(seconds))
    cap = duration * args.cap_per_second
    command = wrk_command(target, args, duration)
    busy_before, total_before = core_times(SERVER_CORE)
    load_before, load_total_before = core_times(LOAD_CORE)
    server_before = process_ticks(target)
    wrk_before = children_ticks()
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=duration + 60, check=False
    )
    busy_after, total_after = core_times(SERVER_CORE)
    load_after, load_total_after = core_times(LOAD_CORE)
    server_after = process_ticks(target)
    wrk_after = children_ticks()
    found = RESULT_LINE.search(done.stdout)
    if done.returncode or not found:
        _fail(f"wrk failed on {target.key} ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    run = Run(**json.loads(found.group(1)))
    bad = FIRST_BAD_LINE.search(done.stdout)
    run.first_bad = bad.group(1) if bad else ""
    run.capped = run.responses >= cap * args.threads
    other = (busy_after - busy_before) - (server_after - server_before)
    run.other_cpu = max(0.0, other / max(1, total_after - total_before))
    other_load = (load_after - load_before) - (wrk_after - wrk_before)
    run.other_load_cpu = max(0.0, other_load / max(1, load_total_after - load_total_before))
    server_seconds = (server_after - server_before) / os.sysconf("SC_CLK_TCK")
    run.server_cpu_us = server_seconds * 1e6 / max(1, run.responses)
    run.server_busy = server_seconds / max(1e-9, run.duration_us / 1e6)
    return run


def children_ticks() -> float:
    """CPU time of this process's finished children (wrk), in clock ticks."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * os.sysconf("SC_CLK_TCK")


class Quiet:
    """Waits, within a budget, for both cores to be idle before a run.

    The machine may be shared (other test runs, other sessions); a run started while a
    neighbour is busy measures the neighbour too. Waiting is bounded per run and in total,
    and what remains is recorded per run as ``other_cpu``.
    """

    def __init__(self, per_run: float, budget: float, threshold: float) -> None:
        self.per_run, self.budget, self.threshold = per_run, budget, threshold
        self.waited = 0.0

    def busy(self, window: float = 0.5) -> float:
        before = [core_times(core) for core in (SERVER_CORE, LOAD_CORE)]
        time.sleep(window)
        after = [core_times(core) for core in (SERVER_CORE, LOAD_CORE)]
        return max(
            (b1 - b0) / max(1, t1 - t0) for (b0, t0), (b1, t1) in zip(before, after, strict=True)
        )

    def wait(self) -> None:
        start = time.monotonic()
        limit = min(self.per_run, self.budget - self.waited)
        if limit <= 0:
            return
        while self.busy() > self.threshold and time.monotonic() - start < limit:
            pass
        self.waited += time.monotonic() - start


def rotation(items: Sequence[Target], shift: int) -> list[Target]:
    shift %= len(items)
    return [*items[shift:], *items[:shift]]


def measure(all_targets: Sequence[Target], args: argparse.Namespace, deadline: float) -> None:
    def guard(seconds: float) -> None:
        if time.monotonic() + seconds + 5 > deadline:
            _fail(f"the run would pass its time limit of {args.max_seconds}s; shorten it")

    quiet = Quiet(args.quiet_wait, args.quiet_budget, args.quiet_threshold)
    retry_budget = float(args.noisy_budget)
    print(f"warm-up: {args.warmup}s each", flush=True)
    for target in all_targets:
        guard(args.warmup + args.quiet_wait)
        quiet.wait()
        target.warmup = drive(target, args, args.warmup)
    for round_number in range(args.rounds):
        order = rotation(all_targets, round_number)
        print(f"round {round_number + 1}/{args.rounds}: {args.duration}s each", flush=True)
        for target in order:
            guard(args.duration + args.quiet_wait)
            quiet.wait()
            run = drive(target, args, args.duration)
            # A run that shared core 0 with a busy neighbour is measured again, within a
            # time budget, and the least disturbed attempt is kept.
            attempts, latest = 0, run.disturbed
            while (
                latest > args.noise_limit
                and attempts < args.noisy_retries
                and retry_budget >= args.duration
                and time.monotonic() + args.duration + args.quiet_wait + 5 < deadline
            ):
                attempts += 1
                retry_budget -= args.duration
                print(
                    f"  {target.key:<32}a core was {latest:.0%} busy with other work;"
                    " measuring again",
                    flush=True,
                )
                quiet.wait()
                again = drive(target, args, args.duration)
                latest = again.disturbed
                run = again if again.disturbed < run.disturbed else run
            target.runs.append(run)
            state = "INVALID: " + "; ".join(run.problems) if run.problems else "ok"
            print(
                f"  {target.key:<32}{run.rps:>10.0f} req/s  p50 {run.p50_us / 1000:6.2f} ms"
                f"  p99 {run.p99_us / 1000:7.2f} ms  others on cores 0/1"
                f" {run.other_cpu:4.0%}/{run.other_load_cpu:4.0%}  {state}",
                flush=True,
            )
    for target in all_targets:
        target.peak_rss_kib = peak_rss_kib(target.serving_pid())


# -- the other benchmarks, in their own processes ---------------------------------------------


@dataclass
class Mrtr:
    ratio: float
    plain_us: float
    retry_us: float


@dataclass
class CatalogPages:
    """``bench.catalog``: the median time of a first ``tools/list`` page, by catalog size."""

    ratio: float
    small_us: float
    large_us: float


@dataclass
class Fanout:
    """One ``bench.listen_fanout`` backend: an edit reaching every open listen stream."""

    backend: str
    trigger: str
    streams: int
    kib_per_stream: float
    p50_ms: float
    p99_ms: float
    slowest_ms: float
    missing: int
    target_s: float
    verdict: str


@dataclass
class Others:
    """What the benchmarks beside the HTTP runs measured; ``None`` or empty where one failed."""

    mrtr: Mrtr | None = None
    catalog: CatalogPages | None = None
    fanout: list[Fanout] = field(default_factory=list)


def run_module(
    module: str,
    *argv: str,
    cores: str,
    env: dict[str, str] | None = None,
    exits: tuple[int, ...] = (0,),
) -> str | None:
    """``python -m module argv`` on ``cores``; its output, or ``None`` (reported) if it exited
    with another status than ``exits``.

    A failure there leaves its own numbers out, rather than losing the HTTP numbers already
    measured.
    """
    done = subprocess.run(
        ["taskset", "-c", cores, sys.executable, "-m", module, *argv],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode not in exits:
        not_run(module, done.returncode, done.stdout + done.stderr)
        return None
    return done.stdout


def not_run(module: str, returncode: int, output: str) -> None:
    tail = "\n".join(output.splitlines()[-15:])
    print(f"{module} failed ({returncode}); its numbers are left out:\n{tail}", file=sys.stderr)


def run_mrtr(iterations: int) -> Mrtr | None:
    """``bench.mrtr`` (on a migrated database) on the server's core, its output parsed."""
    out = run_module(
        "bench.mrtr",
        "-n",
        str(iterations),
        cores=str(SERVER_CORE),
        env={"DJANGO_SETTINGS_MODULE": "tests.settings"},
    )
    if out is None:
        return None
    ratio = re.search(r"retry / plain = ([0-9.]+)", out)
    plain = re.search(r"^tools/call add \(plain\)\s+([0-9.]+)", out, re.MULTILINE)
    retry = re.search(r"^greet retry \(verify, complete\)\s+([0-9.]+)", out, re.MULTILINE)
    if not (ratio and plain and retry):
        not_run("bench.mrtr", 0, out)
        return None
    return Mrtr(float(ratio.group(1)), float(plain.group(1)), float(retry.group(1)))


def run_catalog() -> CatalogPages | None:
    """``bench.catalog`` on the server's core: a first page at 10,000 rows against 100."""
    out = run_module("bench.catalog", cores=str(SERVER_CORE))
    if out is None:
        return None
    ratio = re.search(r"^first page, \d+ / \d+ rows = ([0-9.]+)", out, re.MULTILINE)
    firsts = re.findall(r"^\s*(\d+)\s+first\s+([0-9.]+)", out, re.MULTILINE)
    if not ratio or len(firsts) != 2:
        not_run("bench.catalog", 0, out)
        return None
    return CatalogPages(float(ratio.group(1)), float(firsts[0][1]), float(firsts[1][1]))


#: One row of ``bench.listen_fanout``'s table.
FANOUT_ROW = re.compile(
    r"^(?P<backend>\w+)\s+(?P<trigger>\w+)\s+(?P<streams>\d+)\s+\S+\s+\S+ MiB\s+\S+ MiB\s+"
    r"(?P<kib>[-0-9.]+)\s+(?P<p50>\S+)\s+(?P<p99>\S+)\s+(?P<slowest>\S+)\s+(?P<missing>\d+)\s+"
    r"(?P<target>[0-9.]+)s\s+(?P<verdict>PASS|FAIL)$",
    re.MULTILINE,
)


def run_fanout() -> list[Fanout]:
    """``bench.listen_fanout`` for each delivery backend (Redis when ``REDIS_URL`` is set).

    Its server and its clients share both cores, as when it runs on its own; the HTTP servers
    are stopped by then.
    """
    backends = ["local", "database"] + (["redis"] if os.environ.get("REDIS_URL") else [])
    found: list[Fanout] = []
    for backend in backends:
        # It exits with 1 when a delivery misses its target: the row says so.
        out = run_module(
            "bench.listen_fanout",
            "--backend",
            backend,
            cores=f"{SERVER_CORE},{LOAD_CORE}",
            exits=(0, 1),
        )
        row = FANOUT_ROW.search(out or "")
        if row is None:
            if out is not None:
                not_run(f"bench.listen_fanout --backend {backend}", 0, out)
            continue
        found.append(
            Fanout(
                backend=row["backend"],
                trigger=row["trigger"],
                streams=int(row["streams"]),
                kib_per_stream=float(row["kib"]),
                p50_ms=float(row["p50"]),
                p99_ms=float(row["p99"]),
                slowest_ms=float(row["slowest"]),
                missing=int(row["missing"]),
                target_s=float(row["target"]),
                verdict="holds" if row["verdict"] == "PASS" else "misses",
            )
        )
    return found


def run_others(args: argparse.Namespace) -> Others:
    """The in-process benchmarks and the listen fan-out, once the HTTP servers are stopped."""
    return Others(mrtr=run_mrtr(args.mrtr_iterations), catalog=run_catalog(), fanout=run_fanout())


# -- profile -------------------------------------------------------------------------------


def profile(target: Target, args: argparse.Namespace, py_spy: Path) -> str:
    """py-spy (GIL holder only) on a server under the same load; the top frames as text."""
    seconds = args.profile
    raw = Path(tempfile.mkstemp(prefix="bench-profile-", suffix=".txt")[1])
    load = subprocess.Popen(
        wrk_command(target, args, seconds + 3),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1)  # let the load reach its steady state before sampling
        subprocess.run(
            [
                "taskset",
                "-c",
                str(LOAD_CORE),
                str(py_spy),
                "record",
                *(["--gil"] if args.profile_gil else []),
                "--function",
                "--format",
                "raw",
                # More samples than the default 100 Hz, for a steadier picture in 5 s.
                "--rate",
                "250",
                "--duration",
                str(seconds),
                "--pid",
                str(target.serving_pid()),
                "--output",
                str(raw),
            ],
            check=True,
            capture_output=True,
            timeout=seconds + 60,
        )
    finally:
        try:
            load.wait(seconds + 60)
        except subprocess.TimeoutExpired:
            load.kill()
            load.wait()
    PROFILE_OUT.write_text(raw.read_text())
    raw.unlink()
    return summarise_profile(PROFILE_OUT.read_text(), args.profile_top)


def summarise_profile(collapsed: str, top: int) -> str:
    """Where the GIL-holding thread spent its time, from py-spy's collapsed stacks.

    Three views: self time per package (where the time goes), self time per function
    (the hottest leaves), and inclusive time of this project's own functions (which of
    its steps cost the most, callees included).
    """
    own: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [shorten_frame(frame) for frame in stack.split(";")]
        total += count
        own[frames[-1]] += count
        packages[frame_package(frames[-1])] += count
        for frame in set(frames):
            if "(mcp_app/" in frame:
                inclusive[frame] += count
    if not total:
        return "py-spy recorded no samples"
    lines = [f"{total} samples"]
    views = (
        ("self time by package", packages),
        ("self time by function", own),
        ("inclusive time of mcp_app functions", inclusive),
    )
    for title, counts in views:
        lines.append(f"{title}:")
        for frame, count in counts.most_common(top):
            lines.append(f"  {100 * count / total:5.1f}%  {frame}")
    return "\n".join(lines)


def shorten_frame(frame: str) -> str:
    # "handle (mcp_app/transport/http.py:120)": paths cut to the package or stdlib module.
    return re.sub(r"\((?:[^()]*?(?:site-packages|python3\.\d+|/work/main)/)", "(", frame)


def frame_package(frame: str) -> str:
    found = re.search(r"\(([^/():]+)", frame)
    return found.group(1).removesuffix(".py") if found else frame


# -- report ---------------------------------------------------------------------------------


@dataclass
class Ratio:
    name: str
    meaning: str
    value: float | None  # None: a run it needs was invalid
    bound: float | None = None
    comparison: str = AT_LEAST

    @property
    def verdict(self) -> str:
        if self.value is None:
            return "INVALID"
        if self.bound is None:
            return "(no target)"
        holds = (
            self.value >= self.bound if self.comparison == AT_LEAST else self.value <= self.bound
        )
        return "holds" if holds else "misses"

    @property
    def target(self) -> str:
        return "" if self.bound is None else f"{self.comparison} {self.bound:g}"


def ratios(by_key: dict[str, Target], others: Others) -> list[Ratio]:
    def rps(numerator: str, denominator: str) -> float | None:
        a, b = by_key[numerator], by_key[denominator]
        if not (a.valid and b.valid):
            return None
        return a.median("rps") / b.median("rps")

    def p99(numerator: str, denominator: str) -> float | None:
        a, b = by_key[numerator], by_key[denominator]
        if not (a.valid and b.valid):
            return None
        return a.median("p99_us") / b.median("p99_us")

    legacy = rps("mcp_app/uvicorn", "mcp_app/uvicorn/initialize-era")  # time per call, inverted
    mrtr, catalog = others.mrtr, others.catalog
    found = [
        Ratio("ASGI ÷ official SDK", "req/s, mcp_app/asgi ÷ sdk/uvicorn",
              rps("mcp_app/asgi", "sdk/uvicorn"), 2.5),
        Ratio("Django view path ÷ bare view, uvicorn", "req/s, mcp_app/uvicorn ÷ floor/uvicorn",
              rps("mcp_app/uvicorn", "floor/uvicorn"), 0.9),
        Ratio("Django view path ÷ bare view, gunicorn", "req/s, mcp_app/gunicorn ÷ floor/gunicorn",
              rps("mcp_app/gunicorn", "floor/gunicorn"), 0.9),
        Ratio("WSGI ÷ floor", "req/s, mcp_app/wsgi ÷ floor/gunicorn",
              rps("mcp_app/wsgi", "floor/gunicorn"), 0.95),
        Ratio("WSGI ÷ django-mcpz", "req/s, mcp_app/wsgi ÷ mcpz/gunicorn",
              rps("mcp_app/wsgi", "mcpz/gunicorn"), 1.0),
        Ratio("WSGI view path ÷ django-mcpz", "req/s, mcp_app/gunicorn ÷ mcpz/gunicorn",
              rps("mcp_app/gunicorn", "mcpz/gunicorn")),
        Ratio("ASGI ÷ django-mcpz", "req/s, mcp_app/uvicorn ÷ mcpz/uvicorn",
              rps("mcp_app/uvicorn", "mcpz/uvicorn")),
        Ratio("ASGI ÷ FastMCP", "req/s, mcp_app/asgi ÷ fastmcp/uvicorn",
              rps("mcp_app/asgi", "fastmcp/uvicorn")),
        Ratio("Django view path ÷ FastMCP, uvicorn", "req/s, mcp_app/uvicorn ÷ fastmcp/uvicorn",
              rps("mcp_app/uvicorn", "fastmcp/uvicorn")),
        Ratio("ASGI ÷ raw ASGI ceiling", "req/s, mcp_app/asgi ÷ raw/uvicorn",
              rps("mcp_app/asgi", "raw/uvicorn")),
        Ratio("official SDK ÷ raw ASGI ceiling", "req/s, sdk/uvicorn ÷ raw/uvicorn",
              rps("sdk/uvicorn", "raw/uvicorn")),
        Ratio("MRTR retry ÷ plain call", "in-process median time, bench.mrtr",
              mrtr.ratio if mrtr else None, 1.2, AT_MOST),
        Ratio("tools/list, 10,000 ÷ 100 rows", "in-process median first page, bench.catalog",
              catalog.ratio if catalog else None, 1.5, AT_MOST),
        Ratio("initialize-era ÷ 2026-07-28 call", "time per call (1/req/s), mcp_app/uvicorn",
              legacy, 1.3, AT_MOST),
        Ratio("p99 ÷ official SDK, uvicorn", "p99, mcp_app/uvicorn ÷ sdk/uvicorn",
              p99("mcp_app/uvicorn", "sdk/uvicorn"), 1.0, AT_MOST),
        Ratio("p99 ÷ official SDK, ASGI route", "p99, mcp_app/asgi ÷ sdk/uvicorn",
              p99("mcp_app/asgi", "sdk/uvicorn"), 1.0, AT_MOST),
        Ratio("p99 ÷ FastMCP, uvicorn", "p99, mcp_app/uvicorn ÷ fastmcp/uvicorn",
              p99("mcp_app/uvicorn", "fastmcp/uvicorn"), 1.0, AT_MOST),
        Ratio("p99 ÷ FastMCP, ASGI route", "p99, mcp_app/asgi ÷ fastmcp/uvicorn",
              p99("mcp_app/asgi", "fastmcp/uvicorn"), 1.0, AT_MOST),
        Ratio("p99 ÷ django-mcpz, uvicorn", "p99, mcp_app/uvicorn ÷ mcpz/uvicorn",
              p99("mcp_app/uvicorn", "mcpz/uvicorn"), 1.0, AT_MOST),
        Ratio("p99 ÷ django-mcpz, gunicorn", "p99, mcp_app/gunicorn ÷ mcpz/gunicorn",
              p99("mcp_app/gunicorn", "mcpz/gunicorn"), 1.0, AT_MOST),
        Ratio("p99 ÷ django-mcpz, WSGI route", "p99, mcp_app/wsgi ÷ mcpz/gunicorn",
              p99("mcp_app/wsgi", "mcpz/gunicorn"), 1.0, AT_MOST),
    ]  # fmt: skip
    return found


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(out)
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [headers, ["-" * width for width in widths], *rows]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    )


def server_rows(all_targets: Sequence[Target]) -> list[list[str]]:
    rows = []
    for target in all_targets:
        if not target.runs:
            continue
        rates = [run.rps for run in target.runs]
        rss = f"{target.peak_rss_kib / 1024:.1f}" if target.peak_rss_kib else "?"
        rows.append(
            [
                target.label,
                f"{target.median('rps'):,.0f}",
                f"{min(rates):,.0f}-{max(rates):,.0f}",
                f"{target.median('p50_us') / 1000:.2f}",
                f"{target.median('p99_us') / 1000:.2f}",
                f"{target.median('server_cpu_us'):,.0f} ({target.median('server_busy'):.0%})",
                rss,
                f"{target.median('other_cpu'):.0%} / {target.median('other_load_cpu'):.0%}",
                "ok" if target.valid else "INVALID",
            ]
        )
    return rows


SERVER_HEADERS = [
    "server",
    "req/s",
    "req/s range",
    "p50 ms",
    "p99 ms",
    "server CPU µs/req (busy)",
    "peak RSS MiB",
    "others on cores 0 / 1",
    "runs",
]
RATIO_HEADERS = ["ratio", "what", "value", "target", "verdict"]


def ratio_rows(found: Sequence[Ratio]) -> list[list[str]]:
    return [
        [r.name, r.meaning, "—" if r.value is None else f"{r.value:.2f}", r.target, r.verdict]
        for r in found
    ]


def machine() -> dict[str, str]:
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "python": platform.python_version(),
        "django": metadata.version("django"),
        "mcp": metadata.version("mcp"),
        "django-mcpz": MCPZ_VERSION,
        "fastmcp": FASTMCP_VERSION,
        "gunicorn": metadata.version("gunicorn"),
        "uvicorn": metadata.version("uvicorn"),
        "wrk": subprocess.run(
            ["wrk", "-v"], capture_output=True, text=True, check=False
        ).stdout.split(" [")[0],
        # The tree measured: a dirty one is not what any commit would give.
        "revision": subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        or "?",
        "load average": " ".join(f"{value:.2f}" for value in os.getloadavg()),
    }


FANOUT_HEADERS = [
    "listen fan-out",
    "trigger",
    "streams",
    "KiB per stream",
    "p50 ms",
    "p99 ms",
    "slowest ms",
    "missing",
    "target",
    "verdict",
]


def fanout_rows(found: Sequence[Fanout]) -> list[list[str]]:
    return [
        [
            f.backend,
            f.trigger,
            f"{f.streams:,}",
            f"{f.kib_per_stream:.1f}",
            f"{f.p50_ms:.1f}",
            f"{f.p99_ms:.1f}",
            f"{f.slowest_ms:.1f}",
            str(f.missing),
            f"every stream <= {f.target_s:g} s",
            f.verdict,
        ]
        for f in found
    ]


def report(
    all_targets: Sequence[Target],
    found: Sequence[Ratio],
    others: Others,
    args: argparse.Namespace,
    markdown: bool,
) -> str:
    facts = machine()
    setup = (
        f"{args.warmup}s warm-up, {args.rounds} rounds x {args.duration}s, "
        f"wrk -t{args.threads} -c{args.connections}; server on core {SERVER_CORE}, "
        f"wrk on core {LOAD_CORE}; medians over rounds; peak RSS is VmHWM after the run"
    )
    parts = [
        "machine: " + ", ".join(f"{k} {v}" for k, v in facts.items()),
        setup,
        "",
        table(SERVER_HEADERS, server_rows(all_targets), markdown),
    ]
    if found:
        parts += ["", table(RATIO_HEADERS, ratio_rows(found), markdown)]
    if others.mrtr is not None:
        parts.append(
            f"\nMRTR in process: plain call {others.mrtr.plain_us:.1f} µs, "
            f"retry {others.mrtr.retry_us:.1f} µs (median of {args.mrtr_iterations})"
        )
    if others.catalog is not None:
        parts.append(
            f"tools/list in process, first page: {others.catalog.small_us:.1f} µs at 100 rows, "
            f"{others.catalog.large_us:.1f} µs at 10,000"
        )
    if others.fanout:
        parts += ["", table(FANOUT_HEADERS, fanout_rows(others.fanout), markdown)]
    for target in all_targets:
        for run in [target.warmup, *target.runs]:
            if run is not None and run.problems:
                parts.append(f"INVALID {target.key}: " + "; ".join(run.problems))
                break
    return "\n".join(parts)


def results_json(all_targets: Sequence[Target], found: Sequence[Ratio], others: Others) -> Any:
    mrtr, catalog = others.mrtr, others.catalog
    return {
        "machine": machine(),
        "targets": {
            t.key: {
                "label": t.label,
                "valid": t.valid,
                "peak_rss_kib": t.peak_rss_kib,
                "runs": [run.__dict__ | {"rps": run.rps} for run in t.runs],
            }
            for t in all_targets
        },
        "ratios": [r.__dict__ | {"verdict": r.verdict} for r in found],
        "mrtr": None if mrtr is None else {"ratio": mrtr.ratio, "plain_us": mrtr.plain_us,
                                           "retry_us": mrtr.retry_us},
        "catalog": None if catalog is None else catalog.__dict__,
        "fanout": [f.__dict__ for f in others.fanout],
    }  # fmt: skip


# -- main -----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--warmup", type=int, default=3, help="seconds of warm-up per server")
    parser.add_argument("--duration", type=int, default=5, help="seconds per server per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8, help="wrk -c")
    parser.add_argument("--threads", type=int, default=1, help="wrk -t")
    parser.add_argument(
        "--cap-per-second",
        type=int,
        default=200_000,
        help="responses per second of a run after which wrk stops (a runaway bound)",
    )
    parser.add_argument("--mrtr-iterations", type=int, default=2000)
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=10.0,
        help="seconds to wait at most before a run for both cores to be idle",
    )
    parser.add_argument(
        "--noise-limit",
        type=float,
        default=0.1,
        help="share of either core used by other processes above which a run is measured again",
    )
    parser.add_argument("--noisy-retries", type=int, default=2, help="re-runs per noisy run")
    parser.add_argument(
        "--noisy-budget", type=float, default=90.0, help="seconds of re-runs in all"
    )
    parser.add_argument("--quiet-budget", type=float, default=120.0, help="total of those waits")
    parser.add_argument(
        "--quiet-threshold", type=float, default=0.1, help="busy share counted as idle"
    )
    parser.add_argument("--only", nargs="*", default=None, help="target keys to run")
    parser.add_argument(
        "--variant",
        nargs="+",
        action="append",
        metavar=("NAME", "ENV=VALUE"),
        help="also run mcp_app/gunicorn, mcp_app/wsgi, mcp_app/uvicorn and mcp_app/asgi with this "
        "environment, e.g. --variant no-audit 'BENCH_MCP_APP={\"AUDIT\": false}'",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="SECONDS",
        help="after the rounds, py-spy --gil on mcp_app/uvicorn under load for SECONDS",
    )
    parser.add_argument("--profile-top", type=int, default=15)
    parser.add_argument(
        "--profile-gil",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="sample only the thread holding the GIL (--no-profile-gil: every busy thread)",
    )
    parser.add_argument("--profile-target", default="mcp_app/uvicorn", help="target key to profile")
    parser.add_argument("--max-seconds", type=int, default=900, help="limit for the whole run")
    parser.add_argument("--json", type=Path, help="write every run's numbers here")
    parser.add_argument("--markdown", type=Path, help="write the tables as Markdown here")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error("--rounds must be at least 3")
    return args


def raise_on_signal(signum: int, frame: Any) -> None:
    # Turn SIGTERM/SIGHUP into SystemExit so the finally blocks stop every server.
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    deadline = time.monotonic() + args.max_seconds
    signal.signal(signal.SIGTERM, raise_on_signal)
    signal.signal(signal.SIGHUP, raise_on_signal)
    try:
        check_cores()
        # Keep this process off the server's core too: it only waits and parses.
        os.sched_setaffinity(0, {LOAD_CORE})
        args.wrk = ensure_wrk()
        peer_python = ensure_bench_venv(profile=args.profile > 0)
        with tempfile.TemporaryDirectory(prefix="bench-") as tmp_name:
            tmp = Path(tmp_name)
            db = tmp / "mcp.sqlite3"
            migrate(db)
            all_targets = targets(peer_python, db, args.variant or ())
            if args.only:
                # The ratios need every target; --only is for trying a server out.
                all_targets = [t for t in all_targets if t.key in set(args.only)]
            by_key = {t.key: t for t in all_targets}
            summary = ""
            with serving(all_targets, tmp):
                measure(all_targets, args, deadline)
                if args.profile and args.profile_target in by_key:
                    py_spy = BENCH_VENV / "bin" / "py-spy"
                    summary = profile(by_key[args.profile_target], args, py_spy)
            others = run_others(args) if not args.only else Others()
        found = ratios(by_key, others) if not args.only else []
        print()
        print(report(all_targets, found, others, args, markdown=False))
        if summary:
            gil = " --gil" if args.profile_gil else ""
            print(f"\npy-spy{gil} on {args.profile_target} ({args.profile}s; {PROFILE_OUT}):")
            print(summary)
        if args.markdown:
            args.markdown.write_text(report(all_targets, found, others, args, markdown=True) + "\n")
        if args.json:
            args.json.write_text(json.dumps(results_json(all_targets, found, others), indent=2))
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    except subprocess.SubprocessError as exc:
        # A set-up step (venv, migrate, py-spy) failed; its own output is above.
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    invalid = [t.key for t in all_targets if not t.valid]
    if invalid:
        print(f"\nINVALID runs: {', '.join(invalid)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
