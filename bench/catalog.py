"""What a ``tools/list`` page costs with 100 and with 10,000 tool rows, in process (no HTTP).

Run with ``DJANGO_SETTINGS_MODULE=tests.settings python -m bench.catalog``. The migrations
run on ``tests.settings``' in-memory SQLite database (one thread, so one database), then for
each size the ``default`` server's tool rows are replaced by that many (each a ``template``
row with an input schema), and ``tools/list`` requests go through
``mcp_app.site.endpoint.handle(Incoming(...))`` with the server's page size of 100:

* ``first`` - the first page (the code tools, then rows);
* ``last``  - the last page, through its cursor (rows only).

The row generation is read once and then known to the process (as in a worker between
edits); the merged catalog, its wire dicts and its fingerprints are built once per
generation, before timing (the rebuild after the edit is reported on its own, the median of
the rounds). The sizes take turns over ``ROUNDS`` rounds, and the medians of all their
``--iterations`` runs are reported; the
product target is ``first(10,000) / first(100) <= 1.5``.
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
#: Rounds in which the sizes take turns; each size's samples of all rounds are pooled.
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


def fill(count: int) -> float:
    """Replace the default server's tool rows by ``count`` new ones; the rebuild's seconds."""
    from mcp_app import rows, site
    from mcp_app.models import Tool

    Tool.objects.filter(server="default").delete()
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    Tool.objects.bulk_create(
        Tool(
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
    rows.touch("default", ["tools"])
    start = time.perf_counter()
    catalog = site.catalog()
    _ = catalog.fingerprints  # what the first tools/list would build
    return time.perf_counter() - start


def build(count: int) -> dict[str, Callable[[], dict[str, Any]]]:
    """The two requests for a catalog of ``count`` rows, each checked once."""
    from mcp_app import site

    endpoint = site.endpoint

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
    total = len(site.catalog().tools)
    if listed != total or total < count:
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
    # The sizes take turns, round after round, so a burst of other work on the machine falls
    # on both rather than on whichever was being measured.
    pooled: dict[tuple[int, str], list[int]] = {}
    rebuilds: dict[int, list[float]] = {}
    for round_ in range(ROUNDS):
        for count in SIZES if round_ % 2 == 0 else SIZES[::-1]:
            rebuilds.setdefault(count, []).append(fill(count))
            samples = measure(build(count), args.iterations, args.warmup)
            for name, values in samples.items():
                pooled.setdefault((count, name), []).extend(values)
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
