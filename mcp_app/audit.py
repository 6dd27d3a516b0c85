"""The audit trail: one ``ToolCall`` row per tool call, resource read and prompt get."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import router, transaction
from django.utils import timezone

from .conf import conf
from .state import caller_id

if TYPE_CHECKING:
    from .models import ToolCall

logger = logging.getLogger("mcp_app")

#: Arguments larger than this (bytes of JSON) are not kept, only their size.
ARGUMENTS_MAX_BYTES = 64 * 1024
#: Longest error text kept.
ERROR_MAX_CHARS = 4000
#: Rows deleted per statement by ``clean``, so no single delete holds locks for long.
CLEAN_BATCH = 5000


def setting(name: str) -> Any:
    """A setting of this module, from ``MCP_APP`` or its default."""
    return getattr(conf, name)


@dataclass
class Record:
    """What the transport knows of one finished call."""

    server: str
    method: str
    name: str
    era: str
    user: Any
    arguments: Any
    duration_ms: float
    outcome: str  # "complete", "error" (an isError result), "input_required", "failed"
    error: str = ""
    rounds: int = 0


def record(entry: Record) -> None:
    """Write ``entry`` as a ``ToolCall`` row unless ``AUDIT`` is off.

    Runs in the request's worker thread, after the handler's transaction ended. It never
    raises: a row that cannot be written is logged, and the call is answered all the same.
    """
    if not setting("AUDIT"):
        return
    try:
        write(entry)
    except Exception:
        logger.exception("Could not write the audit record of %s %r", entry.method, entry.name)


def write(entry: Record) -> ToolCall:
    """Write ``entry`` in its own transaction (a savepoint inside an open one).

    Raises:
        DatabaseError: the row could not be written.
    """
    from .models import ToolCall

    alias = router.db_for_write(ToolCall)
    row = ToolCall(
        user=_stored_user(entry.user),
        caller_id=caller_id(entry.user)[:100],
        server=entry.server[:100],
        method=entry.method[:32],
        name=entry.name[:512],
        era=entry.era[:16],
        duration_ms=round(float(entry.duration_ms), 3),
        outcome=entry.outcome[:16],
        error=entry.error[:ERROR_MAX_CHARS],
        rounds=max(0, int(entry.rounds)),
        arguments=_kept_arguments(entry.arguments),
    )
    # A savepoint: a failed insert must not break a transaction the caller has open.
    with transaction.atomic(using=alias):
        row.save(using=alias)
    return row


def _stored_user(user: Any) -> Any:
    """The user as a foreign key, if it is a row of the user model (not a JWT ``TokenUser``)."""
    from django.contrib.auth import get_user_model

    if not getattr(user, "is_authenticated", False):
        return None
    if isinstance(user, get_user_model()) and user.pk is not None:
        return user
    return None


def _kept_arguments(arguments: Any) -> Any:
    if not setting("AUDIT_ARGUMENTS") or arguments is None:
        return None
    size = len(json.dumps(arguments, separators=(",", ":"), default=str).encode())
    if size > ARGUMENTS_MAX_BYTES:
        return {"$omitted": f"{size} bytes of arguments, over the audit limit"}
    return arguments


def retention_days() -> int | None:
    """``AUDIT_RETENTION_DAYS`` as a number of days, or ``None`` to keep rows forever."""
    value = setting("AUDIT_RETENTION_DAYS")
    return None if value is None else int(value)


def clean(days: int | None = None) -> int:
    """Delete the rows older than ``days`` (default ``AUDIT_RETENTION_DAYS``); how many went.

    Deletes in batches of ``CLEAN_BATCH``. With no retention set nothing is deleted.

    Raises:
        ValueError: ``days`` is negative.
    """
    from .models import ToolCall

    keep = retention_days() if days is None else days
    if keep is None:
        return 0
    if keep < 0:
        raise ValueError("days must not be negative")
    alias = router.db_for_write(ToolCall)
    cutoff = timezone.now() - timedelta(days=keep)
    old = ToolCall.objects.using(alias).filter(created__lt=cutoff)
    removed = 0
    while True:
        batch = list(old.order_by("pk").values_list("pk", flat=True)[:CLEAN_BATCH])
        if not batch:
            return removed
        deleted, _ = ToolCall.objects.using(alias).filter(pk__in=batch).delete()
        removed += deleted
