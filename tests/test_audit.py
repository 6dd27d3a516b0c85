"""The audit trail: a ``ToolCall`` row per call in both eras, its admin and its retention."""

from __future__ import annotations

import logging
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError
from django.test import Client
from django.urls import path
from django.utils import timezone
from rest_framework.authtoken.models import Token

from mcp_app import Server, audit, elicit, input_required, tool_error
from mcp_app.models import ToolCall
from mcp_app.testing import MCPClient, MCPClientError

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


def only_row() -> ToolCall:
    rows = list(ToolCall.objects.all())
    assert len(rows) == 1, rows
    return rows[0]


# -- what is written ---------------------------------------------------------------------------


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


def test_lists_are_not_audited() -> None:
    client = MCPClient(audited)
    client.list_tools()
    client.list_prompts()
    assert not ToolCall.objects.exists()


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


def test_outcomes_and_errors() -> None:
    client = MCPClient(audited)
    client.call_tool("refuse")
    with pytest.raises(MCPClientError):
        client.call_tool("no-such-tool")
    with pytest.raises(MCPClientError):
        client.call_tool("greet")  # no elicitation capability: a JSON-RPC error
    rows = {row.name: row for row in ToolCall.objects.all()}
    assert (rows["refuse"].outcome, rows["refuse"].error) == ("error", "No, thank you")
    assert rows["no-such-tool"].outcome == "failed"
    assert rows["no-such-tool"].error == "Unknown tool: no-such-tool"
    assert rows["greet"].outcome == "failed"
    assert all(row.caller_id == "anonymous" and row.user is None for row in rows.values())


def test_an_input_dialogue_is_a_row_per_round() -> None:
    MCPClient(audited, handlers=ANSWERS).call_tool("greet")
    first, second = ToolCall.objects.order_by("id")
    assert (first.outcome, first.rounds) == ("input_required", 0)
    assert (second.outcome, second.rounds) == ("complete", 1)


def test_reads_and_prompts_are_audited_by_uri_and_name() -> None:
    client = MCPClient(audited)
    client.read_resource("memo://note")
    client.get_prompt("hello", {"who": "Ada"})
    assert sorted(ToolCall.objects.values_list("method", "name")) == [
        ("prompts/get", "hello"),
        ("resources/read", "memo://note"),
    ]


def test_the_initialize_era_is_audited_with_its_rounds(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    ada = user()
    with token_client(ada, versions=["2025-11-25"], handlers=ANSWERS) as client:
        client.call_tool("greet")
    row = only_row()
    assert (row.era, row.outcome, row.rounds, row.user) == ("legacy", "complete", 1, ada)


def test_the_row_outlives_the_calls_rolled_back_transaction() -> None:
    MCPClient(audited).call_tool("refuse")
    assert not Group.objects.filter(name="made-by-a-failed-call").exists()
    assert only_row().outcome == "error"


def test_audit_off_writes_nothing(mcp: Any) -> None:
    mcp(AUDIT=False)
    MCPClient(audited).call_tool("add", {"numbers": [1]})
    assert not ToolCall.objects.exists()


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


def test_a_deleted_user_leaves_its_caller_id(mcp: Any) -> None:
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


def test_the_admin_lists_and_filters_read_only(staff_client: Client, mcp: Any) -> None:
    mcp(AUDIT_ARGUMENTS=True)
    client = MCPClient(audited)
    client.call_tool("add", {"numbers": [1]})
    client.call_tool("refuse")
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


def test_clean_deletes_in_batches(monkeypatch: Any) -> None:
    monkeypatch.setattr(audit, "CLEAN_BATCH", 2)
    aged(40, count=5)
    aged(1, count=2)
    assert audit.clean() == 5
    assert ToolCall.objects.count() == 2
