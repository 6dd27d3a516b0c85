"""The admin's form fields: JSON that cannot be kept or shown is a form error, not a crash."""

from __future__ import annotations

import html

import pytest
from django import forms

from mcp_app.forms import MAX_JSON_DEPTH, PrettyJSONField, json_depth


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_depth_counts_arrays_and_objects_without_recursion() -> None:
    assert json_depth(1) == 0
    assert json_depth({"a": [1, {"b": []}]}) == 4
    deep: object = 0
    for _ in range(100_000):
        deep = [deep]
    assert json_depth(deep) == 100_000


def test_json_nested_as_deep_as_allowed_is_kept() -> None:
    assert json_depth(PrettyJSONField().clean(nested(MAX_JSON_DEPTH))) == MAX_JSON_DEPTH


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5000])
def test_json_nested_deeper_is_a_form_error(depth: int) -> None:
    with pytest.raises(forms.ValidationError) as caught:
        PrettyJSONField().clean(nested(depth))
    assert caught.value.messages == [f"JSON may nest at most {MAX_JSON_DEPTH} levels deep."]


def test_an_integer_past_pythons_digit_limit_is_a_form_error() -> None:
    with pytest.raises(forms.ValidationError) as caught:
        PrettyJSONField().clean('{"a": ' + "9" * 5000 + "}")
    [message] = caught.value.messages
    assert message.startswith("Enter valid JSON: Exceeds the limit (4300 digits)")


def test_an_object_giving_a_key_twice_is_a_form_error() -> None:
    with pytest.raises(forms.ValidationError) as caught:
        PrettyJSONField().clean('{"template": "A", "nested": {"a": 1, "a": 2}}')
    assert caught.value.messages == ["Enter valid JSON: the key 'a' is given twice in one object."]
    assert PrettyJSONField().clean('[{"a": 1}, {"a": 2}]') == [{"a": 1}, {"a": 2}]
    form = _JSONForm({"value": '{"a": 1, "a": 2}'})
    assert not form.is_valid()
    assert "{&quot;a&quot;: 1, &quot;a&quot;: 2}" in str(form["value"])  # shown again as typed


def test_a_lone_surrogate_is_refused_and_shown_escaped() -> None:
    field = PrettyJSONField()
    with pytest.raises(forms.ValidationError):
        field.clean('{"a": "\\ud800"}')
    assert field.prepare_value({"a": "\ud800"}) == '{\n  "a": "\\ud800"\n}'


class _JSONForm(forms.Form):
    value = PrettyJSONField()


@pytest.mark.parametrize(
    "typed",
    [nested(5000), '{"a": ' + "9" * 5000 + "}"],
    ids=["deeper than Python recurses", "past the digit limit"],
)
def test_json_that_cannot_be_read_is_shown_again_as_typed_with_its_error(typed: str) -> None:
    form = _JSONForm({"value": typed})
    assert not form.is_valid()
    assert form["value"].value() == typed
    assert typed in html.unescape(str(form["value"]))  # the box re-renders what was typed
