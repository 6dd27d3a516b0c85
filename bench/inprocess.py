"""What the in-process benchmarks share: the command line, a migrated database, the timing loop."""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable
from typing import Any


def setup(doc: str | None, iterations: int, warmup: int) -> argparse.Namespace:
    """Parse ``-n``/``-w``, set Django up on ``tests.settings`` with the product's ``MCP_APP``
    defaults, and migrate its database.

    The catalog reads its row generation (once, then when told of an edit or after
    ``RECHECK_SECONDS``), so the in-memory database needs the app's tables before anything
    is measured.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("-n", "--iterations", type=int, default=iterations)
    parser.add_argument("-w", "--warmup", type=int, default=warmup)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from mcp_app.conf import conf

    # The product's defaults, not the test suite's (which writes audit rows in the request
    # and runs every attempt in a transaction, for its own assertions).
    settings.MCP_APP = {}
    conf.reload()

    call_command("migrate", verbosity=0, interactive=False)
    return args


def measure(
    cases: dict[str, Callable[[], Any]], iterations: int, warmup: int
) -> dict[str, list[int]]:
    """Nanoseconds per call of each case, the cases taking turns in a rotating order.

    The collector runs between iterations, never inside a timed call.
    """
    names = list(cases)
    for _ in range(warmup):
        for name in names:
            cases[name]()
    samples: dict[str, list[int]] = {name: [] for name in names}
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()
    try:
        for i in range(iterations):
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                case = cases[name]
                start = clock()
                case()
                samples[name].append(clock() - start)
            if i % 256 == 255:
                gc.collect()
    finally:
        gc.enable()
    return samples
