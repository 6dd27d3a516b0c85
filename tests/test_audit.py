"""The audit trail: a ``ToolCall`` row per call in both eras, its writer, admin and retention."""

from __future__ import annotations

import functools
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, connections, router
from django.db.backends.signals import connection_created
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import path
from django.utils import timezone
from rest_framework.authtoken.models import Token

from mcp_app import Server, audit, elicit, input_required, tool_error
from mcp_app.checks import check_settings
from mcp_app.models import ToolCall
from mcp_app.testing import MCPClient, MCPClientError
from tests.conftest import run_site_script

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

TOKEN = "rest_framework.authentication.TokenAuthentication"
ANSWERS = {"elicitation/create": lambda params: {"action": "accept", "content": {"name": "Ada"}}}

audited = Server("audited", rows=False)


@audited.tool()
def add(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"sum": sum(arguments.get("numbers", []))}


@audited.tool()
def refuse(arguments: dict[str, Any], context: Any) -> Any:
    Group.objects.create(name="made-by-a-failed-call")
    return tool_error("No, thank you")


@audited.tool()
def greet(arguments: dict[str, Any], context: Any) -> Any:
    answer = context.input_response("name")
    if not isinstance(answer, dict):
        form = {"type": "object", "properties": {"name": {"type": "string"}}}
        return input_required({"name": elicit("Name?", form)})
    return f"Hello, {answer['content']['name']}"


@audited.resource("memo://note", name="note", mime_type="text/plain")
def note(context: Any) -> str:
    return "a note"


@audited.prompt(name="hello", arguments=["who"])
def hello(arguments: dict[str, str], context: Any) -> str:
    return f"Say hello to {arguments.get('who', 'everyone')}"


urlpatterns = [path("admin/", admin.site.urls), path("audited/mcp", audited.urls)]


@pytest.fixture
def mcp(settings: Any) -> Any:
    def configure(**values: Any) -> None:
        settings.MCP_APP = {**settings.MCP_APP, **values}

    return configure


def user(name: str = "ada", **fields: Any) -> Any:
    return get_user_model().objects.create_user(name, f"{name}@example.com", None, **fields)


def token_client(who: Any, **kwargs: Any) -> MCPClient:
    key = Token.objects.create(user=who).key
    return MCPClient(audited, headers={"Authorization": f"Token {key}"}, **kwargs)


@pytest.fixture(autouse=True)
def empty_queue() -> Iterator[None]:
    """No test sees the rows another left queued (the queue is the process's)."""
    discard()
    yield
    discard()


def discard() -> None:
    queue = audit._current()
    with queue.lock:
        queue.rows.clear()
        queue.dropped = 0
        queue.retry_at = 0.0


@pytest.fixture(params=["at once", "deferred"])
def writes(request: pytest.FixtureRequest, mcp: Any) -> str:
    """Rows written in the request's thread, or queued (and written by ``audit.flush()``)."""
    if request.param == "deferred":
        mcp(AUDIT_FLUSH_SECONDS=60)  # the writer thread never gets to them on its own
    return str(request.param)


both_ways = pytest.mark.usefixtures("writes")


def rows() -> list[ToolCall]:
    assert audit.flush()
    return list(ToolCall.objects.order_by("id"))


def only_row() -> ToolCall:
    found = rows()
    assert len(found) == 1, found
    return found[0]


def entry(name: str = "add", user: Any = None) -> audit.Record:
    return audit.Record("audited", "tools/call", name, "modern", user, None, 1.0, "complete")


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# -- what is written ---------------------------------------------------------------------------


@both_ways
def test_a_call_by_a_token_user_is_one_row(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    ada = user()
    token_client(ada).call_tool("add", {"numbers": [1, 2]})
    row = only_row()
    assert (row.user, row.caller_id) == (ada, f"user:{ada.pk}")
    assert (row.server, row.method, row.name, row.era) == ("audited", "tools/call", "add", "modern")
    assert (row.outcome, row.error, row.rounds, row.arguments) == ("complete", "", 0, None)
    assert 0 <= row.duration_ms < 10_000
    assert timezone.now() - row.created < timedelta(minutes=1)
    assert str(row) == f"tools/call add by user:{ada.pk} (complete)"


@both_ways
def test_lists_are_not_audited() -> None:
    client = MCPClient(audited)
    client.list_tools()
    client.list_prompts()
    assert rows() == []


@both_ways
def test_arguments_are_kept_only_when_asked(mcp: Any, monkeypatch: Any) -> None:
    MCPClient(audited).call_tool("add", {"numbers": [1]})
    assert only_row().arguments is None
    ToolCall.objects.all().delete()
    mcp(AUDIT_ARGUMENTS=True)
    MCPClient(audited).call_tool("add", {"numbers": [1, 2]})
    assert only_row().arguments == {"numbers": [1, 2]}
    ToolCall.objects.all().delete()
    monkeypatch.setattr(audit, "ARGUMENTS_MAX_BYTES", 10)
    MCPClient(audited).call_tool("add", {"numbers": [1, 2, 3, 4, 5, 6]})
    assert only_row().arguments == {"$omitted": "25 bytes of arguments, over the audit limit"}


@both_ways
def test_outcomes_and_errors() -> None:
    client = MCPClient(audited)
    client.call_tool("refuse")
    with pytest.raises(MCPClientError):
        client.call_tool("no-such-tool")
    with pytest.raises(MCPClientError):
        client.call_tool("greet")  # no elicitation capability: a JSON-RPC error
    by_name = {row.name: row for row in rows()}
    assert (by_name["refuse"].outcome, by_name["refuse"].error) == ("error", "No, thank you")
    assert by_name["no-such-tool"].outcome == "failed"
    assert by_name["no-such-tool"].error == "Unknown tool: no-such-tool"
    assert by_name["greet"].outcome == "failed"
    assert all(row.caller_id == "anonymous" and row.user is None for row in by_name.values())


@both_ways
def test_nul_characters_a_client_sent_are_kept(mcp: Any) -> None:
    # PostgreSQL's text and jsonb hold no NUL: the row is written all the same, on any
    # database, its arguments exactly and its name and error with U+FFFD in their place.
    mcp(AUDIT_ARGUMENTS=True)
    client = MCPClient(audited)
    arguments = {"numbers": [1], "no\x00te": ["a\x00b", {"k": "\x00"}]}
    client.call_tool("add", arguments)
    with pytest.raises(MCPClientError):
        client.call_tool("no\x00such")
    added, unknown = rows()
    assert added.arguments == arguments
    assert (unknown.name, unknown.outcome) == ("no\ufffdsuch", "failed")
    assert unknown.error == "Unknown tool: no\ufffdsuch"


@both_ways
def test_an_input_dialogue_is_a_row_per_round() -> None:
    MCPClient(audited, handlers=ANSWERS).call_tool("greet")
    first, second = rows()
    assert (first.outcome, first.rounds) == ("input_required", 0)
    assert (second.outcome, second.rounds) == ("complete", 1)


@both_ways
def test_reads_and_prompts_are_audited_by_uri_and_name() -> None:
    client = MCPClient(audited)
    client.read_resource("memo://note")
    client.get_prompt("hello", {"who": "Ada"})
    assert sorted((row.method, row.name) for row in rows()) == [
        ("prompts/get", "hello"),
        ("resources/read", "memo://note"),
    ]


@both_ways
def test_the_initialize_era_is_audited_with_its_rounds(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    ada = user()
    with token_client(ada, versions=["2025-11-25"], handlers=ANSWERS) as client:
        client.call_tool("greet")
    row = only_row()
    assert (row.era, row.outcome, row.rounds, row.user) == ("legacy", "complete", 1, ada)


@both_ways
def test_the_row_outlives_the_calls_rolled_back_transaction() -> None:
    MCPClient(audited).call_tool("refuse")
    assert not Group.objects.filter(name="made-by-a-failed-call").exists()
    assert only_row().outcome == "error"


@both_ways
def test_audit_off_writes_nothing(mcp: Any) -> None:
    mcp(AUDIT=False)
    MCPClient(audited).call_tool("add", {"numbers": [1]})
    assert rows() == []


def test_a_failed_write_is_logged_and_the_call_answered(
    monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: ToolCall, *args: Any, **kwargs: Any) -> None:
        raise DatabaseError("disk full")

    monkeypatch.setattr(ToolCall, "save", broken)
    with caplog.at_level(logging.ERROR, logger="mcp_app"):
        result = MCPClient(audited).call_tool("add", {"numbers": [2, 3]})
    assert result["structuredContent"] == {"sum": 5}
    assert "Could not write the audit record of tools/call 'add'" in caplog.text
    assert "disk full" in caplog.text


@both_ways
def test_a_deleted_user_leaves_its_caller_id(mcp: Any) -> None:
    # Deferred, the user is gone before its row is written: the row is kept all the same.
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    ada = user()
    token_client(ada).call_tool("add", {"numbers": [1]})
    pk = ada.pk
    ada.delete()
    row = only_row()
    assert (row.user, row.caller_id) == (None, f"user:{pk}")


class TokenUser:
    """A user that is not a row, as JWT libraries build from a token's claims."""

    is_authenticated = True
    pk = 42


@both_ways
def test_a_user_that_is_not_a_row_is_kept_by_id_only() -> None:
    entry = audit.Record(
        server="s" * 300,
        method="tools/call",
        name="n" * 1000,
        era="modern",
        user=TokenUser(),
        arguments=None,
        duration_ms=1.23456,
        outcome="complete",
        error="e" * 10_000,
        rounds=-1,
    )
    audit.record(entry)
    row = only_row()
    assert (row.user, row.caller_id, row.duration_ms, row.rounds) == (None, "user:42", 1.235, 0)
    assert (len(row.server), len(row.name), len(row.error)) == (100, 512, audit.ERROR_MAX_CHARS)


# -- the admin ---------------------------------------------------------------------------------


@pytest.fixture
def staff_client() -> Client:
    root = get_user_model().objects.create_superuser("admin", "admin@example.com", None)
    client = Client()
    client.force_login(root)
    return client


@both_ways
def test_the_admin_lists_and_filters_read_only(staff_client: Client, mcp: Any) -> None:
    mcp(AUDIT_ARGUMENTS=True)
    client = MCPClient(audited)
    client.call_tool("add", {"numbers": [1]})
    client.call_tool("refuse")
    assert audit.flush()
    changelist = staff_client.get("/admin/mcp_app/toolcall/")
    assert changelist.status_code == 200
    for facet in ("server", "method", "outcome", "era", "created"):
        assert f"By {facet}".encode() in changelist.content
    errors = staff_client.get("/admin/mcp_app/toolcall/?outcome=error")
    assert errors.context["cl"].result_count == 1
    row = ToolCall.objects.get(name="add")
    detail = staff_client.get(f"/admin/mcp_app/toolcall/{row.pk}/change/")
    assert detail.status_code == 200
    assert b"&quot;numbers&quot;" in detail.content
    assert b'name="_save"' not in detail.content
    assert staff_client.get("/admin/mcp_app/toolcall/add/").status_code == 403
    assert staff_client.get(f"/admin/mcp_app/toolcall/{row.pk}/delete/").status_code == 403
    staff_client.post(f"/admin/mcp_app/toolcall/{row.pk}/change/", {"name": "changed"})
    assert ToolCall.objects.get(pk=row.pk).name == "add"


def test_the_admin_says_when_arguments_were_not_kept(staff_client: Client) -> None:
    MCPClient(audited).call_tool("add", {"numbers": [1]})
    detail = staff_client.get(f"/admin/mcp_app/toolcall/{only_row().pk}/change/")
    assert b"Not kept" in detail.content


# -- retention ---------------------------------------------------------------------------------


def aged(days: float, count: int = 1) -> None:
    for _ in range(count):
        audit.write(
            audit.Record("audited", "tools/call", "add", "modern", None, None, 1.0, "complete")
        )
    ToolCall.objects.filter(created__gt=timezone.now() - timedelta(seconds=30)).update(
        created=timezone.now() - timedelta(days=days)
    )


def run_clean(*args: str) -> str:
    out = StringIO()
    call_command("mcp_audit_clean", *args, stdout=out)
    return out.getvalue()


def test_the_command_deletes_rows_past_the_retention(mcp: Any) -> None:
    aged(45)
    aged(10)
    assert run_clean() == "Removed 1 audit row(s) older than 30 day(s).\n"
    assert ToolCall.objects.count() == 1
    mcp(AUDIT_RETENTION_DAYS=7)
    assert run_clean() == "Removed 1 audit row(s) older than 7 day(s).\n"
    assert not ToolCall.objects.exists()


def test_days_overrides_the_setting_and_none_keeps_everything(mcp: Any) -> None:
    aged(3)
    mcp(AUDIT_RETENTION_DAYS=None)
    assert run_clean() == "AUDIT_RETENTION_DAYS is None: audit rows are kept forever.\n"
    assert audit.clean() == 0
    assert run_clean("--days", "2") == "Removed 1 audit row(s) older than 2 day(s).\n"
    with pytest.raises(CommandError, match="negative"):
        run_clean("--days", "-1")
    with pytest.raises(ValueError, match="negative"):
        audit.clean(-1)


@pytest.mark.parametrize("days", ["1000000", str(10**12)])
def test_more_days_than_dates_go_back_keeps_every_row(days: str) -> None:
    aged(3)
    assert run_clean("--days", days) == f"Removed 0 audit row(s) older than {days} day(s).\n"
    assert ToolCall.objects.count() == 1


def test_clean_deletes_in_batches(monkeypatch: Any) -> None:
    monkeypatch.setattr(audit, "CLEAN_BATCH", 2)
    aged(40, count=5)
    aged(1, count=2)
    assert audit.clean() == 5
    assert ToolCall.objects.count() == 2


def test_clean_binds_at_most_999_values_a_statement() -> None:
    # SQLite before 3.32, which Django still supports, refuses a statement binding more.
    old = timezone.now() - timedelta(days=40)
    ToolCall.objects.bulk_create(
        ToolCall(
            server="audited",
            method="tools/call",
            name="add",
            era="modern",
            duration_ms=1.0,
            outcome="complete",
            created=old,
        )
        for _ in range(1200)
    )
    bound: list[int] = []

    def counting(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        bound.append(len(params or ()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(counting):
        assert audit.clean() == 1200
    assert ToolCall.objects.count() == 0
    assert 0 < max(bound) <= 999


# -- the writer: rows queued in the request's thread, written in batches ----------------------


@pytest.fixture
def deferred(mcp: Any) -> Callable[..., None]:
    """Queue rows, written after ``seconds`` or when ``batch`` are queued."""

    def configure(seconds: float = 60, batch: int = 500, **values: Any) -> None:
        mcp(AUDIT_FLUSH_SECONDS=seconds, AUDIT_BATCH_SIZE=batch, **values)

    return configure


def test_the_writer_inserts_many_rows_a_statement(deferred: Any) -> None:
    deferred(batch=1000)
    for number in range(250):
        audit.record(entry(f"tool-{number}"))
    with CaptureQueriesContext(connection) as queries:
        assert audit.flush()
    inserts = [q["sql"] for q in queries if q["sql"].startswith("INSERT")]
    fields = ["x"] * len(audit.COLUMNS)
    size = min(100, connection.ops.bulk_batch_size(fields, [None] * 250))
    assert size > 1
    assert len(inserts) == -(-250 // size)
    assert list(ToolCall.objects.order_by("pk").values_list("name", flat=True)) == [
        f"tool-{number}" for number in range(250)
    ]


def test_queued_rows_are_left_alone_by_the_garbage_collector(deferred: Any) -> None:
    import gc

    deferred()
    ada = user("ada")
    for number in range(3):
        audit.record(entry(f"tool-{number}", user=ada))
    # A tuple is let go of once what it holds is: the rows' values on one pass, the queue's
    # entries around them on the next.
    gc.collect()
    gc.collect()
    queued = list(audit._current().rows)
    assert len(queued) == 3
    # Plain values only (the user's key, not the user): nothing for a full pass to walk.
    assert not any(gc.is_tracked(row) for row in queued)
    assert audit.flush()


def test_rows_are_written_by_flush_in_call_order_with_their_call_times(deferred: Any) -> None:
    deferred()
    called = []
    for number in range(50):
        before = timezone.now()
        audit.record(entry(f"tool-{number}"))
        called.append((before, timezone.now()))
    time.sleep(0.05)
    flushed = timezone.now()
    assert ToolCall.objects.count() == 0
    assert audit.pending() == 50
    written = rows()
    assert [row.name for row in written] == [f"tool-{number}" for number in range(50)]
    for row, (before, after) in zip(written, called, strict=True):
        assert before <= row.created <= after < flushed
    assert audit.pending() == 0
    assert audit.flush()  # nothing left: nothing written twice
    assert ToolCall.objects.count() == 50
    # Arguments not kept are SQL NULL, as the ORM writes None, not JSON null.
    assert ToolCall.objects.filter(arguments__isnull=True, user__isnull=True).count() == 50


def test_the_writer_waits_for_the_interval_when_the_batch_is_not_full(deferred: Any) -> None:
    interval = 2.0  # far longer than the short look below may take on a busy machine
    deferred(seconds=interval)
    start = time.monotonic()
    for number in range(3):
        audit.record(entry(f"tool-{number}"))
    time.sleep(0.25)
    assert ToolCall.objects.count() == 0
    assert audit.pending() == 3
    wait_until(lambda: audit.pending() == 0, timeout=interval + 10)
    assert time.monotonic() - start >= interval
    assert [row.name for row in rows()] == ["tool-0", "tool-1", "tool-2"]


def test_a_full_batch_is_written_without_waiting_for_the_interval(deferred: Any) -> None:
    deferred(seconds=60, batch=5)
    for number in range(4):
        audit.record(entry(f"tool-{number}"))
    time.sleep(0.2)
    assert audit.pending() == 4
    audit.record(entry("tool-4"))
    wait_until(lambda: audit.pending() == 0)
    audit.record(entry("tool-5"))
    time.sleep(0.1)
    assert audit.pending() == 1
    assert ToolCall.objects.count() == 5
    assert [row.name for row in rows()] == [f"tool-{number}" for number in range(6)]


def rename_table(old: str, new: str) -> None:
    with connection.schema_editor() as editor:
        editor.alter_db_table(ToolCall, old, new)


def test_a_failed_write_keeps_the_rows_for_the_next_flush(
    deferred: Any, caplog: pytest.LogCaptureFixture
) -> None:
    deferred()
    table = ToolCall._meta.db_table
    rename_table(table, "mcp_app_toolcall_away")
    try:
        for number in range(3):
            audit.record(entry(f"tool-{number}"))
        with caplog.at_level(logging.ERROR, logger="mcp_app"):
            assert not audit.flush()
        assert "Could not write 3 audit record(s); they are kept and tried again." in caplog.text
        assert audit.pending() == 3
        audit.record(entry("tool-3"))
    finally:
        rename_table("mcp_app_toolcall_away", table)
    assert [row.name for row in rows()] == ["tool-0", "tool-1", "tool-2", "tool-3"]


def test_the_writer_tries_a_failed_batch_again_on_its_next_tick(
    deferred: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    deferred(seconds=0.1)
    monkeypatch.setattr(audit, "MIN_RETRY_SECONDS", 0.3)
    route = router.db_for_write
    attempts: list[float] = []

    def down_once(model: Any, **hints: Any) -> str:
        if model is not ToolCall:
            return str(route(model, **hints))
        attempts.append(time.monotonic())
        return "down" if len(attempts) == 1 else "default"  # "down" is no database at all

    monkeypatch.setattr(router, "db_for_write", down_once)
    with caplog.at_level(logging.ERROR, logger="mcp_app"):
        audit.record(entry("tool-0"))
        audit.record(entry("tool-1"))
        wait_until(lambda: len(attempts) == 2 and audit.pending() == 0)
    assert attempts[1] - attempts[0] >= 0.3
    assert "Could not write 2 audit record(s); they are kept and tried again." in caplog.text
    assert [row.name for row in rows()] == ["tool-0", "tool-1"]


@pytest.fixture
def opened() -> Iterator[list[str]]:
    """The names of the threads that open a database connection while the test runs."""
    names: list[str] = []

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        names.append(threading.current_thread().name)

    connection_created.connect(count)
    yield names
    connection_created.disconnect(count)


def arriving_during_first_insert(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Rows named ``names`` are queued while the first insert of the test runs."""
    insert = audit._insert
    first = [True]

    def arriving(items: list[Any], alias: str) -> None:
        if first:
            first.clear()
            for name in names:
                audit._enqueue(audit._columns(entry(name)))
        insert(items, alias)

    monkeypatch.setattr(audit, "_insert", arriving)


def test_the_writer_keeps_its_connection_while_rows_keep_coming_and_not_once_idle(
    deferred: Any, monkeypatch: pytest.MonkeyPatch, opened: list[str]
) -> None:
    deferred(seconds=0.2, batch=5)
    arriving_during_first_insert(monkeypatch, "late-0", "late-1", "late-2")
    for number in range(5):
        audit.record(entry(f"tool-{number}"))
    wait_until(lambda: ToolCall.objects.count() == 8)
    # Three rows came during the first write: the second one used the same connection.
    assert opened.count("mcp-audit") == 1
    time.sleep(0.1)
    for number in range(5, 10):
        audit.record(entry(f"tool-{number}"))
    wait_until(lambda: ToolCall.objects.count() == 13)
    # Nothing was waiting after the second write: its connection was closed, and the next
    # write opened another.
    assert opened.count("mcp-audit") == 2


def test_the_writer_lets_go_of_its_connection_once_another_thread_wrote_the_rows(
    deferred: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    deferred(seconds=0.3, batch=3)
    closed: list[str] = []
    close_all = connections.close_all

    def closing() -> None:
        closed.append(threading.current_thread().name)
        close_all()

    monkeypatch.setattr(connections, "close_all", closing)
    arriving_during_first_insert(monkeypatch, "late")
    for number in range(3):
        audit.record(entry(f"tool-{number}"))
    wait_until(lambda: ToolCall.objects.count() == 3)
    # The late row is due soon: the writer kept its connection for it.
    assert "mcp-audit" not in closed
    assert audit.flush()
    assert ToolCall.objects.count() == 4
    wait_until(lambda: "mcp-audit" in closed)


def test_the_writer_connects_afresh_after_a_failed_write(
    deferred: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    opened: list[str],
) -> None:
    deferred(seconds=0.05, batch=2)
    monkeypatch.setattr(audit, "MIN_RETRY_SECONDS", 0.1)
    insert = audit._insert
    down = [True]

    def failing_once(items: list[Any], alias: str) -> None:
        if down:
            # Rows keep coming, so only the failure closes the connection.
            for number in range(2, 4):
                audit._enqueue(audit._columns(entry(f"tool-{number}")))
            raise DatabaseError("the server went away")
        insert(items, alias)

    def one_failing_once(row: Any, alias: str) -> None:
        down.clear()
        raise DatabaseError("the server went away")

    monkeypatch.setattr(audit, "_insert", failing_once)
    monkeypatch.setattr(audit, "_write_one", one_failing_once)
    with caplog.at_level(logging.ERROR, logger="mcp_app"):
        audit.record(entry("tool-0"))
        audit.record(entry("tool-1"))
        wait_until(lambda: ToolCall.objects.count() == 4)
    assert opened.count("mcp-audit") == 2
    assert sorted(row.name for row in rows()) == [f"tool-{number}" for number in range(4)]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs server connections to kill")
def test_a_kept_connection_the_server_killed_is_replaced_before_the_next_write(
    deferred: Any, monkeypatch: pytest.MonkeyPatch, opened: list[str]
) -> None:
    deferred(seconds=0.5, batch=3)
    arriving_during_first_insert(monkeypatch, "late")
    one_by_one: list[Any] = []
    write_one = audit._write_one

    def counted(row: Any, alias: str) -> None:
        one_by_one.append(row)
        write_one(row, alias)

    monkeypatch.setattr(audit, "_write_one", counted)
    for number in range(3):
        audit.record(entry(f"tool-{number}"))
    wait_until(lambda: ToolCall.objects.count() == 3)
    # The writer keeps its connection for the late row; a database restart would break it.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchall()
    wait_until(lambda: ToolCall.objects.count() == 4)
    assert opened.count("mcp-audit") == 2
    # Found broken before the write: the batch's insert did not fail over to rows one by one.
    assert one_by_one == []


def test_a_writer_thread_that_ended_is_started_again_by_the_next_row(
    deferred: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    deferred(seconds=0.05)
    # A queue of its own: the process's has a writer thread already.
    monkeypatch.setattr(audit, "_queue", audit._Queue())
    write_when_due = audit._write_when_due
    monkeypatch.setattr(audit, "_write_when_due", lambda queue: None)
    audit.record(entry("tool-0"))
    wait_until(lambda: audit._current().thread is None)
    assert audit.pending() == 1
    monkeypatch.setattr(audit, "_write_when_due", write_when_due)
    audit.record(entry("tool-1"))
    wait_until(lambda: audit.pending() == 0)
    assert [row.name for row in rows()] == ["tool-0", "tool-1"]


def test_a_row_that_cannot_be_written_is_dropped_alone(
    deferred: Any, caplog: pytest.LogCaptureFixture
) -> None:
    deferred()
    before = timezone.now()
    audit.record(entry("tool-0"))
    # No row record() builds breaks a constraint: one made by hand does.
    broken = dict(zip(audit.COLUMNS, audit._columns(entry("broken")), strict=True))
    broken["rounds"] = -1
    audit._enqueue(tuple(broken.values()))
    audit.record(entry("tool-1"))
    with caplog.at_level(logging.ERROR, logger="mcp_app"):
        assert audit.flush()
    written = list(ToolCall.objects.order_by("id"))
    assert [row.name for row in written] == ["tool-0", "tool-1"]
    assert "Could not write an audit record, dropped: tools/call broken by anonymous" in caplog.text
    # Written one by one, as model instances: their times are the calls' times all the same.
    assert before <= written[0].created <= written[1].created <= timezone.now()


TIMES = [
    datetime(2026, 12, 3, 10, 20, 23, 123456, tzinfo=UTC),
    datetime(2026, 12, 3, 10, 20, 23, tzinfo=UTC),
    datetime(2026, 3, 29, 1, 30, 0, 1, tzinfo=UTC),  # within the hour Europe skips
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


def nanoseconds(when: datetime) -> int:
    """``when`` as ``time.time_ns()`` would give it, 999 ns past its microsecond."""
    return (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000 + 999


@pytest.mark.parametrize("when", TIMES)
def test_a_queued_time_in_nanoseconds_is_the_microsecond_below(when: datetime) -> None:
    assert audit._as_datetime(nanoseconds(when)) == when
    assert audit._as_datetime(nanoseconds(when) - 999) == when
    assert audit._as_datetime(when) is when


def test_a_queued_row_holds_the_time_of_its_call_in_nanoseconds() -> None:
    assert audit._as_datetime(nanoseconds(TIMES[0]) + 1) == TIMES[0] + timedelta(microseconds=1)
    before = time.time_ns()
    queued = dict(zip(audit.COLUMNS, audit._columns(entry("now")), strict=True))
    assert before <= queued["created"] <= time.time_ns()
    with override_settings(USE_TZ=False):
        queued = dict(zip(audit.COLUMNS, audit._columns(entry("now")), strict=True))
    assert isinstance(queued["created"], datetime) and queued["created"].tzinfo is None


def test_a_time_in_utc_is_prepared_as_its_field_prepares_it_without_its_calls() -> None:
    field = ToolCall._meta.get_field("created")
    prepare = audit._datetime_preparer(field, connection)
    # SQLite takes the time's text, PostgreSQL the time itself.
    assert isinstance(prepare, functools.partial)
    assert prepare.func is (
        audit._utc_as_is if connection.vendor == "postgresql" else audit._utc_as_text
    )
    for when in TIMES:
        assert prepare(when) == field.get_db_prep_save(when, connection)
        assert prepare(nanoseconds(when)) == field.get_db_prep_save(when, connection)
    # Anything else is the field's to prepare.
    paris = datetime(2026, 7, 1, 12, 0, 0, 5, tzinfo=ZoneInfo("Europe/Paris"))
    assert prepare(paris) == field.get_db_prep_save(paris, connection)


@override_settings(USE_TZ=False)
def test_without_time_zones_times_are_prepared_by_their_field() -> None:
    field = ToolCall._meta.get_field("created")
    prepare = audit._datetime_preparer(field, connection)
    assert isinstance(prepare, functools.partial) and prepare.func is audit._datetime
    naive = datetime(2026, 12, 3, 10, 20, 23, 5)
    assert prepare(naive) == field.get_db_prep_save(naive, connection)


def test_a_connection_whose_adaptation_is_neither_gets_the_fields_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    field = ToolCall._meta.get_field("created")
    # As a backend that hands its driver an object of its own (Oracle's).
    monkeypatch.setattr(connection.ops, "adapt_datetimefield_value", lambda value: [value])
    prepare = audit._datetime_preparer(field, connection)
    assert isinstance(prepare, functools.partial) and prepare.func is audit._datetime
    assert prepare(TIMES[0]) == [TIMES[0]]
    assert prepare(nanoseconds(TIMES[0])) == [TIMES[0]]


@pytest.mark.filterwarnings("ignore:DateTimeField ToolCall.created received a naive datetime")
@override_settings(USE_TZ=True, TIME_ZONE="Europe/Paris")
def test_a_naive_time_is_written_as_the_model_would_write_it(deferred: Any) -> None:
    deferred()
    # Queued while USE_TZ was off (or by a patched clock): a naive time in TIME_ZONE.
    naive = timezone.make_naive(timezone.now().replace(microsecond=0))
    queued = dict(zip(audit.COLUMNS, audit._columns(entry("naive")), strict=True))
    queued["created"] = naive
    audit._enqueue(tuple(queued.values()))
    assert audit.flush()
    by_model = ToolCall(**{**queued, "name": "by model"})
    by_model.save()
    written = {row.name: row.created for row in ToolCall.objects.all()}
    assert written["naive"] == written["by model"] == timezone.make_aware(naive)


def test_a_row_whose_user_is_gone_does_not_hold_back_the_others(deferred: Any) -> None:
    deferred()
    ada, bob = user("ada"), user("bob")
    audit.record(entry("tool-0", user=ada))
    audit.record(entry("tool-1", user=bob))
    audit.record(entry("tool-2", user=ada))
    gone = ada.pk
    ada.delete()
    written = rows()
    assert [(row.name, row.user, row.caller_id) for row in written] == [
        ("tool-0", None, f"user:{gone}"),
        ("tool-1", bob, f"user:{bob.pk}"),
        ("tool-2", None, f"user:{gone}"),
    ]


def test_past_the_pending_cap_the_oldest_rows_are_dropped_and_logged(
    deferred: Any, caplog: pytest.LogCaptureFixture
) -> None:
    deferred(AUDIT_MAX_PENDING=3)
    for number in range(5):
        audit.record(entry(f"tool-{number}"))
    assert audit.pending() == 3
    with caplog.at_level(logging.ERROR, logger="mcp_app"):
        written = rows()
    assert [row.name for row in written] == ["tool-2", "tool-3", "tool-4"]
    assert "Dropped the 2 oldest audit record(s)" in caplog.text
    assert "AUDIT_MAX_PENDING (3)" in caplog.text


def test_a_flush_interval_of_0_writes_in_the_requests_thread(mcp: Any) -> None:
    mcp(AUDIT_FLUSH_SECONDS=0)
    audit.record(entry("tool-0"))
    assert audit.pending() == 0
    assert ToolCall.objects.count() == 1
    MCPClient(audited).call_tool("add", {"numbers": [1]})
    assert list(ToolCall.objects.order_by("id").values_list("name", flat=True)) == [
        "tool-0",
        "add",
    ]


def test_threads_recording_and_flushing_at_once_lose_nothing(deferred: Any) -> None:
    deferred(seconds=0.02, batch=50)
    failures: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for number in range(200):
                audit.record(entry(f"{worker}:{number}"))
                if number % 40 == 39:
                    assert audit.flush(timeout=None)
        except BaseException as error:
            failures.append(error)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    assert failures == []
    names = [row.name for row in rows()]
    assert len(names) == len(set(names)) == 1600
    for worker in range(8):
        mine = [name for name in names if name.startswith(f"{worker}:")]
        assert mine == [f"{worker}:{number}" for number in range(200)]


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_starts_with_an_empty_queue_of_its_own(deferred: Any) -> None:
    deferred()
    audit.record(entry("tool-0"))
    pid = os.fork()
    if pid == 0:  # the child: its parent writes the row
        os._exit(0 if audit.pending() == 0 and audit._current().thread is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert audit.pending() == 1


def test_a_clean_exit_writes_what_is_queued(tmp_path: Any) -> None:
    database = tmp_path / "exit.sqlite3"
    script = (
        "import django; django.setup()\n"
        "from mcp_app import audit\n"
        "for n in range(3):\n"
        "    audit.record(audit.Record('s', 'tools/call', f'tool-{n}', 'modern', None, None,"
        " 1.0, 'complete'))\n"
        "assert audit.pending() == 3\n"
    )
    run_site_script(database, script)
    with sqlite3.connect(database) as db:
        names = [name for (name,) in db.execute("SELECT name FROM mcp_app_toolcall ORDER BY id")]
    assert names == ["tool-0", "tool-1", "tool-2"]


# -- the settings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"AUDIT_FLUSH_SECONDS": -1},
        {"AUDIT_FLUSH_SECONDS": "soon"},
        {"RECHECK_SECONDS": -0.5},
        {"RECHECK_SECONDS": "inf"},
        {"AUDIT_FLUSH_SECONDS": True},
        {"AUDIT_FLUSH_SECONDS": math.inf},
        {"AUDIT_BATCH_SIZE": 0},
        {"AUDIT_MAX_PENDING": "many"},
    ],
)
def test_writer_settings_out_of_range_are_e009(value: dict[str, Any]) -> None:
    with override_settings(MCP_APP=value):
        assert [message.id for message in check_settings()] == ["mcp_app.E009"]


def test_writer_settings_in_range_pass() -> None:
    good = {"AUDIT_FLUSH_SECONDS": 0, "AUDIT_BATCH_SIZE": 50, "AUDIT_MAX_PENDING": 1000}
    with override_settings(MCP_APP=good):
        assert check_settings() == []
    # Read as conf reads them, as the other numbers are (an environment variable's "2.5").
    for seconds in (2.5, "2.5", "0"):
        with override_settings(
            MCP_APP={"AUDIT_FLUSH_SECONDS": seconds, "RECHECK_SECONDS": seconds}
        ):
            assert check_settings() == []
