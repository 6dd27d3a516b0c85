"""``manage.py mcp_clean``: expired sessions and old stream events go, the rest stays."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from mcp_app.models import Session, StreamEvent, Task
from mcp_app.sessions import DatabaseSessionStore, SessionData

pytestmark = pytest.mark.django_db

LIVE, EXPIRED = "l" * 43, "e" * 43


def run() -> str:
    out = io.StringIO()
    call_command("mcp_clean", stdout=out)
    return out.getvalue()


def add_session(session_id: str, idle_seconds: float) -> None:
    DatabaseSessionStore().create(SessionData(session_id, "default", "2025-11-25"))
    Session.objects.filter(pk=session_id).update(
        last_seen=timezone.now() - timedelta(seconds=idle_seconds)
    )


def add_event(session_id: str, stream: str, age_seconds: float) -> None:
    event = StreamEvent.objects.create(session_id=session_id, stream=stream, seq=1, message={})
    StreamEvent.objects.filter(pk=event.pk).update(
        created=timezone.now() - timedelta(seconds=age_seconds)
    )


@override_settings(MCP_APP={"SESSION_IDLE_SECONDS": 60, "EVENT_RETENTION_SECONDS": 600})
def test_mcp_clean_removes_expired_sessions_and_old_events_and_says_how_many() -> None:
    add_session(LIVE, 10)
    add_session(EXPIRED, 61)
    add_event(LIVE, "fresh", 10)
    add_event(LIVE, "stale", 601)
    add_event(EXPIRED, "of-expired", 10)
    output = run()
    assert output == "Removed 1 expired session(s), 1 old stream event(s) and 0 expired task(s).\n"
    assert list(Session.objects.values_list("pk", flat=True)) == [LIVE]
    assert list(StreamEvent.objects.values_list("stream", flat=True)) == ["fresh"]


def test_mcp_clean_with_nothing_to_do() -> None:
    add_session(LIVE, 0)
    assert run() == "Removed 0 expired session(s), 0 old stream event(s) and 0 expired task(s).\n"
    assert Session.objects.count() == 1


@override_settings(
    CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
    MCP_APP={"SESSION_STORE": "mcp_app.sessions.CacheSessionStore", "EVENT_RETENTION_SECONDS": 60},
)
def test_mcp_clean_leaves_cached_sessions_to_the_cache_but_cleans_events() -> None:
    add_event(LIVE, "stale", 61)
    assert run() == "Removed 0 expired session(s), 1 old stream event(s) and 0 expired task(s).\n"
    assert not StreamEvent.objects.exists()


@pytest.mark.parametrize("kind", ["database", "cache"])
@override_settings(MCP_APP={"SESSION_IDLE_SECONDS": 60, "EVENT_RETENTION_SECONDS": 600})
def test_a_kind_that_cannot_be_cleaned_leaves_the_others_cleaned_and_fails_the_command(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    from django.core.management.base import CommandError
    from django.db import OperationalError

    def refused(self: DatabaseSessionStore) -> int:
        # The database's own error, or a site's session store's (a cache it cannot reach).
        if kind == "database":
            raise OperationalError("too many SQL variables")
        raise ConnectionError("too many SQL variables, says the cache")

    monkeypatch.setattr(DatabaseSessionStore, "clean", refused)
    add_session(EXPIRED, 61)
    add_event(LIVE, "stale", 601)
    out = io.StringIO()
    with pytest.raises(CommandError, match="Could not remove expired sessions: too many SQL"):
        call_command("mcp_clean", stdout=out)
    assert out.getvalue() == (
        "Removed no expired session(s), 1 old stream event(s) and 0 expired task(s).\n"
    )
    assert not StreamEvent.objects.exists()


def test_tasks_past_their_time_to_live_go() -> None:
    now = timezone.now()
    for task_id, expires in (
        ("gone", now - timedelta(seconds=1)),
        ("kept", now + timedelta(hours=1)),
    ):
        Task.objects.create(
            id=task_id, server="default", tool="t", caller="anonymous", expires=expires
        )
    assert run() == "Removed 0 expired session(s), 0 old stream event(s) and 1 expired task(s).\n"
    assert list(Task.objects.values_list("pk", flat=True)) == ["kept"]
