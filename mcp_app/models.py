"""Database tables of the app: initialize-era sessions and the events kept for resuming streams."""

from __future__ import annotations

from django.db import models


class Session(models.Model):
    """An initialize-era session, found by every worker process through the database."""

    id = models.CharField(primary_key=True, max_length=64)
    server = models.CharField(max_length=100)
    protocol_version = models.CharField(max_length=20)
    client_info = models.JSONField(default=dict, blank=True)
    capabilities = models.JSONField(default=dict, blank=True)
    log_level = models.CharField(max_length=16, blank=True, default="")
    subscriptions = models.JSONField(default=list, blank=True)
    caller = models.CharField(max_length=100, default="anonymous")
    initialized = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(db_index=True)

    class Meta:
        verbose_name = "MCP session"

    def __str__(self) -> str:
        return f"{self.server} session {self.id[:8]}…"


class StreamEvent(models.Model):
    """One event sent on a session's stream, kept for a while so a client can resume."""

    session_id = models.CharField(max_length=64, db_index=True)
    stream = models.CharField(max_length=64)
    seq = models.PositiveIntegerField()
    message = models.JSONField()
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = "MCP stream event"
        constraints = [
            models.UniqueConstraint(fields=["stream", "seq"], name="mcp_app_event_stream_seq")
        ]

    def __str__(self) -> str:
        return f"{self.stream}-{self.seq}"


class DeliveryMessage(models.Model):
    """A message published through the database delivery backend, polled by every process."""

    id = models.BigAutoField(primary_key=True)
    channel = models.CharField(max_length=200)
    message = models.JSONField()
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = "MCP delivery message"

    def __str__(self) -> str:
        return f"{self.channel} #{self.id}"
