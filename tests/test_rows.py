"""Rows merged into a server's catalog: order, restyling, caching, and serving through ``/mcp``."""

from __future__ import annotations

import base64
import itertools
import json
import logging
import random
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import django
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from mcp_app import Server, rows, servers
from mcp_app.models import (
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
)
from mcp_app.protocol.context import RequestContext
from mcp_app.uritemplate import URITemplate
from tests.conftest import RecheckClock, modern_request

pytestmark = pytest.mark.django_db

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


@rows.row_handler("shout", label="Shout the arguments", kinds=("tools", "templates"))
def shout(values: dict[str, Any], context: Any) -> str:
    suffix = str(context.config.get("suffix", "!"))
    return " ".join(str(v).upper() for v in values.values()) + suffix


@rows.row_handler("slow-shout", label="Shout, asynchronously", kinds=("templates",))
async def slow_shout(values: dict[str, Any], context: Any) -> str:
    return shout(values, context)


def code_handler(arguments: dict[str, Any], context: Any) -> str:
    """A code tool."""
    return "code"


@pytest.fixture
def server() -> Iterator[Server]:
    instance = Server("rows-merge")
    for name in ("alpha", "beta", "gamma"):
        instance.add_tool(code_handler, name=name, title=name.title())
    instance.add_resource(lambda ctx: "code", uri="code://one", name="one")
    instance.add_resource_template(lambda v, ctx: "code", uri_template="code://{x}", name="coded")
    instance.add_prompt(lambda a, ctx: "code", name="coded")
    yield instance
    servers.pop(instance.name, None)


def tool_row(name: str, **fields: Any) -> Tool:
    values: dict[str, Any] = {
        "server": "rows-merge",
        "name": name,
        "handler": "template",
        "config": {"template": f"{name}: {{{{ x }}}}"},
    }
    values.update(fields)
    return Tool.objects.create(**values)


# -- merging -------------------------------------------------------------------------------


def test_code_first_in_registration_order_then_rows_by_order_and_name(server: Server) -> None:
    tool_row("zeta")
    tool_row("eta")
    tool_row("early", order=-1)
    tool_row("hidden", enabled=False)
    tool_row("beta", overrides_code=True, handler="", config={}, title="Beta, restyled")
    tool_row("gamma", overrides_code=True, handler="", config={}, enabled=False)
    catalog = server.catalog()
    assert [t.name for t in catalog.tools] == ["alpha", "beta", "early", "eta", "zeta"]
    assert [t.source for t in catalog.tools] == ["code", "code", "row", "row", "row"]
    beta = catalog.tool_map["beta"]
    assert beta.title == "Beta, restyled" and beta.handler is code_handler
    assert catalog.tool_map["eta"].config == {"template": "eta: {{ x }}"}


def test_restyling_replaces_only_what_the_row_sets(server: Server) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    tool_row(
        "alpha",
        overrides_code=True,
        handler="",
        config={},
        description="Now documented",
        input_schema=schema,
        annotations={"readOnlyHint": True},
        icons=[{"src": "https://example.com/a.png"}],
        meta={"k": "v"},
    )
    alpha = server.catalog().tool_map["alpha"]
    assert alpha.wire == {
        "name": "alpha",
        "title": "Alpha",
        "description": "Now documented",
        "icons": [{"src": "https://example.com/a.png"}],
        "inputSchema": schema,
        "annotations": {"readOnlyHint": True},
        "_meta": {"k": "v"},
    }


def test_every_kind_of_row_follows_the_code_definitions(server: Server) -> None:
    Resource.objects.create(server="rows-merge", uri="notes://b", name="b", text="B")
    Resource.objects.create(server="rows-merge", uri="notes://a", name="a", text="A", order=1)
    Resource.objects.create(
        server="rows-merge", uri="notes://off", name="c", text="-", enabled=False
    )
    ResourceTemplate.objects.create(
        server="rows-merge", name="notes", uri_template="n://{t}", text="x"
    )
    prompt = Prompt.objects.create(server="rows-merge", name="ask")
    PromptArgument.objects.create(prompt=prompt, name="topic", required=True, order=2)
    PromptArgument.objects.create(prompt=prompt, name="tone", description="How", order=1)
    catalog = server.catalog()
    assert [r.uri for r in catalog.resources] == ["code://one", "notes://b", "notes://a"]
    assert [t.name for t in catalog.templates] == ["coded", "notes"]
    assert [p.name for p in catalog.prompts] == ["coded", "ask"]
    assert catalog.prompt_map["ask"].wire["arguments"] == [
        {"name": "tone", "description": "How"},
        {"name": "topic", "required": True},
    ]
    assert catalog.resource_map["notes://b"].wire == {
        "uri": "notes://b",
        "name": "b",
        "mimeType": "text/plain",
        "size": 1,
    }


def test_a_restyling_that_is_not_a_valid_tool_still_limits_who_may_use_it(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    from django.contrib.auth.models import AnonymousUser, Group

    # Saved through the ORM (or valid before a rule was added): "_" in an x-mcp-header name.
    schema = {"type": "object", "properties": {"t": {"type": "string", "x-mcp-header": "X_T"}}}
    row = tool_row("beta", overrides_code=True, handler="", input_schema=schema)
    row.groups.add(Group.objects.create(name="beta-users"))
    with caplog.at_level(logging.WARNING, logger="mcp_app"):
        beta = server.catalog().tool_map["beta"]
    assert "restyling 'beta' is ignored but for its access limit" in caplog.text
    # The code's tool as it is, but only for the row's group: the row fails closed.
    assert "x-mcp-header" not in str(beta.input_schema)
    assert beta.permission is not None and beta.permission(AnonymousUser()) is False


def test_a_restyled_tool_whose_code_needs_a_list_of_permissions_needs_them_and_the_row(
    server: Server,
) -> None:
    from django.contrib.auth.models import Group, Permission, User

    server.add_tool(code_handler, name="listed", permission=["auth.view_user", "auth.change_user"])
    row = tool_row("listed", overrides_code=True, handler="", title="Listed, restyled")
    members = Group.objects.create(name="listed-users")
    row.groups.add(members)
    pat = User.objects.create_user("pat")
    pat.groups.add(members)
    check = server.catalog().tool_map["listed"].permission

    def allowed() -> bool:
        return bool(check(User.objects.get(pk=pat.pk)))  # fresh: permissions are cached

    assert not allowed()
    for codename in ("view_user", "change_user"):
        pat.user_permissions.add(Permission.objects.get(codename=codename))
    assert allowed()
    pat.groups.remove(members)
    assert not allowed()


def test_rows_the_catalog_cannot_take_are_left_out_and_logged(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    # Saved through the ORM, so nothing validated them.
    tool_row("alpha")  # code has it
    tool_row("orphan", handler="gone")
    tool_row("bad name")
    tool_row("beta", overrides_code=True, handler="", input_schema={"type": "array"})
    Resource.objects.create(server="rows-merge", uri="code://one", name="dup", text="x")
    Resource.objects.create(server="rows-merge", uri="relative", name="rel", text="x")
    ResourceTemplate.objects.create(server="rows-merge", name="t", uri_template="n://{", text="x")
    ResourceTemplate.objects.create(
        server="rows-merge", name="again", uri_template="code://{thing}", text="x"
    )
    Resource.objects.create(server="rows-merge", uri="notes://icons", name="ic", icons=["a"])
    with caplog.at_level(logging.WARNING, logger="mcp_app"):
        catalog = server.catalog()
    assert [t.name for t in catalog.tools] == ["alpha", "beta", "gamma"]
    assert catalog.tool_map["alpha"].source == "code"
    assert catalog.tool_map["beta"].input_schema == {"type": "object"}
    assert [r.name for r in catalog.resources] == ["one"]
    assert [t.name for t in catalog.templates] == ["coded"]
    logged = caplog.text
    for fragment in ("shadowed", "'gone'", "bad name", "restyling 'beta'", "relative", "n://{"):
        assert fragment in logged
    assert "icons must be a list of objects" in logged
    # What is left lists, for everyone.
    assert [r.wire["uri"] for r in catalog.resources] == ["code://one"]


def test_generation_is_one_query_and_zero_before_any_edit() -> None:
    with CaptureQueriesContext(connection) as queries:
        assert rows.generation("never-edited") == 0
    assert len(queries) == 1
    assert "mcp_app_cataloggeneration" in queries[0]["sql"]


def test_uncommitted_edits_get_their_own_generations(server: Server) -> None:
    # The test runs in a transaction: each edit is a new, negative, generation.
    before = rows.generation("rows-merge")
    tool_row("one")
    first = rows.generation("rows-merge")
    tool_row("two")
    second = rows.generation("rows-merge")
    assert first < 0 and second < 0 and len({before, first, second}) == 3
    assert [t.name for t in server.catalog().tools][-2:] == ["one", "two"]
    # The edit stays out of another server's generation.
    assert rows.generation("default") >= 0


@pytest.mark.django_db(transaction=True)
def test_a_known_generation_is_read_once() -> None:
    with CaptureQueriesContext(connection) as queries:
        first = rows.generation("known")
        assert rows.generation("known") == first
    assert len(queries) == 1


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_generation_is_its_snapshots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As on SQLite, or above READ COMMITTED (whichever database runs the tests).
    monkeypatch.setattr(rows, "snapshot_may_lag", lambda connection: True)
    server = Server("snapshot")
    try:
        Tool.objects.create(server="snapshot", name="old", handler="template", config={})
        seen = rows.generation("snapshot")
        # This process has heard of an edit that a transaction's older snapshot (REPEATABLE
        # READ, SQLite) does not show yet.
        rows._known.store("snapshot", seen + 1, rows._known.epoch())
        assert rows.generation("snapshot") == seen + 1
        with transaction.atomic():
            assert rows.generation("snapshot") == seen
            inside = server.catalog()
        # What the transaction built is keyed by its snapshot's generation: not taken for
        # the newer one.
        assert server.catalog() is not inside
    finally:
        servers.pop("snapshot", None)


@pytest.mark.parametrize(
    ("vendor", "options", "lags"),
    [
        ("sqlite", {}, True),
        ("mysql", {}, True),
        ("postgresql", {}, False),
        ("postgresql", {"isolation_level": "READ_COMMITTED"}, True),  # not psycopg's own
        ("postgresql", {"isolation_level": SimpleNamespace(name="READ_COMMITTED")}, False),
        ("postgresql", {"isolation_level": SimpleNamespace(name="REPEATABLE_READ")}, True),
    ],
)
def test_a_transaction_reads_the_generation_where_its_snapshot_may_lag(
    vendor: str, options: dict[str, Any], lags: bool
) -> None:
    # Only there does a catalog built in a transaction cost a query of its own.
    connection_ = SimpleNamespace(vendor=vendor, settings_dict={"OPTIONS": options})
    assert rows.snapshot_may_lag(connection_) is lags


def _bump_unseen(server: str) -> None:
    """Edit the generation as another process without a shared backend would."""
    from django.db.models import F

    from mcp_app.models import CatalogGeneration

    if not CatalogGeneration.objects.filter(server=server).update(value=F("value") + 1):
        CatalogGeneration.objects.create(server=server, value=7)


@pytest.mark.django_db(transaction=True)
def test_an_edit_no_one_announced_is_seen_after_the_recheck_interval(
    settings: Any, recheck_clock: RecheckClock
) -> None:
    settings.MCP_APP = {**settings.MCP_APP, "RECHECK_SECONDS": 60}
    before = rows.generation("unseen")
    _bump_unseen("unseen")
    assert rows.generation("unseen") == before  # trusted for a while
    recheck_clock.now += 61
    assert rows.generation("unseen") != before


@pytest.mark.django_db(transaction=True)
def test_a_recheck_interval_of_zero_reads_every_time(settings: Any) -> None:
    settings.MCP_APP = {**settings.MCP_APP, "RECHECK_SECONDS": 0}
    before = rows.generation("unseen")
    _bump_unseen("unseen")
    assert rows.generation("unseen") != before
    with CaptureQueriesContext(connection) as queries:
        rows.generation("unseen")
        rows.generation("unseen")
    assert len(queries) == 2


@pytest.mark.django_db(transaction=True)
def test_forget_generations_reads_again_at_once() -> None:
    before = rows.generation("unseen")
    _bump_unseen("unseen")
    rows.forget_generations("unseen")
    assert rows.generation("unseen") != before


@pytest.mark.django_db(transaction=True)
def test_an_edit_in_this_process_is_seen_on_the_next_call(server: Server) -> None:
    assert "fresh" not in server.catalog().tool_map
    tool_row("fresh")
    assert "fresh" in server.catalog().tool_map
    Tool.objects.filter(name="fresh").delete()
    assert "fresh" not in server.catalog().tool_map


class _Relay:
    """A backend carrying messages between "processes" of one test (not the local one)."""

    def __init__(self) -> None:
        from mcp_app.delivery.base import SinkTable

        self.table = SinkTable()

    def publish(self, channel: str, message: dict[str, Any]) -> None:
        self.table._deliver(channel, message)

    def subscribe(self, channels: Any, sink: Any) -> Any:
        with self.table._lock:
            token = self.table._add_sinks(list(channels), sink)

        def unsubscribe() -> None:
            with self.table._lock:
                self.table._remove_sinks(list(channels), token)

        return unsubscribe


@pytest.mark.django_db(transaction=True)
def test_a_message_from_another_process_makes_the_generation_read_again(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_app import delivery
    from mcp_app.server import channel_name

    relay = _Relay()
    monkeypatch.setattr(delivery, "backend", lambda: relay)
    settings.MCP_APP = {**settings.MCP_APP, "RECHECK_SECONDS": 3600}
    before = rows.generation("elsewhere")
    _bump_unseen("elsewhere")
    assert rows.generation("elsewhere") == before
    relay.publish(channel_name("elsewhere", "lists"), {"kinds": ["tools"]})
    assert rows.generation("elsewhere") != before


@pytest.mark.django_db(transaction=True)
def test_a_read_that_raced_an_edit_does_not_keep_its_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An edit forgets the generation while a read is between its query and storing it.
    real_store = rows._known.store

    def store_after_an_edit(server: str, value: int, epoch: int) -> None:
        rows.forget_generations(server)
        real_store(server, value, epoch)

    monkeypatch.setattr(rows._known, "store", store_after_an_edit)
    rows.generation("raced")
    monkeypatch.undo()
    with CaptureQueriesContext(connection) as queries:
        rows.generation("raced")
    assert len(queries) == 1


@pytest.mark.django_db(transaction=True)
def test_rows_are_loaded_once_per_generation(server: Server, settings: Any) -> None:
    # The generation stays known however long the test takes.
    settings.MCP_APP = {**settings.MCP_APP, "RECHECK_SECONDS": 3600}
    tool_row("one")
    server.catalog()
    server.add_tool(code_handler, name="delta")  # code changes, rows do not
    with CaptureQueriesContext(connection) as queries:
        catalog = server.catalog()
    # The rows' generation is known since the first build: no row is read again.
    assert len(queries) == 0
    assert [t.name for t in catalog.tools] == ["alpha", "beta", "gamma", "delta", "one"]
    with CaptureQueriesContext(connection) as queries:
        assert server.catalog() is catalog
    assert len(queries) == 0


def test_touch_refuses_unknown_kinds() -> None:
    with pytest.raises(ValueError):
        rows.touch("default", ["widgets"])
    with pytest.raises(ValueError):
        rows.touch("default", [])


def test_row_handlers_get_the_rows_config(server: Server) -> None:
    ResourceTemplate.objects.create(
        server="rows-merge",
        name="shouted",
        uri_template="shout://{word}",
        handler="shout",
        config={"suffix": "?"},
    )
    ResourceTemplate.objects.create(
        server="rows-merge",
        name="slow",
        uri_template="slow://{word}",
        handler="slow-shout",
        config={"suffix": "..."},
    )
    catalog = server.catalog()
    context = RequestContext(server=server)
    shouted = catalog.template_map["shouted"]
    assert not shouted.is_async
    assert shouted.handler({"word": "hey"}, context) == "HEY?"
    assert context.config == {"suffix": "?"}
    slow = catalog.template_map["slow"]
    assert slow.is_async
    assert context.run_async(slow.handler({"word": "hey"}, context)) == "HEY..."


# -- through the endpoint ------------------------------------------------------------------


def call(client: Client, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body, headers = modern_request(method, params)
    response = client.post(
        "/mcp", data=json.dumps(body), content_type="application/json", headers=headers
    )
    answer: dict[str, Any] = response.json()
    return answer


def listing(client: Client, method: str, key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    while True:
        result = call(client, method, params)["result"]
        items.extend(result[key])
        if "nextCursor" not in result:
            return items
        params = {"cursor": result["nextCursor"]}


def by_name(items: list[dict[str, Any]], key: str = "name") -> dict[str, dict[str, Any]]:
    return {item[key]: item for item in items}


@pytest.mark.django_db(transaction=True)
def test_an_edit_shows_on_the_next_request() -> None:
    client = Client()
    assert "row-tool" not in by_name(listing(client, "tools/list", "tools"))
    row = Tool.objects.create(
        name="row-tool", title="First", handler="template", config={"template": "x"}
    )
    assert by_name(listing(client, "tools/list", "tools"))["row-tool"]["title"] == "First"
    row.title = "Second"
    row.save()
    assert by_name(listing(client, "tools/list", "tools"))["row-tool"]["title"] == "Second"
    row.delete()
    assert "row-tool" not in by_name(listing(client, "tools/list", "tools"))


@pytest.mark.django_db(transaction=True)
def test_template_tool_called_through_the_endpoint() -> None:
    Tool.objects.create(
        name="hello",
        handler="template",
        config={"template": "Hello {{ name }}{% if excited %}!{% endif %} <3"},
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "excited": {"type": "boolean"}},
            "required": ["name"],
        },
    )
    client = Client()
    result = call(client, "tools/call", {"name": "hello", "arguments": {"name": "Ada & Co"}})
    assert result["result"]["content"] == [{"type": "text", "text": "Hello Ada & Co <3"}]
    invalid = call(client, "tools/call", {"name": "hello", "arguments": {}})["result"]
    assert invalid["isError"] is True and "name" in invalid["content"][0]["text"]


def test_a_row_template_loads_only_the_libraries_the_settings_allow(settings: Any) -> None:
    # The cache library would let whoever edits rows read and write the site's cache.
    problem = rows.template_error("{% load cache %}{% cache 60 sidebar %}x{% endcache %}")
    assert problem is not None
    assert "'cache' is not a registered tag library" in problem
    assert rows.template_error("{% load tz %}{{ when|utc }}") is None
    assert rows.render_template("{% load l10n %}{{ n|unlocalize }}", {"n": 1000}) == "1000"
    settings.MCP_APP = {**getattr(settings, "MCP_APP", {}), "ROW_TEMPLATE_LIBRARIES": ["cache"]}
    assert rows.template_error("{% load cache %}{% cache 60 sidebar %}x{% endcache %}") is None
    assert rows.template_error("{% load tz %}") is not None


def test_a_row_template_s_url_given_only_literals_must_reverse() -> None:
    problem = rows.template_error("Go to {% url 'nope' %}")
    assert problem is not None
    assert problem.startswith("Template error: {% url %} names no URL of the site (Reverse for")
    assert rows.template_error("{% url 'admin:index' 1 %}") is not None
    assert rows.template_error("{% url 'admin:app_list' app_label=7 %}") is not None
    # What reverses renders; what depends on the values rendered is judged then.
    for fine in (
        "{% url 'admin:index' %}",
        "{% url 'admin:app_list' app_label='auth' %}",
        "{% url 'nope' who %}",
        "{% url page %}",
        "{% url 'nope'|lower %}",
        "{% url 'nope' as link %}{{ link }}",
    ):
        assert rows.template_error(fine) is None, fine
    assert rows.render_template("{% url 'admin:index' %}", {}) == "/admin/"


def test_a_row_template_s_url_is_not_refused_when_the_site_s_urls_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import django.urls

    def broken(*args: Any, **kwargs: Any) -> str:
        raise ImportError("a URLconf that does not import")

    monkeypatch.setattr(django.urls, "reverse", broken)
    assert rows.template_error("{% url 'nope' %}") is None
    assert "a URLconf that does not import" in caplog.text


def test_a_row_template_may_not_print_its_context_with_debug() -> None:
    # With DEBUG on, {% debug %} also prints every imported module to the row's reader.
    problem = rows.template_error("{% debug %}")
    assert problem is not None and "Invalid block tag on line 1: 'debug'" in problem
    # The other built-in tags and filters are all there.
    source = "{% now 'Y' as y %}{% for c in word %}{{ c|upper }}{% endfor %}{% lorem 1 w %}"
    assert rows.render_template(source, {"word": "ab"}) == "ABlorem"
    # The site's own templates keep it.
    from django.template import engines

    assert "debug" in engines["django"].engine.template_builtins[0].tags


@pytest.mark.django_db(transaction=True)
def test_a_restyled_schema_narrows_a_code_tool_but_never_widens_it() -> None:
    row = Tool.objects.create(name="add", overrides_code=True, input_schema={"type": "object"})
    client = Client()
    listed = by_name(listing(client, "tools/list", "tools"))["add"]
    assert listed["inputSchema"] == {"type": "object"}
    # The handler was written against the code's schema: it still holds.
    loose = call(client, "tools/call", {"name": "add", "arguments": {"numbers": ["x"]}})
    assert loose["result"]["isError"] is True
    assert "expected number, got string" in loose["result"]["content"][0]["text"]
    row.input_schema = {
        "type": "object",
        "properties": {"numbers": {"type": "array", "maxItems": 2}},
    }
    row.save()
    three = {"name": "add", "arguments": {"numbers": [1, 2, 3]}}
    assert call(client, "tools/call", three)["result"]["isError"] is True
    two = {"name": "add", "arguments": {"numbers": [1, 2]}}
    assert call(client, "tools/call", two)["result"]["structuredContent"] == {"sum": 3}


@pytest.mark.django_db(transaction=True)
def test_restyled_and_hidden_code_tools_through_the_endpoint() -> None:
    Tool.objects.create(name="add", overrides_code=True, title="Sum", order=5)
    Tool.objects.create(name="logo", overrides_code=True, enabled=False)
    client = Client()
    tools = listing(client, "tools/list", "tools")
    names = [t["name"] for t in tools]
    assert names[0] == "add" and "logo" not in names
    assert tools[0]["title"] == "Sum"
    result = call(client, "tools/call", {"name": "add", "arguments": {"numbers": [1, 2]}})
    assert result["result"]["structuredContent"] == {"sum": 3}


@pytest.mark.django_db(transaction=True)
def test_template_rows_read_through_the_endpoint() -> None:
    ResourceTemplate.objects.create(
        name="notes",
        uri_template="notes://{topic}",
        text="Notes on {{ topic }}",
        mime_type="text/markdown",
    )
    ResourceTemplate.objects.create(
        name="shouted", uri_template="shout://{word}", handler="shout", config={}
    )
    client = Client()
    templates = by_name(listing(client, "resources/templates/list", "resourceTemplates"))
    assert templates["notes"]["uriTemplate"] == "notes://{topic}"
    read = call(client, "resources/read", {"uri": "notes://django%20admin"})["result"]
    assert read["contents"] == [
        {
            "uri": "notes://django%20admin",
            "text": "Notes on django admin",
            "mimeType": "text/markdown",
        }
    ]
    shouted = call(client, "resources/read", {"uri": "shout://hey"})["result"]
    assert shouted["contents"][0]["text"] == "HEY!"


@pytest.mark.django_db(transaction=True)
def test_file_resource_served_as_a_blob(settings: Any, tmp_path: Any) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    Resource.objects.create(
        uri="images://pixel",
        name="pixel",
        title="A pixel",
        file=SimpleUploadedFile("pixel.png", PIXEL),
    )
    client = Client()
    listed = by_name(listing(client, "resources/list", "resources"), "uri")["images://pixel"]
    assert listed == {
        "uri": "images://pixel",
        "name": "pixel",
        "title": "A pixel",
        "mimeType": "image/png",
        "size": len(PIXEL),
    }
    read = call(client, "resources/read", {"uri": "images://pixel"})["result"]
    assert read["contents"] == [
        {"uri": "images://pixel", "blob": base64.b64encode(PIXEL).decode(), "mimeType": "image/png"}
    ]
    # Gone from storage behind the row's back: an internal error that names no path.
    row = Resource.objects.get(uri="images://pixel")
    row.file.storage.delete(row.file.name)
    reporting = Client(raise_request_exception=False)
    error = call(reporting, "resources/read", {"uri": "images://pixel"})["error"]
    assert error == {"code": -32603, "message": "The resource's file is missing from its storage"}


@pytest.mark.django_db(transaction=True)
def test_prompt_row_with_arguments_messages_and_embedded_resources() -> None:
    Resource.objects.create(uri="notes://style", name="style", text="Be brief.")
    prompt = Prompt.objects.create(name="brief", title="Brief", description="A short brief")
    PromptArgument.objects.create(prompt=prompt, name="id", required=True, description="Who")
    PromptArgument.objects.create(prompt=prompt, name="tone", order=1)
    PromptMessage.objects.create(prompt=prompt, order=0, text="Introduce {{ id }}, {{ tone }}.")
    PromptMessage.objects.create(
        prompt=prompt, order=1, role="assistant", resource_uri="notes://style"
    )
    PromptMessage.objects.create(prompt=prompt, order=2, resource_uri="people://{{ id }}")
    client = Client()
    listed = by_name(listing(client, "prompts/list", "prompts"))["brief"]
    assert listed["arguments"] == [
        {"name": "id", "description": "Who", "required": True},
        {"name": "tone"},
    ]
    missing = call(client, "prompts/get", {"name": "brief", "arguments": {}})
    assert missing["error"]["code"] == -32602
    result = call(
        client, "prompts/get", {"name": "brief", "arguments": {"id": "ada", "tone": "warm"}}
    )["result"]
    assert result["description"] == "A short brief"
    first, second, third = result["messages"]
    assert first == {"role": "user", "content": {"type": "text", "text": "Introduce ada, warm."}}
    assert second == {
        "role": "assistant",
        "content": {
            "type": "resource",
            "resource": {"uri": "notes://style", "text": "Be brief.", "mimeType": "text/plain"},
        },
    }
    person = third["content"]["resource"]
    assert third["role"] == "user" and person["uri"] == "people://ada"
    assert json.loads(person["text"])["name"] == "Ada Lovelace"


def test_an_embedded_resource_asking_for_input_makes_the_prompt_ask(server: Server) -> None:
    from mcp_app import elicit, input_required
    from mcp_app.input import InputRequired

    def ask(context: Any) -> Any:
        return input_required({"who": elicit("Who?")})

    server.add_resource(ask, uri="code://ask", name="ask")
    prompt = Prompt.objects.create(server="rows-merge", name="asking")
    PromptMessage.objects.create(prompt=prompt, text="First")
    PromptMessage.objects.create(prompt=prompt, resource_uri="code://ask", order=1)
    handler = server.catalog().prompt_map["asking"].handler
    context = RequestContext(server=server)
    assert isinstance(handler({}, context), InputRequired)


@pytest.mark.django_db(transaction=True)
def test_losing_the_race_to_create_the_generation_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db.models import QuerySet

    rows.touch("default", ["tools"])
    start = rows.generation("default")
    real_update = QuerySet.update
    calls: list[int] = []

    def first_update_misses(self: QuerySet[Any], **kwargs: Any) -> int:
        # As if another transaction created the row between our update and our insert.
        calls.append(1)
        return 0 if len(calls) == 1 else real_update(self, **kwargs)

    monkeypatch.setattr(QuerySet, "update", first_update_misses)
    rows.touch("default", ["tools"])
    monkeypatch.undo()
    assert len(calls) == 2
    assert rows.generation("default") == start + 1


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("people://{id}", "people://{thing}", True),
        ("x://{/var:1,var}", "x://{/a:1,b}", True),
        ("x://{a*}{?q,r}", "x://{b*}{?s,t}", True),
        ("people://{id}", "people://{+id}", False),
        ("x://{/var:1,var}", "x://{/a:2,b}", False),
        ("x://{a}/{b}", "x://{a}", False),
        # Path parameters name themselves in the URI: ;b=1 is not ;c=1.
        ("notes://{a}{;b}", "notes://{a}{;c}", False),
        ("notes://{a}{;b}", "notes://{x}{;b}", True),
    ],
)
def test_templates_of_one_shape_differ_only_in_their_variables_names(
    first: str, second: str, same: bool
) -> None:
    assert (rows.template_shape(first) == rows.template_shape(second)) is same


@pytest.mark.parametrize(
    ("first", "later", "covered"),
    [
        ("notes://{+path}", "notes://{topic}/summary", True),
        ("f://{+p}", "f://{a}/{b}", True),
        ("notes://{a}", "notes://{b}", True),
        ("x://{a}{?q}", "x://{b}", True),
        ("notes://{topic}", "notes://{topic}/summary", False),
        ("notes://{a}{;b}", "notes://{a}{;c}", False),
        ("f://{a}.json", "f://{a}", False),
        ("x://{b}", "x://{a}{?q}", False),
        # {+path} and {#frag} keep reserved characters that {id} would encode.
        ("notes://{id}", "notes://{+path}", False),
        ("notes://{id}", "notes://{#frag}", False),
        ("notes://{+path}", "notes://{id}", True),
    ],
)
def test_covers_tells_whether_one_template_matches_every_uri_of_another(
    first: str, later: str, covered: bool
) -> None:
    assert rows.covers(URITemplate(first), URITemplate(later)) is covered


def test_of_two_template_rows_of_one_shape_the_first_is_listed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Saved without the form's check (an ORM script, or rows enabled together).
    ResourceTemplate.objects.create(name="a", uri_template="notes://{a}", text="a:{{ a }}", order=1)
    ResourceTemplate.objects.create(name="b", uri_template="notes://{b}", text="b:{{ b }}", order=2)
    with caplog.at_level(logging.WARNING, logger="mcp_app"):
        listed = servers["default"].catalog().templates
    names = [template.name for template in listed]
    assert "a" in names and "b" not in names
    assert "is shadowed by a definition listed before it" in caplog.text


# -- the size of what a row's template renders -----------------------------------------------

#: A hundred times the default ROW_TEMPLATE_MAX_CHARS.
HUGE = 10**8


@pytest.fixture
def cap(settings: Any) -> int:
    """A ROW_TEMPLATE_MAX_CHARS of 1,000, for boundaries quick to reach."""
    settings.MCP_APP = {**getattr(settings, "MCP_APP", {}), "ROW_TEMPLATE_MAX_CHARS": 1000}
    return 1000


def django_render(source: str, values: dict[str, Any]) -> str:
    """``source`` as Django's own engine renders it, unescaped as a row's template is."""
    from django.template import Context, Engine

    return Engine(autoescape=False).from_string(source).render(Context(values, autoescape=False))


def refusal(source: str, values: dict[str, Any]) -> str:
    """The message refusing to render ``source`` with ``values``, which comes within seconds."""
    started = time.monotonic()
    with pytest.raises(rows.TemplateTooLarge) as refused:
        rows.render_template(source, values)
    # Long before the text would be made (minutes, or a MemoryError), with room for a slow runner.
    assert time.monotonic() - started < 5
    return str(refused.value)


@pytest.mark.parametrize(
    ("source", "values"),
    [
        ("{{ text|ljust:width }}", {"text": "a", "width": HUGE}),
        ("{{ text|rjust:width }}", {"text": "a", "width": str(HUGE)}),
        # More digits than int() reads: a width past any cap, not a crash.
        ("{{ text|center:width }}", {"text": "a", "width": "9" * 5000}),
        ("{% lorem count w %}", {"count": HUGE // 10}),
        ("{% lorem count p %}", {"count": 10_000}),
        ("{% lorem count b random %}", {"count": 10_000}),
        ("{{ n|stringformat:spec }}", {"n": 7, "spec": f"0{HUGE}d"}),
        ("{{ n|stringformat:spec }}", {"n": 7.5, "spec": f".{HUGE}f"}),
        ("{{ n|stringformat:'0100000000d' }}", {"n": 7}),
        # One key again and again: each conversion is small, together they are not.
        (
            "{{ person|stringformat:spec }}",
            {"person": {"name": "x" * 10_000}, "spec": "(name)s" + "%(name)s" * 999},
        ),
        ("{{ n|floatformat:precision }}", {"n": 1.5, "precision": HUGE}),
        ("{{ n|floatformat:precision }}", {"n": 1.5, "precision": f"{HUGE}gu"}),
        ("{{ items|join:separator }}", {"items": ["a"] * 100_000, "separator": "-" * 1000}),
        ("{{ text|join:separator }}", {"text": "a" * 100_000, "separator": "-" * 1000}),
        # A list added to itself holds its long string twice, four times, eight times...
        (
            "{% with b=a|add:a %}{% with c=b|add:b %}{% with d=c|add:c %}{{ d }}"
            "{% endwith %}{% endwith %}{% endwith %}",
            {"a": ["x" * 200_000]},
        ),
        # 10**12 rounds that make nothing: refused when the second loop starts.
        ("{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}", {"s": "x" * 10**6}),
    ],
)
def test_amplifiers_are_refused_before_they_make_their_text(
    source: str, values: dict[str, Any]
) -> None:
    assert refusal(source, values).startswith("The template's ")


@pytest.mark.parametrize(
    ("source", "fits", "too_long"),
    [
        ("{{ t|ljust:w }}", {"t": "a", "w": 1000}, {"t": "a", "w": 1001}),
        ("{{ t|rjust:w }}", {"t": "a", "w": "1000"}, {"t": "a", "w": "1001"}),
        ("{{ t|center:w }}", {"t": "a", "w": 1000.0}, {"t": "a", "w": 1001.0}),
        ("{{ n|stringformat:s }}", {"n": 5, "s": "01000d"}, {"n": 5, "s": "01001d"}),
        # "0." and the digits: the precision is within the cap, the text is not.
        ("{{ n|stringformat:s }}", {"n": 0.5, "s": ".998f"}, {"n": 0.5, "s": ".999f"}),
        (
            "{{ d|stringformat:s }}",
            {"d": {"k": "0123456789"}, "s": "(k)s" + "%(k)s" * 99},
            {"d": {"k": "0123456789"}, "s": "(k)s" + "%(k)s" * 100},
        ),
        ("{{ n|floatformat:p }}", {"n": 1.5, "p": 998}, {"n": 1.5, "p": 999}),
        ("{{ n|floatformat:p }}", {"n": 1.5, "p": "-998"}, {"n": 1.5, "p": "-1001"}),
        (
            "{{ items|join:sep }}",
            {"items": ["abcdefgh"] * 100, "sep": ".."},
            {"items": ["abcdefgh"] * 101, "sep": ".."},
        ),
        (
            "{% with b=a|add:a %}{{ b|length }}{% endwith %}",
            {"a": ["x" * 499]},
            {"a": ["x" * 500]},
        ),
        ("{{ t }}{{ t }}", {"t": "x" * 500}, {"t": "x" * 501}),
        ("{% for c in s %}{{ c }}{% endfor %}", {"s": "x" * 1000}, {"s": "x" * 1001}),
        # 31 + 31 * 31 rounds; 32 + 32 * 32 are too many.
        (
            "{% for a in s %}{% for b in s %}.{% endfor %}{% endfor %}",
            {"s": "x" * 31},
            {"s": "x" * 32},
        ),
        # Each filter's result is held to the cap, however short what is shown of it.
        ("{{ t|upper|length }}", {"t": "x" * 1000}, {"t": "x" * 1001}),
        ("{{ t|make_list|length }}", {"t": "x" * 1000}, {"t": "x" * 1001}),
        # "é" is "%C3%A9", then "%25C3%25A9": ten characters, then fourteen.
        ("{{ t|urlencode|urlencode }}", {"t": "é" * 100}, {"t": "é" * 101}),
        ("{{ t|urlencode|urlencode|urlencode }}", {"t": "é" * 71}, {"t": "é" * 72}),
        (
            "{{ nested|unordered_list }}",
            {"nested": ["a" * 100, ["x" * 100] * 7]},
            {"nested": ["a" * 100, ["x" * 100] * 8]},
        ),
    ],
)
def test_within_the_cap_django_answers_and_past_it_the_template_is_refused(
    cap: int, source: str, fits: dict[str, Any], too_long: dict[str, Any]
) -> None:
    assert rows.render_template(source, fits) == django_render(source, fits)
    assert "MCP_APP['ROW_TEMPLATE_MAX_CHARS'] (1,000" in refusal(source, too_long)


def test_lorem_is_held_to_the_longest_text_its_count_could_make(cap: int) -> None:
    # The longest lorem word is 14 letters: 66 words and their spaces fit, 67 might not.
    for source in ("{% lorem 66 w random %}", "{% lorem %}", "{% lorem 1 p %}", "{% lorem 0 %}"):
        random.seed(source)
        ours = rows.render_template(source, {})
        random.seed(source)
        assert ours == django_render(source, {})
    # A random paragraph may reach thousands of characters; {% lorem %} reads an error in its
    # count as a count of one, and the refusal still comes through.
    for source in ("{% lorem 67 w %}", "{% lorem 2 %}", "{% lorem 1 p random %}"):
        refusal(source, {})


def test_loops_that_make_nothing_still_stop(cap: int) -> None:
    source = "{% for a in s %}{% for b in s %}{% if b == a %}{% endif %}{% endfor %}{% endfor %}"
    # Without the count, 3,000 rounds of 3,000: nine million, for an empty text.
    assert refusal(source, {"s": "x" * 3000}) == (
        "The template's loops would run more than MCP_APP['ROW_TEMPLATE_MAX_CHARS'] (1,000) rounds"
    )
    # An iterator is read only as far as past the cap, as it may not end.
    assert refusal("{% for n in numbers %}{% endfor %}", {"numbers": itertools.count()})


def test_a_refusal_is_not_read_as_false_nor_turned_into_another_error(cap: int) -> None:
    values = {"t": "a", "w": 1001}
    # Django reads an error within {% if a == b %} as false, and {% widthratio %} turns one
    # into a syntax error: the reader sees the refusal all the same.
    assert django_render("{% if t|ljust:w == 'a' %}yes{% else %}no{% endif %}", values) == "no"
    refusal("{% if t|ljust:w == 'a' %}yes{% else %}no{% endif %}", values)
    refusal("{% widthratio t|ljust:w 1 1 %}", values)


def test_the_cap_is_the_setting(settings: Any) -> None:
    assert rows.render_template("{{ t|ljust:1000000 }}", {"t": "a"}) == "a".ljust(10**6)
    assert refusal("{{ t|ljust:1000001 }}", {"t": "a"}).endswith("(1,000,000 characters)")
    settings.MCP_APP = {**getattr(settings, "MCP_APP", {}), "ROW_TEMPLATE_MAX_CHARS": 20}
    assert rows.render_template("{{ t|ljust:20 }}", {"t": "a"}) == "a".ljust(20)
    assert refusal("{{ t|ljust:21 }}", {"t": "a"}).endswith("(20 characters)")


@pytest.mark.django_db(transaction=True)
def test_a_refusal_reaches_the_client_as_a_readable_error(settings: Any) -> None:
    settings.MCP_APP = {
        **getattr(settings, "MCP_APP", {}),
        "ROW_TEMPLATE_MAX_CHARS": 1000,
        "TOOL_ERROR_DETAILS": False,
    }
    Tool.objects.create(
        name="pad",
        handler="template",
        config={"template": "{{ text|ljust:width }}"},
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}, "width": {"type": "integer"}},
        },
    )
    prompt = Prompt.objects.create(name="padded")
    PromptArgument.objects.create(prompt=prompt, name="width", required=True)
    PromptMessage.objects.create(prompt=prompt, text="{{ 'a'|ljust:width }}")
    ResourceTemplate.objects.create(
        name="pad", uri_template="pad://{width}", text="{{ 'a'|ljust:width }}"
    )
    message = (
        "The template's output would be longer than MCP_APP['ROW_TEMPLATE_MAX_CHARS'] "
        "(1,000 characters)"
    )
    client = Client()
    fits = call(client, "tools/call", {"name": "pad", "arguments": {"text": "a", "width": 1000}})
    assert fits["result"]["content"] == [{"type": "text", "text": "a".ljust(1000)}]
    assert "isError" not in fits["result"]
    # An isError result the model can read, though TOOL_ERROR_DETAILS is off: the message
    # tells of a setting, nothing of the server.
    too_long = {"name": "pad", "arguments": {"text": "a", "width": 1001}}
    refused = call(client, "tools/call", too_long)["result"]
    assert refused["content"] == [{"type": "text", "text": message}]
    assert refused["isError"] is True
    for method, params in (
        ("prompts/get", {"name": "padded", "arguments": {"width": "1001"}}),
        ("resources/read", {"uri": "pad://1001"}),
    ):
        body, headers = modern_request(method, params)
        response = client.post(
            "/mcp", data=json.dumps(body), content_type="application/json", headers=headers
        )
        assert response.status_code == 200
        assert response.json()["error"] == {"code": -32602, "message": message}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("details", [True, False])
def test_a_template_failing_on_what_the_client_sent_is_invalid_params(
    settings: Any, details: bool, caplog: pytest.LogCaptureFixture
) -> None:
    settings.MCP_APP = {**getattr(settings, "MCP_APP", {}), "TOOL_ERROR_DETAILS": details}
    prompt = Prompt.objects.create(name="last-seen")
    PromptArgument.objects.create(prompt=prompt, name="when", required=True)
    # Prompt arguments are strings: timesince fails on every one.
    PromptMessage.objects.create(prompt=prompt, text="Last seen {{ when|timesince }} ago")
    ResourceTemplate.objects.create(
        name="even", uri_template="even://{n}", text='{{ n|divisibleby:"2" }}'
    )
    ResourceTemplate.objects.create(
        name="deep", uri_template="deep://{n}", text="{% if n %}" * 400 + "x" + "{% endif %}" * 400
    )
    client = Client()
    cases = [
        ("prompts/get", {"name": "last-seen", "arguments": {"when": "2025-01-01"}}),
        ("resources/read", {"uri": "even://abc"}),
        ("resources/read", {"uri": "deep://1"}),
    ]
    expected = [
        ("the prompt last-seen", "AttributeError: 'str' object has no attribute 'year'"),
        ("the resource template even://{n}", "ValueError: invalid literal for int()"),
        ("the resource template deep://{n}", "RecursionError: "),
    ]
    for (method, params), (what, detail) in zip(cases, expected, strict=True):
        body, headers = modern_request(method, params)
        response = client.post(
            "/mcp", data=json.dumps(body), content_type="application/json", headers=headers
        )
        assert response.status_code == 200, response.content
        error = response.json()["error"]
        assert error["code"] == -32602
        shown = f"Could not render {what} with these arguments"
        if details:
            assert error["message"].startswith(f"{shown} ({detail}")
        else:
            assert error["message"] == shown
        assert f"Could not render {what}" in caplog.text
    # The same template renders for arguments it can work with.
    good = call(client, "resources/read", {"uri": "even://4"})["result"]
    assert good["contents"][0]["text"] == "True"


def test_a_template_that_runs_past_its_time_is_stopped(settings: Any) -> None:
    settings.MCP_APP = {**getattr(settings, "MCP_APP", {}), "ROW_TEMPLATE_MAX_SECONDS": 0.2}
    # Each round reads the long argument and makes nothing: no count but time grows.
    source = "{% for item in items %}{% if item == query|wordcount %}match{% endif %}{% endfor %}"
    values = {"items": [1] * 200_000, "query": "A" * 500_000}
    started = time.monotonic()
    with pytest.raises(rows.TemplateTooLarge) as refused:
        rows.render_template(source, values)
    assert time.monotonic() - started < 3
    assert str(refused.value) == (
        "The template took longer to render than MCP_APP['ROW_TEMPLATE_MAX_SECONDS'] (0.2 s)"
    )
    # An ordinary rendering is well within it.
    assert rows.render_template("{{ a|lower }}", {"a": "X"}) == "x"


def test_the_filters_of_one_tag_are_timed(settings: Any) -> None:
    settings.MCP_APP = {**getattr(settings, "MCP_APP", {}), "ROW_TEMPLATE_MAX_SECONDS": 0.2}
    # One {% with %} runs all its filters before any tag inside it begins.
    assignments = " ".join(f"n{index}=q|wordcount" for index in range(3_000))
    started = time.monotonic()
    with pytest.raises(rows.TemplateTooLarge, match="took longer to render"):
        rows.render_template(
            f"{{% with {assignments} %}}{{{{ n0 }}}}{{% endwith %}}", {"q": "a " * 300_000}
        )
    assert time.monotonic() - started < 1.5


def test_what_the_filters_make_in_all_is_bounded(settings: Any) -> None:
    settings.MCP_APP = {**getattr(settings, "MCP_APP", {}), "ROW_TEMPLATE_MAX_CHARS": 1_000}
    # Each list is within the limit; {% with %} would keep them all.
    lists = " ".join(f"m{index}=s|make_list" for index in range(3))
    source = f"{{% with {lists} %}}{{{{ m0|length }}}}{{% endwith %}}"
    assert rows.render_template(source, {"s": "x" * 400}) == "400"
    with pytest.raises(rows.TemplateTooLarge) as refused:
        rows.render_template(source, {"s": "x" * 500})
    assert str(refused.value) == (
        "The template's filters would make more than 10 times "
        "MCP_APP['ROW_TEMPLATE_MAX_CHARS'] (10,000 characters) in all"
    )


@pytest.mark.parametrize("name", ["truncatechars_html", "truncatewords_html"])
def test_an_html_truncating_filter_takes_a_bounded_number_of_tags(name: str) -> None:
    source = f"{{{{ t|{name}:3 }}}}"
    assert rows.render_template(source, {"t": "<b>" * rows.HTML_TAGS_MAX}).startswith("<b>")
    with pytest.raises(rows.TemplateTooLarge, match="more than 10,000 tags"):
        rows.render_template(source, {"t": "<b>" * (rows.HTML_TAGS_MAX + 1)})


@pytest.mark.skipif(django.VERSION < (6,), reason="template partials are new in Django 6")
def test_a_partial_that_renders_itself_is_stopped_in_time(settings: Any) -> None:
    settings.MCP_APP = {**getattr(settings, "MCP_APP", {}), "ROW_TEMPLATE_MAX_SECONDS": 0.2}
    source = (
        "{% partialdef p %}{% if s %}{% with s=s|slice:'1:' %}{% partial p %}{% partial p %}"
        "{% endwith %}{% endif %}{% endpartialdef %}{% partial p %}"
    )
    started = time.monotonic()
    with pytest.raises(rows.TemplateTooLarge, match="took longer to render"):
        rows.render_template(source, {"s": "x" * 40})
    assert time.monotonic() - started < 3


def test_a_lorem_count_of_infinity_is_refused() -> None:
    with pytest.raises(rows.TemplateTooLarge):
        rows.render_template("{% lorem count w %}", {"count": float("inf")})


@pytest.mark.parametrize(
    ("shape", "identity"),
    [
        ("Notes://{}", "notes://{}"),
        ("HTTP://User@Example.COM/{}", "http://User@example.com/{}"),
        ("http://Ex.COM{/}", "http://ex.com{/}"),  # the expression begins the path
        ("http://Ex{}.COM/", "http://Ex{}.COM/"),  # part of the host: left as it is
        ("notes://{}.Example/", "notes://{}.Example/"),
        ("notes://h/%7e%2f{}%41", "notes://h/~%2F{}A"),
        ("notes:cafe\u0301{}", "notes:caf\u00e9{}"),
        ("{}://X/", "{}://X/"),
    ],
)
def test_template_identity_is_uri_identity_of_a_template_s_literal_text(
    shape: str, identity: str
) -> None:
    # A shape is its own shape: what is left is the literal text's identity.
    assert rows.template_identity(shape) == identity
