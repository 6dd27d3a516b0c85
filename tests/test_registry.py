"""Tests for mcp_app.registry: definitions, their wire form and catalog snapshots."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pytest
from django.utils.translation import gettext_lazy

from mcp_app.exceptions import DefinitionError
from mcp_app.registry import (
    Catalog,
    PromptArgument,
    PromptDef,
    ResourceDef,
    TemplateDef,
    ToolDef,
    argument_at,
    header_problem,
    uri_identity,
)


def handler(*args: Any) -> str:
    return "ok"


async def async_handler(*args: Any) -> str:
    return "ok"


def complete(value: str, context_args: dict[str, str], ctx: Any) -> list[str]:
    return [value]


# ---------------------------------------------------------------- ToolDef


@pytest.mark.parametrize("name", ["a", "get_weather", "v1.tool-name", "x" * 64])
def test_tool_names_within_the_rules_are_accepted(name: str) -> None:
    assert ToolDef(name=name, handler=handler).name == name


@pytest.mark.parametrize("name", ["", "x" * 65, "a/b", "has space", "ünïcode"])
def test_tool_names_outside_the_rules_are_refused(name: str) -> None:
    with pytest.raises(DefinitionError, match="must be 1-64 characters"):
        ToolDef(name=name, handler=handler)


def test_tool_handler_must_be_callable() -> None:
    with pytest.raises(DefinitionError, match="handler is not callable"):
        ToolDef(name="t", handler="nope")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "schema", [{"type": "string"}, {"properties": {}}, {"type": ["object"]}, ["object"]]
)
def test_tool_input_schema_must_be_an_object_schema(schema: Any) -> None:
    with pytest.raises(DefinitionError, match="input_schema must be an object schema"):
        ToolDef(name="t", handler=handler, input_schema=schema)


def test_tool_output_schema_must_be_a_dict() -> None:
    with pytest.raises(DefinitionError, match="output_schema must be a JSON Schema object"):
        ToolDef(name="t", handler=handler, output_schema=True)  # type: ignore[arg-type]


def test_tool_default_input_schema_is_an_empty_object_schema_not_shared() -> None:
    one, two = ToolDef(name="a", handler=handler), ToolDef(name="b", handler=handler)
    assert one.input_schema == {"type": "object"}
    assert one.input_schema is not two.input_schema


def test_minimal_tool_wire() -> None:
    assert ToolDef(name="t", handler=handler).wire == {
        "name": "t",
        "inputSchema": {"type": "object"},
    }


def test_full_tool_wire() -> None:
    tool = ToolDef(
        name="t",
        handler=handler,
        title="T",
        description="Does t",
        input_schema={"type": "object", "properties": {"a": {"type": "string"}}},
        output_schema={"type": "object"},
        annotations={"readOnlyHint": True},
        icons=[{"src": "https://example.com/i.png"}],
        meta={"k": "v"},
    )
    assert tool.wire == {
        "name": "t",
        "title": "T",
        "description": "Does t",
        "icons": [{"src": "https://example.com/i.png"}],
        "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
        "_meta": {"k": "v"},
    }


def test_tool_is_async_detects_coroutine_functions_and_async_callables() -> None:
    class AsyncCallable:
        async def __call__(self, *args: Any) -> str:
            return "ok"

    assert ToolDef(name="a", handler=async_handler).is_async is True
    assert ToolDef(name="b", handler=AsyncCallable()).is_async is True
    assert ToolDef(name="c", handler=handler).is_async is False


def test_tool_header_params_map_lower_case_header_to_argument() -> None:
    tool = ToolDef(
        name="t",
        handler=handler,
        input_schema={
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "plain": {"type": "string"},
                "odd": True,
                "where": {
                    "type": "object",
                    "properties": {
                        "zone": {
                            "type": "object",
                            "properties": {"id": {"type": "integer", "x-mcp-header": "Zone"}},
                        },
                        "listed": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
    )
    assert tool.header_params == {
        "mcp-param-region": ("region",),
        "mcp-param-zone": ("where", "zone", "id"),
    }


@pytest.mark.parametrize(
    ("arguments", "value"),
    [
        ({"where": {"zone": {"id": 4}}}, 4),
        ({"where": {"zone": {}}}, None),
        ({"where": {"zone": 4}}, None),
        ({"where": None}, None),
        ([1], None),
        (None, None),
    ],
)
def test_argument_at_follows_a_path_of_property_names(arguments: Any, value: Any) -> None:
    assert argument_at(arguments, ("where", "zone", "id")) == value


@pytest.mark.parametrize(
    ("properties", "problem"),
    [
        ({"a": {"type": "string", "x-mcp-header": 5}}, "x-mcp-header of 'a' must be an HTTP"),
        ({"a": {"type": "string", "x-mcp-header": ""}}, "must be an HTTP header name"),
        ({"a": {"type": "string", "x-mcp-header": "Bad Header"}}, "must be an HTTP header"),
        ({"a": {"type": "string", "x-mcp-header": "X\r\nY"}}, "must be an HTTP header name"),
        # A token, but gunicorn, Django's request headers and proxies drop it.
        ({"a": {"type": "string", "x-mcp-header": "Tenant_Id"}}, "must not contain '_'"),
        ({"a": {"type": "number", "x-mcp-header": "A"}}, "string, integer or boolean"),
        ({"a": {"type": "object", "x-mcp-header": "A"}}, "string, integer or boolean"),
        ({"a": {"x-mcp-header": "A"}}, "string, integer or boolean"),
        (
            {
                "a": {"type": "string", "x-mcp-header": "Region"},
                "b": {"type": "string", "x-mcp-header": "region"},
            },
            "x-mcp-header 'region' of 'b' repeats that of 'a'",
        ),
        (
            {"o": {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}},
            "x-mcp-header of 'o.n' needs",
        ),
        ({"a": {"type": ["string", "null"], "x-mcp-header": "A"}}, "string, integer or boolean"),
        ({"a": {"type": {"not": "a type"}, "x-mcp-header": "A"}}, "string, integer or boolean"),
        (
            # A property named "a.b" is not "b" inside "a", though both are written a.b.
            {
                "a.b": {"type": "string", "x-mcp-header": "X"},
                "a": {
                    "type": "object",
                    "properties": {"b": {"type": "string", "x-mcp-header": "x"}},
                },
            },
            "x-mcp-header 'x' of 'a.b' repeats that of \"['a.b']\"",
        ),
    ],
)
def test_a_tool_breaking_the_x_mcp_header_rules_is_not_defined(
    properties: dict[str, Any], problem: str
) -> None:
    # A client leaves such a tool out of its list: the server refuses it instead.
    schema = {"type": "object", "properties": properties}
    with pytest.raises(DefinitionError) as caught:
        ToolDef(name="t", handler=handler, input_schema=schema)
    assert problem in str(caught.value)


_REGION = {"type": "string", "x-mcp-header": "Region"}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"anyOf": [_REGION]}}},
        {"type": "object", "properties": {"a": {"type": "array", "items": _REGION}}},
        {"type": "object", "x-mcp-header": "Region", "properties": {}},
        {"type": "object", "$defs": {"r": _REGION}, "properties": {"a": {"$ref": "#/$defs/r"}}},
        {"type": "object", "additionalProperties": _REGION},
        {"type": "object", "properties": {"a": {"type": "object", "not": {"not": _REGION}}}},
    ],
)
def test_an_x_mcp_header_off_the_chain_of_properties_is_not_defined(schema: Any) -> None:
    # The official clients leave such a tool out of their lists.
    with pytest.raises(DefinitionError, match="reached from the arguments through 'properties'"):
        ToolDef(name="t", handler=handler, input_schema=schema)


def test_a_property_used_under_properties_and_elsewhere_is_judged_in_each_place() -> None:
    region = {"type": "string", "x-mcp-header": "Region"}
    schema = {"type": "object", "properties": {"a": region, "b": {"anyOf": [region]}}}
    # One dict in two places: a client reads the one under anyOf as misplaced.
    assert "reached from the arguments through 'properties'" in str(header_problem(schema))
    with pytest.raises(DefinitionError, match="reached from the arguments through 'properties'"):
        ToolDef(name="t", handler=handler, input_schema=schema)


def test_a_property_named_x_mcp_header_is_only_a_name() -> None:
    schema = {"type": "object", "properties": {"x-mcp-header": {"type": "string"}}}
    assert header_problem(schema) is None


@pytest.mark.parametrize("header", ["Region\n", "Region\r"])
def test_an_x_mcp_header_ending_in_a_line_break_is_not_defined(header: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": header}}}
    with pytest.raises(DefinitionError, match="must be an HTTP header name"):
        ToolDef(name="t", handler=handler, input_schema=schema)


def test_a_name_ending_in_a_line_break_is_not_defined() -> None:
    with pytest.raises(DefinitionError):
        ToolDef(name="abc\n", handler=handler)


def test_x_mcp_header_may_mirror_strings_integers_and_booleans_at_any_depth() -> None:
    nested = {"type": "object", "properties": {"limit": {"type": "integer", "x-mcp-header": "L"}}}
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run.1~"},
            "options": nested,
        },
    }
    assert header_problem(schema) is None
    ToolDef(name="t", handler=handler, input_schema=schema)


def test_a_sub_schema_used_twice_is_read_in_both_places() -> None:
    address = {"type": "object", "properties": {"zip": {"type": "string", "x-mcp-header": "Zip"}}}
    schema = {"type": "object", "properties": {"home": address, "work": address}}
    # A client finds the header twice, and would leave the tool out.
    with pytest.raises(DefinitionError, match=r"'Zip' of 'work\.zip' repeats that of 'home\.zip'"):
        ToolDef(name="t", handler=handler, input_schema=schema)


def test_a_read_only_mapping_inside_a_schema_is_checked_too() -> None:
    bad = MappingProxyType({"type": "number", "x-mcp-header": "bad name"})
    schema = {
        "type": "object",
        "properties": {"opts": {"type": "object", "properties": {"n": bad}}},
    }
    with pytest.raises(DefinitionError, match=r"x-mcp-header of 'opts\.n' must be an HTTP header"):
        ToolDef(name="t", handler=handler, input_schema=schema)


def test_a_schema_holding_itself_is_not_defined() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    schema["properties"]["me"] = schema
    assert header_problem(schema) is None  # read once, not for ever
    with pytest.raises(DefinitionError, match="holds itself, or nests too deeply"):
        ToolDef(name="t", handler=handler, input_schema=schema)


def test_tool_without_properties_has_no_header_params() -> None:
    assert ToolDef(name="t", handler=handler).header_params == {}
    weird = ToolDef(name="u", handler=handler, input_schema={"type": "object", "properties": []})
    assert weird.header_params == {}


# ---------------------------------------------------------------- ResourceDef


@pytest.mark.parametrize("uri", ["", "no-scheme", "relative/path"])
def test_resource_uri_must_be_absolute(uri: str) -> None:
    with pytest.raises(DefinitionError, match="is not an absolute URI"):
        ResourceDef(uri=uri, name="r", handler=handler)


def test_resource_handler_must_be_callable() -> None:
    with pytest.raises(DefinitionError, match="handler is not callable"):
        ResourceDef(uri="x://r", name="r", handler=None)  # type: ignore[arg-type]


def test_resource_wire_minimal_and_full() -> None:
    assert ResourceDef(uri="x://r", name="r", handler=handler).wire == {"uri": "x://r", "name": "r"}
    full = ResourceDef(
        uri="x://r",
        name="r",
        handler=handler,
        title="R",
        description="desc",
        mime_type="text/plain",
        size=0,
        annotations={"priority": 1},
        icons=[{"src": "https://example.com/i.png"}],
        meta={"m": 1},
    )
    assert full.wire == {
        "uri": "x://r",
        "name": "r",
        "title": "R",
        "description": "desc",
        "icons": [{"src": "https://example.com/i.png"}],
        "mimeType": "text/plain",
        "size": 0,
        "annotations": {"priority": 1},
        "_meta": {"m": 1},
    }


def test_resource_is_async() -> None:
    assert ResourceDef(uri="x://r", name="r", handler=async_handler).is_async is True
    assert ResourceDef(uri="x://r", name="r", handler=handler).is_async is False


# ---------------------------------------------------------------- TemplateDef


def test_template_matcher_is_built_and_matches() -> None:
    template = TemplateDef(uri_template="people://{id}", name="person", handler=handler)
    assert template.matcher.match("people://ada") == {"id": "ada"}
    assert template.matcher.match("other://ada") is None


@pytest.mark.parametrize("uri_template", ["people://{id", "people://{=x}"])
def test_malformed_template_is_a_definition_error(uri_template: str) -> None:
    with pytest.raises(DefinitionError, match="resource template 'p'"):
        TemplateDef(uri_template=uri_template, name="p", handler=handler)


def test_template_handler_must_be_callable() -> None:
    with pytest.raises(DefinitionError, match="handler is not callable"):
        TemplateDef(uri_template="p://{id}", name="p", handler=1)  # type: ignore[arg-type]


def test_template_completion_for_unknown_variable_is_refused() -> None:
    with pytest.raises(
        DefinitionError, match=r"completion for unknown argument 'nope' \(known: id\)"
    ):
        TemplateDef(uri_template="p://{id}", name="p", handler=handler, complete={"nope": complete})


def test_template_completion_must_be_callable() -> None:
    with pytest.raises(DefinitionError, match="completion for 'id' is not callable"):
        TemplateDef(uri_template="p://{id}", name="p", handler=handler, complete={"id": "x"})


def test_template_wire_minimal_and_full() -> None:
    assert TemplateDef(uri_template="p://{id}", name="p", handler=handler).wire == {
        "uriTemplate": "p://{id}",
        "name": "p",
    }
    full = TemplateDef(
        uri_template="p://{id}",
        name="p",
        handler=async_handler,
        title="P",
        description="d",
        mime_type="application/json",
        annotations={"a": 1},
        icons=[{"src": "https://example.com/i.png"}],
        meta={"m": 1},
        complete={"id": complete},
    )
    assert full.wire == {
        "uriTemplate": "p://{id}",
        "name": "p",
        "title": "P",
        "description": "d",
        "icons": [{"src": "https://example.com/i.png"}],
        "mimeType": "application/json",
        "annotations": {"a": 1},
        "_meta": {"m": 1},
    }
    assert full.is_async is True


# ---------------------------------------------------------------- PromptArgument / PromptDef


def test_prompt_argument_coerce_from_each_form() -> None:
    arg = PromptArgument("a", required=True)
    assert PromptArgument.coerce(arg) is arg
    assert PromptArgument.coerce("b") == PromptArgument("b")
    assert PromptArgument.coerce({"name": "c", "description": "C"}) == PromptArgument("c", "C")


@pytest.mark.parametrize("value", [{"name": "a", "bogus": 1}, {}])
def test_prompt_argument_coerce_refuses_bad_dicts(value: dict[str, Any]) -> None:
    with pytest.raises(DefinitionError, match="bad prompt argument"):
        PromptArgument.coerce(value)


def test_prompt_argument_wire() -> None:
    assert PromptArgument("a").wire == {"name": "a"}
    assert PromptArgument("a", "desc", True, "A").wire == {
        "name": "a",
        "title": "A",
        "description": "desc",
        "required": True,
    }


def test_prompt_needs_a_name_and_callable_handler() -> None:
    with pytest.raises(DefinitionError, match="a prompt needs a name"):
        PromptDef(name="", handler=handler)
    with pytest.raises(DefinitionError, match="handler is not callable"):
        PromptDef(name="p", handler=42)  # type: ignore[arg-type]


def test_prompt_arguments_are_coerced_and_required_listed() -> None:
    prompt = PromptDef(
        name="p",
        handler=handler,
        arguments=("a", {"name": "b", "required": True}, PromptArgument("c", required=True)),  # type: ignore[arg-type]
    )
    assert all(isinstance(a, PromptArgument) for a in prompt.arguments)
    assert prompt.required == ("b", "c")


def test_prompt_argument_names_must_not_repeat() -> None:
    with pytest.raises(DefinitionError, match="argument names repeat"):
        PromptDef(name="p", handler=handler, arguments=("a", "a"))  # type: ignore[arg-type]


def test_prompt_completion_for_unknown_argument_is_refused() -> None:
    with pytest.raises(DefinitionError, match="completion for unknown argument 'z'"):
        PromptDef(name="p", handler=handler, arguments=("a",), complete={"z": complete})  # type: ignore[arg-type]


def test_prompt_wire_minimal_and_full() -> None:
    assert PromptDef(name="p", handler=handler).wire == {"name": "p"}
    full = PromptDef(
        name="p",
        handler=handler,
        title="P",
        description="d",
        arguments=(PromptArgument("a", required=True),),
        icons=[{"src": "https://example.com/i.png"}],
        meta={"m": 1},
    )
    assert full.wire == {
        "name": "p",
        "title": "P",
        "description": "d",
        "icons": [{"src": "https://example.com/i.png"}],
        "_meta": {"m": 1},
        "arguments": [{"name": "a", "required": True}],
    }


def test_prompt_is_async() -> None:
    assert PromptDef(name="p", handler=async_handler).is_async is True


# ---------------------------------------------------------------- Catalog


def _catalog(generation: int = 1, description: str = "d") -> Catalog:
    return Catalog(
        generation,
        tools=[
            ToolDef(name="t1", handler=handler, description=description),
            ToolDef(name="t2", handler=handler),
        ],
        resources=[ResourceDef(uri="x://r", name="r", handler=handler)],
        templates=[
            TemplateDef(uri_template="people://{id}", name="person", handler=handler),
            TemplateDef(uri_template="any://{+rest}", name="any", handler=handler),
        ],
        prompts=[PromptDef(name="p", handler=handler)],
    )


def test_catalog_maps_and_items() -> None:
    catalog = _catalog()
    assert catalog.generation == 1
    assert [t.name for t in catalog.items("tools")] == ["t1", "t2"]
    assert set(catalog.tool_map) == {"t1", "t2"}
    assert set(catalog.resource_map) == {"x://r"}
    assert set(catalog.template_map) == {"person", "any"}
    assert set(catalog.prompt_map) == {"p"}
    assert isinstance(catalog.items("prompts"), tuple)


def test_catalog_fingerprint_is_stable_for_the_same_definitions() -> None:
    one, two = _catalog(1), _catalog(7)
    assert one.fingerprints == two.fingerprints
    assert set(one.fingerprints) == {"tools", "resources", "templates", "prompts"}
    assert all(len(v) == 12 for v in one.fingerprints.values())


def test_catalog_fingerprint_changes_only_for_the_kind_that_changed() -> None:
    before, after = _catalog(description="d"), _catalog(description="changed")
    assert before.fingerprints["tools"] != after.fingerprints["tools"]
    for kind in ("resources", "templates", "prompts"):
        assert before.fingerprints[kind] == after.fingerprints[kind]


def test_catalog_fingerprint_depends_on_order() -> None:
    a, b = ToolDef(name="a", handler=handler), ToolDef(name="b", handler=handler)
    assert (
        Catalog(1, tools=[a, b]).fingerprints["tools"]
        != Catalog(1, tools=[b, a]).fingerprints["tools"]
    )


def test_empty_catalog_fingerprints_differ_from_populated() -> None:
    assert Catalog(0).fingerprints["tools"] != _catalog().fingerprints["tools"]


def test_a_listing_s_fingerprint_is_of_the_entries_kept() -> None:
    a, b, c = (ToolDef(name=name, handler=handler) for name in "abc")
    catalog = Catalog(1, tools=[a, b, c])
    assert catalog.listing("tools") == ((a, b, c), catalog.fingerprints["tools"])
    assert catalog.listing("tools", lambda tool: True) == ((a, b, c), catalog.fingerprints["tools"])
    kept, fingerprint = catalog.listing("tools", lambda tool: tool is not b)
    assert kept == (a, c)
    # The fingerprint of the list [a, c] itself: what was left out does not shape it.
    assert fingerprint == Catalog(2, tools=[a, c]).fingerprints["tools"]
    changed_b = ToolDef(name="b", handler=handler, description="changed")
    assert Catalog(3, tools=[a, changed_b, c]).listing("tools", lambda t: t.name != "b") == (
        (a, c),
        fingerprint,
    )
    assert catalog.listing("tools", lambda tool: False) == ((), Catalog(0).fingerprints["tools"])


def test_find_template_takes_the_first_match_with_variables() -> None:
    catalog = _catalog()
    template, variables = catalog.find_template("people://ada")  # type: ignore[misc]
    assert template.name == "person"
    assert variables == {"id": "ada"}
    fallback, rest = catalog.find_template("any://a/b")  # type: ignore[misc]
    assert fallback.name == "any"
    assert rest == {"rest": "a/b"}
    assert catalog.find_template("nomatch:x") is None


def test_can_complete_follows_completers() -> None:
    assert _catalog().can_complete is False
    with_prompt = Catalog(
        1,
        prompts=[PromptDef(name="p", handler=handler, arguments=("a",), complete={"a": complete})],  # type: ignore[arg-type]
    )
    assert with_prompt.can_complete is True
    with_template = Catalog(
        1,
        templates=[
            TemplateDef(
                uri_template="p://{id}", name="p", handler=handler, complete={"id": complete}
            )
        ],
    )
    assert with_template.can_complete is True


# ---------------------------------------------------------------- what every definition lists


def _make(kind: str, **face: Any) -> Any:
    if kind == "tool":
        return ToolDef(name="t", handler=handler, **face)
    if kind == "resource":
        return ResourceDef(uri="r://x", name="r", handler=handler, **face)
    if kind == "template":
        return TemplateDef(uri_template="r://{x}", name="t", handler=handler, **face)
    face.pop("annotations", None)
    return PromptDef(name="p", handler=handler, **face)


@pytest.mark.parametrize("kind", ["tool", "resource", "template", "prompt"])
@pytest.mark.parametrize(
    ("face", "problem"),
    [
        ({"icons": ["a"]}, "icons must be a list of objects"),
        ({"icons": "a.png"}, "icons must be a list of objects"),
        ({"icons": {"src": "a.png"}}, "icons must be a list of objects"),
        ({"meta": ["k"]}, "meta must be an object"),
        ({"title": 3}, "title must be text"),
        ({"description": ["d"]}, "description must be text"),
        # What a row's form refuses, code is refused too: clients would list it as sent.
        (
            {"icons": [{"mimeType": "image/png"}]},
            "Invalid icons at /0: missing required property 'src'",
        ),
        ({"icons": [{"src": "javascript:alert(1)"}]}, "Icon 1's src must be a URI"),
        ({"icons": [{"src": "https://a.example/i.png", "theme": "blue"}]}, "Invalid icons"),
        ({"meta": {"bad key": 1}}, "'bad key' is not a _meta key"),
        ({"meta": {"com.example/-x": 1}}, "is not a _meta key"),
        ({"meta": {"k\n": 1}}, "is not a _meta key"),  # a line break after the name
        ({"meta": {"": 1}}, "'' is not a _meta key"),
        ({"meta": {1: 1}}, "1 is not a _meta key"),
    ],
)
def test_a_definition_whose_face_cannot_be_listed_is_refused(
    kind: str, face: dict[str, Any], problem: str
) -> None:
    with pytest.raises(DefinitionError, match=problem):
        _make(kind, **face)


@pytest.mark.parametrize("kind", ["tool", "resource", "template"])
def test_annotations_must_be_an_object(kind: str) -> None:
    with pytest.raises(DefinitionError, match="annotations must be an object"):
        _make(kind, annotations=[1])


@pytest.mark.parametrize(
    ("kind", "annotations", "problem"),
    [
        ("tool", {"readOnlyHint": "yes"}, "Invalid annotations at /readOnlyHint: expected boolean"),
        ("resource", {"priority": 7}, "Invalid annotations at /priority"),
        ("template", {"audience": ["robot"]}, "Invalid annotations at /audience/0"),
        ("resource", {"lastModified": "yesterday"}, "must be an RFC 3339 date-time"),
    ],
)
def test_annotations_outside_the_schema_are_refused(
    kind: str, annotations: dict[str, Any], problem: str
) -> None:
    with pytest.raises(DefinitionError, match=problem):
        _make(kind, annotations=annotations)


class Audience(enum.Enum):
    USER = "user"


@pytest.mark.parametrize(
    ("kind", "face"),
    [
        # Judged as the encoder writes them: lazy text, tuples, enums, dates, any mapping.
        ("tool", {"annotations": {"title": gettext_lazy("Add")}}),
        ("tool", {"icons": ({"src": "https://a.example/i.png", "sizes": ("48x48",)},)}),
        ("prompt", {"icons": [{"src": gettext_lazy("https://a.example/i.png")}]}),
        ("resource", {"annotations": {"audience": ("user",)}}),
        ("template", {"annotations": {"audience": [Audience.USER]}}),
        ("resource", {"annotations": {"lastModified": datetime(2025, 1, 1, tzinfo=UTC)}}),
        ("resource", {"annotations": {"lastModified": "2016-12-31T23:59:60Z"}}),
        ("resource", {"annotations": MappingProxyType({"priority": 0.5})}),
    ],
)
def test_a_face_the_wire_writes_as_the_schema_asks_is_accepted(
    kind: str, face: dict[str, Any]
) -> None:
    _make(kind, **face)


@pytest.mark.parametrize("kind", ["tool", "resource", "template", "prompt"])
def test_a_listable_face_is_listed(kind: str) -> None:
    icons = [{"src": "https://example.com/a.png"}]
    definition = _make(kind, icons=icons, meta={"k": 1}, title="T", description="D")
    assert definition.wire["icons"] == icons
    assert definition.wire["_meta"] == {"k": 1}


def test_lazy_translated_text_is_text() -> None:
    from django.utils.translation import gettext_lazy

    definition = ToolDef(
        name="t", handler=handler, title=gettext_lazy("Title"), description=gettext_lazy("About")
    )
    assert str(definition.wire["title"]) == "Title"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"uri": "not a uri: really"}, "is not an absolute URI"),
        ({"uri": ":"}, "is not an absolute URI"),
        ({"uri": 5}, "is not an absolute URI"),
        ({"uri": "people://{id}"}, "is a URI template; register it with add_resource_template"),
        ({"size": -1}, "size must be a number of bytes"),
        ({"size": "big"}, "size must be a number of bytes"),
        ({"size": True}, "size must be a number of bytes"),
        ({"mime_type": 5}, "mime_type must be text"),
        ({"name": 5}, "name must be text"),
    ],
)
def test_a_resource_of_the_wrong_kind_is_not_defined(fields: dict[str, Any], problem: str) -> None:
    values = {"uri": "notes://one", "name": "one", "handler": handler, **fields}
    with pytest.raises(DefinitionError, match=problem):
        ResourceDef(**values)


def test_a_template_or_prompt_named_with_no_text_is_not_defined() -> None:
    with pytest.raises(DefinitionError, match="name must be text"):
        TemplateDef(uri_template="notes://{id}", name=7, handler=handler)  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="needs a name"):
        PromptDef(name=5, handler=handler)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("uri", "identity"),
    [
        ("File:///A%2fb", "file:///A%2Fb"),  # the path keeps its case
        ("https://User@Example.COM:8080/P?Q#F", "https://User@example.com:8080/P?Q#F"),
        ("HTTPS://x", "https://x/"),  # http(s)' empty path is "/"
        ("mailto:A@B.example", "mailto:A@B.example"),  # no authority: only the scheme
        ("notes:cafe\u0301", "notes:caf\u00e9"),
        ("notes://h", "notes://h"),
        # Octets that encode what needs no encoding are decoded, others stay encoded.
        ("notes:%41%2f%7e%2D", "notes:A%2F~-"),
        ("http://%45x.org/", "http://ex.org/"),
        # Dot segments of an absolute path; a relative path and the query keep theirs.
        ("file:///a/./b/../c", "file:///a/c"),
        ("file:///a/b/..", "file:///a/"),
        ("file:///..", "file:///"),
        ("file:///a//b/.", "file:///a//b/"),
        ("http://h/%2e%2E/x", "http://h/x"),
        ("urn:a/./b", "urn:a/./b"),
        ("http://h/?q=/./", "http://h/?q=/./"),
        # Default and empty ports go; others stay, and IPv6 literals keep their colons.
        ("http://x:80/a", "http://x/a"),
        ("https://x:443", "https://x/"),
        ("wss://x:443/", "wss://x/"),
        ("https://x:80/", "https://x:80/"),
        ("notes://x:/a", "notes://x/a"),
        ("notes://x:80/a", "notes://x:80/a"),
        ("http://[::1]:80/", "http://[::1]/"),
        ("http://[::1]/", "http://[::1]/"),
        ("http://[::1]:8080/", "http://[::1]:8080/"),
        # A path with no authority never reads as one, and a host's octets keep upper case.
        ("notes:/..//x", "notes:/.//x"),
        ("file:/.//etc/passwd", "file:/.//etc/passwd"),
        ("http://%C3%89x.org/", "http://%C3%89x.org/"),
    ],
)
def test_uri_identity_is_what_rfc_3986_and_nfc_leave_of_a_uri(uri: str, identity: str) -> None:
    assert uri_identity(uri) == identity
