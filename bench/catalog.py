"""What a ``tools/list`` page costs with 100 and with 10,000 tool rows, in process (no HTTP).

Run with ``DJANGO_SETTINGS_MODULE=tests.settings python -m bench.catalog``. The migrations
run on ``tests.settings``' in-memory SQLite database (one thread, so one database). Two
servers of their own, with no code definitions, get 100 and 10,000 tool rows (each a
``template`` row with an input schema), and ``tools/list`` requests go through each
server's ``endpoint.handle(Incoming(...))`` with a page size of 100:

* ``first`` - the first page;
* ``last``  - the last page, through its cursor.

The row generation is read once and then known to the process (as in a worker between
edits); each merged catalog, its wire dicts and its fingerprints are built once per
generation, before timing (the rebuild after the edit is reported on its own, the median of
the rounds). Both catalogs stay built, so the four requests take turns call by call: the
machine's speed, which can move by a third from one second to the next, falls on both sizes
alike. The rows are written again and rebuilt in each of ``ROUNDS`` rounds; the medians of
all rounds' ``--iterations`` runs are reported. The product target is
``first(10,000) / first(100) <= 1.5``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.inprocess import measure, setup

TARGET_RATIO = 1.5
#: Rounds, each with the rows written again; each case's samples of all rounds are pooled.
ROUNDS = 3
MODERN = "2026-07-28"
SIZES = (100, 10_000)


def _request(request_id: int, cursor: str | None) -> Any:
    from mcp_app.transport.http import Incoming

    params: dict[str, Any] = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        }
    }
    if cursor is not None:
        params["cursor"] = cursor
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": params}
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/list",
    }
    return Incoming(method="POST", headers=headers, body=json.dumps(body).encode(), host="bench")


def servers() -> dict[int, Any]:
    """A server of its own for each size, with no code definitions: only its rows."""
    from mcp_app import Server

    return {count: Server(f"bench-catalog-{count}") for count in SIZES}


def fill(server: Any, count: int) -> float:
    """Replace ``server``'s tool rows by ``count`` new ones; the rebuild's seconds."""
    from mcp_app import rows
    from mcp_app.models import Tool

    Tool.objects.filter(server=server.name).delete()
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    Tool.objects.bulk_create(
        Tool(
            server=server.name,
            name=f"row-{i:05d}",
            title=f"Row tool {i}",
            description="Says hello from a Django template.",
            handler="template",
            config={"template": "Hello {{ name }}"},
            input_schema=schema,
            annotations={"readOnlyHint": True},
        )
        for i in range(count)
    )
    # bulk_create sends no signals: report the edit as such code must.
    rows.touch(server.name, ["tools"])
    start = time.perf_counter()
    catalog = server.catalog()
    _ = catalog.fingerprints  # what the first tools/list would build
    return time.perf_counter() - start


def build(server: Any, count: int) -> dict[str, Callable[[], dict[str, Any]]]:
    """The two requests for ``server``'s catalog of ``count`` rows, each checked once."""
    endpoint = server.endpoint

    def run(incoming: Any) -> Callable[[], dict[str, Any]]:
        def go() -> dict[str, Any]:
            return endpoint.handle(incoming).body  # type: ignore[no-any-return]

        return go

    first = run(_request(1, None))
    page = first()["result"]
    listed = len(page["tools"])
    cursor = None
    while "nextCursor" in page:
        cursor = page["nextCursor"]
        page = run(_request(2, cursor))()["result"]
        listed += len(page["tools"])
    total = len(server.catalog().tools)
    if listed != total or total != count:
        raise SystemExit(f"listed {listed} of {total} tools for {count} rows")
    last = run(_request(3, cursor))
    if last()["result"]["tools"][-1]["name"] != f"row-{count - 1:05d}":
        raise SystemExit("the last page does not end with the last row")
    return {"first": first, "last": last}


def main() -> int:
    args = setup(__doc__, iterations=200, warmup=50)
    import mcp_app.signals  # noqa: F401  (the app's ready() imports it too)

    medians: dict[tuple[int, str], float] = {}
    print(
        f"tools/list in-process benchmark: page size 100, {ROUNDS} rounds of {args.iterations} "
        "runs each, medians"
    )
    print(f"{'rows':>7}{'page':>7}{'median µs':>11}{'p10 µs':>9}{'p90 µs':>9}{'rebuild ms':>12}")
    print("-" * 55)
    pooled: dict[tuple[int, str], list[int]] = {}
    rebuilds: dict[int, list[float]] = {}
    by_size = servers()
    for _ in range(ROUNDS):
        cases: dict[str, Callable[[], dict[str, Any]]] = {}
        for count, server in by_size.items():
            rebuilds.setdefault(count, []).append(fill(server, count))
            for name, case in build(server, count).items():
                cases[f"{count} {name}"] = case
        for key, values in measure(cases, args.iterations, args.warmup).items():
            size, name = key.split()
            pooled.setdefault((int(size), name), []).extend(values)
    for count in SIZES:
        for name in ("first", "last"):
            values = sorted(pooled[count, name])
            medians[count, name] = statistics.median(values)
            rebuild = statistics.median(rebuilds[count]) if name == "first" else 0.0
            print(
                f"{count:>7}{name:>7}{medians[count, name] / 1000:>11.1f}"
                f"{values[len(values) // 10] / 1000:>9.1f}"
                f"{values[len(values) * 9 // 10] / 1000:>9.1f}"
                f"{rebuild * 1000:>12.1f}"
            )
    print("-" * 55)
    small, large = SIZES
    ratio = medians[large, "first"] / medians[small, "first"]
    verdict = "meets" if ratio <= TARGET_RATIO else "misses"
    print(
        f"first page, {large} / {small} rows = {ratio:.2f} ({verdict} the target <= {TARGET_RATIO})"
    )
    last = medians[large, "last"] / medians[small, "last"]
    print(f"last page,  {large} / {small} rows = {last:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
