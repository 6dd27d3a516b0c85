"""What the in-process benchmarks share: their command line and a migrated test database."""

from __future__ import annotations

import argparse
import os


def setup(doc: str | None, iterations: int, warmup: int) -> argparse.Namespace:
    """Parse ``-n``/``-w``, set Django up on ``tests.settings`` and migrate its database.

    The catalog reads its row generation on every call, so the in-memory database needs
    the app's tables before anything is measured.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("-n", "--iterations", type=int, default=iterations)
    parser.add_argument("-w", "--warmup", type=int, default=warmup)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    return args
