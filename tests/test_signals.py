"""Every committed edit of a row moves its server's generation once and is announced after commit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save

from mcp_app import Server, rows, servers
from mcp_app.delivery import backend
from mcp_app.models import (
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
)
from mcp_app.server import channel_name

pytestmark = pytest.mark.django_db(transaction=True)

Message = tuple[str, dict[str, Any]]


class Boom(Exception):
    pass


@pytest.fixture
def other() -> Iterator[Server]:
    server = Server("signals-other")
    yield server
    servers.pop(server.name, None)


@pytest.fixture
def sink(other: Server) -> Iterator[list[Message]]:
    got: list[Message] = []
    channels = [
        channel_name(name, topic)
        for name in ("default", other.name)
        for topic in ("lists", "updated")
    ]
    unsubscribe = backend().subscribe(
        channels, lambda channel, message: got.append((channel, message))
    )
    yield got
    unsubscribe()


def lists(server: str, *kinds: str) -> Message:
    return (channel_name(server, "lists"), {"kinds": list(kinds)})


def updated(server: str, uri: str) -> Message:
    return (channel_name(server, "updated"), {"uri": uri})


def make_tool(name: str = "row-tool", **fields: Any) -> Tool:
    return Tool.objects.create(name=name, handler="template", config={"template": "x"}, **fields)


def test_receivers_are_connected_at_startup() -> None:
    # mcp_app's AppConfig.ready() imports mcp_app.signals.
    for model in (Tool, Resource, ResourceTemplate, Prompt):
        assert pre_save.has_listeners(model) and post_save.has_listeners(model)
        assert post_delete.has_listeners(model)
    for inline in (PromptArgument, PromptMessage):
        assert post_save.has_listeners(inline) and post_delete.has_listeners(inline)


def test_each_committed_edit_moves_the_generation_once(sink: list[Message]) -> None:
    assert rows.generation("default") == 0
    tool = make_tool()
    first = rows.generation("default")
    assert first > 0
    tool.title = "Edited"
    tool.save()
    assert rows.generation("default") == first + 1
    tool.delete()
    assert rows.generation("default") == first + 2
    assert sink == [lists("default", "tools")] * 3


def test_a_rolled_back_edit_changes_nothing(sink: list[Message]) -> None:
    make_tool()
    sink.clear()
    before = rows.generation("default")
    with pytest.raises(Boom), transaction.atomic():
        Tool.objects.filter(name="row-tool").get().delete()
        make_tool("another")
        raise Boom
    assert rows.generation("default") == before
    assert sink == []
    assert list(Tool.objects.values_list("name", flat=True)) == ["row-tool"]


def test_announced_after_commit_once_per_transaction(sink: list[Message]) -> None:
    make_tool("first")
    sink.clear()
    before = rows.generation("default")
    with transaction.atomic():
        make_tool()
        Resource.objects.create(uri="notes://a", name="a", text="A")
        make_tool("second")
        assert sink == []  # nothing before the commit
    assert rows.generation("default") == before + 1
    assert sink == [lists("default", "tools", "resources"), updated("default", "notes://a")]


def test_only_the_changed_kinds_are_announced(sink: list[Message]) -> None:
    template = ResourceTemplate.objects.create(name="notes", uri_template="n://{t}", text="x")
    prompt = Prompt.objects.create(name="ask")
    assert sink == [lists("default", "templates"), lists("default", "prompts")]
    sink.clear()
    template.description = "Edited"
    template.save()
    assert sink == [lists("default", "templates")]
    sink.clear()
    argument = PromptArgument.objects.create(prompt=prompt, name="topic")
    PromptMessage.objects.create(prompt=prompt, text="{{ topic }}")
    argument.delete()
    assert sink == [lists("default", "prompts")] * 3


def test_deleting_a_prompt_with_its_inline_rows_is_one_announcement(sink: list[Message]) -> None:
    prompt = Prompt.objects.create(name="ask")
    PromptArgument.objects.create(prompt=prompt, name="topic")
    PromptMessage.objects.create(prompt=prompt, text="{{ topic }}")
    sink.clear()
    before = rows.generation("default")
    prompt.delete()
    assert rows.generation("default") == before + 1
    assert sink == [lists("default", "prompts")]


def test_moving_a_row_changes_both_servers(sink: list[Message], other: Server) -> None:
    tool = make_tool()
    resource = Resource.objects.create(uri="notes://a", name="a", text="A")
    sink.clear()
    default_before = rows.generation("default")
    with transaction.atomic():
        tool.server = other.name
        tool.save()
        resource.server = other.name
        resource.save()
    assert rows.generation("default") == default_before + 1
    assert rows.generation(other.name) > 0
    assert sorted(sink) == sorted(
        [
            lists("default", "tools", "resources"),
            updated("default", "notes://a"),
            lists(other.name, "tools", "resources"),
            updated(other.name, "notes://a"),
        ]
    )


def test_a_row_saved_by_primary_key_alone_leaves_its_old_server_too(
    sink: list[Message], other: Server
) -> None:
    tool = make_tool()
    sink.clear()
    Tool(pk=tool.pk, server=other.name, name="row-tool", handler="template").save()
    assert sorted(sink) == sorted([lists("default", "tools"), lists(other.name, "tools")])


def test_updated_only_when_a_resources_content_changes(sink: list[Message]) -> None:
    resource = Resource.objects.create(uri="notes://a", name="a", text="A")
    sink.clear()
    resource.title = "Just a title"
    resource.save()
    assert sink == [lists("default", "resources")]
    sink.clear()
    resource.text = "B"
    resource.save()
    assert sink == [lists("default", "resources"), updated("default", "notes://a")]
    sink.clear()
    resource.uri = "notes://b"
    resource.save()
    assert sink == [
        lists("default", "resources"),
        updated("default", "notes://a"),
        updated("default", "notes://b"),
    ]
    sink.clear()
    # A row saved by primary key alone (not loaded first) is compared with the database.
    Resource(pk=resource.pk, uri="notes://b", name="a", text="C").save()
    assert sink == [lists("default", "resources"), updated("default", "notes://b")]
    sink.clear()
    Resource.objects.get(pk=resource.pk).delete()
    assert sink == [lists("default", "resources"), updated("default", "notes://b")]


def test_an_edit_in_a_rolled_back_savepoint_is_not_announced(sink: list[Message]) -> None:
    make_tool("first")
    sink.clear()
    before = rows.generation("default")
    with transaction.atomic():
        try:
            with transaction.atomic():
                make_tool("doomed")
                raise Boom
        except Boom:
            pass
        Resource.objects.create(uri="notes://a", name="a", text="A")
    assert rows.generation("default") == before + 1
    assert sink == [lists("default", "resources"), updated("default", "notes://a")]
    assert not Tool.objects.filter(name="doomed").exists()


def test_a_catalog_built_inside_a_transaction_is_not_kept_after_it(sink: list[Message]) -> None:
    from mcp_app import site

    with pytest.raises(Boom), transaction.atomic():
        make_tool("uncommitted")
        assert rows.generation("default") < 0
        assert "uncommitted" in site.catalog().tool_map
        raise Boom
    assert "uncommitted" not in site.catalog().tool_map
    make_tool("committed")
    assert "committed" in site.catalog().tool_map


def test_touch_outside_a_transaction_announces_at_once(sink: list[Message]) -> None:
    # bulk_create sends no signals; touch() is how such code reports its edit.
    Tool.objects.bulk_create(
        [Tool(name=f"bulk-{i}", handler="template", config={"template": "x"}) for i in range(3)]
    )
    assert sink == [] and rows.generation("default") == 0
    rows.touch("default", ["tools"])
    assert sink == [lists("default", "tools")]
    assert rows.generation("default") > 0


def test_a_failing_publisher_does_not_undo_the_edit(
    sink: list[Message], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(channel: str, message: dict[str, Any]) -> None:
        raise RuntimeError("delivery is down")

    monkeypatch.setattr(backend(), "publish", broken)
    make_tool()
    assert Tool.objects.filter(name="row-tool").exists()
    assert rows.generation("default") > 0
    assert "delivery is down" in caplog.text


@pytest.fixture
def filed(settings: Any, tmp_path: Any) -> tuple[Any, Resource]:
    """The resources' storage, in a folder of the test's, and a row holding a file there;
    former files deleted."""
    settings.MEDIA_ROOT = str(tmp_path)
    settings.MCP_APP = {**getattr(settings, "MCP_APP", {}), "DELETE_REPLACED_FILES": True}
    storage = Resource._meta.get_field("file").storage  # type: ignore[attr-defined]
    row = Resource.objects.create(uri="notes://filed", name="filed", file=upload("a.txt", b"first"))
    return storage, row


def upload(name: str, content: bytes) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, content)


def test_a_resource_s_former_file_leaves_storage_once_no_row_names_it(
    filed: tuple[Any, Resource],
) -> None:
    storage, row = filed
    first = row.file.name
    assert storage.exists(first)
    # Replaced: the new file is kept, the old one goes.
    row.file = upload("b.txt", b"second")
    row.save()
    second = row.file.name
    assert storage.exists(second) and not storage.exists(first)
    # A replacement rolled back keeps the file the row still names.
    with pytest.raises(Boom), transaction.atomic():
        row.file = upload("c.txt", b"third")
        row.save()
        raise Boom
    row.refresh_from_db()
    assert row.file.name == second and storage.exists(second)
    # A copy naming the same file (saved as new) keeps it while it does.
    copy = Resource.objects.create(uri="notes://copy", name="copy", file=second)
    row.delete()
    assert storage.exists(second)
    # Cleared for text, by the last row naming it: gone.
    copy.file, copy.text = "", "now text"
    copy.save()
    assert not storage.exists(second)


def test_only_the_app_s_own_uploads_are_deleted_and_only_when_asked(
    filed: tuple[Any, Resource], settings: Any
) -> None:
    storage, row = filed
    # A row may name any file of the storage: one the admin did not upload stays.
    theirs = storage.save("uploads/logo.png", upload("logo.png", b"png"))
    Resource.objects.create(uri="notes://logo", name="logo", file=theirs).delete()
    assert storage.exists(theirs)
    # Loading fixtures (a raw save) replaces no one's upload.
    first = row.file.name
    row.file = theirs
    row.save_base(raw=True)
    assert storage.exists(first)
    # Off, as by default: every file stays, as Django leaves them.
    settings.MCP_APP = {**settings.MCP_APP, "DELETE_REPLACED_FILES": False}
    row.refresh_from_db()
    row.file = upload("b.txt", b"second")
    row.save()
    row.delete()
    assert storage.exists(first) and storage.exists(row.file.name)


def test_a_file_storage_cannot_delete_leaves_the_edit_standing(
    filed: tuple[Any, Resource],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    storage, row = filed
    name = row.file.name

    def refuse(name: str) -> None:
        raise PermissionError("read-only storage")

    monkeypatch.setattr(storage, "delete", refuse)
    row.delete()
    assert not Resource.objects.filter(pk=row.pk).exists()
    assert storage.exists(name)
    assert "Could not delete" in caplog.text and "read-only storage" in caplog.text
