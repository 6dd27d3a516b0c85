"""``manage.py mcp_clean``: remove expired sessions and tasks, and stream events kept too long.

Sessions idle longer than ``MCP_APP["SESSION_IDLE_SECONDS"]`` are already refused (404); this
deletes them from the session store, with their events. Events older than
``MCP_APP["EVENT_RETENTION_SECONDS"]`` can no longer be replayed; they go too, and so do tasks
past their ``TASK_TTL_SECONDS``. Run it periodically (cron, a scheduler); it is safe to run
while the site serves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ... import events, sessions, tasks


class Command(BaseCommand):
    help = (
        "Remove expired MCP sessions (SESSION_IDLE_SECONDS) and tasks (TASK_TTL_SECONDS), and "
        "stream events older than EVENT_RETENTION_SECONDS."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        failures: list[str] = []

        def removed(what: str, clean: Callable[[], int]) -> str:
            # Each kind on its own: one that fails leaves the others cleaned.
            try:
                return str(clean())
            except Exception as exc:  # the database, or a site's own session store
                failures.append(f"Could not remove {what}: {exc}")
                return "no"

        removed_sessions = removed("expired sessions", lambda: sessions.store().clean())
        removed_events = removed("old stream events", events.clean_events)
        removed_tasks = removed("expired tasks", tasks.clean)
        self.stdout.write(
            f"Removed {removed_sessions} expired session(s), "
            f"{removed_events} old stream event(s) and {removed_tasks} expired task(s)."
        )
        if failures:
            raise CommandError("; ".join(failures))
