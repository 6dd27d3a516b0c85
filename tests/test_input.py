"""The input-request builders, ``input_required`` and the capabilities its requests need."""

from __future__ import annotations

import datetime
import decimal
import enum
from typing import Any

import pytest
from django.utils.translation import gettext_lazy

from mcp_app import elicit, elicit_url, input_required, roots, sample
from mcp_app.input import (
    InputRequired,
    checked_answers,
    expected,
    kept_answer,
    revision_problem,
)

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
WEATHER_TOOL = {
    "name": "weather",
    "description": "Look up the weather",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
BUILDER_MESSAGE = (
    "input request {key!r} must be built with elicit(), elicit_url(), sample() or roots()"
)
EMPTY_MESSAGE = "input_required() needs at least one request or a state"
LOGIN = elicit_url("Sign in", "https://example.com")
TOOLS = {"sampling": {"tools": {}}}


# -- builders ----------------------------------------------------------------------------


def test_elicit_defaults_to_form_mode_with_an_empty_object_schema() -> None:
    assert elicit("Anything to add?") == {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "Anything to add?",
            "requestedSchema": {"type": "object", "properties": {}},
        },
    }


def test_elicit_sends_the_given_schema_unchanged() -> None:
    request = elicit("Who?", NAME_FORM)
    assert request == {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Who?", "requestedSchema": NAME_FORM},
    }


def test_elicit_adds_the_object_type_without_touching_the_callers_schema() -> None:
    schema = {"properties": {"age": {"type": "integer"}}}
    request = elicit("Age?", schema)
    assert request["params"]["requestedSchema"] == {
        "type": "object",
        "properties": {"age": {"type": "integer"}},
    }
    assert schema == {"properties": {"age": {"type": "integer"}}}
    assert request["params"]["requestedSchema"] is not schema


def test_elicit_of_an_empty_schema_still_has_the_properties_the_schema_requires() -> None:
    assert elicit("Sure?", {})["params"]["requestedSchema"] == {"type": "object", "properties": {}}


def test_elicit_url_asks_the_user_to_visit_a_page() -> None:
    assert elicit_url("Sign in to continue", "https://example.com/login?x=1") == {
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": "Sign in to continue",
            "url": "https://example.com/login?x=1",
        },
    }


def test_sample_turns_a_string_into_one_user_text_message() -> None:
    assert sample("Write a haiku", 100) == {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Write a haiku"}}],
            "maxTokens": 100,
        },
    }


def test_sample_mixes_strings_and_message_dicts_in_order_and_copies_the_dicts() -> None:
    reply = {"role": "assistant", "content": {"type": "text", "text": "Hi, how can I help?"}}
    request = sample(["Hello", reply, "Tell me a joke"], 64)
    assert request["params"]["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Hello"}},
        {"role": "assistant", "content": {"type": "text", "text": "Hi, how can I help?"}},
        {"role": "user", "content": {"type": "text", "text": "Tell me a joke"}},
    ]
    assert request["params"]["messages"][1] is not reply
    assert request["params"]["maxTokens"] == 64


def test_sample_converts_snake_case_parameters_to_their_wire_names() -> None:
    request = sample(
        "What's the weather in Paris?",
        200,
        system_prompt="Be brief",
        temperature=0.2,
        stop_sequences=["\n\n"],
        include_context="none",
        model_preferences={"hints": [{"name": "claude"}], "speed_priority": 0.5},
        tools=[WEATHER_TOOL],
        tool_choice={"mode": "auto"},
        metadata={"trace": "t1"},
    )
    assert request["params"] == {
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "What's the weather in Paris?"}}
        ],
        "maxTokens": 200,
        "systemPrompt": "Be brief",
        "temperature": 0.2,
        "stopSequences": ["\n\n"],
        "includeContext": "none",
        # Only the parameter names are converted, never the values.
        "modelPreferences": {"hints": [{"name": "claude"}], "speed_priority": 0.5},
        "tools": [WEATHER_TOOL],
        "toolChoice": {"mode": "auto"},
        "metadata": {"trace": "t1"},
    }


def test_sample_keeps_parameters_already_given_by_their_wire_names() -> None:
    request = sample("Hi", 10, systemPrompt="Be kind", toolChoice={"mode": "none"})
    assert request["params"]["systemPrompt"] == "Be kind"
    assert request["params"]["toolChoice"] == {"mode": "none"}
    assert set(request["params"]) == {"messages", "maxTokens", "systemPrompt", "toolChoice"}


def test_sample_passes_meta_through_under_its_wire_name() -> None:
    request = sample("Hi", 10, _meta={"trace": "t1"})
    assert request["params"]["_meta"] == {"trace": "t1"}
    assert "Meta" not in request["params"]


def test_roots_asks_for_the_clients_roots() -> None:
    assert roots() == {"method": "roots/list", "params": {}}
    assert roots() is not roots()


# -- input_required ----------------------------------------------------------------------


def test_input_required_keeps_requests_by_key_and_the_state() -> None:
    requests = {"name": elicit("Who?", NAME_FORM), "roots": roots()}
    outcome = input_required(requests, state={"step": 2})
    assert isinstance(outcome, InputRequired)
    assert outcome.requests == {"name": elicit("Who?", NAME_FORM), "roots": roots()}
    assert outcome.state == {"step": 2}
    requests["late"] = roots()
    assert "late" not in outcome.requests


def test_input_required_with_state_alone_means_retry_me() -> None:
    outcome = input_required(state={"attempt": 1})
    assert outcome.requests == {}
    assert outcome.state == {"attempt": 1}


def test_input_required_accepts_falsy_state_as_a_state() -> None:
    assert input_required(state=0).state == 0
    assert input_required({}, state="").state == ""


@pytest.mark.parametrize(
    "request_",
    [
        {"method": "ping", "params": {}},
        {"method": "tools/call", "params": {"name": "add"}},
        {"params": {"message": "no method"}},
        {"method": None},
        "elicitation/create",
        ["elicitation/create"],
        None,
    ],
    ids=["ping", "tools-call", "no-method", "null-method", "string", "list", "none"],
)
def test_input_required_refuses_requests_not_made_by_the_builders(request_: Any) -> None:
    with pytest.raises(ValueError) as info:
        input_required({"fine": roots(), "odd": request_})
    assert str(info.value) == BUILDER_MESSAGE.format(key="odd")


@pytest.mark.parametrize(
    "call",
    [lambda: input_required(), lambda: input_required({}), lambda: input_required(None, None)],
    ids=["no-arguments", "empty-dict", "explicit-none"],
)
def test_input_required_refuses_neither_request_nor_state(call: Any) -> None:
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == EMPTY_MESSAGE


# -- required_capabilities ---------------------------------------------------------------


def needs(request: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any]:
    return input_required({"q": request}).required_capabilities(declared)


@pytest.mark.parametrize(
    ("request_", "declared", "missing"),
    [
        # Nothing declared: the whole capability, with the sub-capability a request needs.
        (elicit("Who?", NAME_FORM), {}, {"elicitation": {}}),
        (sample("Hi", 10), {}, {"sampling": {}}),
        (LOGIN, {}, {"elicitation": {"url": {}}}),
        (sample("Hi", 10, tools=[WEATHER_TOOL]), {}, {"sampling": {"tools": {}}}),
        (roots(), {}, {"roots": {}}),
        # Another capability declared does not stand in for the one needed.
        (elicit("Who?"), {"sampling": {}, "roots": {}}, {"elicitation": {}}),
        (roots(), {"elicitation": {"form": {}, "url": {}}}, {"roots": {}}),
        # A capability that is not an object is not declared.
        (elicit("Who?"), {"elicitation": True}, {"elicitation": {}}),
        (sample("Hi", 10), {"sampling": None}, {"sampling": {}}),
        # Elicitation: an empty object means form only.
        (elicit("Who?"), {"elicitation": {}}, {}),
        (LOGIN, {"elicitation": {}}, {"elicitation": {"url": {}}}),
        (LOGIN, {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
        (LOGIN, {"elicitation": {"url": {}}}, {}),
        (elicit("Who?"), {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        (elicit("Who?"), {"elicitation": {"form": {}, "url": {}}}, {}),
        (
            {"method": "elicitation/create", "params": {"message": "No mode means form"}},
            {"elicitation": {}},
            {},
        ),
        # Sampling: tools or toolChoice need sampling.tools.
        (sample("Hi", 10), {"sampling": {}}, {}),
        (sample("Hi", 10, tools=[WEATHER_TOOL]), {"sampling": {}}, TOOLS),
        (sample("Hi", 10, tool_choice={"mode": "none"}), {"sampling": {}}, TOOLS),
        (sample("Hi", 10, tools=[WEATHER_TOOL]), {"sampling": {"tools": True}}, TOOLS),
        (sample("Hi", 10, tools=[WEATHER_TOOL]), {"sampling": {"tools": {}}}, {}),
        # Roots.
        (roots(), {"roots": {}}, {}),
    ],
    ids=[
        "form-none",
        "sampling-none",
        "url-none",
        "sampling-tools-none",
        "roots-none",
        "form-other-capabilities",
        "roots-other-capabilities",
        "elicitation-true",
        "sampling-null",
        "form-empty",
        "url-empty-means-form-only",
        "url-form-only",
        "url-url",
        "form-url-only",
        "form-both",
        "no-mode-empty",
        "sampling-plain",
        "sampling-tools-without-tools",
        "sampling-tool-choice-without-tools",
        "sampling-tools-not-object",
        "sampling-tools-declared",
        "roots-declared",
    ],
)
def test_required_capabilities_for_one_request(
    request_: dict[str, Any], declared: dict[str, Any], missing: dict[str, Any]
) -> None:
    assert needs(request_, declared) == missing


def test_required_capabilities_combines_what_several_requests_miss() -> None:
    outcome = input_required(
        {
            "login": elicit_url("Sign in", "https://example.com/login"),
            "plan": sample("Plan a trip", 500, tools=[WEATHER_TOOL], tool_choice={"mode": "auto"}),
            "summary": sample("Summarise", 100),
            "where": roots(),
        }
    )
    assert outcome.required_capabilities({}) == {
        "elicitation": {"url": {}},
        "sampling": {"tools": {}},
        "roots": {},
    }
    assert outcome.required_capabilities({"elicitation": {}, "sampling": {}}) == {
        "elicitation": {"url": {}},
        "sampling": {"tools": {}},
        "roots": {},
    }
    assert outcome.required_capabilities(
        {"elicitation": {"url": {}}, "sampling": {"tools": {}}}
    ) == {"roots": {}}
    assert (
        outcome.required_capabilities(
            {"elicitation": {"url": {}}, "sampling": {"tools": {}}, "roots": {}}
        )
        == {}
    )


def test_required_capabilities_is_empty_for_state_only() -> None:
    assert input_required(state={"retry": True}).required_capabilities({}) == {}


def _merge(declared: dict[str, Any], missing: dict[str, Any]) -> dict[str, Any]:
    """What a client declares after adding what it was told it lacks."""
    out: dict[str, Any] = {}
    for key, value in declared.items():
        out[key] = dict(value) if isinstance(value, dict) else value
    if out.get("elicitation") == {}:
        out["elicitation"] = {"form": {}}  # an empty elicitation capability means form only
    for key, value in missing.items():
        base = out.get(key)
        out[key] = {**(base if isinstance(base, dict) else {}), **value}
    return out


@pytest.mark.parametrize(
    ("requests", "declared"),
    [
        ({"a": elicit_url("Sign in", "https://e.com"), "b": roots()}, {}),
        ({"a": elicit_url("Sign in", "https://e.com"), "b": elicit("Who?")}, {"elicitation": {}}),
        ({"a": sample("Hi", 5, tools=[WEATHER_TOOL]), "b": sample("Yo", 5)}, {}),
        pytest.param({"a": elicit_url("Sign in", "https://e.com"), "b": elicit("Who?")}, {}),
    ],
    ids=["url-and-roots", "form-and-url-after-form", "sampling-twice", "form-and-url-from-nothing"],
)
def test_declaring_the_reported_capabilities_satisfies_the_requests(
    requests: dict[str, Any], declared: dict[str, Any]
) -> None:
    outcome = input_required(requests)
    missing = outcome.required_capabilities(declared)
    assert missing
    assert outcome.required_capabilities(_merge(declared, missing)) == {}


def test_sampling_with_include_context_needs_sampling_context() -> None:
    request = sample("Hi", 10, include_context="thisServer")
    assert needs(request, {"sampling": {}}) == {"sampling": {"context": {}}}


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18"])
def test_before_2025_11_25_include_context_needs_only_sampling(version: str) -> None:
    outcome = input_required({"q": sample("Hi", 10, include_context="thisServer")})
    assert outcome.required_capabilities({"sampling": {}}, version) == {}
    assert outcome.required_capabilities({}, version) == {"sampling": {}}


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28", None])
def test_from_2025_11_25_include_context_needs_sampling_context(version: str | None) -> None:
    outcome = input_required({"q": sample("Hi", 10, include_context="allServers")})
    assert outcome.required_capabilities({"sampling": {}}, version) == {"sampling": {"context": {}}}
    assert outcome.required_capabilities({"sampling": {"context": {}}}, version) == {}


def test_before_2025_11_25_sampling_with_tools_is_never_satisfied() -> None:
    # The revision has no tool use in sampling: whatever the client declares, it lacks it.
    outcome = input_required({"q": sample("Hi", 10, tools=[WEATHER_TOOL])})
    assert outcome.required_capabilities({"sampling": {"tools": {}}}, "2025-06-18") == TOOLS
    assert outcome.required_capabilities({"sampling": {"tools": {}}}, "2025-11-25") == {}


# -- what a handler is given of the client's answers ------------------------------------------

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.mark.parametrize(
    "state",
    [(1, 2), {1: "one"}, {"when": datetime.date(2026, 7, 28)}, float("nan"), {"a": {1, 2}}],
    ids=["tuple", "int key", "date", "NaN", "set"],
)
def test_input_required_refuses_state_that_json_would_not_give_back(state: Any) -> None:
    # Each would come back changed, or not at all, on 2026-07-28 and unchanged in a session.
    with pytest.raises(ValueError, match="state must be JSON"):
        input_required({"name": elicit("Name?")}, state=state)


class Colour(enum.Enum):
    RED = "red"


def test_a_forms_lazy_text_and_enums_are_sent_and_kept_as_the_wire_writes_them() -> None:
    form = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": gettext_lazy("Your name")},
            "colour": {"type": "string", "enum": [Colour.RED]},
        },
    }
    asked = input_required({"who": elicit("Who?", form)})
    sent = asked.requests["who"]["params"]["requestedSchema"]
    assert sent["properties"] == {
        "name": {"type": "string", "title": "Your name"},
        "colour": {"type": "string", "enum": ["red"]},
    }
    # A decimal is written as text, which no schema keyword takes for a number.
    form["properties"] = {"n": {"type": "number", "maximum": decimal.Decimal("3.5")}}
    with pytest.raises(ValueError, match="expected number, got string"):
        input_required({"n": elicit("N?", form)})
    assert type(sent["properties"]["name"]["title"]) is str
    assert expected(asked.requests)[1] == {"who": sent}


def test_input_required_refuses_a_form_that_is_not_of_an_object() -> None:
    with pytest.raises(ValueError, match="a form whose schema is not of an object"):
        input_required({"n": elicit("N?", {"type": "string"})})


@pytest.mark.parametrize("kind", ["array", ["array", "null"]])
def test_a_multi_select_field_is_beyond_2025_06_18(kind: Any) -> None:
    picked = {"type": kind, "items": {"type": "string", "enum": ["a"]}}
    asked = input_required({"pick": elicit("Which?", {"properties": {"picked": picked}})})
    assert "multi-select" in (revision_problem(asked.requests, "2025-06-18") or "")
    assert revision_problem(asked.requests, "2025-11-25") is None


def _chain_of(hops: int) -> dict[str, Any]:
    """A field reaching a list through ``hops`` references in a row."""
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(hops)}
    defs[f"d{hops}"] = {"type": "array"}
    return {"properties": {"picked": {"$ref": "#/$defs/d0"}}, "$defs": defs}


PICKS = {"type": "array", "items": {"type": "string"}}


@pytest.mark.parametrize(
    "form",
    [
        {"properties": {"picked": {"$ref": "#/$defs/picks"}}, "$defs": {"picks": PICKS}},
        # A chain of references, and pointers escaping "/" as "~1" and percent-encoded.
        {
            "properties": {"picked": {"$ref": "#/$defs/a~1b"}},
            "$defs": {"a/b": {"$ref": "#/$defs/two%20words"}, "two words": {"type": ["array"]}},
        },
        # An anchor, and a reference by the form's $id.
        {
            "properties": {"picked": {"$ref": "#picks"}},
            "$defs": {"p": {"$anchor": "picks", **PICKS}},
        },
        {
            "$id": "urn:form",
            "properties": {"picked": {"$ref": "urn:form#/$defs/picks"}},
            "$defs": {"picks": PICKS},
        },
        _chain_of(40),
        # A list among the schemas the value must or may match.
        {
            "properties": {"picked": {"allOf": [{"$ref": "#/$defs/picks"}]}},
            "$defs": {"picks": PICKS},
        },
        {"properties": {"picked": {"anyOf": [{"type": "string"}, PICKS]}}},
    ],
)
def test_a_multi_select_field_given_by_reference_is_beyond_2025_06_18(form: dict[str, Any]) -> None:
    asked = input_required({"pick": elicit("Which?", form)})
    assert "'picked' is a multi-select" in (revision_problem(asked.requests, "2025-06-18") or "")
    assert revision_problem(asked.requests, "2025-11-25") is None


@pytest.mark.parametrize(
    "field",
    [
        {"$ref": "#/$defs/name"},
        # What a value need not match does not make it a list.
        {"type": "string", "not": {"type": "array"}},
        {"type": "string", "if": {"type": "array"}, "then": {"minItems": 1}},
    ],
)
def test_a_field_of_a_single_value_is_no_multi_select(field: dict[str, Any]) -> None:
    form = {"properties": {"name": field}, "$defs": {"name": {"type": "string"}}}
    asked = input_required({"who": elicit("Who?", form)})
    assert revision_problem(asked.requests, "2025-06-18") is None


@pytest.mark.parametrize(
    "field",
    [
        {"type": "object", "properties": {"street": {"type": "string"}}},
        {"type": ["object", "null"]},
        {"type": "array", "items": {"type": "object"}},
    ],
)
def test_input_required_refuses_a_form_with_a_field_no_answer_can_fill(field: Any) -> None:
    with pytest.raises(ValueError, match="form whose field 'address' holds objects"):
        input_required({"where": elicit("Where?", {"properties": {"address": field}})})


@pytest.mark.parametrize(
    "field",
    [
        {"type": ["string", "object"]},
        {"type": "array", "items": {"type": "string"}},
        {"$ref": "#/$defs/place"},
        {"enum": ["a", "b"]},
    ],
)
def test_a_field_that_an_answer_can_fill_is_taken(field: Any) -> None:
    form = {"properties": {"address": field}, "$defs": {"place": {"type": "string"}}}
    asked = input_required({"where": elicit("Where?", form)})
    assert asked.requests["where"]["params"]["requestedSchema"]["properties"] == {"address": field}


def test_input_required_refuses_keys_that_are_not_text() -> None:
    with pytest.raises(ValueError, match="input request keys must be text, not 1"):
        input_required({1: elicit("Name?")})  # type: ignore[dict-item]


def test_input_required_refuses_a_form_whose_schema_is_no_schema() -> None:
    with pytest.raises(ValueError, match="input request 'name' asks for a form whose"):
        input_required({"name": elicit("Name?", {"type": "object", "properties": 3})})


def test_an_answer_declining_a_form_is_given_without_its_content() -> None:
    answer = {"action": "decline", "content": {"name": "Ada"}}
    assert kept_answer("elicitation/create", answer, FORM) == {"action": "decline"}
    assert answer == {"action": "decline", "content": {"name": "Ada"}}  # not changed


def test_an_accepted_form_is_checked_against_its_schema_only_when_known() -> None:
    answer = {"action": "accept", "content": {"nom": "Ada"}}
    assert kept_answer("elicitation/create", answer) == answer
    with pytest.raises(ValueError, match="missing required property 'name'"):
        kept_answer("elicitation/create", answer, FORM)


def test_an_accepted_url_elicitation_needs_no_content() -> None:
    asked, forms = expected({"login": elicit_url("Sign in", "https://example.com/")})
    assert (asked, forms) == ({"login": "elicitation/create"}, {})
    assert kept_answer("elicitation/create", {"action": "accept"}) == {"action": "accept"}


@pytest.mark.parametrize(
    "content",
    [{"text": "hi"}, [{"type": "text", "text": "hi"}, "hi"], [], "hi"],
    ids=["block without type", "a list with a string", "empty list is fine", "a string"],
)
def test_a_sampling_answer_needs_content_blocks_with_a_type(content: Any) -> None:
    answer = {"role": "assistant", "model": "m", "content": content}
    if content == []:
        assert kept_answer("sampling/createMessage", answer) == answer
        return
    with pytest.raises(ValueError, match="each with a 'type'"):
        kept_answer("sampling/createMessage", answer)


def test_answers_are_kept_only_for_what_was_asked() -> None:
    asked, forms = expected({"name": elicit("Name?", FORM)})
    answers = {"name": {"action": "accept", "content": {"name": "Ada"}}, "other": {"roots": []}}
    assert checked_answers(answers, asked, forms) == {"name": answers["name"]}
    assert checked_answers(answers, {}, {}) == {}
    # Sent up front, with no state to say what was asked: each is taken as what it is shaped as.
    assert checked_answers({**answers, "junk": 3}, None) == answers
