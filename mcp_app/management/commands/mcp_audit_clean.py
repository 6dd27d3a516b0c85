"""``manage.py mcp_audit_clean``: delete audit rows (``ToolCall``) older than the retention."""

# The retention is MCP_APP["AUDIT_RETENTION_DAYS"] (30 days by default; None keeps rows
# forever), or --days. Run it periodically (cron, a scheduler): it deletes in batches, so it is
# safe to run while the site serves.

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import audit


class Command(BaseCommand):
    help = "Delete MCP audit rows (tool calls) older than AUDIT_RETENTION_DAYS or --days."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help="Keep this many days instead of AUDIT_RETENTION_DAYS (0 deletes every row "
            "created before now).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days: int | None = options["days"]
        if days is not None and days < 0:
            raise CommandError("--days must not be negative")
        keep = audit.retention_days() if days is None else days
        if keep is None:
            self.stdout.write("AUDIT_RETENTION_DAYS is None: audit rows are kept forever.")
            return
        # Rows this process has queued (the command called from code that served calls) are
        # written first, or --days 0 would miss them.
        audit.flush()
        removed = audit.clean(keep)
        self.stdout.write(f"Removed {removed} audit row(s) older than {keep} day(s).")
