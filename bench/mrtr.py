"""What a multi round-trip retry costs next to a plain tool call, in process (no HTTP).

Run with ``DJANGO_SETTINGS_MODULE=tests.settings python -m bench.mrtr``. Four requests go
through ``mcp_app.site.endpoint.handle(Incoming(...))``:

* ``plain``  - ``tools/call`` of ``add`` (input and output schema validation, an audit row);
* ``ask``    - the first round of ``greet``: the handler asks for a name, the state is signed;
* ``retry``  - the retry of ``greet`` with ``inputResponses`` and the signed ``requestState``:
  the state is verified, the handler runs and completes;
* ``unsigned`` - the same answer without ``requestState`` (for scale: the retry's cost less
  verifying the state).

Each iteration runs each once, in an order that rotates between iterations, so drift in
the machine's speed falls on all of them alike. Medians are reported; the product target is
``retry / plain <= 1.2``.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

from bench.inprocess import measure, setup

TARGET_RATIO = 1.2
MODERN = "2026-07-28"


def _request(request_id: int, name: str, params: dict[str, Any], caps: dict[str, Any]) -> Any:
    from mcp_app.transport.http import Incoming

    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": name,
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": caps,
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            },
        },
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    return Incoming(method="POST", headers=headers, body=json.dumps(body).encode(), host="bench")


def build() -> dict[str, Callable[[], dict[str, Any]]]:
    """The requests, each checked once to answer what it should."""
    from mcp_app import site

    endpoint = site.endpoint
    caps: dict[str, Any] = {"elicitation": {}}
    plain = _request(1, "add", {"arguments": {"numbers": [1, 2, 3.5]}}, caps)
    ask = _request(2, "greet", {"arguments": {}}, caps)

    def run(incoming: Any) -> Callable[[], dict[str, Any]]:
        def go() -> dict[str, Any]:
            reply = endpoint.handle(incoming)
            return reply.body  # type: ignore[no-any-return]

        return go

    asked = run(ask)()
    if asked["result"]["resultType"] != "input_required":
        raise SystemExit(f"greet did not ask for input: {asked}")
    retry = _request(
        3,
        "greet",
        {
            "arguments": {},
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
            "requestState": asked["result"]["requestState"],
        },
        caps,
    )
    unsigned = _request(
        4,
        "greet",
        {
            "arguments": {},
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
        },
        caps,
    )
    cases = {
        "plain": run(plain),
        "ask": run(ask),
        "retry": run(retry),
        "unsigned": run(unsigned),
    }
    expected = {
        "plain": lambda r: r["result"]["structuredContent"] == {"sum": 6.5},
        "ask": lambda r: r["result"]["resultType"] == "input_required",
        "retry": lambda r: r["result"]["content"][0]["text"] == "Hello, Ada!",
        "unsigned": lambda r: r["result"]["content"][0]["text"] == "Hello, Ada!",
    }
    for name, case in cases.items():
        answer = case()
        if "result" not in answer or not expected[name](answer):
            raise SystemExit(f"{name} answered unexpectedly: {answer}")
    return cases


def report(samples: dict[str, list[int]], iterations: int) -> float:
    medians = {name: statistics.median(values) for name, values in samples.items()}
    labels = {
        "plain": "tools/call add (plain)",
        "ask": "greet round 1 (ask, sign)",
        "retry": "greet retry (verify, complete)",
        "unsigned": "greet answered, no state",
    }
    base = medians["plain"]
    print(f"MRTR in-process benchmark: {iterations} iterations each, medians, rotating order")
    print(f"{'case':<32}{'median µs':>11}{'p10 µs':>9}{'p90 µs':>9}{'vs plain':>10}")
    print("-" * 71)
    for name in ("plain", "ask", "retry", "unsigned"):
        values = sorted(samples[name])
        p10 = values[len(values) // 10] / 1000
        p90 = values[len(values) * 9 // 10] / 1000
        print(
            f"{labels[name]:<32}{medians[name] / 1000:>11.1f}{p10:>9.1f}{p90:>9.1f}"
            f"{medians[name] / base:>10.2f}"
        )
    ratio = medians["retry"] / base
    verdict = "meets" if ratio <= TARGET_RATIO else "misses"
    print("-" * 71)
    print(f"retry / plain = {ratio:.2f} ({verdict} the target of <= {TARGET_RATIO})")
    verify_cost = (medians["retry"] - medians["unsigned"]) / 1000
    print(f"requestState verification adds about {verify_cost:.1f} µs to the retry")
    return ratio


def main() -> int:
    args = setup(__doc__, iterations=2000, warmup=200)
    cases = build()
    samples = measure(cases, args.iterations, args.warmup)
    report(samples, args.iterations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
