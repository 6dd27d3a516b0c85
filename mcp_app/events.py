"""The event log of resumable streams: events kept for a while, and published as they happen."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from .conf import conf
from .delivery import backend

if TYPE_CHECKING:
    from .server import Server

JSON = dict[str, Any]


def parse_event_id(event_id: str) -> tuple[str, int] | None:
    """``(stream, seq)`` of an event id, or ``None`` if it is not one of ours."""
    stream, _, seq = event_id.strip().rpartition("-")
    if not stream or not seq.isdigit():
        return None
    return stream, int(seq)


class StreamLog:
    """One stream's events: numbered, stored, and published on the stream's channel."""

    def __init__(self, server: Server, session_id: str) -> None:
        self.server = server
        self.session_id = session_id
        self.stream = secrets.token_hex(8)
        self.seq = 0

    @property
    def channel(self) -> str:
        return self.server.channel(f"stream:{self.stream}")

    def priming_id(self) -> str:
        return f"{self.stream}-0"

    def append(self, message: JSON) -> str:
        """Record ``message`` and return its event id."""
        from .models import StreamEvent

        self.seq += 1
        StreamEvent.objects.create(
            session_id=self.session_id, stream=self.stream, seq=self.seq, message=message
        )
        event_id = f"{self.stream}-{self.seq}"
        backend().publish(self.channel, {"seq": self.seq, "message": message})
        return event_id


def events_after(session_id: str, stream: str, seq: int) -> list[tuple[int, JSON]] | None:
    """The stream's events after ``seq``; ``None`` if the stream is not this session's."""
    from .models import StreamEvent

    rows = StreamEvent.objects.filter(session_id=session_id, stream=stream)
    if seq > 0 and not rows.filter(seq__lte=seq).exists():
        return None
    return [(row.seq, row.message) for row in rows.filter(seq__gt=seq).order_by("seq")]


def clean_events() -> int:
    """Remove events older than ``EVENT_RETENTION_SECONDS``; how many went."""
    from .models import StreamEvent

    cutoff = timezone.now() - timedelta(seconds=conf.EVENT_RETENTION_SECONDS)
    return StreamEvent.objects.filter(created__lt=cutoff).delete()[0]
