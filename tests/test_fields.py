"""The app's JSON fields: WireJSONField keeps what clients send, NUL characters included, and
OrderedJSONField the order of an object's keys, on every database."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from django.db import connection

from mcp_app.fields import WRAPPED, storable
from mcp_app.models import DeliveryMessage, StreamEvent, Tool

pytestmark = pytest.mark.django_db

VALUES: list[Any] = [
    {"text": "a\x00b"},
    {"lone": "\ud800", "pair": "\U0001f600"},
    {"k\x00ey": [1, "\x00", {"deep": "x\x00"}]},
    ["\x00"],
    "\x00 alone",
    # What looks like the wrapper is stored wrapped too, so it reads back as itself.
    {WRAPPED: "[1, 2]"},
    {WRAPPED: "not json at all"},
    # A literal backslash before "u0000" is not a NUL.
    {"text": "\\u0000"},
    {"plain": [1, 2.5, True, None, "é"]},
    [],
    {},
    0,
]


def test_nan_and_infinity_read_back_as_they_were_written() -> None:
    # What a handler put in a progress notification of a stream that is logged.
    message = {"progress": float("nan"), "total": [float("inf"), -float("inf")]}
    row = StreamEvent.objects.create(session_id="s", stream="t", seq=1, message=message)
    stored = StreamEvent.objects.get(pk=row.pk).message
    assert math.isnan(stored["progress"]) and stored["total"] == [float("inf"), -float("inf")]


@pytest.mark.parametrize("value", VALUES)
def test_values_read_back_as_they_were_written(value: Any) -> None:
    row = DeliveryMessage.objects.create(channel="c", message=value)
    assert DeliveryMessage.objects.get(pk=row.pk).message == value
    assert DeliveryMessage.objects.values_list("message", flat=True).get(pk=row.pk) == value


def test_a_value_without_nul_is_stored_as_plain_json() -> None:
    StreamEvent.objects.create(session_id="s", stream="t", seq=1, message={"a": ["b"]})
    with connection.cursor() as cursor:
        cursor.execute("SELECT message FROM mcp_app_streamevent")
        (stored,) = cursor.fetchone()
    assert WRAPPED not in str(stored)


def test_a_value_with_nul_is_stored_wrapped_without_a_nul() -> None:
    StreamEvent.objects.create(session_id="s", stream="t", seq=1, message={"a": "\x00"})
    with connection.cursor() as cursor:
        cursor.execute("SELECT message FROM mcp_app_streamevent")
        (stored,) = cursor.fetchone()
    assert WRAPPED in str(stored) and "\x00" not in str(stored)


def test_a_key_lookup_reads_the_stored_value_as_it_is() -> None:
    # Inside a stored value, the wrapper's shape is data, not a wrapper this field made.
    DeliveryMessage.objects.create(channel="c", message={"k": {WRAPPED: "zz"}})
    found = DeliveryMessage.objects.values_list("message__k", flat=True).get()
    assert found == {WRAPPED: "zz"}


def test_a_wrapper_shaped_row_from_before_the_field_reads_as_stored() -> None:
    # What a plain JSONField stored in the wrapper's shape, bypassing this field's wrapping.

    DeliveryMessage.objects.create(channel="c", message=[])
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE mcp_app_deliverymessage SET message = %s{cast}",
            [json.dumps({WRAPPED: "not json"})],
        )
    assert DeliveryMessage.objects.get().message == {WRAPPED: "not json"}


# -- OrderedJSONField ------------------------------------------------------------------------

#: Properties in an order no database sorts them into: PostgreSQL's jsonb sorts by length,
#: then bytes ("mid", "zeta", "alpha").
SCHEMA = {
    "type": "object",
    "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}, "mid": {}},
    "required": ["zeta"],
}


def test_a_schema_keeps_its_properties_in_the_order_written() -> None:
    tool = Tool.objects.create(
        name="ordered", handler="echo", input_schema=SCHEMA, output_schema=SCHEMA
    )
    stored = Tool.objects.get(pk=tool.pk)
    for schema in (stored.input_schema, stored.output_schema):
        assert schema == SCHEMA
        assert list(schema) == ["type", "properties", "required"]
        assert list(schema["properties"]) == ["zeta", "alpha", "mid"]
    # The same through update(), which bypasses the model.
    Tool.objects.filter(pk=tool.pk).update(input_schema={"b": 1, "a": 2})
    assert list(Tool.objects.get(pk=tool.pk).input_schema) == ["b", "a"]


def test_a_schema_stored_before_as_an_object_reads_as_it_is() -> None:
    tool = Tool.objects.create(name="older", handler="echo")
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE mcp_app_tool SET input_schema = %s{cast} WHERE id = %s",
            [json.dumps(SCHEMA), tool.pk],
        )
    assert Tool.objects.get(pk=tool.pk).input_schema == SCHEMA


def test_a_schema_of_none_is_sql_null() -> None:
    tool = Tool.objects.create(name="nothing", handler="echo", input_schema=None)
    assert Tool.objects.filter(pk=tool.pk, input_schema__isnull=True).exists()
    assert Tool.objects.get(pk=tool.pk).input_schema is None


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("plain ascii", "plain ascii"),
        ("", ""),
        ("a\x00b", "a\ufffdb"),
        ("\x00", "\ufffd"),
        ("é and \U0001f600", "é and \U0001f600"),
        ("é\x00", "é\ufffd"),
        ("lone \ud800 and \udfff", "lone \ufffd and \ufffd"),
    ],
)
def test_storable_replaces_nul_and_lone_surrogates_only(text: str, kept: str) -> None:
    assert storable(text) == kept
