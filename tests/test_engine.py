"""Tests for mcp_app.protocol.engine: the method table over plain dicts, without HTTP."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from mcp_app.content import content, image, text, tool_error
from mcp_app.input import InputRequired, elicit, input_required
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.engine import Engine, ServerOptions, resource_not_found_code
from mcp_app.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    InternalError,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    ResourceNotFound,
)
from mcp_app.registry import Catalog, PromptArgument, PromptDef, ResourceDef, TemplateDef, ToolDef
from mcp_app.schema import JSONSchemaValidator, Problem

NUMBERS_SCHEMA = {
    "type": "object",
    "properties": {"numbers": {"type": "array", "items": {"type": "number"}}},
    "required": ["numbers"],
}
SUM_SCHEMA = {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}


def make_engine(**options: Any) -> Engine:
    return Engine(ServerOptions(**options))


def make_ctx(**kwargs: Any) -> RequestContext:
    return RequestContext(**kwargs)


def tool(name: str, handler: Any, **kwargs: Any) -> ToolDef:
    return ToolDef(name=name, handler=handler, **kwargs)


def call(engine: Engine, catalog: Catalog, name: str, arguments: Any = None, **ctx: Any) -> Any:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return engine.handle("tools/call", params, make_ctx(**ctx), catalog)


def returning(value: Any) -> Any:
    def handler(*args: Any) -> Any:
        return value

    return handler


# ---------------------------------------------------------------- dispatch


def test_unknown_method_is_method_not_found() -> None:
    with pytest.raises(MethodNotFound) as info:
        make_engine().handle("ping", {}, make_ctx(), Catalog(0))
    assert info.value.code == METHOD_NOT_FOUND
    assert info.value.message == "Method not found: ping"


def test_knows_exactly_the_common_methods() -> None:
    engine = make_engine()
    assert all(engine.knows(m) for m in Engine.COMMON)
    assert not engine.knows("server/discover")
    assert not engine.knows("Tools/List")


def test_option_hooks_read_the_options() -> None:
    class Custom:
        def check_schema(self, schema: Any) -> None:
            pass

        def problems(self, schema: Any, instance: object) -> list[Problem]:
            return []

    validator = Custom()
    engine = make_engine(validate_input=False, validate_output=False, validator=validator)
    assert engine.validate_input() is False
    assert engine.validate_output() is False
    assert engine.validator() is validator


# ---------------------------------------------------------------- listing and pagination


def five_tools() -> list[ToolDef]:
    return [tool(f"t{i}", returning(None)) for i in range(5)]


def test_pages_of_two_over_five_tools_follow_the_cursor_to_the_end() -> None:
    engine = make_engine(page_size=2)
    catalog = Catalog(1, tools=five_tools())
    seen: list[list[str]] = []
    params: dict[str, Any] = {}
    for _ in range(10):
        page = engine.handle("tools/list", params, make_ctx(), catalog)
        seen.append([t["name"] for t in page["tools"]])
        if "nextCursor" not in page:
            break
        assert isinstance(page["nextCursor"], str)
        params = {"cursor": page["nextCursor"]}
    assert seen == [["t0", "t1"], ["t2", "t3"], ["t4"]]


def test_exact_multiple_of_page_size_has_no_cursor_on_the_last_page() -> None:
    engine = make_engine(page_size=2)
    catalog = Catalog(1, tools=five_tools()[:4])
    first = engine.handle("tools/list", {}, make_ctx(), catalog)
    second = engine.handle("tools/list", {"cursor": first["nextCursor"]}, make_ctx(), catalog)
    assert [t["name"] for t in second["tools"]] == ["t2", "t3"]
    assert "nextCursor" not in second


def test_without_page_size_everything_is_one_page() -> None:
    page = make_engine(page_size=None).handle(
        "tools/list", {}, make_ctx(), Catalog(1, tools=five_tools())
    )
    assert len(page["tools"]) == 5
    assert "nextCursor" not in page


def test_null_cursor_means_first_page() -> None:
    page = make_engine(page_size=2).handle(
        "tools/list", {"cursor": None}, make_ctx(), Catalog(1, tools=five_tools())
    )
    assert [t["name"] for t in page["tools"]] == ["t0", "t1"]


def test_empty_listing_is_an_empty_page() -> None:
    # With list_changed, tools may be added later: the capability is offered, the list empty.
    engine = make_engine(list_changed=True)
    assert engine.handle("tools/list", {}, make_ctx(), Catalog(1)) == {"tools": []}


@pytest.mark.parametrize("method", [m for m in Engine.COMMON if m != "completion/complete"])
def test_a_method_of_a_kind_the_server_does_not_offer_is_not_found(method: str) -> None:
    engine = make_engine()
    assert engine.options.capabilities(Catalog(1)) == {"logging": {}}
    with pytest.raises(MethodNotFound, match="this server has no"):
        engine.handle(method, {}, make_ctx(), Catalog(1))


def test_list_pages_carry_the_wire_form() -> None:
    t = tool("t", returning(None), description="d")
    page = make_engine().handle("tools/list", {}, make_ctx(), Catalog(1, tools=[t]))
    assert page == {"tools": [{"name": "t", "description": "d", "inputSchema": {"type": "object"}}]}


def _encode(payload: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!!",
        "",
        "%%%%",
        _encode([1, 2, 3]),
        _encode(42),
        _encode(["stamp", -1]),
        _encode(["stamp", "2"]),
        _encode([5, 2]),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_garbage_cursor_is_invalid_params(cursor: str) -> None:
    with pytest.raises(InvalidParams) as info:
        make_engine(page_size=2).handle(
            "tools/list", {"cursor": cursor}, make_ctx(), Catalog(1, tools=five_tools())
        )
    assert info.value.code == INVALID_PARAMS
    assert info.value.message.startswith("Invalid cursor")


@pytest.mark.parametrize("offset", [True, 5, 999_999, 2.0])
def test_a_cursor_pointing_where_none_was_issued_is_invalid_params(offset: Any) -> None:
    catalog = Catalog(1, tools=five_tools())
    engine = make_engine(page_size=2)
    issued = engine.handle("tools/list", {}, make_ctx(), catalog)["nextCursor"]
    stamp = json.loads(base64.urlsafe_b64decode(issued + "=" * (-len(issued) % 4)))[0]
    with pytest.raises(InvalidParams, match=r"^Invalid cursor$"):
        engine.handle("tools/list", {"cursor": _encode([stamp, offset])}, make_ctx(), catalog)
    # The one issued still works.
    assert engine.handle("tools/list", {"cursor": issued}, make_ctx(), catalog)["tools"]


def test_non_string_cursor_is_invalid_params() -> None:
    with pytest.raises(InvalidParams, match="must be a string"):
        make_engine().handle(
            "tools/list", {"cursor": 2}, make_ctx(), Catalog(1, tools=five_tools())
        )


def test_cursor_taken_before_the_listing_changed_is_refused() -> None:
    engine = make_engine(page_size=2)
    tools = five_tools()
    first = engine.handle("tools/list", {}, make_ctx(), Catalog(1, tools=tools))
    changed = Catalog(2, tools=[*tools, tool("t5", returning(None))])
    with pytest.raises(InvalidParams, match="changed") as info:
        engine.handle("tools/list", {"cursor": first["nextCursor"]}, make_ctx(), changed)
    assert info.value.code == INVALID_PARAMS


def test_cursor_survives_a_new_generation_with_the_same_listing() -> None:
    engine = make_engine(page_size=2)
    tools = five_tools()
    first = engine.handle("tools/list", {}, make_ctx(), Catalog(1, tools=tools))
    again = engine.handle(
        "tools/list", {"cursor": first["nextCursor"]}, make_ctx(), Catalog(9, tools=tools)
    )
    assert [t["name"] for t in again["tools"]] == ["t2", "t3"]


def test_cursor_of_one_kind_is_refused_by_another() -> None:
    engine = make_engine(page_size=1)
    catalog = Catalog(
        1,
        tools=five_tools(),
        prompts=[PromptDef(name=f"p{i}", handler=returning("x")) for i in range(3)],
    )
    first = engine.handle("tools/list", {}, make_ctx(), catalog)
    with pytest.raises(InvalidParams, match="changed"):
        engine.handle("prompts/list", {"cursor": first["nextCursor"]}, make_ctx(), catalog)


def test_every_listing_method_uses_its_result_key() -> None:
    catalog = Catalog(
        1,
        resources=[ResourceDef(uri="x://r", name="r", handler=returning("x"))],
        templates=[TemplateDef(uri_template="x://{id}", name="t", handler=returning("x"))],
        prompts=[PromptDef(name="p", handler=returning("x"))],
    )
    engine, ctx = make_engine(), make_ctx()
    assert engine.handle("resources/list", {}, ctx, catalog) == {
        "resources": [{"uri": "x://r", "name": "r"}]
    }
    assert engine.handle("resources/templates/list", {}, ctx, catalog) == {
        "resourceTemplates": [{"uriTemplate": "x://{id}", "name": "t"}]
    }
    assert engine.handle("prompts/list", {}, ctx, catalog) == {"prompts": [{"name": "p"}]}


def test_templates_and_resources_paginate_too() -> None:
    engine = make_engine(page_size=1)
    catalog = Catalog(
        1,
        resources=[
            ResourceDef(uri=f"x://{i}", name=f"r{i}", handler=returning("x")) for i in range(2)
        ],
        templates=[
            TemplateDef(uri_template=f"t{i}://{{id}}", name=f"t{i}", handler=returning("x"))
            for i in range(2)
        ],
    )
    res = engine.handle("resources/list", {}, make_ctx(), catalog)
    tpl = engine.handle("resources/templates/list", {}, make_ctx(), catalog)
    res2 = engine.handle("resources/list", {"cursor": res["nextCursor"]}, make_ctx(), catalog)
    tpl2 = engine.handle(
        "resources/templates/list", {"cursor": tpl["nextCursor"]}, make_ctx(), catalog
    )
    assert [r["name"] for r in res2["resources"]] == ["r1"]
    assert [t["name"] for t in tpl2["resourceTemplates"]] == ["t1"]


# ---------------------------------------------------------------- tools/call: request checks


OTHER_TOOL = tool("other", returning(None))


@pytest.mark.parametrize("params", [{}, {"name": 5}, {"name": None}])
def test_call_without_a_string_name_is_invalid_params(params: dict[str, Any]) -> None:
    with pytest.raises(InvalidParams, match="needs a tool 'name'"):
        make_engine().handle("tools/call", params, make_ctx(), Catalog(1, tools=[OTHER_TOOL]))


def test_call_of_an_unknown_tool_is_invalid_params_naming_it() -> None:
    with pytest.raises(InvalidParams) as info:
        call(make_engine(), Catalog(1, tools=[OTHER_TOOL]), "missing")
    assert info.value.code == INVALID_PARAMS
    assert info.value.message == "Unknown tool: missing"
    assert info.value.data == {"name": "missing"}


@pytest.mark.parametrize("arguments", [[1], "x", 3])
def test_call_with_non_object_arguments_is_invalid_params(arguments: Any) -> None:
    catalog = Catalog(1, tools=[tool("t", returning("x"))])
    with pytest.raises(InvalidParams, match="'arguments' must be an object"):
        call(make_engine(), catalog, "t", arguments)


def test_missing_or_null_arguments_reach_the_handler_as_an_empty_dict() -> None:
    received: list[Any] = []

    def handler(arguments: dict[str, Any], ctx: RequestContext) -> str:
        received.append(arguments)
        return "ok"

    catalog = Catalog(1, tools=[tool("t", handler)])
    engine = make_engine()
    engine.handle("tools/call", {"name": "t"}, make_ctx(), catalog)
    engine.handle("tools/call", {"name": "t", "arguments": None}, make_ctx(), catalog)
    assert received == [{}, {}]


def test_handler_gets_arguments_and_context_with_definition_and_config() -> None:
    seen: dict[str, Any] = {}

    def handler(arguments: dict[str, Any], ctx: RequestContext) -> str:
        seen.update(arguments=arguments, definition=ctx.definition, config=ctx.config)
        return "ok"

    t = tool("t", handler, config={"row": 1})
    call(make_engine(), Catalog(1, tools=[t]), "t", {"a": 1})
    assert seen == {"arguments": {"a": 1}, "definition": t, "config": {"row": 1}}


# ---------------------------------------------------------------- tools/call: result mapping


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("hi", {"content": [text("hi")]}),
        ({"a": 1}, {"content": [text('{"a":1}')], "structuredContent": {"a": 1}}),
        (content(["x", image(b"i")]), {"content": [text("x"), image(b"i")]}),
        (
            {"content": [text("own")], "_meta": {"k": 1}},
            {"content": [text("own")], "_meta": {"k": 1}},
        ),
        (tool_error("nope"), {"content": [text("nope")], "isError": True}),
        (None, {"content": []}),
        ([text("a"), "b"], {"content": [text("a"), text("b")]}),
        (7, {"content": [text("7")]}),
    ],
)
def test_tool_return_values_map_to_call_tool_results(value: Any, expected: dict[str, Any]) -> None:
    catalog = Catalog(1, tools=[tool("t", returning(value))])
    assert call(make_engine(), catalog, "t") == expected


def test_number_with_output_schema_is_structured_content() -> None:
    catalog = Catalog(1, tools=[tool("t", returning(7), output_schema={"type": "integer"})])
    assert call(make_engine(), catalog, "t") == {"content": [text("7")], "structuredContent": 7}


def test_unsupported_return_type_is_an_internal_error() -> None:
    catalog = Catalog(1, tools=[tool("t", returning({1, 2}))])
    with pytest.raises(InternalError, match="a tool returned set") as info:
        call(make_engine(), catalog, "t")
    assert info.value.code == INTERNAL_ERROR


def test_exception_in_a_tool_is_an_error_result_with_its_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(arguments: dict[str, Any], ctx: RequestContext) -> str:
        raise RuntimeError("disk full")

    catalog = Catalog(1, tools=[tool("broken", broken)])
    with caplog.at_level(logging.ERROR, logger="mcp_app"):
        result = call(make_engine(), catalog, "broken")
    assert result == {"content": [text("disk full")], "isError": True}
    assert "tool 'broken' failed" in caplog.text


def test_exception_without_a_message_is_reported_by_its_type() -> None:
    def broken(arguments: dict[str, Any], ctx: RequestContext) -> str:
        raise KeyError

    result = call(make_engine(), Catalog(1, tools=[tool("t", broken)]), "t")
    assert result == {"content": [text("KeyError")], "isError": True}


def test_protocol_error_from_a_tool_propagates() -> None:
    def refuses(arguments: dict[str, Any], ctx: RequestContext) -> str:
        raise ProtocolError("go away", {"why": "test"}, code=-31000)

    with pytest.raises(ProtocolError) as info:
        call(make_engine(), Catalog(1, tools=[tool("t", refuses)]), "t")
    assert info.value.code == -31000
    assert info.value.data == {"why": "test"}


def test_resource_not_found_raised_in_a_tool_propagates() -> None:
    def missing(arguments: dict[str, Any], ctx: RequestContext) -> str:
        raise ResourceNotFound("x://gone")

    with pytest.raises(ResourceNotFound):
        call(make_engine(), Catalog(1, tools=[tool("t", missing)]), "t")


def test_input_required_from_a_tool_is_returned_as_is() -> None:
    outcome = input_required({"confirm": elicit("Sure?")}, state={"step": 1})
    result = call(make_engine(), Catalog(1, tools=[tool("t", returning(outcome))]), "t")
    assert result is outcome
    assert isinstance(result, InputRequired)


# ---------------------------------------------------------------- tools/call: validation


def test_invalid_arguments_are_an_error_result_and_the_handler_is_not_called() -> None:
    calls: list[Any] = []

    def add(arguments: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        calls.append(arguments)
        return {"sum": 0}

    catalog = Catalog(1, tools=[tool("add", add, input_schema=NUMBERS_SCHEMA)])
    result = call(make_engine(), catalog, "add", {"numbers": ["1"]})
    assert result == {
        "content": [
            {"type": "text", "text": "Invalid arguments at /numbers/0: expected number, got string"}
        ],
        "isError": True,
    }
    assert calls == []


def test_input_validation_can_be_switched_off() -> None:
    catalog = Catalog(1, tools=[tool("add", returning("ran"), input_schema=NUMBERS_SCHEMA)])
    result = call(make_engine(validate_input=False), catalog, "add", {"numbers": ["1"]})
    assert result == {"content": [text("ran")]}


def test_valid_arguments_and_output_pass() -> None:
    def add(arguments: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        return {"sum": sum(arguments["numbers"])}

    catalog = Catalog(
        1, tools=[tool("add", add, input_schema=NUMBERS_SCHEMA, output_schema=SUM_SCHEMA)]
    )
    result = call(make_engine(), catalog, "add", {"numbers": [1, 2.5]})
    assert result == {"content": [text('{"sum":3.5}')], "structuredContent": {"sum": 3.5}}


def test_output_schema_violation_is_an_internal_error_naming_the_tool_and_place() -> None:
    catalog = Catalog(1, tools=[tool("add", returning({"sum": "x"}), output_schema=SUM_SCHEMA)])
    with pytest.raises(InternalError) as info:
        call(make_engine(), catalog, "add")
    assert info.value.message == (
        "Tool add returned invalid structured content at /sum: expected number, got string"
    )


def test_output_schema_without_structured_content_is_an_internal_error() -> None:
    catalog = Catalog(
        1, tools=[tool("add", returning(content(text("just text"))), output_schema=SUM_SCHEMA)]
    )
    with pytest.raises(
        InternalError, match="has an output schema but returned no structured content"
    ):
        call(make_engine(), catalog, "add")


def test_a_string_against_an_object_output_schema_is_invalid_structured_content() -> None:
    catalog = Catalog(1, tools=[tool("add", returning("just text"), output_schema=SUM_SCHEMA)])
    with pytest.raises(InternalError) as info:
        call(make_engine(), catalog, "add")
    assert info.value.message == (
        "Tool add returned invalid structured content at the root: expected object, got string"
    )


@pytest.mark.parametrize(
    ("schema", "value", "structured"),
    [
        ({"type": "string"}, "hello", "hello"),
        ({"type": ["object", "null"]}, None, None),
        ({"type": "integer"}, 3, 3),
        ({"type": "array", "items": {"type": "string"}}, ["a", "b"], ["a", "b"]),
    ],
    ids=["string", "null", "integer", "array"],
)
def test_any_json_value_is_structured_content_under_an_output_schema_for_it(
    schema: dict[str, Any], value: Any, structured: Any
) -> None:
    catalog = Catalog(1, tools=[tool("t", returning(value), output_schema=schema)])
    result = call(make_engine(), catalog, "t")
    assert result["structuredContent"] == structured
    assert "structuredContent" in result


def test_error_results_skip_the_output_schema() -> None:
    catalog = Catalog(1, tools=[tool("add", returning(tool_error("no")), output_schema=SUM_SCHEMA)])
    assert call(make_engine(), catalog, "add") == {"content": [text("no")], "isError": True}


def test_output_validation_can_be_switched_off() -> None:
    catalog = Catalog(1, tools=[tool("add", returning({"sum": "x"}), output_schema=SUM_SCHEMA)])
    result = call(make_engine(validate_output=False), catalog, "add")
    assert result["structuredContent"] == {"sum": "x"}


def test_a_custom_validator_is_used_for_input() -> None:
    class Strict:
        def check_schema(self, schema: Any) -> None:
            pass

        def problems(self, schema: Any, instance: object) -> list[Problem]:
            return [Problem("/x", "always wrong")]

    catalog = Catalog(1, tools=[tool("t", returning("x"))])
    result = call(make_engine(validator=Strict()), catalog, "t", {"x": 1})
    assert result["content"][0]["text"] == "Invalid arguments at /x: always wrong"


def test_a_subclass_of_the_default_validator_overriding_problems_is_used() -> None:
    class Strict(JSONSchemaValidator):
        def problems(self, schema: Any, instance: object) -> list[Problem]:
            return [Problem("/x", "always wrong")]

    catalog = Catalog(1, tools=[tool("t", returning("x"))])
    result = call(make_engine(validator=Strict()), catalog, "t", {"x": 1})
    assert result["content"][0]["text"] == "Invalid arguments at /x: always wrong"


def test_a_schema_with_read_only_mappings_registers_and_validates() -> None:
    from types import MappingProxyType

    schema = {"type": "object", "properties": MappingProxyType({"n": {"type": "integer"}})}
    catalog = Catalog(1, tools=[tool("t", returning("ok"), input_schema=schema)])
    assert call(make_engine(), catalog, "t", {"n": 1}) == {"content": [text("ok")]}
    assert call(make_engine(), catalog, "t", {"n": "x"})["isError"] is True


def test_a_schema_changed_by_its_registrant_after_registration_changes_nothing() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    output: dict[str, Any] = {"type": "object", "properties": {"sum": {"type": "integer"}}}
    add = tool("t", returning({"sum": 1}), input_schema=schema, output_schema=output)
    catalog = Catalog(1, tools=[add])
    assert not call(make_engine(), catalog, "t", {"n": 1}).get("isError")
    schema["properties"]["n"]["type"] = "string"
    output["properties"]["sum"]["type"] = "string"
    # Validated and listed as registered, both ways.
    assert not call(make_engine(), catalog, "t", {"n": 2}).get("isError")
    assert call(make_engine(), catalog, "t", {"n": "2"})["isError"] is True
    assert add.wire["inputSchema"]["properties"]["n"] == {"type": "integer"}
    assert add.wire["outputSchema"]["properties"]["sum"] == {"type": "integer"}


# ---------------------------------------------------------------- async handlers


async def async_tool(arguments: dict[str, Any], ctx: RequestContext) -> str:
    await asyncio.sleep(0)
    return f"async {arguments['n']}"


def test_async_tool_runs_through_the_context_runner() -> None:
    ran: list[Any] = []

    def runner(coroutine: Coroutine[Any, Any, Any]) -> Any:
        ran.append(coroutine)
        return asyncio.run(coroutine)

    catalog = Catalog(1, tools=[tool("t", async_tool)])
    result = call(make_engine(), catalog, "t", {"n": 1}, run_async=runner)
    assert result == {"content": [text("async 1")]}
    assert len(ran) == 1


def test_async_tool_runs_with_the_default_runner() -> None:
    result = call(make_engine(), Catalog(1, tools=[tool("t", async_tool)]), "t", {"n": 2})
    assert result == {"content": [text("async 2")]}


def plainly_wrapped(function: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator that does not keep an async function a coroutine function."""

    @functools.wraps(function)
    def wrapper(*args: Any) -> Any:
        return function(*args)

    return wrapper


def test_an_async_tool_behind_a_plain_wrapper_is_awaited() -> None:
    result = call(
        make_engine(), Catalog(1, tools=[tool("t", plainly_wrapped(async_tool))]), "t", {"n": 3}
    )
    assert result == {"content": [text("async 3")]}


def test_an_async_completer_behind_a_plain_wrapper_is_awaited() -> None:
    async def completer(value: str, context_args: dict[str, str], ctx: RequestContext) -> list[str]:
        return [value + "?"]

    catalog = completion_catalog(prompt_completer=plainly_wrapped(completer))
    result = complete(catalog, {"type": "ref/prompt", "name": "p"}, {"name": "lang", "value": "x"})
    assert result["completion"]["values"] == ["x?"]


def test_exception_in_an_async_tool_is_an_error_result() -> None:
    async def broken(arguments: dict[str, Any], ctx: RequestContext) -> str:
        raise ValueError("async broke")

    result = call(make_engine(), Catalog(1, tools=[tool("t", broken)]), "t")
    assert result == {"content": [text("async broke")], "isError": True}


def test_sync_tool_does_not_use_the_runner() -> None:
    def runner(coroutine: Any) -> Any:
        raise AssertionError("must not be called")

    result = call(
        make_engine(), Catalog(1, tools=[tool("t", returning("s"))]), "t", run_async=runner
    )
    assert result == {"content": [text("s")]}


# ---------------------------------------------------------------- resources/read


def read(catalog: Catalog, uri: Any, **ctx: Any) -> Any:
    return make_engine().handle("resources/read", {"uri": uri}, make_ctx(**ctx), catalog)


def resource(uri: str, value: Any, mime_type: str | None = None) -> ResourceDef:
    return ResourceDef(uri=uri, name=uri, handler=returning(value), mime_type=mime_type)


class Gatekeeper(Engine):
    """An engine whose callers may use only definitions whose permission is "open"."""

    def permitted(self, definition: Any, ctx: RequestContext) -> bool:
        return bool(definition.permission == "open")


def test_a_hidden_template_claims_no_uri_of_a_visible_one_after_it() -> None:
    hidden = TemplateDef(
        uri_template="docs://{+path}", name="hidden", handler=returning("secret"), permission="x"
    )
    public = TemplateDef(
        uri_template="docs://{+rest}",
        name="public",
        handler=lambda v, c: f"public {v['rest']}",
        permission="open",
        complete={"rest": lambda value, ctx: ["a"]},
    )
    catalog = Catalog(1, templates=[hidden, public])
    engine, ctx = Gatekeeper(ServerOptions()), make_ctx()
    read = engine.handle("resources/read", {"uri": "docs://x"}, ctx, catalog)
    assert read["contents"][0]["text"] == "public x"
    assert engine.hides("docs://x", ctx, catalog) is False
    # Only templates that match the URI have their permission asked.
    asked: list[str] = []

    class Counting(Gatekeeper):
        def permitted(self, definition: Any, ctx: RequestContext) -> bool:
            asked.append(definition.name)
            return super().permitted(definition, ctx)

    other = TemplateDef(
        uri_template="other://{x}", name="other", handler=returning("o"), permission="x"
    )
    Counting(ServerOptions()).handle(
        "resources/read", {"uri": "docs://x"}, ctx, Catalog(3, templates=[other, hidden, public])
    )
    assert asked == ["hidden", "public"]
    # With no visible template, the URI is hidden, and reads as one that does not exist: on a
    # server whose lists may change, a resource not found; on one with a fixed catalog, as if
    # it had no resources at all.
    alone = Catalog(2, templates=[hidden])
    assert engine.hides("docs://x", ctx, alone) is True
    with pytest.raises(ResourceNotFound):
        Gatekeeper(ServerOptions(list_changed=True)).handle(
            "resources/read", {"uri": "docs://x"}, ctx, alone
        )
    with pytest.raises(MethodNotFound, match="this server has no resources"):
        engine.handle("resources/read", {"uri": "docs://x"}, ctx, alone)


class Trusting(Gatekeeper):
    """As ``Gatekeeper``, but the user "trusted" may use everything."""

    def permitted(self, definition: Any, ctx: RequestContext) -> bool:
        return ctx.user == "trusted" or super().permitted(definition, ctx)


def secret_prompt(name: str = "secret", permission: str = "x", value: str = "b") -> PromptDef:
    """A prompt that completes its argument ``a`` with ``value``; by default, one that only
    permission "x" may use."""
    return PromptDef(
        name=name,
        handler=returning(name),
        arguments=("a",),  # type: ignore[arg-type]
        complete={"a": completer_for([value])},
        permission=permission,
    )


def test_what_a_caller_may_not_use_shapes_none_of_its_capabilities() -> None:
    hidden_tool = tool("tasked", returning("t"), task="optional", permission="x")
    hidden_prompt = secret_prompt()
    plain = tool("plain", returning("p"), permission="open")
    catalog = Catalog(1, tools=[hidden_tool, plain], prompts=[hidden_prompt])
    alone = Catalog(1, tools=[plain])
    engine = Trusting(ServerOptions())
    everything = engine.options.capabilities(catalog)
    assert {"tools", "prompts", "completions", "extensions"} <= set(everything)
    assert engine.capabilities(catalog, "trusted") == everything
    assert engine.offers_tasks(catalog, make_ctx(user="trusted")) is True
    # As on a server with only the tool the caller may use.
    assert engine.capabilities(catalog, None) == engine.options.capabilities(alone)
    ctx = make_ctx()
    assert engine.offers_tasks(catalog, ctx) is False
    for method, params in [
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "secret"}}),
        ("prompts/list", {}),
        ("prompts/get", {"name": "secret"}),
    ]:
        with pytest.raises(MethodNotFound) as hidden:
            engine.handle(method, params, ctx, catalog)
        with pytest.raises(MethodNotFound) as absent:
            engine.handle(method, params, ctx, alone)
        assert hidden.value.message == absent.value.message
    listed = engine.handle("prompts/list", {}, make_ctx(user="trusted"), catalog)
    assert [prompt["name"] for prompt in listed["prompts"]] == ["secret"]
    # A server whose lists may change offers them all; only what hidden definitions alone
    # offer is left out.
    changing = Trusting(ServerOptions(list_changed=True))
    offered = changing.capabilities(catalog, None)
    assert set(offered) == {"tools", "resources", "prompts", "logging"}
    assert set(changing.capabilities(catalog, "trusted")) == set(offered) | {
        "completions",
        "extensions",
    }


def test_completing_a_hidden_prompt_answers_as_for_one_that_does_not_exist() -> None:
    hidden_prompt = secret_prompt()
    open_template = TemplateDef(
        uri_template="z://{q}",
        name="z",
        handler=returning("z"),
        complete={"q": completer_for(["y"])},
        permission="open",
    )
    catalog = Catalog(1, templates=[open_template], prompts=[hidden_prompt])
    engine, ctx = Gatekeeper(ServerOptions()), make_ctx()
    # Something the caller may use completes, so the method is served to it.
    assert "completions" in engine.capabilities(catalog, None)
    errors = []
    for name in ("secret", "absent"):
        params = {
            "ref": {"type": "ref/prompt", "name": name},
            "argument": {"name": "a", "value": ""},
        }
        with pytest.raises(InvalidParams) as refused:
            engine.handle("completion/complete", params, ctx, catalog)
        errors.append((refused.value.code, refused.value.message.replace(name, "NAME")))
    assert errors[0] == errors[1]
    assert errors[0][1] == "Unknown prompt: NAME"


class Failing(Gatekeeper):
    """As ``Gatekeeper``, but the check of a definition whose permission is "boom" fails."""

    def permitted(self, definition: Any, ctx: RequestContext) -> bool:
        if definition.permission == "boom":
            raise RuntimeError("the permission backend is down")
        return super().permitted(definition, ctx)


def test_a_capability_whose_check_fails_stays_offered(caplog: pytest.LogCaptureFixture) -> None:
    unsure = tool("unsure", returning("u"), task="optional", permission="boom")
    catalog = Catalog(1, tools=[unsure], prompts=[secret_prompt()])
    engine = Failing(ServerOptions(list_changed=True))
    with caplog.at_level(logging.WARNING, logger="mcp_app"):
        offered = engine.capabilities(catalog, None)
    assert "Could not check which definitions a caller may use" in caplog.text
    # Offering one grants nothing: the tool is checked again where it is used. The other
    # checks hold.
    assert "extensions" in offered
    assert "completions" not in offered
    assert engine.offers_tasks(catalog, make_ctx()) is True


def test_a_failing_check_of_another_definition_leaves_a_request_served() -> None:
    unsure = secret_prompt("unsure", "boom", "x")
    usable = secret_prompt("usable", "open", "z")
    tools = [tool("boom", returning("b"), permission="boom")]
    tools.append(tool("t2", returning("t"), permission="open", input_schema={"type": "object"}))
    catalog = Catalog(1, tools=tools, prompts=[unsure, usable])
    engine, ctx = Failing(ServerOptions()), make_ctx()
    params = {
        "ref": {"type": "ref/prompt", "name": "usable"},
        "argument": {"name": "a", "value": ""},
    }
    assert engine.handle("completion/complete", params, ctx, catalog)["completion"]["values"] == [
        "z"
    ]
    # A call's own error is answered, not the failure of checking what else the caller sees.
    with pytest.raises(InvalidParams):
        engine.handle("tools/call", {"name": "t2", "arguments": 5}, ctx, catalog)


def test_a_caller_s_cursors_do_not_change_with_what_is_hidden_from_it() -> None:
    def listing(*tools: ToolDef) -> Catalog:
        return Catalog(1, tools=list(tools))

    a, b, c = (tool(name, returning(name), permission="open") for name in "abc")
    hidden = tool("h", returning("h"), permission="x")
    engine, ctx = Gatekeeper(ServerOptions(page_size=1)), make_ctx()
    first = engine.handle("tools/list", {}, ctx, listing(a, hidden, b, c))
    cursor = {"cursor": first["nextCursor"]}
    # The hidden tool changed: the caller's list did not, and its cursor still serves.
    changed = tool("h", returning("h"), permission="x", description="new")
    for catalog in (listing(a, changed, b, c), listing(a, b, c), listing(hidden, a, b, c)):
        assert [t["name"] for t in engine.handle("tools/list", cursor, ctx, catalog)["tools"]] == [
            "b"
        ]
    # A change of what it sees is refused as ever.
    renamed = tool("b2", returning("b"), permission="open")
    with pytest.raises(InvalidParams, match="list has changed"):
        engine.handle("tools/list", cursor, ctx, listing(a, hidden, renamed, c))


@pytest.mark.parametrize("uri", [None, "", 5])
def test_read_needs_a_uri(uri: Any) -> None:
    with pytest.raises(InvalidParams, match="needs a 'uri'"):
        read(Catalog(1, resources=[resource("x://a", "hello", "text/plain")]), uri)


def test_text_resource_with_its_mime_type() -> None:
    catalog = Catalog(1, resources=[resource("x://a", "hello", "text/plain")])
    assert read(catalog, "x://a") == {
        "contents": [{"uri": "x://a", "text": "hello", "mimeType": "text/plain"}]
    }


def test_bytes_resource_is_a_base64_blob() -> None:
    catalog = Catalog(1, resources=[resource("x://b", b"\x00\x01\x02", "application/octet-stream")])
    assert read(catalog, "x://b") == {
        "contents": [{"uri": "x://b", "blob": "AAEC", "mimeType": "application/octet-stream"}]
    }


def test_dict_and_list_resources_fill_in_the_mime_type_only_when_missing() -> None:
    catalog = Catalog(
        1,
        resources=[
            resource("x://d", {"text": "{}", "mimeType": "application/json"}, "text/plain"),
            resource("x://l", ["a", {"blob": b"b"}], "text/plain"),
        ],
    )
    assert read(catalog, "x://d")["contents"] == [
        {"uri": "x://d", "text": "{}", "mimeType": "application/json"}
    ]
    assert read(catalog, "x://l")["contents"] == [
        {"uri": "x://l", "text": "a", "mimeType": "text/plain"},
        {"uri": "x://l", "blob": "Yg==", "mimeType": "text/plain"},
    ]


def test_resource_handler_gets_only_the_context() -> None:
    seen: list[Any] = []

    def handler(*args: Any) -> str:
        seen.append(args)
        return "x"

    r = ResourceDef(uri="x://a", name="a", handler=handler)
    ctx = make_ctx()
    make_engine().handle("resources/read", {"uri": "x://a"}, ctx, Catalog(1, resources=[r]))
    assert seen == [(ctx,)]
    assert ctx.definition is r


def test_resource_returning_none_is_not_found() -> None:
    with pytest.raises(ResourceNotFound) as info:
        read(Catalog(1, resources=[resource("x://a", None)]), "x://a")
    assert info.value.data == {"uri": "x://a"}


def test_unknown_uri_is_resource_not_found_with_the_uri() -> None:
    with pytest.raises(ResourceNotFound) as info:
        read(Catalog(1, resources=[resource("x://a", "x")]), "x://other")
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"uri": "x://other"}
    assert info.value.uri == "x://other"


def test_template_read_passes_variables_and_uses_the_template_mime_type() -> None:
    seen: list[Any] = []

    def person(variables: dict[str, str], ctx: RequestContext) -> str:
        seen.append((variables, ctx.definition))
        return f"person {variables['id']}"

    template = TemplateDef(
        uri_template="people://{id}", name="person", handler=person, mime_type="text/plain"
    )
    catalog = Catalog(1, templates=[template])
    assert read(catalog, "people://ada") == {
        "contents": [{"uri": "people://ada", "text": "person ada", "mimeType": "text/plain"}]
    }
    assert seen == [({"id": "ada"}, template)]


def test_fixed_resource_wins_over_a_matching_template() -> None:
    catalog = Catalog(
        1,
        resources=[resource("people://ada", "fixed")],
        templates=[TemplateDef(uri_template="people://{id}", name="p", handler=returning("templ"))],
    )
    assert read(catalog, "people://ada")["contents"][0]["text"] == "fixed"
    assert read(catalog, "people://bob")["contents"][0]["text"] == "templ"


def test_template_handler_returning_none_is_not_found() -> None:
    catalog = Catalog(
        1, templates=[TemplateDef(uri_template="p://{id}", name="p", handler=returning(None))]
    )
    with pytest.raises(ResourceNotFound) as info:
        read(catalog, "p://nobody")
    assert info.value.data == {"uri": "p://nobody"}


def test_async_resource_and_template_are_awaited() -> None:
    async def fixed(ctx: RequestContext) -> str:
        return "async fixed"

    async def templ(variables: dict[str, str], ctx: RequestContext) -> bytes:
        return variables["id"].encode()

    catalog = Catalog(
        1,
        resources=[ResourceDef(uri="x://a", name="a", handler=fixed)],
        templates=[TemplateDef(uri_template="y://{id}", name="y", handler=templ)],
    )
    assert read(catalog, "x://a")["contents"] == [{"uri": "x://a", "text": "async fixed"}]
    assert read(catalog, "y://hi")["contents"] == [{"uri": "y://hi", "blob": "aGk="}]


def test_resource_input_required_is_returned_as_is() -> None:
    outcome = input_required(state=1)
    assert read(Catalog(1, resources=[resource("x://a", outcome)]), "x://a") is outcome


def test_unsupported_resource_value_is_an_internal_error() -> None:
    with pytest.raises(InternalError):
        read(Catalog(1, resources=[resource("x://a", 42)]), "x://a")


def test_resource_handler_exceptions_propagate() -> None:
    def broken(ctx: RequestContext) -> str:
        raise OSError("gone")

    catalog = Catalog(1, resources=[ResourceDef(uri="x://a", name="a", handler=broken)])
    with pytest.raises(OSError, match="gone"):
        read(catalog, "x://a")


# ---------------------------------------------------------------- prompts/get


def get_prompt(catalog: Catalog, name: Any, arguments: Any = None) -> Any:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return make_engine().handle("prompts/get", params, make_ctx(), catalog)


def prompt(name: str, value: Any, **kwargs: Any) -> PromptDef:
    return PromptDef(name=name, handler=returning(value), **kwargs)


def test_string_prompt_is_one_user_message_with_description_fallback() -> None:
    catalog = Catalog(1, prompts=[prompt("greet", "Say hi", description="Greets")])
    assert get_prompt(catalog, "greet") == {
        "messages": [{"role": "user", "content": text("Say hi")}],
        "description": "Greets",
    }


def test_prompt_without_description_has_none() -> None:
    assert "description" not in get_prompt(Catalog(1, prompts=[prompt("p", "x")]), "p")


def test_list_prompt_of_strings_and_dicts() -> None:
    value = ["q", {"role": "assistant", "content": "a"}]
    assert get_prompt(Catalog(1, prompts=[prompt("p", value)]), "p")["messages"] == [
        {"role": "user", "content": text("q")},
        {"role": "assistant", "content": text("a")},
    ]


def test_dict_prompt_keeps_its_own_description() -> None:
    value = {"description": "own", "messages": ["q"]}
    result = get_prompt(Catalog(1, prompts=[prompt("p", value, description="fallback")]), "p")
    assert result["description"] == "own"


def test_prompt_handler_gets_arguments_and_context() -> None:
    seen: list[Any] = []

    def handler(arguments: dict[str, str], ctx: RequestContext) -> str:
        seen.append((arguments, ctx.definition.name))
        return f"hello {arguments['who']}"

    p = PromptDef(name="p", handler=handler, arguments=(PromptArgument("who", required=True),))
    result = get_prompt(Catalog(1, prompts=[p]), "p", {"who": "ada", "extra": "x"})
    assert result["messages"][0]["content"]["text"] == "hello ada"
    assert seen == [({"who": "ada", "extra": "x"}, "p")]


def test_missing_required_prompt_arguments_are_named() -> None:
    p = prompt(
        "p",
        "x",
        arguments=(
            PromptArgument("a", required=True),
            PromptArgument("b"),
            PromptArgument("c", required=True),
        ),
    )
    with pytest.raises(InvalidParams) as info:
        get_prompt(Catalog(1, prompts=[p]), "p", {"b": "1"})
    assert info.value.code == INVALID_PARAMS
    assert info.value.message == "Missing required arguments for prompt p: a, c"
    assert info.value.data == {"missing": ["a", "c"]}


@pytest.mark.parametrize("arguments", [{"a": 1}, {"a": None}, ["a"], "a"])
def test_prompt_arguments_must_be_an_object_of_strings(arguments: Any) -> None:
    with pytest.raises(InvalidParams, match="must be an object of strings"):
        get_prompt(Catalog(1, prompts=[prompt("p", "x")]), "p", arguments)


def test_unknown_prompt_is_invalid_params() -> None:
    with pytest.raises(InvalidParams) as info:
        get_prompt(Catalog(1, prompts=[prompt("p", "x")]), "nope")
    assert info.value.message == "Unknown prompt: nope"
    assert info.value.data == {"name": "nope"}


def test_prompt_needs_a_string_name() -> None:
    with pytest.raises(InvalidParams, match="needs a prompt 'name'"):
        get_prompt(Catalog(1, prompts=[prompt("p", "x")]), 3)


def test_async_prompt_is_awaited() -> None:
    async def handler(arguments: dict[str, str], ctx: RequestContext) -> str:
        return "async prompt"

    catalog = Catalog(1, prompts=[PromptDef(name="p", handler=handler)])
    assert get_prompt(catalog, "p")["messages"][0]["content"] == text("async prompt")


def test_prompt_input_required_is_returned_as_is() -> None:
    outcome = input_required(state="s")
    assert get_prompt(Catalog(1, prompts=[prompt("p", outcome)]), "p") is outcome


def test_prompt_returning_garbage_is_an_internal_error() -> None:
    with pytest.raises(InternalError):
        get_prompt(Catalog(1, prompts=[prompt("p", 42)]), "p")


# ---------------------------------------------------------------- completion/complete


def completer_for(values: Any) -> Any:
    calls: list[Any] = []

    def completer(value: str, context_args: dict[str, str], ctx: RequestContext) -> Any:
        calls.append((value, context_args, ctx))
        return values

    completer.calls = calls  # type: ignore[attr-defined]
    return completer


def completion_catalog(prompt_completer: Any = None, template_completer: Any = None) -> Catalog:
    prompts = [
        PromptDef(
            name="p",
            handler=returning("x"),
            arguments=("lang", "other"),  # type: ignore[arg-type]
            complete={"lang": prompt_completer} if prompt_completer else {},
        )
    ]
    templates = [
        TemplateDef(
            uri_template="repo://{owner}/{name}",
            name="repo",
            handler=returning("x"),
            complete={"owner": template_completer} if template_completer else {},
        )
    ]
    if not prompt_completer and not template_completer:
        # Keep completions possible somewhere so the method is served.
        templates.append(
            TemplateDef(
                uri_template="z://{q}",
                name="z",
                handler=returning("x"),
                complete={"q": completer_for([])},
            )
        )
    return Catalog(1, prompts=prompts, templates=templates)


def complete(
    catalog: Catalog, ref: Any, argument: Any, context: Any = None, ctx: Any = None
) -> Any:
    params: dict[str, Any] = {"ref": ref, "argument": argument}
    if context is not None:
        params["context"] = context
    return make_engine().handle("completion/complete", params, ctx or make_ctx(), catalog)


def test_prompt_completion_passes_value_context_and_sets_definition() -> None:
    completer = completer_for(["python", "perl"])
    catalog = completion_catalog(prompt_completer=completer)
    ctx = make_ctx()
    result = complete(
        catalog,
        {"type": "ref/prompt", "name": "p"},
        {"name": "lang", "value": "p"},
        {"arguments": {"other": "x"}},
        ctx,
    )
    assert result == {"completion": {"values": ["python", "perl"], "hasMore": False}}
    assert completer.calls == [("p", {"other": "x"}, ctx)]
    assert ctx.definition is catalog.prompt_map["p"]


def test_resource_completion_finds_the_template_by_its_uri_template() -> None:
    completer = completer_for({"values": ["octo"], "total": 5, "hasMore": True})
    catalog = completion_catalog(template_completer=completer)
    result = complete(
        catalog,
        {"type": "ref/resource", "uri": "repo://{owner}/{name}"},
        {"name": "owner", "value": "oc"},
    )
    assert result == {"completion": {"values": ["octo"], "hasMore": True, "total": 5}}
    assert completer.calls[0][:2] == ("oc", {})


def test_argument_without_a_completer_gives_empty_values() -> None:
    catalog = completion_catalog(prompt_completer=completer_for(["a"]))
    result = complete(catalog, {"type": "ref/prompt", "name": "p"}, {"name": "other", "value": ""})
    assert result == {"completion": {"values": [], "hasMore": False}}


def test_more_than_a_hundred_values_are_capped_with_has_more_and_total() -> None:
    catalog = completion_catalog(prompt_completer=completer_for([f"v{i}" for i in range(250)]))
    result = complete(catalog, {"type": "ref/prompt", "name": "p"}, {"name": "lang", "value": ""})
    completion = result["completion"]
    assert len(completion["values"]) == 100
    assert completion["values"][0] == "v0"
    assert completion["values"][-1] == "v99"
    assert completion["hasMore"] is True
    assert completion["total"] == 250


def test_async_completer_is_awaited() -> None:
    async def completer(value: str, context_args: dict[str, str], ctx: RequestContext) -> list[str]:
        await asyncio.sleep(0)
        return [value + "!"]

    catalog = completion_catalog(prompt_completer=completer)
    result = complete(catalog, {"type": "ref/prompt", "name": "p"}, {"name": "lang", "value": "x"})
    assert result["completion"]["values"] == ["x!"]


def test_completion_for_an_unknown_prompt_is_invalid_params() -> None:
    with pytest.raises(InvalidParams, match="Unknown prompt: nope"):
        complete(
            completion_catalog(), {"type": "ref/prompt", "name": "nope"}, {"name": "a", "value": ""}
        )


def test_completion_for_an_unknown_template_is_invalid_params() -> None:
    with pytest.raises(InvalidParams, match="Unknown resource template: repo://x"):
        complete(
            completion_catalog(),
            {"type": "ref/resource", "uri": "repo://x"},
            {"name": "a", "value": ""},
        )


def test_completion_with_an_unknown_ref_type_is_invalid_params() -> None:
    with pytest.raises(InvalidParams, match="must be 'ref/prompt' or 'ref/resource'"):
        complete(
            completion_catalog(), {"type": "ref/tool", "name": "p"}, {"name": "a", "value": ""}
        )


@pytest.mark.parametrize(
    ("ref", "argument", "message"),
    [
        (None, {"name": "a", "value": ""}, "needs 'ref' and 'argument' objects"),
        ({"type": "ref/prompt", "name": "p"}, "a", "needs 'ref' and 'argument' objects"),
        (
            {"type": "ref/prompt", "name": "p"},
            {"name": 1, "value": ""},
            "string 'name' and 'value'",
        ),
        (
            {"type": "ref/prompt", "name": "p"},
            {"name": "a", "value": 3},
            "string 'name' and 'value'",
        ),
        ({"type": "ref/prompt", "name": "p"}, {"name": "a"}, "string 'name' and 'value'"),
    ],
)
def test_malformed_completion_requests_are_invalid_params(
    ref: Any, argument: Any, message: str
) -> None:
    with pytest.raises(InvalidParams, match=message):
        complete(completion_catalog(), ref, argument)


@pytest.mark.parametrize("context", [[1], "oops", 5, False])
def test_a_completion_context_that_is_no_object_is_invalid_params(context: Any) -> None:
    with pytest.raises(InvalidParams, match="'context' must be an object"):
        complete(
            completion_catalog(prompt_completer=completer_for(["x"])),
            {"type": "ref/prompt", "name": "p"},
            {"name": "a", "value": ""},
            context,
        )


def test_completion_without_any_completer_is_method_not_found() -> None:
    catalog = Catalog(1, prompts=[PromptDef(name="p", handler=returning("x"), arguments=("a",))])  # type: ignore[arg-type]
    with pytest.raises(MethodNotFound, match="nothing can complete"):
        complete(catalog, {"type": "ref/prompt", "name": "p"}, {"name": "a", "value": ""})


# ---------------------------------------------------------------- capabilities and identity


def test_capabilities_of_an_empty_catalog_without_logging_are_empty() -> None:
    assert ServerOptions(logging=False).capabilities(Catalog(1)) == {}


def test_logging_capability_follows_the_option() -> None:
    assert ServerOptions().capabilities(Catalog(1)) == {"logging": {}}


def test_capabilities_follow_what_is_defined() -> None:
    full = completion_catalog(prompt_completer=completer_for([]))
    full = Catalog(
        1, tools=[tool("t", returning(None))], prompts=full.prompts, templates=full.templates
    )
    assert ServerOptions(logging=False).capabilities(full) == {
        "tools": {},
        "resources": {},
        "prompts": {},
        "completions": {},
    }


def test_templates_alone_give_the_resources_capability() -> None:
    catalog = Catalog(
        1, templates=[TemplateDef(uri_template="p://{id}", name="p", handler=returning("x"))]
    )
    assert ServerOptions(logging=False).capabilities(catalog) == {"resources": {}}


def test_list_changed_and_subscribe_flags_are_advertised() -> None:
    catalog = Catalog(
        1,
        tools=[tool("t", returning(None))],
        resources=[resource("x://a", "x")],
        prompts=[prompt("p", "x")],
    )
    caps = ServerOptions(list_changed=True, subscribe=True).capabilities(catalog)
    assert caps == {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "logging": {},
    }


def test_server_info_is_name_and_version_by_default() -> None:
    assert ServerOptions().server_info == {"name": "django-mcp-app", "version": "0.1.0"}


def test_server_info_includes_the_optional_identity_fields() -> None:
    options = ServerOptions(
        name="n",
        version="2",
        title="T",
        description="D",
        website_url="https://example.com",
        icons=[{"src": "https://example.com/i.png"}],
    )
    assert options.server_info == {
        "name": "n",
        "version": "2",
        "title": "T",
        "description": "D",
        "websiteUrl": "https://example.com",
        "icons": [{"src": "https://example.com/i.png"}],
    }


def test_resource_not_found_code_depends_on_the_era() -> None:
    assert resource_not_found_code("2026-07-28") == INVALID_PARAMS
    assert resource_not_found_code("2025-11-25") == RESOURCE_NOT_FOUND
    assert resource_not_found_code("2025-03-26") == RESOURCE_NOT_FOUND


def test_a_tool_schema_that_cannot_be_used_is_an_internal_error_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A loop through $dynamicRef is met only on a value with x (see test_schema).
    schema = {
        "type": "object",
        "properties": {"x": {"$dynamicRef": "#/$defs/a"}},
        "$defs": {"a": {"$dynamicRef": "#/$defs/a"}},
    }
    catalog = Catalog(1, tools=[tool("looped", returning("ok"), input_schema=schema)])
    engine = make_engine()
    assert call(engine, catalog, "looped", {})["content"][0]["text"] == "ok"
    with pytest.raises(InternalError, match="Tool looped has an input schema that cannot be used"):
        call(engine, catalog, "looped", {"x": 1})
    assert "refers to itself without end" in caplog.text


# ---------------------------------------------------------------- work handed to a task


def handing_over(value: Any) -> Any:
    from mcp_app.protocol.tasks import run_as_task

    def handler(arguments: Any, ctx: RequestContext) -> Any:
        return run_as_task(lambda task: value)

    return handler


def test_work_handed_to_a_task_goes_to_a_client_that_follows_tasks() -> None:
    from mcp_app.protocol.tasks import TaskWork

    catalog = Catalog(1, tools=[tool("job", handing_over("done"), task="optional")])
    ctx = make_ctx()
    ctx.follows_tasks = True
    outcome = make_engine().handle("tools/call", {"name": "job"}, ctx, catalog)
    assert isinstance(outcome, TaskWork)
    assert make_engine().run_work(catalog.tool_map["job"], outcome, ctx) == {
        "content": [{"type": "text", "text": "done"}]
    }


def test_work_handed_to_a_task_is_done_in_the_request_for_other_clients() -> None:
    catalog = Catalog(1, tools=[tool("job", handing_over("done"), task="optional")])
    assert call(make_engine(), catalog, "job")["content"][0]["text"] == "done"
    # A tool that declared no task support runs its work in the request for everyone.
    catalog = Catalog(1, tools=[tool("job", handing_over("done"))])
    ctx = make_ctx()
    ctx.follows_tasks = True
    assert make_engine().handle("tools/call", {"name": "job"}, ctx, catalog)["content"]


def test_work_asking_for_input_in_the_request_is_a_request_for_input() -> None:
    asked = input_required({"q": elicit("Q?")})
    catalog = Catalog(1, tools=[tool("job", handing_over(asked), task="optional")])
    assert call(make_engine(), catalog, "job") is asked


def test_work_that_hands_over_again_is_an_internal_error() -> None:
    from mcp_app.protocol.tasks import run_as_task

    again = run_as_task(lambda task: "x")
    catalog = Catalog(1, tools=[tool("job", handing_over(again), task="optional")])
    with pytest.raises(InternalError, match="handed a task's work to another task"):
        call(make_engine(), catalog, "job")


def test_a_task_only_tool_needs_a_client_that_follows_tasks() -> None:
    catalog = Catalog(1, tools=[tool("job", handing_over("x"), task="required")])
    with pytest.raises(ProtocolError) as caught:
        call(make_engine(), catalog, "job")
    assert caught.value.code == -32021
    with pytest.raises(ProtocolError) as caught:
        call(make_engine(), catalog, "job", protocol_version="2025-11-25")
    # A well-formed request for a tool this era cannot call: invalid params, not request.
    assert caught.value.code == -32602


def test_task_support_is_advertised_as_the_extension() -> None:
    options = ServerOptions()
    with_tasks = Catalog(1, tools=[tool("job", handing_over("x"), task="optional")])
    assert options.capabilities(with_tasks)["extensions"] == {"io.modelcontextprotocol/tasks": {}}
    assert "extensions" not in options.capabilities(Catalog(1, tools=[tool("t", returning(1))]))


def test_task_support_is_one_of_three_words() -> None:
    from mcp_app.exceptions import DefinitionError

    with pytest.raises(DefinitionError, match="task must be one of"):
        tool("job", returning(1), task="sometimes")


# ---------------------------------------------------------------- a handler that raises


class _Quiet(Engine):
    def error_details(self) -> bool:
        return False


@pytest.mark.parametrize("method", ["prompts/get", "resources/read"])
def test_a_resource_or_prompt_handler_that_raises_is_an_internal_error_with_its_message(
    method: str,
) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("the disk is on fire")

    catalog = Catalog(
        1,
        prompts=[PromptDef(name="p", handler=broken)],
        resources=[ResourceDef(uri="memo://a", name="a", handler=broken)],
    )
    params = {"name": "p"} if method == "prompts/get" else {"uri": "memo://a"}
    for engine, message in (
        (make_engine(), "the disk is on fire"),
        (_Quiet(ServerOptions()), "Internal error"),
    ):
        ctx = make_ctx()
        with pytest.raises(RuntimeError) as raised:
            engine.handle(method, params, ctx, catalog)
        assert ctx.handler_error is raised.value
        error = engine.internal_error(raised.value, ctx)
        assert (error.code, error.message) == (-32603, message)
    # An exception of anything but the handler says nothing of itself, details on or not.
    other = RuntimeError("SELECT secret FROM elsewhere")
    assert make_engine().internal_error(other, ctx).message == "Internal error"
    assert make_engine().internal_error(other, None).message == "Internal error"


def test_an_exception_with_no_message_is_named_by_its_type() -> None:
    def broken(*args: Any) -> Any:
        raise KeyError

    catalog = Catalog(1, prompts=[PromptDef(name="p", handler=broken)])
    ctx = make_ctx()
    engine = make_engine()
    with pytest.raises(KeyError) as raised:
        engine.handle("prompts/get", {"name": "p"}, ctx, catalog)
    assert engine.internal_error(raised.value, ctx).message == "KeyError"


def test_an_error_of_the_servers_own_work_for_a_handler_is_never_told_to_the_client() -> None:
    def broken_emit(message: Any) -> None:
        raise RuntimeError('could not connect to server: host "db-primary.internal", user "rw"')

    def progressing(*args: Any) -> Any:
        args[-1].report_progress(1)
        return "unreached"

    def logging_handler(*args: Any) -> Any:
        args[-1].log("error", "x")
        return "unreached"

    engine = make_engine()
    for handler in (progressing, logging_handler):
        catalog = Catalog(
            1,
            tools=[tool("t", handler)],
            prompts=[PromptDef(name="p", handler=handler)],
        )
        server_side = {"emit": broken_emit, "progress_token": "k", "log_level": "debug"}
        ctx = make_ctx(**server_side)
        with pytest.raises(RuntimeError) as raised:
            engine.handle("prompts/get", {"name": "p"}, ctx, catalog)
        assert ctx.raised_by_server(raised.value)
        assert engine.internal_error(raised.value, ctx).message == "Internal error"
        # A tool's isError says only that it failed, details on or not.
        result = engine.handle("tools/call", {"name": "t"}, make_ctx(**server_side), catalog)
        assert result == {"content": [{"type": "text", "text": "Tool t failed"}], "isError": True}


def test_a_handler_that_passes_on_a_server_error_it_caught_in_its_own_words_is_told() -> None:
    def broken_emit(message: Any) -> None:
        raise RuntimeError("host db-primary.internal")

    def careful(*args: Any) -> Any:
        try:
            args[-1].report_progress(1)
        except RuntimeError:
            raise ValueError("progress could not be sent") from None
        return "unreached"

    catalog = Catalog(1, prompts=[PromptDef(name="p", handler=careful)])
    ctx = make_ctx(emit=broken_emit, progress_token="k")
    engine = make_engine()
    with pytest.raises(ValueError) as raised:
        engine.handle("prompts/get", {"name": "p"}, ctx, catalog)
    assert engine.internal_error(raised.value, ctx).message == "progress could not be sent"
