"""Tests for mcp_app.schema: messages, dialects, references, caching and formatting."""

from __future__ import annotations

import socket
import time
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from mcp_app.schema import (
    PATTERN_SECONDS,
    PATTERNS_SECONDS,
    JSONSchemaValidator,
    Problem,
    SchemaError,
    Validator,
    check_schema,
    format_problems,
    in_place,
    incompatible,
    is_valid_schema,
    unsatisfiable,
    validate,
)

DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT6 = "http://json-schema.org/draft-06/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT2019 = "https://json-schema.org/draft/2019-09/schema"
DRAFT2020 = "https://json-schema.org/draft/2020-12/schema"

NUMBERS = {
    "type": "object",
    "properties": {"numbers": {"type": "array", "items": {"type": "number"}}},
    "required": ["numbers"],
}


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Fail loudly if anything in here tries to open a connection."""

    def refuse(*args, **kwargs):
        raise AssertionError("schema validation tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def messages(schema: Any, instance: Any) -> list[str]:
    return [str(problem) for problem in validate(schema, instance)]


def schema_error(schema: Any) -> SchemaError:
    with pytest.raises(SchemaError) as info:
        check_schema(schema)
    return info.value


# --- the headline message -------------------------------------------------------------------


def test_wrong_item_type_names_pointer_and_types():
    problems = validate(NUMBERS, {"numbers": ["x"]})
    assert problems == [Problem("/numbers/0", "expected number, got string")]
    assert format_problems(problems) == (
        "Invalid arguments at /numbers/0: expected number, got string"
    )


def test_valid_instance_has_no_problems():
    assert validate(NUMBERS, {"numbers": [1, 2.5]}) == []


# --- message for each keyword ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "instance", "expected"),
    [
        # type
        ({"type": "integer"}, True, "expected integer, got boolean"),
        ({"type": "integer"}, 1.5, "expected integer, got number"),
        ({"type": "string"}, None, "expected string, got null"),
        ({"type": "string"}, {"a": 1}, "expected string, got object"),
        ({"type": "string"}, (1,), "expected string, got array"),
        ({"type": "boolean"}, 0, "expected boolean, got integer"),
        ({"type": "array"}, {1}, "expected array, got set"),
        ({"type": ["string", "null"]}, 1, "expected string or null, got integer"),
        ({"type": ["string", "null", "array"]}, 1, "expected string, null or array, got integer"),
        # enum / const
        ({"enum": ["a", "b"]}, "c", "expected one of: 'a', 'b'"),
        ({"enum": ["a", 1, None, True]}, 2, "expected one of: 'a', 1, null, true"),
        ({"const": "on"}, "off", "expected 'on'"),
        ({"const": {"k": [1]}}, {}, 'expected {"k": [1]}'),
        # numeric bounds
        ({"minimum": 1}, 0, "expected a number >= 1, got 0"),
        ({"maximum": 10}, 10.5, "expected a number <= 10, got 10.5"),
        ({"exclusiveMinimum": 0}, 0, "expected a number > 0, got 0"),
        ({"exclusiveMaximum": 5}, 5, "expected a number < 5, got 5"),
        ({"minimum": 1}, Decimal("0.5"), "expected a number >= 1, got Decimal('0.5')"),
        ({"multipleOf": 3}, 7, "expected a multiple of 3, got 7"),
        # sizes, singular and plural
        ({"minLength": 1}, "", "expected at least 1 character, got 0"),
        ({"maxLength": 2}, "abc", "expected at most 2 characters, got 3"),
        ({"minItems": 2}, [1], "expected at least 2 items, got 1"),
        ({"maxItems": 1}, [1, 2], "expected at most 1 item, got 2"),
        ({"minProperties": 2}, {"a": 1}, "expected at least 2 properties, got 1"),
        ({"maxProperties": 1}, {"a": 1, "b": 2}, "expected at most 1 property, got 2"),
        # strings
        ({"pattern": "^[a-z]+$"}, "ABC", "expected a string matching '^[a-z]+$', got 'ABC'"),
        ({"format": "email"}, "nobody", "not a valid email"),
        ({"format": "date"}, "2024-13-01", "not a valid date"),
        ({"format": "ipv4"}, "999.1.1.1", "not a valid ipv4"),
        # arrays
        ({"uniqueItems": True}, [1, 1], "expected all items to be unique"),
        (
            {"contains": {"type": "integer"}},
            ["a"],
            "expected at least one item matching 'contains'",
        ),
        (
            {"contains": {"type": "integer"}, "minContains": 2},
            [1, "a"],
            "expected at least 2 items matching 'contains'",
        ),
        (
            {"contains": {"type": "integer"}, "maxContains": 1},
            [1, 2],
            "expected at most 1 item matching 'contains'",
        ),
        # combinators
        ({"not": {"type": "string"}}, "a", "matches a schema it must not match"),
        (
            {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "x",
            "expected integer or null, got string",
        ),
        (
            {"oneOf": [{"type": "string", "minLength": 2}, {"type": "integer"}]},
            "x",
            "expected at least 2 characters, got 1",
        ),
        (
            {"anyOf": [{"type": "string", "minLength": 3}, {"type": "string", "pattern": "^a"}]},
            "x",
            "does not match any of the allowed alternatives",
        ),
        (
            {"oneOf": [{"type": "string"}, {"minLength": 1}]},
            "x",
            "matches more than one of the alternatives, but must match exactly one",
        ),
        # false subschema
        ({"properties": {"x": False}}, {"x": 1}, "no value is allowed here"),
        # anything else keeps jsonschema's wording
        ({"dependentRequired": {"a": ["b"]}}, {"a": 1}, "'b' is a dependency of 'a'"),
    ],
)
def test_keyword_messages(schema, instance, expected):
    problems = validate(schema, instance)
    assert [problem.message for problem in problems] == [expected]


def test_valid_formats_pass():
    schema = {
        "type": "object",
        "properties": {
            "mail": {"format": "email"},
            "day": {"format": "date"},
            "ip": {"format": "ipv4"},
        },
    }
    assert validate(schema, {"mail": "a@example.com", "day": "2024-02-29", "ip": "10.0.0.1"}) == []


@pytest.mark.parametrize(
    ("schema", "instance", "expected"),
    [
        # Values a check cannot even compute with are the client's fault, not a server error.
        ({"type": "number", "multipleOf": 0.01}, 10**400, "cannot be checked against the schema"),
        ({"type": "string", "format": "regex"}, "a{4294967296}", "not a valid regex"),
        ({"type": "string", "format": "regex"}, "(" * 1000 + ")" * 1000, "not a valid regex"),
    ],
)
def test_a_value_the_checks_cannot_run_on_is_a_problem(schema, instance, expected):
    [problem] = validate(schema, instance)
    assert expected in problem.message


def test_anyof_descends_to_the_deeper_problem():
    schema = {
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {"b": {"type": "string"}}},
        ]
    }
    assert messages(schema, {"a": 1, "b": 1}) == ["at /a: expected string, got integer"]


def test_optional_ref_descends_into_the_meant_alternative():
    schema = {
        "$defs": {"Item": {"type": "object", "required": ["id"]}},
        "anyOf": [{"$ref": "#/$defs/Item"}, {"type": "null"}],
    }
    assert messages(schema, {}) == ["at the root: missing required property 'id'"]


def test_long_values_are_truncated():
    (problem,) = validate({"pattern": "^a"}, "b" * 200)
    shown = problem.message.split(", got ")[1]
    assert len(shown) == 60
    assert shown.endswith("...")


# --- required and additionalProperties ------------------------------------------------------


def test_required_points_at_the_object():
    assert messages(NUMBERS, {}) == ["at the root: missing required property 'numbers'"]
    nested = {"properties": {"user": {"type": "object", "required": ["id", "name"]}}}
    assert messages(nested, {"user": {"name": "x"}}) == ["at /user: missing required property 'id'"]


def test_every_missing_property_reported_once():
    schema = {"required": ["a", "b", "c"]}
    assert [p.message for p in validate(schema, {"b": 1})] == [
        "missing required property 'a'",
        "missing required property 'c'",
    ]


def test_unexpected_properties_one_problem_each_sorted():
    schema = {
        "type": "object",
        "properties": {"a": {}},
        "patternProperties": {"^x-": {}},
        "additionalProperties": False,
    }
    assert validate(schema, {"z": 1, "a": 1, "x-ok": 1, "b": 2}) == [
        Problem("", "unexpected property 'b'"),
        Problem("", "unexpected property 'z'"),
    ]
    assert validate(schema, {"a": 1, "x-ok": 2}) == []


def test_additional_properties_schema_descends():
    schema = {"additionalProperties": {"type": "integer"}}
    assert messages(schema, {"n": "x"}) == ["at /n: expected integer, got string"]


# --- pointers and ordering ------------------------------------------------------------------


def test_pointer_escapes_tilde_and_slash():
    schema = {"properties": {"a/b": {"type": "string"}, "m~n": {"type": "string"}}}
    assert messages(schema, {"a/b": 1, "m~n": 1}) == [
        "at /a~1b: expected string, got integer",
        "at /m~0n: expected string, got integer",
    ]


def test_problem_str_at_root_and_below():
    assert str(Problem("", "expected object, got array")) == (
        "at the root: expected object, got array"
    )
    assert str(Problem("/a/0", "bad")) == "at /a/0: bad"


def test_order_is_shallow_first_then_document_order():
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "integer"}},
            "name": {"type": "string"},
        },
        "required": ["id"],
    }
    instance = {"items": [0, 1, "a", 3, 4, 5, 6, 7, 8, 9, "b"], "name": 5}
    assert [p.pointer for p in validate(schema, instance)] == ["", "/name", "/items/2", "/items/10"]


def test_weak_keywords_come_last_at_the_same_place():
    schema = {"minLength": 5, "anyOf": [{"type": "string", "pattern": "^z"}, {"maxLength": 1}]}
    assert [p.message for p in validate(schema, "ab")] == [
        "expected at least 5 characters, got 2",
        "expected a string matching '^z', got 'ab'",
    ]


def test_order_is_deterministic_regardless_of_key_order():
    first = {"properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    second = {"properties": {"b": {"type": "string"}, "a": {"type": "string"}}}
    instance = {"b": 1, "a": 1}
    assert validate(first, instance) == validate(second, instance)
    assert [p.pointer for p in validate(first, instance)] == ["/a", "/b"]


def test_identical_problems_are_reported_once():
    schema = {"allOf": [{"type": "string"}, {"type": "string"}]}
    assert messages(schema, 1) == ["at the root: expected string, got integer"]


# --- dialects -------------------------------------------------------------------------------


def test_draft7_items_array_and_additional_items():
    tuple_schema = {
        "type": "array",
        "items": [{"type": "string"}, {"type": "integer"}],
        "additionalItems": False,
    }
    draft7 = {"$schema": DRAFT7, **tuple_schema}
    assert validate(draft7, ["a", 1]) == []
    assert validate(draft7, [1, "a"]) == [
        Problem("/0", "expected string, got integer"),
        Problem("/1", "expected integer, got string"),
    ]
    (extra,) = validate(draft7, ["a", 1, True])
    assert extra.pointer == ""
    assert "Additional items are not allowed" in extra.message
    # In 2020-12 (the default) "items" must be a single schema.
    error = schema_error(tuple_schema)
    assert error.pointer == "/items"
    assert error.reason == "expected object or boolean, got array"


def test_draft7_dependencies_honoured_but_ignored_in_2020_12():
    schema = {"dependencies": {"a": ["b"]}}
    assert messages({"$schema": DRAFT7, **schema}, {"a": 1}) == [
        "at the root: 'b' is a dependency of 'a'"
    ]
    assert validate(schema, {"a": 1}) == []


def test_draft4_boolean_exclusive_bounds():
    schema = {"$schema": DRAFT4, "minimum": 1, "exclusiveMinimum": True, "maximum": 3}
    assert [p.message for p in validate(schema, 1)] == ["expected a number > 1, got 1"]
    assert [p.message for p in validate(schema, 4)] == ["expected a number <= 3, got 4"]
    assert validate(schema, 2) == []
    upper = {"$schema": DRAFT4, "maximum": 3, "exclusiveMaximum": True}
    assert [p.message for p in validate(upper, 3)] == ["expected a number < 3, got 3"]


def test_draft6_numeric_exclusive_minimum():
    schema = {"$schema": DRAFT6, "exclusiveMinimum": 0}
    assert [p.message for p in validate(schema, 0)] == ["expected a number > 0, got 0"]


def test_draft2019_dependent_required_vs_draft7():
    schema = {"dependentRequired": {"a": ["b"]}}
    assert len(validate({"$schema": DRAFT2019, **schema}, {"a": 1})) == 1
    assert validate({"$schema": DRAFT7, **schema}, {"a": 1}) == []


@pytest.mark.parametrize(
    "dialect",
    [
        "https://example.com/my-dialect",
        "",
        # Near misses of official identifiers name no meta-schema either.
        "http://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft-07/schema",
    ],
)
def test_an_unknown_dialect_is_refused_by_name(dialect):
    error = schema_error({"$schema": dialect, "prefixItems": [{"type": "string"}]})
    assert error.pointer == "/$schema"
    assert error.reason.startswith(f"unsupported dialect {dialect!r}; use one of ")
    assert "https://json-schema.org/draft/2020-12/schema" in error.reason


@pytest.mark.parametrize(
    "dialect",
    [
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
        DRAFT2019,
        DRAFT7,
        "http://json-schema.org/draft-07/schema",
        DRAFT6,
        DRAFT4,
    ],
)
def test_every_supported_dialect_is_named_as_its_meta_schema_spells_it(dialect):
    assert messages({"$schema": dialect, "type": "string"}, 1) == [
        "at the root: expected string, got integer"
    ]


def test_draft3_is_refused():
    error = schema_error({"$schema": "http://json-schema.org/draft-03/schema#"})
    assert error.pointer == "/$schema"
    assert "unsupported dialect" in error.reason


def test_dollar_schema_must_be_a_string():
    error = schema_error({"$schema": ["x"]})
    assert error.pointer == "/$schema"
    assert error.reason == "expected string, got array"


# --- 2020-12 references and conditionals ----------------------------------------------------

CONDITIONAL = {
    "$schema": DRAFT2020,
    "$defs": {
        "positive": {"$anchor": "positive", "type": "integer", "minimum": 1},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
    },
    "type": "object",
    "properties": {"kind": {"enum": ["count", "code"]}, "value": {}},
    "required": ["kind", "value"],
    "if": {"properties": {"kind": {"const": "count"}}},
    "then": {"properties": {"value": {"$ref": "#positive"}}},
    "else": {"properties": {"value": {"$ref": "#/$defs/code"}}},
}


def test_defs_anchor_ref_if_then_else():
    check_schema(CONDITIONAL)
    assert validate(CONDITIONAL, {"kind": "count", "value": 3}) == []
    assert validate(CONDITIONAL, {"kind": "code", "value": "ABC"}) == []
    assert messages(CONDITIONAL, {"kind": "count", "value": 0}) == [
        "at /value: expected a number >= 1, got 0"
    ]
    assert messages(CONDITIONAL, {"kind": "count", "value": "ABC"}) == [
        "at /value: expected integer, got string"
    ]
    assert messages(CONDITIONAL, {"kind": "code", "value": "abc"}) == [
        "at /value: expected a string matching '^[A-Z]{3}$', got 'abc'"
    ]


def test_embedded_id_resolves_locally():
    schema = {
        "$id": "https://example.com/root.json",
        "$defs": {"name": {"$id": "name.json", "type": "string"}},
        "properties": {"x": {"$ref": "name.json"}},
    }
    assert messages(schema, {"x": 1}) == ["at /x: expected string, got integer"]


def test_ref_to_official_metaschema_needs_no_network():
    schema = {"properties": {"inner": {"$ref": DRAFT2020}}}
    assert validate(schema, {"inner": {"type": "object"}}) == []
    assert messages(schema, {"inner": {"type": 5}}) != []


# --- remote and broken references -----------------------------------------------------------


def test_network_guard_is_active():
    with pytest.raises(AssertionError):
        socket.create_connection(("example.com", 80))


def test_remote_ref_is_refused_without_network():
    schema = {"type": "object", "properties": {"x": {"$ref": "https://example.com/x"}}}
    started = time.monotonic()
    with pytest.raises(SchemaError) as info:
        validate(schema, {"x": 1})
    assert time.monotonic() - started < 1
    assert info.value.pointer == "/properties/x/$ref"
    assert info.value.reason == (
        "cannot resolve $ref 'https://example.com/x': remote references are not fetched"
    )
    assert str(info.value) == (
        "invalid schema at /properties/x/$ref: cannot resolve $ref 'https://example.com/x': "
        "remote references are not fetched"
    )
    assert not is_valid_schema(schema)


def test_relative_ref_to_another_document_is_refused():
    schema = {"$id": "https://example.com/root.json", "$defs": {"a": {"$ref": "other.json"}}}
    error = schema_error(schema)
    assert error.pointer == "/$defs/a/$ref"
    assert "remote references are not fetched" in error.reason


def test_missing_local_targets_are_schema_errors():
    error = schema_error({"properties": {"a": {"$ref": "#/$defs/nope"}}})
    assert error.pointer == "/properties/a/$ref"
    assert (
        error.reason == "cannot resolve $ref '#/$defs/nope': nothing in the schema has that address"
    )
    assert schema_error({"$ref": "#nope"}).pointer == "/$ref"


def test_remote_ref_reached_only_while_validating():
    # "x-defs" is no keyword, so only validation (following the $ref) reaches the inner one.
    schema = {"$ref": "#/x-defs/a", "x-defs": {"a": {"$ref": "https://example.com/r"}}}
    check_schema(schema)
    with pytest.raises(SchemaError) as info:
        validate(schema, 1)
    assert info.value.pointer == "/x-defs/a/$ref"
    assert "remote references are not fetched" in info.value.reason


def test_broken_local_ref_reached_only_while_validating():
    schema = {"$ref": "#/x-defs/a", "x-defs": {"a": {"$ref": "#/nope"}}}
    with pytest.raises(SchemaError) as info:
        validate(schema, 1)
    assert info.value.pointer == ""
    assert "nothing in the schema has that address" in info.value.reason


# --- invalid schemas ------------------------------------------------------------------------


def test_metaschema_violation_names_the_place():
    error = schema_error({"properties": {"a": {"minLength": -1}}})
    assert isinstance(error, ValueError)
    assert error.pointer == "/properties/a/minLength"
    assert error.reason == "expected a number >= 0, got -1"
    assert str(error) == (
        "invalid schema at /properties/a/minLength: expected a number >= 0, got -1"
    )


def test_unknown_type_name_lists_the_choices():
    error = schema_error({"type": "float"})
    assert error.pointer == "/type"
    assert error.reason.startswith("expected one of: 'array', 'boolean', 'integer'")


def test_bad_regex_is_a_schema_error():
    assert schema_error({"pattern": "["}).reason == "not a valid regex"


def test_invalid_schema_raises_from_validate_too():
    with pytest.raises(SchemaError):
        validate({"type": "float"}, 1)


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ([{"type": "string"}], "expected object or boolean, got array"),
        ("string", "expected object or boolean, got string"),
        (None, "expected object or boolean, got null"),
    ],
)
def test_schema_must_be_object_or_boolean(schema, reason):
    error = schema_error(schema)
    assert error.pointer == ""
    assert error.reason == reason
    assert str(error) == f"invalid schema at the root: {reason}"


@pytest.mark.parametrize("schema", [{"const": float("nan")}, {"enum": [{1, 2}]}])
def test_schema_must_be_json(schema):
    assert schema_error(schema).reason.startswith("not representable as JSON")


def test_boolean_and_read_only_schemas():
    assert validate(True, {"anything": 1}) == []
    assert messages(False, 1) == ["at the root: no value is allowed here"]
    frozen = MappingProxyType({"type": "object", "properties": MappingProxyType({"a": {}})})
    assert is_valid_schema(frozen)
    assert messages(frozen, []) == ["at the root: expected object, got array"]


def test_is_valid_schema():
    assert is_valid_schema(NUMBERS)
    assert not is_valid_schema({"type": "float"})


# --- caching --------------------------------------------------------------------------------


def test_compiled_schemas_are_cached_by_canonical_json():
    validator = JSONSchemaValidator(cache_size=2)
    validator.problems({"type": "object", "required": ["a"]}, {})
    validator.problems({"required": ["a"], "type": "object"}, {"a": 1})
    validator.check_schema({"type": "object", "required": ["a"]})
    info = validator.cache_info()
    assert (info.hits, info.misses, info.currsize) == (2, 1, 1)


def test_cache_is_bounded_and_clearable():
    validator = JSONSchemaValidator(cache_size=2)
    for kind in ("string", "integer", "boolean"):
        validator.check_schema({"type": kind})
    assert validator.cache_info().currsize == 2
    assert validator.cache_info().maxsize == 2
    validator.cache_clear()
    assert validator.cache_info().currsize == 0


def test_mutating_a_schema_after_use_is_seen():
    validator = JSONSchemaValidator()
    schema = {"type": "string"}
    assert validator.problems(schema, 1) != []
    schema["type"] = "integer"
    assert validator.problems(schema, 1) == []


# --- pluggable validators -------------------------------------------------------------------


class Picky:
    """A structural Validator that rejects everything."""

    def check_schema(self, schema):
        raise SchemaError("never good enough")

    def problems(self, schema, instance):
        return [Problem("", "no")]


def test_custom_validator_is_used():
    picky: Validator = Picky()
    assert validate({}, 1, validator=picky) == [Problem("", "no")]
    assert not is_valid_schema({}, validator=picky)
    with pytest.raises(SchemaError, match="never good enough"):
        check_schema({}, validator=picky)


def test_default_validator_is_a_validator():
    validator: Validator = JSONSchemaValidator()
    assert validator.problems({"type": "string"}, "x") == []


# --- format_problems ------------------------------------------------------------------------


def test_format_problems_joins_and_caps():
    problems = [Problem(f"/{index}", "bad") for index in range(7)]
    assert format_problems(problems[:2]) == "Invalid arguments at /0: bad; at /1: bad"
    assert format_problems(problems[:5]).count("; ") == 4
    assert format_problems(problems) == (
        "Invalid arguments at /0: bad; at /1: bad; at /2: bad; at /3: bad; at /4: bad; and 2 more"
    )
    assert format_problems(problems, "Bad result", limit=1) == "Bad result at /0: bad; and 6 more"


def test_format_problems_edge_cases():
    assert format_problems([]) == "Invalid arguments"
    assert format_problems([Problem("", "expected object, got null")]) == (
        "Invalid arguments at the root: expected object, got null"
    )
    with pytest.raises(ValueError, match="limit must be at least 1"):
        format_problems([Problem("", "x")], limit=0)


# -- uniqueItems and enum in linear time ------------------------------------------------


def test_unique_items_of_many_objects_is_checked_at_once() -> None:
    # jsonschema compares objects pair by pair: 20,000 of them took many minutes.
    schema = {"type": "array", "uniqueItems": True}
    many = [{"k": index} for index in range(20_000)]
    started = time.monotonic()
    assert validate(schema, many) == []
    assert validate(schema, [*many, {"k": 7}])[0].message == "expected all items to be unique"
    assert time.monotonic() - started < 2


def test_an_enum_of_many_objects_is_checked_at_once() -> None:
    values = [{"k": index} for index in range(3_000)]
    schema = {"type": "array", "items": {"enum": values}}
    started = time.monotonic()
    assert validate(schema, list(reversed(values))) == []
    assert validate(schema, [{"k": -1}])[0].pointer == "/0"
    assert time.monotonic() - started < 2


def _json_values() -> Any:
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from([0.0, 1.0, 2.5])
    scalars |= st.sampled_from(["", "a", "1"])
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2)
        ),
        max_leaves=6,
    )


def test_unique_items_and_enum_decide_as_jsonschema_does() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=400, deadline=None)
    @given(st.lists(_json_values(), max_size=5), _json_values())
    def agree(items: list[Any], value: Any) -> None:
        for schema, instance in (
            ({"uniqueItems": True}, items),
            ({"enum": items or [None]}, value),
        ):
            reference = jsonschema.Draft202012Validator(schema).is_valid(instance)
            assert (validate(schema, instance) == []) is reference, (schema, instance)

    agree()


# -- two object schemas no object passes ------------------------------------------------


def _obj(properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **more}


@pytest.mark.parametrize(
    ("first", "second", "found"),
    [
        (
            _obj({"n": {"type": "integer"}}),
            _obj({"n": {"type": ["string", "null"]}}, required=["n"]),
            ["'n' is integer in the first and null or string in the second"],
        ),
        # Required by neither: an object without it passes both.
        (_obj({"n": {"type": "integer"}}), _obj({"n": {"type": "string"}}), []),
        # Beside a $ref, draft-07 ignores "type".
        (
            _obj({"n": {"$ref": "#/definitions/s", "type": "integer"}}, required=["n"])
            | {"definitions": {"s": {"type": "string"}}},
            _obj({"n": {"type": "string"}}),
            [],
        ),
        # Every integer is a number, either way round.
        (_obj({"n": {"type": "integer"}}), _obj({"n": {"type": "number"}}), []),
        (_obj({"n": {"type": ["number"]}}), _obj({"n": {"type": "integer"}}), []),
        # No declared type, or one only of the two: nothing is shown.
        (_obj({"n": {"minimum": 1}}), _obj({"n": {"type": "string"}}), []),
        (_obj({"n": {"type": "string"}}), _obj({"m": {"type": "integer"}}), []),
        (
            _obj({"n": {"type": "string"}}, required=["n"]),
            _obj({"m": {}}, additionalProperties=False),
            ["'n' is required by the first and not allowed by the second"],
        ),
        (
            _obj({"m": {}}, additionalProperties=False),
            _obj({}, required=["n", "m"]),
            ["'n' is required by the second and not allowed by the first"],
        ),
        # A pattern may allow the name: not judged.
        (
            _obj({}, required=["n"]),
            _obj({}, additionalProperties=False, patternProperties={"^n$": {}}),
            [],
        ),
        (True, _obj({}, required=["n"]), []),
    ],
)
def test_incompatible_names_what_no_object_could_pass(
    first: Any, second: Any, found: list[str]
) -> None:
    assert incompatible(first, second) == found
    # What it finds is true: an object meeting either schema fails the other.
    for reason in found:
        name = reason.split("'")[1]
        for instance in ({name: "x"}, {name: 1}, {name: None}, {}):
            assert not all(validate(schema, instance) == [] for schema in (first, second))


def test_incompatible_names_root_types_that_do_not_meet() -> None:
    found = incompatible({"type": "array"}, _obj({}, required=["n"]), ("code", "row"))
    assert found == ["the value is array in code and object in row"]
    for instance in ([], {}, {"n": 1}, "x"):
        assert not all(validate(schema, instance) == [] for schema in ({"type": "array"}, _obj({})))
    assert incompatible({"type": ["object", "null"]}, {"type": "object"}) == []
    assert incompatible({"type": "integer"}, {"type": "number"}) == []
    assert incompatible({"type": "object"}, {"properties": {}}) == []


def test_incompatible_names_the_schemas_as_told() -> None:
    found = incompatible(
        _obj({"n": {"type": "string"}}, required=["n"]),
        _obj({"n": {"type": "boolean"}}),
        ("code", "row"),
    )
    assert found == ["'n' is string in code and boolean in row"]


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (False, "at the root: it is false, which no value passes"),
        ({"type": "object", "not": {}}, "at the root: its not refuses every value"),
        ({"not": True}, "at the root: its not refuses every value"),
        ({"enum": []}, "at the root: its enum is empty"),
        ({"allOf": [{}, {"enum": []}]}, "at /allOf/1: its enum is empty"),
        (
            _obj({"tags": {"type": "array", "minItems": 3, "maxItems": 1}}, required=["tags"]),
            "at /properties/tags: its minItems 3 is over its maxItems 1",
        ),
        (
            _obj(
                {"a/b": {"type": "integer", "exclusiveMinimum": 3, "maximum": 3}}, required=["a/b"]
            ),
            "at /properties/a~1b: its exclusiveMinimum 3 is not under its maximum 3",
        ),
        (
            {
                "type": ["string", "array"],
                "minLength": 2,
                "maxLength": 1,
                "minItems": 2,
                "maxItems": 0,
            },
            "at the root: as an array its minItems 2 is over its maxItems 0; "
            "as a string its minLength 2 is over its maxLength 1",
        ),
        (
            {"type": "object", "required": ["a", "b"], "maxProperties": 1},
            "at the root: it requires 2 properties and its maxProperties is 1",
        ),
        (
            {"type": "object", "required": ["x"], "additionalProperties": False},
            "at the root: it requires 'x', which its additionalProperties: false refuses",
        ),
        (
            {"anyOf": [{"enum": []}, False]},
            "at /anyOf: none of its members passes a value (at /anyOf/0: its enum is empty; "
            "at /anyOf/1: it is false, which no value passes)",
        ),
        ({"oneOf": [{"not": {}}]}, "at /oneOf/0: its not refuses every value"),
        (
            _obj(
                {"n": {"anyOf": [{"type": "integer", "minimum": 2, "maximum": 1}]}}, required=["n"]
            ),
            "at /properties/n/anyOf/0: its minimum 2 is over its maximum 1",
        ),
        ({"type": "integer", "const": "7"}, 'at the root: its const "7" is not an integer'),
        ({"type": "integer", "const": 1.5}, "at the root: its const 1.5 is not an integer"),
        ({"type": "number", "const": True}, "at the root: its const true is not a number"),
        (
            {"type": ["string", "null"], "enum": [1, False, [], {}]},
            "at the root: none of its enum values is null or a string",
        ),
    ],
)
def test_unsatisfiable_names_where_and_why_no_value_passes(schema: Any, reason: str) -> None:
    check_schema(schema)
    assert unsatisfiable(schema) == reason
    assert not is_valid_for_any(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object"},
        True,
        # Bounds of a type the value need not have: a string passes.
        {"minItems": 3, "maxItems": 1},
        {"type": ["array", "string"], "minItems": 3, "maxItems": 1},
        # A property that is not required may be left out.
        _obj({"tags": {"type": "array", "minItems": 3, "maxItems": 1}}),
        {
            "type": "object",
            "required": ["x"],
            "additionalProperties": False,
            "patternProperties": {"x": {}},
        },
        {"type": "number", "minimum": 3, "maximum": 3},
        # What a reference leads to is not looked at.
        {"$ref": "#/$defs/never", "$defs": {"never": False}},
        # One member that a value passes is enough.
        {"anyOf": [False, {"type": "string"}]},
        {"oneOf": [{"enum": []}, {}]},
        # 1.0 is an integer from draft 6 on; an integer is a number.
        {"type": "integer", "const": 1.0},
        {"type": "number", "enum": ["a", 2]},
        {"type": ["string", "null"], "enum": [1, None]},
        # Draft 4 has no const; a subschema of another dialect is not looked into.
        {"$schema": DRAFT4, "type": "integer", "const": "a"},
        _obj({"n": {"$schema": DRAFT4, "type": "integer", "const": "a"}}, required=["n"]),
    ],
)
def test_unsatisfiable_finds_nothing_where_a_value_may_pass(schema: Any) -> None:
    assert unsatisfiable(schema) is None


def test_unsatisfiable_reads_a_mapping_const_as_an_object() -> None:
    from types import MappingProxyType

    schema = {"type": "string", "const": MappingProxyType({"k": MappingProxyType({})})}
    assert unsatisfiable(schema) == ('at the root: its const {"k": {}} is not a string')
    assert unsatisfiable({"type": "object", "const": MappingProxyType({})}) is None
    # What JSON has no form for is shown as Python writes it.
    assert unsatisfiable({"type": "string", "const": [{1}]}) == (
        "at the root: its const [{1}] is not a string"
    )


def is_valid_for_any(schema: Any) -> bool:
    """Whether one of a few telling values passes ``schema``."""
    samples: list[Any] = [None, True, 0, 3, 3.5, "", "ab", [], [1, 2], {}, {"tags": [1]}, {"x": 1}]
    return any(not validate(schema, value) for value in samples)


# -- the quick check for simply typed object schemas -------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from mcp_app.schema import _quick_check  # noqa: E402

_TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
_NAMES = st.sampled_from(["a", "b", "c", "d"])
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1.0, 2.0, -0.0])
    | st.text(max_size=3),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_NAMES, children, max_size=3),
    max_leaves=6,
)
_BOUND = st.integers(-3, 3) | st.sampled_from([0.5, -1.5, 2.0, 1e300])
_LIMITS = st.fixed_dictionaries(
    {},
    optional={
        "minLength": st.integers(0, 3),
        "maxLength": st.integers(0, 3),
        "minimum": _BOUND,
        "maximum": _BOUND,
        "enum": st.lists(st.text(max_size=2), min_size=1, max_size=3, unique=True),
        "const": st.text(max_size=2),
    },
)
_PROPERTY = st.one_of(
    st.just(True),
    st.just({}),
    st.builds(lambda t: {"type": t}, st.sampled_from(_TYPES)),
    st.builds(
        lambda ts: {"type": ts, "description": "x"},
        st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3, unique=True),
    ),
    # The keywords the quick check reads, with or without a type.
    st.builds(
        lambda ts, limits: ({"type": ts} if ts else {}) | limits,
        st.lists(st.sampled_from(_TYPES), max_size=2, unique=True),
        _LIMITS,
    ),
)
_SIMPLE = st.fixed_dictionaries(
    {
        "type": st.just("object"),
        "properties": st.dictionaries(_NAMES, _PROPERTY, min_size=1, max_size=4),
    },
    optional={
        "$schema": st.sampled_from([DRAFT6, DRAFT7, DRAFT2019, DRAFT2020]),
        "required": st.lists(_NAMES, min_size=1, max_size=3, unique=True),
        "additionalProperties": st.booleans(),
        "title": st.just("t"),
    },
)


_NUMBERS = [None, True, False, 0, 1, -3, 1.0, 1.5, -0.0, 3, 2.5, 1e301]
_SCALARS = st.sampled_from([*_NUMBERS, "", "x", "xyz", "é", "😀", [], {}, [1], {"a": 1}])


@settings(max_examples=1000, deadline=None)
@given(schema=_SIMPLE, data=st.data())
def test_the_quick_check_never_accepts_what_the_validator_refuses(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    import json

    # Mostly objects over the schema's own property names, where the types matter.
    names = [*sorted(schema.get("properties", {})), "z"]
    instance = data.draw(
        st.dictionaries(st.sampled_from(names), _SCALARS | _JSON, max_size=4) | _JSON
    )

    quick = _quick_check(schema)
    assert quick is not None, schema
    full, _ = JSONSchemaValidator()._compiled(json.dumps(schema, sort_keys=True))
    if quick(instance):
        assert full.is_valid(instance), (schema, instance)
    # And what the validator answers through the quick path is the validator's own answer.
    assert [str(p) for p in JSONSchemaValidator().problems(schema, instance)] == [
        str(p) for p in validate(schema, instance)
    ]


def test_the_quick_check_takes_the_usual_argument_object() -> None:

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "description": "b"}},
        "required": ["a", "b"],
    }
    quick = _quick_check(schema)
    assert quick is not None
    assert quick({"a": 1, "b": 2})
    assert not quick({"a": 1})
    assert not quick({"a": True, "b": 2})  # a boolean is never an integer
    assert not quick({"a": 1.0, "b": 2})  # left to the validator: drafts differ on 1.0
    assert validate(schema, {"a": 1.0, "b": 2}) == []  # 2020-12 takes it
    assert validate({**schema, "$schema": DRAFT4}, {"a": 1.0, "b": 2}) != []


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "format": "email"}}},
        {"type": "object", "properties": {"a": {"type": "integer", "exclusiveMinimum": 0}}},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}},
        {"type": "object", "properties": {"a": {"enum": ["x", 1]}}},  # true is not 1 in JSON
        {"type": "object", "properties": {"a": {"const": 1}}},
        {"type": "object", "properties": {"a": {"minimum": 0, "exclusiveMinimum": True}}},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {}}},
        {"type": "object", "properties": {"a": {"type": "decimal"}}},
        {"type": "object", "properties": {"a": False}},
        {"type": "array"},
        {"type": ["object", "null"]},
    ],
)
def test_other_schemas_always_go_to_the_validator(schema: dict[str, Any]) -> None:

    assert _quick_check(schema) is None


def test_the_quick_check_reads_lengths_bounds_and_string_enums() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 3, "description": "who"},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "count": {"type": "integer", "minimum": 1, "maximum": 10},
            "kind": {"const": "tool"},
        },
        "required": ["name", "mode"],
        "additionalProperties": False,
    }
    quick = _quick_check(schema)
    assert quick is not None
    assert quick({"name": "ada", "mode": "fast", "count": 10, "kind": "tool"})
    assert quick({"name": "😀", "mode": "slow"})  # one code point, as JSON Schema counts
    for wrong in (
        {"name": "", "mode": "fast"},
        {"name": "adam", "mode": "fast"},
        {"name": "ada", "mode": "quick"},
        {"name": "ada", "mode": "fast", "count": 0},
        {"name": "ada", "mode": "fast", "count": 11},
        {"name": "ada", "mode": "fast", "kind": "prompt"},
    ):
        assert not quick(wrong), wrong
        assert validate(schema, wrong) != [], wrong


def test_the_quick_check_leaves_values_of_other_types_to_the_validator() -> None:
    # Output validation sees a handler's own objects, not parsed JSON.
    import enum
    from decimal import Decimal

    from django.utils.safestring import mark_safe

    class Mode(enum.StrEnum):
        LONG = "toolong"

    class Level(enum.IntEnum):
        LOW = 5

    for limits, value in (
        ({"maxLength": 3}, Mode.LONG),
        ({"maxLength": 3}, mark_safe("<b>x</b>")),
        ({"minimum": 10}, Level.LOW),
        ({"minimum": 10}, Decimal(5)),
    ):
        schema = {"type": "object", "properties": {"v": limits}}
        quick = _quick_check(schema)
        assert quick is not None
        assert not quick({"v": value}), (limits, value)
        assert validate(schema, {"v": value}) != [], (limits, value)


# ---------------------------------------------------------------- reference loops

LOOP_DEFS = {"a": {"$ref": "#/$defs/a"}}


def test_a_reference_loop_met_on_any_instance_is_refused_when_checked() -> None:
    schema = {"type": "object", "$ref": "#/$defs/a", "$defs": LOOP_DEFS}
    with pytest.raises(SchemaError, match=r"refers to itself without end"):
        check_schema(schema)
    assert not is_valid_schema(schema)


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        # Reached only through a property: the trial on {} does not meet it.
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "$defs": LOOP_DEFS},
            "/$defs/a",
        ),
        ({"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}}, "/properties/x"),
        (
            {"type": "object", "properties": {"x": {"allOf": [{"$ref": "#/properties/x"}]}}},
            "/properties/x",
        ),
        (
            {
                "type": "object",
                "properties": {"x": {"$ref": "#/$defs/a"}},
                "$defs": {
                    "a": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/b"}]},
                    "b": {"not": {"$ref": "#/$defs/a"}},
                },
            },
            "/$defs/a",
        ),
        ({"properties": {"x": {"if": {"$ref": "#/properties/x"}}}}, "/properties/x"),
        (
            {"properties": {"x": {"if": {"type": "string"}, "then": {"$ref": "#/properties/x"}}}},
            "/properties/x",
        ),
        (
            {"properties": {"x": {"if": {"type": "string"}, "else": {"$ref": "#/properties/x"}}}},
            "/properties/x",
        ),
        ({"type": "object", "dependentSchemas": {"x": {"$ref": "#"}}}, ""),
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "dependencies": {"a": ["b"], "x": {"$ref": "#"}},
            },
            "",
        ),
        (
            {
                "$id": "https://example.com/root",
                "properties": {"x": {"$ref": "other"}},
                # "#" is other itself, by its $id: not the root, which would go into x.
                "$defs": {"other": {"$id": "other", "oneOf": [{"$ref": "#"}]}},
            },
            "/$defs/other",
        ),
    ],
)
def test_a_reference_loop_that_never_goes_into_the_value_is_refused_when_checked(
    schema: dict[str, Any], pointer: str
) -> None:
    with pytest.raises(SchemaError, match=r"refers to itself without end") as caught:
        check_schema(schema)
    assert caught.value.pointer == pointer


@pytest.mark.parametrize(
    "schema",
    [
        # Each step of the loop goes into a property or an item of the value.
        {"type": "object", "properties": {"x": {"$ref": "#"}}},
        {"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"},
        {"propertyNames": {"$ref": "#"}},
        {
            "$id": "https://example.com/root",
            "properties": {"x": {"$ref": "other"}},
            "$defs": {"other": {"$id": "other", "oneOf": [{"$ref": "root"}]}},
        },
        # Draft 7 ignores a $ref's siblings, so the allOf below never runs.
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "properties": {"x": {"$ref": "#/definitions/a"}},
            "definitions": {
                "a": {"$ref": "#/definitions/b", "allOf": [{"$ref": "#/definitions/a"}]},
                "b": {},
            },
        },
        # then and else do nothing without if; draft 4 has no if (an unknown keyword there).
        {"properties": {"x": {"else": {"$ref": "#/properties/x"}}}},
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "properties": {"x": {"if": {"$ref": "#/properties/x"}}},
        },
        # The dynamic target, the root, goes into the value; the static one, inner, does not.
        {
            "$id": "https://example.com/root",
            "$dynamicAnchor": "meta",
            "properties": {"x": {"$ref": "inner"}},
            "$defs": {
                "inner": {"$id": "inner", "$dynamicAnchor": "meta", "not": {"$dynamicRef": "#meta"}}
            },
        },
        {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$ref": "http://json-schema.org/draft-07/schema#",
        },
    ],
)
def test_a_recursive_schema_that_goes_into_the_value_is_accepted(schema: dict[str, Any]) -> None:
    check_schema(schema)
    validate(schema, {"x": {"x": {}}})


def test_a_dynamic_reference_loop_met_through_a_value_is_a_schema_error_when_validating() -> None:
    # $dynamicRef is not followed by the check (its target depends on the way to it); with a
    # plain pointer it acts as $ref, so this loops on a value with x.
    defs = {"a": {"$dynamicRef": "#/$defs/a"}}
    schema = {"type": "object", "properties": {"x": {"$dynamicRef": "#/$defs/a"}}, "$defs": defs}
    check_schema(schema)  # not met on an empty object
    assert validate(schema, {}) == []
    with pytest.raises(SchemaError, match=r"refers to itself without end"):
        validate(schema, {"x": 1})


def test_a_recursive_schema_that_reads_the_instance_is_fine() -> None:
    tree = {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#"}}},
    }
    check_schema(tree)
    assert validate(tree, {"children": [{"children": []}]}) == []


# --- what the checks cannot follow -----------------------------------------------------------


def nested_items(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return {"type": "object", "properties": {"a": schema}}


@pytest.mark.parametrize("depth", [200, 5000])
def test_a_schema_nested_too_deeply_to_check_is_a_schema_error(depth: int) -> None:
    error = schema_error(nested_items(depth))
    assert "nests too deeply" in error.reason
    assert not is_valid_schema(nested_items(depth))


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"properties": {"a": {"pattern": "a{99999999999}"}}}, "/properties/a/pattern"),
        ({"patternProperties": {"a{99999999999}": {}}}, "/patternProperties"),
        ({"properties": {"a": {"pattern": "(" * 1000 + ")" * 1000}}}, "/properties/a/pattern"),
    ],
)
def test_a_pattern_too_large_to_compile_is_a_schema_error(schema: Any, pointer: str) -> None:
    error = schema_error(schema)
    assert error.pointer == pointer
    assert error.reason == "not a valid regex"


def test_an_unresolvable_dynamic_ref_is_refused_when_checked():
    error = schema_error({"type": "object", "$dynamicRef": "#meta"})
    assert error.pointer == "/$dynamicRef"
    assert error.reason == (
        "cannot resolve $dynamicRef '#meta': nothing in the schema has that address"
    )
    nested = {"properties": {"a": {"$dynamicRef": "https://example.com/s#node"}}}
    assert schema_error(nested).pointer == "/properties/a/$dynamicRef"
    # Draft 2019-09 has no $dynamicRef: there it is an unknown keyword, ignored.
    check_schema({"$schema": DRAFT2019, "$dynamicRef": "#meta"})


def test_a_value_nested_deeper_than_the_check_can_follow_is_a_problem() -> None:
    tree = {"type": "object", "properties": {"kid": {"$ref": "#"}}}
    value: dict[str, Any] = {}
    for _ in range(5000):
        value = {"kid": value}
    [problem] = validate(tree, value)
    assert problem.pointer == ""
    assert "nests too deeply" in problem.message


# -- patterns that backtrack without end ------------------------------------------------------


@pytest.mark.parametrize("pattern", ["^(a|aa)+$", "^(a|a)*$"])
def test_a_pattern_that_backtracks_without_end_refuses_the_string_in_time(pattern: str) -> None:
    # Python's re takes minutes on these; any client could send such a string.
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
    started = time.perf_counter()
    problems = JSONSchemaValidator().problems(schema, {"x": "a" * 60 + "!"})
    assert time.perf_counter() - started < 20 * PATTERN_SECONDS
    assert [p.pointer for p in problems] == ["/x"]
    assert problems[0].message.endswith(
        f"took longer than {PATTERN_SECONDS} s to match {pattern!r}"
    )
    # What matches quickly is answered as before.
    assert JSONSchemaValidator().problems(schema, {"x": "aaaa"}) == []


def test_many_strings_that_backtrack_share_one_time_limit() -> None:
    schema = {
        "type": "array",
        "items": {"type": "string", "pattern": "^(a|aa)+$"},
    }
    started = time.perf_counter()
    problems = JSONSchemaValidator().problems(schema, ["a" * 60 + "!"] * 40)
    # Not 40 times PATTERN_SECONDS: every string is refused within PATTERNS_SECONDS in all.
    assert time.perf_counter() - started < PATTERNS_SECONDS + 10 * PATTERN_SECONDS
    assert len(problems) == 40
    assert problems[0].message.endswith(
        f"took longer than {PATTERN_SECONDS} s to match '^(a|aa)+$'"
    )
    assert problems[-1].message.endswith(
        f"was left unmatched after {PATTERNS_SECONDS} s of matching the value's patterns, "
        "against '^(a|aa)+$'"
    )
    # The next validation has its own time.
    assert JSONSchemaValidator().problems(schema, ["aaaa"]) == []


def test_the_shared_time_limit_counts_only_the_matching(monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp_app.schema as schema_module

    # Checking the long list takes longer than this; matching the patterns does not.
    monkeypatch.setattr(schema_module, "PATTERNS_SECONDS", 0.02)
    schema = {
        "type": "object",
        "patternProperties": {"^x": {}},
        "properties": {
            "big": {"type": "array", "items": {"type": "integer"}},
            "name": {"type": "string", "pattern": "^a$"},
        },
        "unevaluatedProperties": False,
    }
    big = list(range(50_000))
    started = time.perf_counter()
    assert JSONSchemaValidator().problems(schema, {"big": big, "name": "a", "x1": 0}) == []
    assert time.perf_counter() - started > 0.02  # the list did take longer
    problems = JSONSchemaValidator().problems(schema, {"big": big, "name": "a", "zzz": 1})
    assert [p.message for p in problems] == [
        "Unevaluated properties are not allowed ('zzz' was unexpected)"
    ]


def test_a_pattern_re_would_backtrack_on_is_matched_at_once() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}
    problems = JSONSchemaValidator().problems(schema, {"x": "a" * 60 + "!"})
    assert [p.message for p in problems] == [
        "expected a string matching '^(a+)+$', got '" + "a" * 56 + "..."
    ]


def test_a_pattern_property_that_backtracks_without_end_refuses_the_name_in_time() -> None:
    schema = {"type": "object", "patternProperties": {"^(a|aa)+$": {"type": "integer"}}}
    started = time.perf_counter()
    problems = JSONSchemaValidator().problems(schema, {"a" * 60 + "!": 1, "aa": "two"})
    assert time.perf_counter() - started < 20 * PATTERN_SECONDS
    messages = sorted(p.message for p in problems)
    assert messages[0] == "expected integer, got string"
    assert "took longer than 0.25 s to match '^(a|aa)+$'" in messages[1]


@pytest.mark.parametrize("keyword", ["additionalProperties", "unevaluatedProperties"])
@pytest.mark.parametrize("pattern", ["^(a+)+$", "^(a|aa)+$"])
def test_names_matched_for_other_properties_are_refused_in_time(keyword: str, pattern: str) -> None:
    # jsonschema's own keywords search patternProperties with re: minutes for such a name.
    schema = {"type": "object", "patternProperties": {pattern: {"type": "string"}}, keyword: False}
    started = time.perf_counter()
    problems = JSONSchemaValidator().problems(schema, {"a" * 40 + "!": "x"})
    assert time.perf_counter() - started < 20 * PATTERN_SECONDS
    assert problems, "the name matches no pattern"
    assert JSONSchemaValidator().problems(schema, {"aaaa": "x"}) == []


#: Schemas whose answers for other properties depend on which names are evaluated or extra.
_EVALUATION_SCHEMAS: list[dict[str, Any]] = [
    {"properties": {"a": {}}, "patternProperties": {"^x": {}}, "additionalProperties": False},
    {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}},
    {"patternProperties": {"^x": {"type": "integer"}}, "unevaluatedProperties": False},
    {
        "allOf": [{"properties": {"a": {}}}, {"patternProperties": {"^x": {}}}],
        "unevaluatedProperties": False,
    },
    {
        "anyOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {}}}],
        "unevaluatedProperties": {"type": "string"},
    },
    {
        "if": {"properties": {"a": {"const": 1}}},
        "then": {"properties": {"b": {}}},
        "else": {"patternProperties": {"^x": {}}},
        "unevaluatedProperties": False,
    },
    {
        "dependentSchemas": {"a": {"properties": {"b": {}}}},
        "properties": {"a": {}},
        "unevaluatedProperties": False,
    },
    {
        "$defs": {"base": {"properties": {"a": {}}, "patternProperties": {"^x": {}}}},
        "$ref": "#/$defs/base",
        "unevaluatedProperties": False,
    },
    {"additionalProperties": {"type": "integer"}, "unevaluatedProperties": False},
    {"oneOf": [{"additionalProperties": True}], "unevaluatedProperties": False},
]
_EVALUATION_INSTANCES: list[dict[str, Any]] = [
    {},
    {"a": 1},
    {"a": 1, "b": 2},
    {"a": 2, "b": "x"},
    {"x1": 1, "y": "s"},
    {"a": 1, "x": "s", "z": 3},
    {"b": "t", "xx": 2},
]


@pytest.mark.parametrize("dialect", ["2020-12", "2019-09"])
@pytest.mark.parametrize("index", range(len(_EVALUATION_SCHEMAS)))
def test_other_properties_are_judged_as_jsonschema_judges_them(dialect: str, index: int) -> None:
    schema = {
        "$schema": f"https://json-schema.org/draft/{dialect}/schema",
        **_EVALUATION_SCHEMAS[index],
    }
    plain = jsonschema.validators.validator_for(schema)(schema)
    for instance in _EVALUATION_INSTANCES:
        expected = plain.is_valid(instance)
        assert (JSONSchemaValidator().problems(schema, instance) == []) is expected, instance


def test_a_schema_of_many_anchors_is_checked_in_linear_time() -> None:
    # Each anchor lookup crawled the whole schema again: 600 anchors took about 12 s.
    count = 600
    defs: dict[str, Any] = {
        f"d{i}": {"$anchor": f"a{i}", "type": "object", "properties": {"x": {"$ref": f"#a{i + 1}"}}}
        for i in range(count)
    }
    defs[f"d{count}"] = {"$anchor": f"a{count}", "type": "string"}
    schema = {"type": "object", "properties": {"x": {"$ref": "#a0"}}, "$defs": defs}
    started = time.monotonic()
    check_schema(schema)
    assert time.monotonic() - started < 5
    assert validate(schema, {"x": {"x": "s"}}) == [Problem("/x/x", "expected object, got string")]


def test_in_place_follows_references_and_the_combinators_a_value_matches() -> None:
    listed = {"type": "array"}
    named = {"$anchor": "named", "type": "string"}
    field = {"allOf": [{"$ref": "#/$defs/chain"}], "not": {"type": "null"}}
    schema = {
        "properties": {"f": field, "other": {"type": "integer"}},
        "$defs": {
            "chain": {"$ref": "#named", "if": {"minLength": 1}, "then": {"anyOf": [listed]}},
            "named": named,
        },
    }
    found = list(in_place(schema, field))
    assert found[0] is field
    assert {id(s) for s in found} == {
        id(field),
        id(field["allOf"][0]),
        id(schema["$defs"]["chain"]),
        id(schema["$defs"]["chain"]["then"]),
        id(listed),
        id(named),
    }
    # A subschema that is not in the schema, and a loop, each met once.
    assert list(in_place(schema, {"type": "array"})) == []
    looped = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}
    assert len(list(in_place(looped, looped["$defs"]["a"]))) == 2


def test_in_place_in_a_draft_7_schema_ignores_what_stands_beside_a_ref() -> None:
    field = {"$ref": "#/definitions/s", "anyOf": [{"type": "array"}]}
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"f": field},
        "definitions": {"s": {"type": "string"}},
    }
    assert list(in_place(schema, field)) == [field, schema["definitions"]["s"]]


_BOUNDS = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(_TYPES)
        | st.lists(st.sampled_from(_TYPES), max_size=3, unique=True),
        "minLength": st.integers(0, 3),
        "maxLength": st.integers(0, 3),
        "minItems": st.integers(0, 3),
        "maxItems": st.integers(0, 3),
        "minimum": _BOUND,
        "maximum": _BOUND,
        "exclusiveMinimum": _BOUND,
        "exclusiveMaximum": _BOUND,
        "minProperties": st.integers(0, 3),
        "maxProperties": st.integers(0, 3),
        "required": st.lists(_NAMES, max_size=3, unique=True),
        "additionalProperties": st.booleans(),
        "const": _SCALARS,
        "enum": st.lists(_SCALARS, min_size=1, max_size=3),
    },
)
_NEVER = st.recursive(
    _BOUNDS,
    lambda children: (
        st.builds(
            lambda bounds, props: bounds | {"properties": props},
            _BOUNDS,
            st.dictionaries(_NAMES, children, max_size=3),
        )
        | st.builds(
            lambda keyword, members: {keyword: members},
            st.sampled_from(["allOf", "anyOf", "oneOf"]),
            st.lists(children, min_size=1, max_size=2),
        )
    ),
    max_leaves=4,
)
#: The same at the root, in each dialect, where a keyword may mean another thing or nothing.
_NEVER_IN_A_DIALECT = st.builds(
    lambda schema, dialect: schema | ({"$schema": dialect} if dialect else {}),
    _NEVER,
    st.sampled_from([None, DRAFT4, DRAFT6, DRAFT7, DRAFT2019, DRAFT2020]),
)
_NEAR = st.recursive(
    _SCALARS | st.integers(-4, 4) | st.sampled_from([0.5, 1.5, 2.0, -1.5]) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_NAMES, children, max_size=4),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(schema=_NEVER_IN_A_DIALECT, data=st.data())
def test_no_value_passes_a_schema_unsatisfiable_names(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    if not is_valid_schema(schema) or unsatisfiable(schema) is None:
        return
    # The schema's own const and enum values too, which drawn values seldom equal.
    for value in [data.draw(_NEAR) for _ in range(20)] + _named_values(schema):
        assert validate(schema, value), (schema, value)


def _named_values(schema: Any) -> list[Any]:
    """Every ``const`` and ``enum`` value in ``schema``, and objects of them for its
    properties."""
    if not isinstance(schema, dict):
        return []
    found = [schema["const"]] if "const" in schema else []
    found += schema.get("enum", [])
    for keyword in ("allOf", "anyOf", "oneOf"):
        for member in schema.get(keyword, []):
            found += _named_values(member)
    properties = schema.get("properties", {})
    for name, subschema in properties.items():
        found += [{name: value} for value in _named_values(subschema)]
    return found
