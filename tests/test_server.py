"""Tests for mcp_app.server: registering definitions on fresh ``Server`` instances."""

from __future__ import annotations

import functools
import itertools
import pickle
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from django.urls import URLResolver, path
from django.urls.resolvers import RegexPattern

import mcp_app
from mcp_app.content import text
from mcp_app.delivery.local import LocalBackend
from mcp_app.exceptions import AlreadyRegistered, DefinitionError, MCPAppError, NotRegistered
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.engine import Engine
from mcp_app.registry import PromptArgument, PromptDef, ResourceDef, TemplateDef, ToolDef
from mcp_app.schema import JSONSchemaValidator, Problem, SchemaError
from mcp_app.server import SettingsEngine, servers
from mcp_app.transport.listen import KIND_TO_FILTER, Listen

_counter = itertools.count()

# Server.catalog() reads the row generation from the database.
pytestmark = pytest.mark.django_db


@pytest.fixture
def server() -> Iterator[mcp_app.Server]:
    name = f"test-server-{next(_counter)}"
    instance = mcp_app.Server(name)
    yield instance
    servers.pop(name, None)


def first_handler(arguments: dict[str, Any], ctx: RequestContext) -> str:
    """First."""
    return "first"


def second_handler(arguments: dict[str, Any], ctx: RequestContext) -> str:
    return "second"


def read_handler(ctx: RequestContext) -> str:
    return "read"


class PickyValidator(JSONSchemaValidator):
    """Used through MCP_APP["VALIDATOR"]: finds a problem in everything."""

    def problems(self, schema: Any, instance: object) -> list[Problem]:
        return [Problem("", "picky")]


# ---------------------------------------------------------------- construction


def test_new_server_is_registered_by_name_and_empty(server: mcp_app.Server) -> None:
    assert servers[server.name] is server
    assert repr(server) == f"<Server {server.name!r}>"
    assert server.generation == 0
    catalog = server.catalog()
    assert (catalog.tools, catalog.resources, catalog.templates, catalog.prompts) == (
        (),
        (),
        (),
        (),
    )
    assert isinstance(server.engine, SettingsEngine)
    assert isinstance(server.engine, Engine)
    assert server.engine.options is server.options


def test_server_name_is_its_server_info_name_unless_overridden() -> None:
    plain = mcp_app.Server("test-server-identity")
    custom = mcp_app.Server(
        "test-server-identity-2",
        version="9.9",
        title="T",
        description="D",
        instructions="Be nice",
        website_url="https://example.com",
        icons=[{"src": "https://example.com/i.png"}],
        page_size=3,
        ttl_ms=1000,
        cache_scope="public",
        logging=False,
        server_name="public-name",
    )
    try:
        assert plain.options.server_info == {"name": "test-server-identity", "version": "0.1.0"}
        assert custom.options.server_info == {
            "name": "public-name",
            "version": "9.9",
            "title": "T",
            "description": "D",
            "websiteUrl": "https://example.com",
            "icons": [{"src": "https://example.com/i.png"}],
        }
        assert custom.options.instructions == "Be nice"
        assert custom.options.page_size == 3
        assert custom.options.ttl_ms == 1000
        assert custom.options.cache_scope == "public"
        # Nothing defined, logging off; tools, resources and prompts may still be added and
        # announced (list_changed), so they are offered.
        assert custom.options.capabilities(custom.catalog()) == {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
        }
    finally:
        servers.pop("test-server-identity", None)
        servers.pop("test-server-identity-2", None)


def test_the_default_site_is_called_django_mcp_app() -> None:
    assert mcp_app.site.name == "default"
    assert mcp_app.site.options.name == "django-mcp-app"
    assert servers["default"] is mcp_app.site


def test_bad_cache_scope_is_refused() -> None:
    with pytest.raises(ValueError, match="cache_scope must be 'private' or 'public'"):
        mcp_app.Server("test-server-bad-scope", cache_scope="shared")
    assert "test-server-bad-scope" not in servers


@pytest.mark.parametrize("ttl_ms", [-5, 1.5, True, "60000"])
def test_a_ttl_that_is_not_a_whole_number_of_milliseconds_is_refused(ttl_ms: Any) -> None:
    with pytest.raises(ValueError, match="ttl_ms must be a whole number of milliseconds"):
        mcp_app.Server("test-server-bad-ttl", ttl_ms=ttl_ms)
    assert "test-server-bad-ttl" not in servers


@pytest.mark.parametrize("page_size", [-1, 2.5, False, "10"])
def test_a_page_size_that_is_not_a_count_is_refused(page_size: Any) -> None:
    with pytest.raises(ValueError, match="page_size must be a whole number, 0 or more"):
        mcp_app.Server("test-server-bad-page", page_size=page_size)
    assert "test-server-bad-page" not in servers


# ---------------------------------------------------------------- decorators


def test_tool_decorator_returns_the_function_unchanged(server: mcp_app.Server) -> None:
    def greet(arguments: dict[str, Any], ctx: RequestContext) -> str:
        """Say hello.

        More detail.
        """
        return "hi"

    decorated = server.tool(title="Greet")(greet)
    assert decorated is greet
    tool = server.catalog().tool_map["greet"]
    assert tool.handler is greet
    assert tool.title == "Greet"
    assert tool.description == "Say hello.\n\n        More detail."


def test_tool_decorator_takes_a_name(server: mcp_app.Server) -> None:
    @server.tool("renamed", description="explicit")
    def f(arguments: dict[str, Any], ctx: RequestContext) -> None:
        """Ignored docstring."""

    tool = server.catalog().tool_map["renamed"]
    assert tool.description == "explicit"
    assert "f" not in server.catalog().tool_map


def test_empty_docstring_and_no_docstring_give_no_description(server: mcp_app.Server) -> None:
    def blank(arguments: dict[str, Any], ctx: RequestContext) -> None:
        """ """

    server.add_tool(blank)
    server.add_tool(second_handler)
    assert server.catalog().tool_map["blank"].description is None
    assert server.catalog().tool_map["second_handler"].description is None


def test_explicit_empty_description_beats_the_docstring(server: mcp_app.Server) -> None:
    server.add_tool(first_handler, description="")
    assert server.catalog().tool_map["first_handler"].description == ""


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("tool", r"use @server\.tool\(\) with parentheses"),
        ("prompt", r"use @server\.prompt\(\) with parentheses"),
    ],
)
def test_bare_decorator_raises_type_error(server: mcp_app.Server, kind: str, message: str) -> None:
    decorator = getattr(server, kind)
    with pytest.raises(TypeError, match=message):

        @decorator
        def f(arguments: dict[str, Any], ctx: RequestContext) -> None:
            return None

    assert server.generation == 0


def test_bare_resource_decorators_raise_type_error(server: mcp_app.Server) -> None:
    def f(ctx: RequestContext) -> str:
        return "x"

    with pytest.raises(TypeError, match=r"use @server\.resource\(uri\) with the resource's URI"):
        server.resource(f)
    with pytest.raises(TypeError, match=r"use @server\.resource\(uri\)"):
        server.resource()
    with pytest.raises(TypeError, match=r"use @server\.resource_template\(uri_template\)"):
        server.resource_template(f)
    with pytest.raises(TypeError, match=r"use @server\.resource_template\(uri_template\)"):
        server.resource_template()


def test_resource_decorator_registers_at_the_uri(server: mcp_app.Server) -> None:
    def readme(ctx: RequestContext) -> str:
        """The readme."""
        return "# hi"

    assert server.resource("docs://readme", mime_type="text/markdown", size=4)(readme) is readme
    resource = server.catalog().resource_map["docs://readme"]
    assert isinstance(resource, ResourceDef)
    assert resource.name == "readme"
    assert resource.description == "The readme."
    assert resource.mime_type == "text/markdown"
    assert resource.size == 4


def test_resource_template_decorator_registers_by_name(server: mcp_app.Server) -> None:
    def complete_id(value: str, args: dict[str, str], ctx: RequestContext) -> list[str]:
        return ["ada"]

    def person(variables: dict[str, str], ctx: RequestContext) -> str:
        """A person."""
        return variables["id"]

    decorated = server.resource_template("people://{id}", complete={"id": complete_id})(person)
    assert decorated is person
    template = server.catalog().template_map["person"]
    assert isinstance(template, TemplateDef)
    assert template.description == "A person."
    assert dict(template.complete) == {"id": complete_id}
    assert server.catalog().can_complete


def test_prompt_decorator_coerces_arguments(server: mcp_app.Server) -> None:
    def greet(arguments: dict[str, str], ctx: RequestContext) -> str:
        """Greets someone."""
        return "hi"

    decorated = server.prompt(
        arguments=["who", {"name": "tone", "required": True}, PromptArgument("style")]
    )(greet)
    assert decorated is greet
    prompt = server.catalog().prompt_map["greet"]
    assert isinstance(prompt, PromptDef)
    assert [a.name for a in prompt.arguments] == ["who", "tone", "style"]
    assert prompt.required == ("tone",)
    assert prompt.description == "Greets someone."


def test_prompt_decorator_takes_a_name(server: mcp_app.Server) -> None:
    server.prompt("hello", title="Hello")(first_handler)
    assert server.catalog().prompt_map["hello"].title == "Hello"


def test_add_methods_return_their_definitions(server: mcp_app.Server) -> None:
    assert isinstance(server.add_tool(first_handler), ToolDef)
    assert isinstance(server.add_resource(read_handler, uri="x://a"), ResourceDef)
    assert isinstance(
        server.add_resource_template(first_handler, uri_template="x://{id}"), TemplateDef
    )
    assert isinstance(server.add_prompt(first_handler), PromptDef)


def test_code_definitions_are_a_live_read_only_view_of_each_kind(
    server: mcp_app.Server,
) -> None:
    tools = server.code_definitions("tools")
    assert dict(tools) == {}
    tool = server.add_tool(lambda arguments, context: "ok", name="t")
    resource = server.add_resource(lambda context: "x", uri="notes://a", name="a")
    template = server.add_resource_template(
        lambda variables, context: "x", uri_template="notes://{b}", name="b"
    )
    prompt = server.add_prompt(lambda arguments, context: "x", name="p")
    assert dict(tools) == {"t": tool}
    assert dict(server.code_definitions("resources")) == {"notes://a": resource}
    assert dict(server.code_definitions("templates")) == {"b": template}
    assert dict(server.code_definitions("prompts")) == {"p": prompt}
    with pytest.raises(TypeError):
        tools["u"] = tool  # type: ignore[index]
    server.remove_tool("t")
    assert dict(tools) == {}


def test_add_tool_passes_every_attribute_through(server: mcp_app.Server) -> None:
    tool = server.add_tool(
        first_handler,
        name="t",
        title="T",
        input_schema={"type": "object", "properties": {"a": {"type": "string"}}},
        output_schema={"type": "object"},
        annotations={"readOnlyHint": True},
        icons=[{"src": "https://example.com/i.png"}],
        meta={"m": 1},
        permission="app.use_tool",
    )
    assert tool.description == "First."
    assert tool.permission == "app.use_tool"
    assert tool.wire["annotations"] == {"readOnlyHint": True}
    assert tool.wire["_meta"] == {"m": 1}


@pytest.mark.django_db
def test_a_list_of_permissions_needs_every_one(server: mcp_app.Server) -> None:
    from django.contrib.auth.models import Permission, User

    from mcp_app.protocol.context import RequestContext

    server.add_tool(first_handler, name="both", permission=["auth.view_user", "auth.change_user"])
    tool = server.catalog().tool_map["both"]
    pat = User.objects.create_user("pat")

    def permitted() -> bool:
        user = User.objects.get(pk=pat.pk)  # fresh: permissions are cached on the object
        return server.engine.permitted(tool, RequestContext(user=user))

    pat.user_permissions.add(Permission.objects.get(codename="view_user"))
    assert not permitted()
    pat.user_permissions.add(Permission.objects.get(codename="change_user"))
    assert permitted()
    assert not server.engine.permitted(tool, RequestContext(user=None))


@pytest.mark.parametrize("permission", [["auth.view_user", 5], [], "", 7, {"auth.view_user": 1}])
def test_a_permission_of_another_kind_is_refused_when_defined(
    server: mcp_app.Server, permission: Any
) -> None:
    with pytest.raises(DefinitionError, match="permission must be a permission codename"):
        server.add_tool(first_handler, name="odd", permission=permission)


def test_a_second_server_of_the_same_name_is_refused(server: mcp_app.Server) -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match=f"A Server named '{server.name}' exists"):
        mcp_app.Server(server.name, instructions="Tools for invoices.")
    assert servers[server.name] is server
    with pytest.raises(ImproperlyConfigured, match="named 'default' exists"):
        mcp_app.Server()
    assert servers["default"] is mcp_app.site


def test_a_second_template_of_the_same_uri_template_is_refused(server: mcp_app.Server) -> None:
    server.add_resource_template(first_handler, uri_template="dup://{id}", name="first")
    with pytest.raises(DefinitionError, match="already the URI template of 'first'"):
        server.add_resource_template(second_handler, uri_template="dup://{id}", name="second")
    assert list(server.catalog().template_map) == ["first"]


@pytest.mark.parametrize("kind", ["tool", "resource_template"])
def test_a_definition_is_announced_outside_the_servers_lock(
    server: mcp_app.Server, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # A slow delivery backend must not hold up every catalog() while it publishes.
    free: list[bool] = []

    def announce(kind: str) -> None:
        def elsewhere() -> None:
            got = server._lock.acquire(timeout=1)
            if got:
                server._lock.release()
            free.append(got)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()

    monkeypatch.setattr(server, "_announce_change", announce)
    if kind == "tool":
        server.add_tool(first_handler, name="announced")
    else:
        server.add_resource_template(first_handler, uri_template="a://{id}", name="announced")
    assert free == [True]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ("id", "arguments must be a list"),
        ({"id": "the id"}, "arguments must be a list"),
        ([{"name": 5}], "name must be text"),
        ([""], "name must be text"),
        ([{"name": "id", "required": "no"}], "required must be True or False"),
        ([{"name": "id", "description": 5}], "description must be text"),
    ],
)
def test_prompt_arguments_of_the_wrong_kind_are_refused(
    server: mcp_app.Server, arguments: Any, problem: str
) -> None:
    with pytest.raises(DefinitionError, match=problem):
        server.add_prompt(first_handler, name="p", arguments=arguments)


# ---------------------------------------------------------------- refusals


def test_duplicate_tool_names_both_handlers(server: mcp_app.Server) -> None:
    server.add_tool(first_handler, name="same")
    with pytest.raises(AlreadyRegistered) as info:
        server.add_tool(second_handler, name="same")
    assert str(info.value) == (
        "tool 'same' is already registered by tests.test_server.first_handler; "
        "cannot register tests.test_server.second_handler under the same name"
    )
    assert info.value.kind == "tool"
    assert info.value.name == "same"
    assert isinstance(info.value, DefinitionError)
    assert isinstance(info.value, MCPAppError)
    assert server.catalog().tool_map["same"].handler is first_handler


def test_duplicate_with_a_handler_without_qualname_uses_its_repr(server: mcp_app.Server) -> None:
    server.add_tool(first_handler, name="same")
    partial = functools.partial(second_handler)
    with pytest.raises(AlreadyRegistered, match=r"cannot register functools\.partial\("):
        server.add_tool(partial, name="same")


def test_duplicates_of_each_kind_are_refused(server: mcp_app.Server) -> None:
    server.add_resource(read_handler, uri="x://a")
    server.add_resource_template(first_handler, uri_template="x://{id}", name="tpl")
    server.add_prompt(first_handler, name="p")
    with pytest.raises(AlreadyRegistered, match="resource 'x://a' is already registered"):
        server.add_resource(read_handler, uri="x://a", name="other")
    with pytest.raises(AlreadyRegistered, match="resource template 'tpl' is already registered"):
        server.add_resource_template(second_handler, uri_template="y://{id}", name="tpl")
    with pytest.raises(AlreadyRegistered, match="prompt 'p' is already registered"):
        server.add_prompt(second_handler, name="p")
    assert server.generation == 3


def test_same_name_in_different_kinds_is_fine(server: mcp_app.Server) -> None:
    server.add_tool(first_handler, name="shared")
    server.add_prompt(first_handler, name="shared")
    server.add_resource_template(first_handler, uri_template="s://{x}", name="shared")
    assert server.generation == 3


@pytest.mark.parametrize(
    ("method", "kind"),
    [
        ("remove_tool", "tool"),
        ("remove_resource", "resource"),
        ("remove_resource_template", "resource template"),
        ("remove_prompt", "prompt"),
    ],
)
def test_removing_what_is_not_registered_raises_not_registered(
    server: mcp_app.Server, method: str, kind: str
) -> None:
    with pytest.raises(NotRegistered) as info:
        getattr(server, method)("ghost")
    assert str(info.value) == f"{kind} 'ghost' is not registered"
    assert info.value.kind == kind
    assert info.value.name == "ghost"
    assert isinstance(info.value, LookupError)
    assert server.generation == 0


def test_invalid_name_is_refused_before_registering(server: mcp_app.Server) -> None:
    with pytest.raises(DefinitionError, match="1-64 characters"):
        server.add_tool(first_handler, name="a/b")
    with pytest.raises(DefinitionError):
        server.add_tool(first_handler, name="x" * 65)
    assert server.generation == 0


def test_a_schema_naming_an_unknown_dialect_is_refused_at_registration(
    server: mcp_app.Server,
) -> None:
    with pytest.raises(SchemaError) as raised:
        server.add_tool(
            first_handler, input_schema={"$schema": "https://example.com/d", "type": "object"}
        )
    assert raised.value.pointer == "/$schema"
    assert raised.value.reason.startswith("unsupported dialect 'https://example.com/d'; use one of")
    assert server.catalog().tools == ()


def test_a_schema_no_value_can_pass_is_refused_at_registration(server: mcp_app.Server) -> None:
    never = {"type": "object", "properties": {"n": False}, "required": ["n"]}
    with pytest.raises(DefinitionError) as raised:
        server.add_tool(first_handler, input_schema=never)
    assert str(raised.value) == (
        "tool 'first_handler': input_schema: no arguments can pass it "
        "(at /properties/n: it is false, which no value passes)"
    )
    with pytest.raises(DefinitionError, match="output_schema: no result can pass it"):
        server.add_tool(first_handler, output_schema={"enum": []})
    assert server.catalog().tools == ()


def test_invalid_input_schema_is_refused_at_registration(server: mcp_app.Server) -> None:
    with pytest.raises(SchemaError) as raised:
        server.add_tool(
            first_handler, input_schema={"type": "object", "properties": {"a": {"type": "nope"}}}
        )
    assert server.generation == 0
    assert server.catalog().tools == ()
    # Named, and caught as any other bad definition is.
    assert isinstance(raised.value, DefinitionError)
    assert str(raised.value).startswith("tool 'first_handler': input_schema: invalid schema at ")
    assert raised.value.pointer == "/properties/a/type"
    assert raised.value.reason.startswith("expected one of: ")
    again = pickle.loads(pickle.dumps(raised.value))
    assert (type(again), str(again), again.pointer) == (
        type(raised.value),
        str(raised.value),
        raised.value.pointer,
    )


def test_invalid_output_schema_is_refused_at_registration(server: mcp_app.Server) -> None:
    with pytest.raises(
        DefinitionError, match=r"^tool 'sums': output_schema: invalid schema "
    ) as raised:
        server.add_tool(
            first_handler, name="sums", output_schema={"type": "object", "required": "sum"}
        )
    assert isinstance(raised.value, SchemaError)
    assert server.generation == 0


def test_non_object_input_schema_is_a_definition_error(server: mcp_app.Server) -> None:
    with pytest.raises(DefinitionError, match="input_schema must be an object schema"):
        server.add_tool(first_handler, input_schema={"type": "array"})


def test_bad_resource_uri_and_template_are_refused(server: mcp_app.Server) -> None:
    with pytest.raises(DefinitionError, match="not an absolute URI"):
        server.add_resource(read_handler, uri="relative")
    with pytest.raises(DefinitionError, match="resource template"):
        server.add_resource_template(first_handler, uri_template="x://{unclosed")
    with pytest.raises(DefinitionError, match="argument names repeat"):
        server.add_prompt(first_handler, arguments=["a", "a"])
    assert server.generation == 0


# ---------------------------------------------------------------- generation, snapshot, listeners


def test_generation_counts_every_change_and_snapshot_is_reused_while_unchanged(
    server: mcp_app.Server,
) -> None:
    first = server.catalog()
    assert server.catalog() is first
    server.add_tool(first_handler)
    assert server.generation == 1
    second = server.catalog()
    assert second is not first
    assert second.generation > first.generation
    assert server.catalog() is second
    assert [t.name for t in second.tools] == ["first_handler"]
    assert first.tools == ()  # old snapshots stay as they were
    server.remove_tool("first_handler")
    assert server.generation == 2
    assert server.catalog().tools == ()


def test_catalog_keeps_registration_order(server: mcp_app.Server) -> None:
    for name in ("c", "a", "b"):
        server.add_tool(first_handler, name=name)
    assert [t.name for t in server.catalog().tools] == ["c", "a", "b"]


def test_remove_each_kind(server: mcp_app.Server) -> None:
    server.add_resource(read_handler, uri="x://a")
    server.add_resource_template(first_handler, uri_template="x://{id}", name="tpl")
    server.add_prompt(first_handler, name="p")
    server.remove_resource("x://a")
    server.remove_resource_template("tpl")
    server.remove_prompt("p")
    catalog = server.catalog()
    assert (catalog.resources, catalog.templates, catalog.prompts) == ((), (), ())
    assert server.generation == 6


def test_removed_name_can_be_registered_again(server: mcp_app.Server) -> None:
    server.add_tool(first_handler, name="t")
    server.remove_tool("t")
    server.add_tool(second_handler, name="t")
    assert server.catalog().tool_map["t"].handler is second_handler


def test_on_change_listeners_get_the_server_and_the_changed_kind(server: mcp_app.Server) -> None:
    calls: list[tuple[Any, set[str], int]] = []
    server.on_change(lambda srv, kinds: calls.append((srv, kinds, srv.generation)))
    server.add_tool(first_handler)
    server.add_resource(read_handler, uri="x://a")
    server.add_resource_template(first_handler, uri_template="x://{id}")
    server.add_prompt(first_handler)
    server.remove_tool("first_handler")
    assert [c[0] for c in calls] == [server] * 5
    # Listeners run after the generation moved, so they see the new catalog.
    assert [c[2] for c in calls] == [1, 2, 3, 4, 5]
    # Kinds are the catalog's names, which subscriptions/listen maps to list_changed.
    assert [c[1] for c in calls] == [
        {"tools"},
        {"resources"},
        {"templates"},
        {"prompts"},
        {"tools"},
    ]
    assert all(next(iter(c[1])) in KIND_TO_FILTER for c in calls)


def test_every_listener_is_called_and_a_failed_change_calls_none(server: mcp_app.Server) -> None:
    one: list[set[str]] = []
    two: list[set[str]] = []
    server.on_change(lambda srv, kinds: one.append(kinds))
    server.on_change(lambda srv, kinds: two.append(kinds))
    server.add_prompt(first_handler)
    with pytest.raises(AlreadyRegistered):
        server.add_prompt(first_handler)
    with pytest.raises(NotRegistered):
        server.remove_prompt("ghost")
    assert len(one) == len(two) == 1


def test_listener_may_read_the_catalog(server: mcp_app.Server) -> None:
    seen: list[list[str]] = []
    server.on_change(lambda srv, kinds: seen.append([t.name for t in srv.catalog().tools]))
    server.add_tool(first_handler)
    assert seen == [["first_handler"]]


def test_servers_are_independent(server: mcp_app.Server) -> None:
    other = mcp_app.Server(server.name + "-other")
    try:
        server.add_tool(first_handler)
        assert other.catalog().tools == ()
        assert other.generation == 0
        assert "first_handler" not in mcp_app.site.catalog().tool_map
    finally:
        servers.pop(other.name, None)


# ---------------------------------------------------------------- announcements


def test_nothing_is_announced_before_the_endpoint_serves(server: mcp_app.Server) -> None:
    # No endpoint yet: no backend and no database are touched.
    server.add_tool(first_handler)
    server.notify_resource_updated("x://a")
    assert "_endpoint" not in server.__dict__


def test_channels_are_per_server_and_topic(server: mcp_app.Server) -> None:
    assert server.channel("lists") == f"mcp:{server.name}:lists"
    assert server.channel("updated") == f"mcp:{server.name}:updated"


@pytest.mark.django_db
def test_changes_and_updates_are_published_after_commit(
    server: mcp_app.Server, django_capture_on_commit_callbacks: Any
) -> None:
    from mcp_app.delivery import backend

    received: list[tuple[str, dict[str, Any]]] = []
    unsubscribe = backend().subscribe(
        [server.channel("lists"), server.channel("updated")],
        lambda channel, message: received.append((channel, message)),
    )
    try:
        endpoint = server.endpoint
        assert server.endpoint is endpoint
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            server.add_tool(first_handler)
            server.notify_resource_updated("x://a")
        assert received == []  # nothing before the commit
        for callback in callbacks:
            callback()
    finally:
        unsubscribe()
    assert len(received) == 2
    assert received[0][0] == server.channel("lists")
    assert received[0] == (server.channel("lists"), {"kinds": ["tools"]})
    assert received[1] == (server.channel("updated"), {"uri": "x://a"})
    # A listen stream asking for tool list changes turns the announcement into one.
    listen = Listen(
        server, 9, {"toolsListChanged": True}, server.options.capabilities(server.catalog())
    )
    assert len(listen.notifications(*received[0])) == 1


class BrokenBackend(LocalBackend):
    """A backend that is down: every publish fails."""

    def publish(self, channel: str, message: dict[str, Any]) -> None:
        raise ConnectionError("the backend is down")


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_change_is_published_at_once_even_from_an_event_loop(
    server: mcp_app.Server,
) -> None:
    import asyncio

    from mcp_app.delivery import backend

    received: list[tuple[str, dict[str, Any]]] = []
    unsubscribe = backend().subscribe(
        [server.channel("lists"), server.channel("updated")],
        lambda channel, message: received.append((channel, message)),
    )
    server.endpoint  # noqa: B018

    async def in_a_handler() -> None:
        # An async handler: no database access is allowed here.
        server.add_tool(first_handler)
        server.notify_resource_updated("x://b")

    try:
        asyncio.run(in_a_handler())
    finally:
        unsubscribe()
    assert received == [
        (server.channel("lists"), {"kinds": ["tools"]}),
        (server.channel("updated"), {"uri": "x://b"}),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_backend_that_is_down_is_logged_and_the_change_stands(
    server: mcp_app.Server, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.MCP_APP = {
        **settings.MCP_APP,
        "DELIVERY_BACKEND": f"{__name__}.BrokenBackend",
    }
    server.endpoint  # noqa: B018
    server.add_tool(first_handler)
    assert "first_handler" in server.catalog().tool_map
    assert "Could not publish on" in caplog.text
    server.remove_tool("first_handler")
    assert "first_handler" not in server.catalog().tool_map


# ---------------------------------------------------------------- urls


def test_urls_are_patterns_app_name_and_namespace(server: mcp_app.Server) -> None:
    patterns, app_name, namespace = server.urls
    assert app_name == "mcp_app"
    assert namespace == server.name
    assert len(patterns) == 1
    assert patterns[0].name == "endpoint"
    # The include's own path answers with and without a trailing slash.
    assert patterns[0].resolve("") is not None
    assert patterns[0].resolve("/") is not None
    assert patterns[0].resolve("x") is None


def test_urls_can_be_mounted_with_path_like_the_admin(server: mcp_app.Server) -> None:
    resolver = URLResolver(RegexPattern(r"^/"), [path("mcp", server.urls)])
    match = resolver.resolve("/mcp/")
    assert match.namespace == server.name
    assert match.url_name == "endpoint"
    assert resolver.resolve("/mcp").url_name == "endpoint"


@pytest.mark.parametrize(("view", "is_coroutine"), [("sync", False), ("async", True)])
def test_urls_serve_the_view_kind_named_in_settings(
    server: mcp_app.Server, view: str, is_coroutine: bool
) -> None:
    import inspect

    with override_settings(MCP_APP={"VIEW": view}):
        patterns, _, _ = server.urls
    assert inspect.iscoroutinefunction(patterns[0].callback) is is_coroutine


# ---------------------------------------------------------------- settings-driven engine


def _call(server: mcp_app.Server, arguments: dict[str, Any]) -> Any:
    return server.engine.handle(
        "tools/call", {"name": "add", "arguments": arguments}, RequestContext(), server.catalog()
    )


def _add_numbers(server: mcp_app.Server) -> None:
    def add(arguments: dict[str, Any], ctx: RequestContext) -> Any:
        return arguments.get("result", {"sum": 1})

    server.add_tool(
        add,
        input_schema={"type": "object", "properties": {"n": {"type": "number"}}},
        output_schema={"type": "object", "properties": {"sum": {"type": "number"}}},
    )


def test_settings_switch_input_validation_live(server: mcp_app.Server) -> None:
    _add_numbers(server)
    with override_settings(MCP_APP={"VALIDATE_INPUT": True}):
        assert _call(server, {"n": "x"})["isError"] is True
    with override_settings(MCP_APP={"VALIDATE_INPUT": False}):
        assert _call(server, {"n": "x"}) == {
            "content": [text('{"sum":1}')],
            "structuredContent": {"sum": 1},
        }


def test_settings_switch_output_validation_live(server: mcp_app.Server) -> None:
    from mcp_app.protocol.jsonrpc import InternalError

    _add_numbers(server)
    with override_settings(MCP_APP={"VALIDATE_OUTPUT": True}), pytest.raises(InternalError):
        _call(server, {"result": {"sum": "x"}})
    with override_settings(MCP_APP={"VALIDATE_OUTPUT": False}):
        assert _call(server, {"result": {"sum": "x"}})["structuredContent"] == {"sum": "x"}


def test_validator_setting_names_the_validator_class(server: mcp_app.Server) -> None:
    _add_numbers(server)
    with override_settings(MCP_APP={"VALIDATOR": "tests.test_server.PickyValidator"}):
        assert isinstance(server.engine.validator(), PickyValidator)
        result = _call(server, {"n": 1})
    assert result["content"][0]["text"] == "Invalid arguments at the root: picky"
    with override_settings(MCP_APP={}):
        assert server.engine.validator() is server.options.validator


def test_tool_error_details_off_sends_only_that_the_tool_failed(
    server: mcp_app.Server, caplog: pytest.LogCaptureFixture
) -> None:
    def leaky(arguments: dict[str, Any], ctx: RequestContext) -> Any:
        raise OSError("[Errno 2] No such file or directory: '/srv/private/keys/x'")

    server.add_tool(leaky, name="leaky")
    call = {"name": "leaky", "arguments": {}}

    def failed() -> Any:
        return server.engine.handle("tools/call", call, RequestContext(), server.catalog())

    assert "/srv/private" in failed()["content"][0]["text"]
    with override_settings(MCP_APP={"TOOL_ERROR_DETAILS": False}), caplog.at_level("ERROR"):
        assert failed() == {"content": [text("Tool leaky failed")], "isError": True}
    assert "/srv/private/keys/x" in caplog.text  # for the site's own eyes


def test_routing_an_endpoint_without_the_app_installed_is_improperly_configured(
    server: mcp_app.Server,
) -> None:
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    without = ["django.contrib.auth", "django.contrib.contenttypes"]
    with (
        override_settings(INSTALLED_APPS=without),
        pytest.raises(ImproperlyConfigured, match="'mcp_app' is not in INSTALLED_APPS"),
    ):
        server.urls  # noqa: B018
    _, app_name, namespace = server.urls
    assert (app_name, namespace) == ("mcp_app", server.name)


def test_a_handler_that_cannot_take_its_arguments_is_refused_at_registration(
    server: mcp_app.Server,
) -> None:
    def one(arguments: Any) -> str:
        return "x"

    with pytest.raises(DefinitionError) as raised:
        server.add_tool(one)
    assert str(raised.value) == (
        "tool 'one': its handler must take (arguments, context): too many positional arguments"
    )
    with pytest.raises(
        DefinitionError, match=r"^resource 'x://a': its handler must take \(context\)"
    ):
        server.add_resource(first_handler, uri="x://a")
    with pytest.raises(
        DefinitionError,
        match=r"^resource template 't': its handler must take \(variables, context\)",
    ):
        server.add_resource_template(read_handler, uri_template="x://{id}", name="t")
    with pytest.raises(DefinitionError, match=r"^prompt 'p': its handler must take"):
        server.add_prompt(lambda arguments, context, extra: "x", name="p")
    with pytest.raises(
        DefinitionError, match=r"missing a required (keyword-only )?argument: 'flag'"
    ):
        server.add_tool(lambda arguments, context, *, flag: "x", name="kw")
    assert server.generation == 0


def test_handlers_of_any_callable_shape_that_takes_the_arguments_are_registered(
    server: mcp_app.Server,
) -> None:
    class Handler:
        def __call__(self, arguments: Any, context: Any) -> str:
            return "called"

        def method(self, arguments: Any, context: Any) -> str:
            return "method"

    server.add_tool(lambda *args: "x", name="star")
    server.add_tool(lambda arguments, context=None, extra=1: "x", name="defaults")
    server.add_tool(Handler(), name="instance")
    server.add_tool(Handler().method, name="bound")
    server.add_tool(functools.partial(lambda prefix, arguments, context: "x", "p"), name="partial")

    async def later(arguments: Any, context: Any) -> str:
        return "async"

    server.add_tool(later)

    # A decorator whose wrapper takes the call's arguments and adapts them for what it wraps.
    def with_user(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(arguments: Any, context: Any) -> Any:
            return fn(arguments, context, context.user)

        return wrapper

    @with_user
    def personal(arguments: Any, context: Any, user: Any) -> str:
        return "x"

    server.add_tool(personal)
    # A callable Python cannot describe is left to its calls.
    server.add_resource(vars, uri="x://builtin")
    assert server.generation == 8
