"""The audit trail: one record per tool call, resource read and prompt get."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
    """Keep ``entry``; the default keeps nothing."""
