"""The fixtures the official MCP conformance suite calls by name.

``@modelcontextprotocol/conformance`` runs its server scenarios against tools, resources,
templates and prompts with fixed names, and checks their texts and payloads (see
``conformance.md`` and ``conformance-scenarios.md`` in the shared notes). ``register(server)``
defines all of them on one server; ``project/demo/mcp.py`` calls it for the demo site.

One handler serves both protocol eras: a handler that needs the client (sampling, elicitation,
roots) returns ``input_required(...)``. On the 2026-07-28 wire that becomes an
``InputRequiredResult``; on initialize-era sessions the server sends the requests itself and calls
the handler again with the answers. Either way the answers arrive as ``context.input_responses``
and the state the handler chose as ``context.state``, already verified by the server.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import secrets
import struct
import threading
import time
import wave
import zlib
from collections.abc import Mapping
from typing import Any

from mcp_app import (
    AlreadyRegistered,
    NotRegistered,
    ProtocolError,
    RequestContext,
    Server,
    audio,
    content,
    elicit,
    embedded_text,
    image,
    input_required,
    resource_link,
    roots,
    run_as_task,
    sample,
    tool_error,
)

__all__ = ["register"]

JSON = dict[str, Any]
Arguments = dict[str, Any]

NO_ARGUMENTS: JSON = {"type": "object", "properties": {}}


# -- small binary payloads ----------------------------------------------------------------------


def _png_pixel(red: int, green: int, blue: int) -> bytes:
    """A valid 1x1 truecolour PNG of one pixel."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        checksum = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", checksum)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    scanline = b"\x00" + bytes((red, green, blue))  # filter type 0, then the pixel
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(scanline))
        + chunk(b"IEND", b"")
    )


def _wav_tone(milliseconds: int = 50, rate: int = 8000, frequency: float = 440.0) -> bytes:
    """A short mono 16-bit PCM WAV of a sine tone."""
    count = rate * milliseconds // 1000
    samples = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * frequency * n / rate)))
        for n in range(count)
    )
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples)
    return buffer.getvalue()


PNG = _png_pixel(255, 0, 0)
WAV = _wav_tone()


# -- texts the suite checks ---------------------------------------------------------------------

SIMPLE_TEXT = "This is a simple text response for testing."
EMBEDDED_URI = "test://embedded-resource"
EMBEDDED_TEXT = "This is an embedded resource content."
MIXED_HEADING = "Multiple content types test:"
MIXED_URI = "test://mixed-content-resource"
MIXED_JSON = '{"test":"data","value":123}'
ERROR_TEXT = "This tool intentionally returns an error for testing"
LOG_MESSAGES = ("Tool execution started", "Tool processing data", "Tool execution completed")
STATIC_TEXT = "This is the content of the static text resource."
SIMPLE_PROMPT = "This is a simple prompt for testing."
PROMPT_RESOURCE_TEXT = "Embedded resource content for testing."

#: The tool and prompt that ``test_trigger_*_change`` add and remove in turn.
DYNAMIC_TOOL = "test_dynamic_tool"
DYNAMIC_PROMPT = "test_dynamic_prompt"

#: Values ``completion/complete`` offers for ``test_prompt_with_arguments``'s ``arg1``.
ARG1_VALUES = ("paris", "park", "party", "pasta", "test", "testing", "tested")
#: Values offered for the template's ``{id}``.
TEMPLATE_IDS = ("1", "123", "456", "789")


# -- JSON Schemas -------------------------------------------------------------------------------


def _form(**fields: JSON) -> JSON:
    """A flat elicitation form with every field required."""
    return {"type": "object", "properties": fields, "required": list(fields)}


NAME_FORM = _form(name={"type": "string"})
COLOR_FORM = _form(color={"type": "string"})
CONFIRM_FORM = _form(ok={"type": "boolean"})
#: The task fixtures' forms, which the suite answers alike whatever they ask ({"confirm": true},
#: and {"name": ..., "confirm": true} to both of multi_input's questions).
CONFIRM_DELETE_FORM = _form(confirm={"type": "boolean"})
MAYBE_COLOR_FORM: JSON = {"type": "object", "properties": {"color": {"type": "string"}}}
CONTEXT_FORM = _form(context={"type": "string"})

USER_INFO_FORM: JSON = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

#: SEP-1034: a default for every primitive type.
DEFAULTS_FORM: JSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "default": "John Doe"},
        "age": {"type": "integer", "title": "Age", "default": 30},
        "score": {"type": "number", "title": "Score", "default": 95.5},
        "status": {
            "type": "string",
            "title": "Status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "title": "Verified", "default": True},
    },
}

#: SEP-1330: the five enum shapes.
ENUMS_FORM: JSON = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "title": "Untitled single-select",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "title": "Titled single-select",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "title": "Legacy titled enum",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "title": "Untitled multi-select",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "title": "Titled multi-select",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}

#: SEP-1613 / SEP-2106: kept verbatim in ``tools/list``.
JSON_SCHEMA_2020_12: JSON = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

#: SEP-2243: ``region`` travels in the ``Mcp-Param-Region`` header as well as the body.
X_MCP_HEADER_SCHEMA: JSON = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "description": "The region to report; also sent as the Mcp-Param-Region header",
            "x-mcp-header": "Region",
        }
    },
    "required": ["region"],
}


# -- reading the client's answers ---------------------------------------------------------------


def _elicited(response: Any) -> tuple[str, JSON] | None:
    """An ``ElicitResult`` as ``(action, content)``, or ``None`` when it is malformed."""
    if not isinstance(response, Mapping):
        return None
    action = response.get("action")
    answer = response.get("content", {})
    if action not in ("accept", "decline", "cancel") or not isinstance(answer, Mapping):
        return None
    if action == "accept" and "content" not in response:
        return None
    return str(action), dict(answer)


def _accepted(response: Any, field: str, kind: type | tuple[type, ...] = str) -> Any:
    """The accepted value of ``field`` in an ``ElicitResult``, or ``None``."""
    answer = _elicited(response)
    if answer is None or answer[0] != "accept":
        return None
    value = answer[1].get(field)
    return value if isinstance(value, kind) else None


def _sampled(response: Any) -> str | None:
    """The text of a ``CreateMessageResult`` (one content block or a list), or ``None``."""
    if not isinstance(response, Mapping):
        return None
    body = response.get("content")
    blocks = body if isinstance(body, list) else [body]
    texts = [
        block["text"]
        for block in blocks
        if isinstance(block, Mapping)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return " ".join(texts) if texts else None


def _listed_roots(response: Any) -> list[JSON] | None:
    """The roots of a ``ListRootsResult``, or ``None`` when it is malformed."""
    if not isinstance(response, Mapping) or not isinstance(response.get("roots"), list):
        return None
    found = response["roots"]
    if not all(isinstance(r, Mapping) and isinstance(r.get("uri"), str) for r in found):
        return None
    return [dict(r) for r in found]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _can_elicit_form(capabilities: Mapping[str, Any]) -> bool:
    declared = capabilities.get("elicitation")
    # An empty elicitation capability means form mode only.
    return isinstance(declared, Mapping) and (not declared or "form" in declared)


def _state_issued_by(context: RequestContext, fixture: str) -> bool:
    """Whether the verified requestState is the one this fixture issued."""
    state = context.state
    return isinstance(state, Mapping) and state.get("fixture") == fixture


def _fresh_state(fixture: str, **extra: Any) -> JSON:
    return {"fixture": fixture, "nonce": secrets.token_hex(8), **extra}


# -- registration -------------------------------------------------------------------------------


def register(server: Server) -> None:
    """Define every conformance fixture on ``server``."""
    _register_content_tools(server)
    _register_legacy_tools(server)
    _register_protocol_tools(server)
    _register_input_required_tools(server)
    _register_task_tools(server)
    _register_resources(server)
    _register_prompts(server)


def _register_content_tools(server: Server) -> None:
    # test_simple_text comes first: header-validation scenarios call the first listed tool.
    @server.tool(
        name="test_simple_text",
        description="Returns one simple text block",
        input_schema=NO_ARGUMENTS,
    )
    def simple_text(arguments: Arguments, context: RequestContext) -> Any:
        return SIMPLE_TEXT

    @server.tool(
        name="test_image_content",
        description="Returns one image block (a 1x1 PNG)",
        input_schema=NO_ARGUMENTS,
    )
    def image_content(arguments: Arguments, context: RequestContext) -> Any:
        return content([image(PNG, "image/png")])

    @server.tool(
        name="test_audio_content",
        description="Returns one audio block (a short WAV tone)",
        input_schema=NO_ARGUMENTS,
    )
    def audio_content(arguments: Arguments, context: RequestContext) -> Any:
        return content([audio(WAV, "audio/wav")])

    @server.tool(
        name="test_embedded_resource",
        description="Returns one embedded text resource",
        input_schema=NO_ARGUMENTS,
    )
    def embedded_resource(arguments: Arguments, context: RequestContext) -> Any:
        return content([embedded_text(EMBEDDED_URI, EMBEDDED_TEXT, "text/plain")])

    @server.tool(
        name="test_multiple_content_types",
        description="Returns a text block, an image block and an embedded JSON resource",
        input_schema=NO_ARGUMENTS,
    )
    def multiple_content_types(arguments: Arguments, context: RequestContext) -> Any:
        return content(
            [
                MIXED_HEADING,
                image(PNG, "image/png"),
                embedded_text(MIXED_URI, MIXED_JSON, "application/json"),
            ]
        )

    @server.tool(
        name="test_error_handling",
        description="Always fails with an isError result",
        input_schema=NO_ARGUMENTS,
    )
    def error_handling(arguments: Arguments, context: RequestContext) -> Any:
        return tool_error(ERROR_TEXT)

    @server.tool(
        name="test_tool_with_progress",
        description="Reports progress 0, 50 and 100 of 100, about 50 ms apart",
        input_schema=NO_ARGUMENTS,
    )
    def tool_with_progress(arguments: Arguments, context: RequestContext) -> Any:
        for step, progress in enumerate((0, 50, 100)):
            if step:
                time.sleep(0.05)
            context.report_progress(progress, total=100)
        return "Progress test completed: 0, 50 and 100 of 100."

    @server.tool(
        name="json_schema_2020_12_tool",
        description="Tool with JSON Schema 2020-12 features",
        input_schema=JSON_SCHEMA_2020_12,
    )
    def json_schema_2020_12_tool(arguments: Arguments, context: RequestContext) -> Any:
        return f"Received contact details: {_dumps(arguments)}"


def _register_legacy_tools(server: Server) -> None:
    """Fixtures of initialize-era scenarios; they work on the stateless wire too."""

    @server.tool(
        name="test_tool_with_logging",
        description="Sends three info log messages about 50 ms apart",
        input_schema=NO_ARGUMENTS,
    )
    def tool_with_logging(arguments: Arguments, context: RequestContext) -> Any:
        for step, message in enumerate(LOG_MESSAGES):
            if step:
                time.sleep(0.05)
            context.log("info", message, logger="conformance")
        return "Logging test completed: sent 3 info messages."

    @server.tool(
        name="test_sampling",
        description="Asks the client's model to answer a prompt (sampling/createMessage)",
        input_schema={
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "The prompt to send to the LLM"}
            },
            "required": ["prompt"],
        },
    )
    def sampling(arguments: Arguments, context: RequestContext) -> Any:
        answer = _sampled(context.input_response("llm"))
        if answer is None:
            return input_required({"llm": sample(str(arguments["prompt"]), 100)})
        return f"LLM response: {answer}"

    @server.tool(
        name="test_elicitation",
        description="Asks the user for a username and an email address (elicitation/create)",
        input_schema={
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "The message to show the user"}
            },
            "required": ["message"],
        },
    )
    def elicitation(arguments: Arguments, context: RequestContext) -> Any:
        answer = _elicited(context.input_response("user_info"))
        if answer is None:
            return input_required({"user_info": elicit(str(arguments["message"]), USER_INFO_FORM)})
        action, given = answer
        return f"User response: action={action}, content={_dumps(given)}"

    @server.tool(
        name="test_elicitation_sep1034_defaults",
        description="Elicits a form with a default for every primitive type (SEP-1034)",
        input_schema=NO_ARGUMENTS,
    )
    def elicitation_defaults(arguments: Arguments, context: RequestContext) -> Any:
        answer = _elicited(context.input_response("defaults"))
        if answer is None:
            return input_required(
                {"defaults": elicit("Please review and update the form fields", DEFAULTS_FORM)}
            )
        action, given = answer
        return f"Elicitation completed: action={action}, content={_dumps(given)}"

    @server.tool(
        name="test_elicitation_sep1330_enums",
        description="Elicits a form with every enum variant (SEP-1330)",
        input_schema=NO_ARGUMENTS,
    )
    def elicitation_enums(arguments: Arguments, context: RequestContext) -> Any:
        answer = _elicited(context.input_response("enums"))
        if answer is None:
            return input_required({"enums": elicit("Please choose from the options", ENUMS_FORM)})
        action, given = answer
        return f"Elicitation completed: action={action}, content={_dumps(given)}"

    @server.tool(
        name="test_reconnection",
        description="Runs long enough for the server to close its SSE stream mid-call",
        input_schema=NO_ARGUMENTS,
    )
    def reconnection(arguments: Arguments, context: RequestContext) -> Any:
        context.close_stream()
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline and not context.is_cancelled:
            time.sleep(0.02)
        return "Reconnection test completed."


def _register_protocol_tools(server: Server) -> None:
    """Diagnostics of the stateless wire (server-stateless, SEP-2243 headers)."""

    @server.tool(
        name="test_x_mcp_header",
        description="Echoes a region that is also carried in the Mcp-Param-Region header",
        input_schema=X_MCP_HEADER_SCHEMA,
    )
    def x_mcp_header(arguments: Arguments, context: RequestContext) -> Any:
        return f"Region: {arguments['region']}"

    @server.tool(
        name="test_missing_capability",
        description="Needs the client's sampling capability; without it the call fails",
        input_schema=NO_ARGUMENTS,
    )
    def missing_capability(arguments: Arguments, context: RequestContext) -> Any:
        # Asks for sampling whatever the client declared: the server answers -32021 for it.
        answer = _sampled(context.input_response("completion"))
        if answer is None:
            return input_required({"completion": sample("Say hello.", 20)})
        return f"Model said: {answer}"

    @server.tool(
        name="test_streaming_elicitation",
        description="Asks for input through an input_required result, never a stream request",
        input_schema=NO_ARGUMENTS,
    )
    def streaming_elicitation(arguments: Arguments, context: RequestContext) -> Any:
        answer = _elicited(context.input_response("confirmation"))
        if answer is None:
            return input_required(
                {"confirmation": elicit("Continue the streaming test?", CONFIRM_FORM)}
            )
        action, given = answer
        return f"Streaming elicitation completed: action={action}, content={_dumps(given)}"

    @server.tool(
        name="test_logging_tool",
        description="Logs at several levels; nothing is sent unless the request set a logLevel",
        input_schema=NO_ARGUMENTS,
    )
    def logging_tool(arguments: Arguments, context: RequestContext) -> Any:
        for level in ("debug", "info", "warning"):
            context.log(level, f"test_logging_tool {level} message", logger="conformance")
        return "Logged at debug, info and warning."

    lock = threading.Lock()

    def dynamic_tool(arguments: Arguments, context: RequestContext) -> Any:
        return "This tool comes and goes with test_trigger_tool_change."

    def dynamic_prompt(arguments: Arguments, context: RequestContext) -> Any:
        return "This prompt comes and goes with test_trigger_prompt_change."

    @server.tool(
        name="test_trigger_tool_change",
        description=f"Adds {DYNAMIC_TOOL}, or removes it if present, so the tool list changes",
        input_schema=NO_ARGUMENTS,
    )
    def trigger_tool_change(arguments: Arguments, context: RequestContext) -> Any:
        with lock:
            try:
                server.remove_tool(DYNAMIC_TOOL)
                done = "removed"
            except NotRegistered:
                with contextlib.suppress(AlreadyRegistered):
                    server.add_tool(
                        dynamic_tool,
                        name=DYNAMIC_TOOL,
                        description="Added and removed by test_trigger_tool_change",
                        input_schema=NO_ARGUMENTS,
                    )
                done = "added"
        return f"The tool list changed: {DYNAMIC_TOOL} was {done}."

    @server.tool(
        name="test_trigger_prompt_change",
        description=f"Adds {DYNAMIC_PROMPT}, or removes it if present, so the prompt list changes",
        input_schema=NO_ARGUMENTS,
    )
    def trigger_prompt_change(arguments: Arguments, context: RequestContext) -> Any:
        with lock:
            try:
                server.remove_prompt(DYNAMIC_PROMPT)
                done = "removed"
            except NotRegistered:
                with contextlib.suppress(AlreadyRegistered):
                    server.add_prompt(
                        dynamic_prompt,
                        name=DYNAMIC_PROMPT,
                        description="Added and removed by test_trigger_prompt_change",
                    )
                done = "added"
        return f"The prompt list changed: {DYNAMIC_PROMPT} was {done}."


def _register_input_required_tools(server: Server) -> None:
    """SEP-2322 (multi round-trip requests): the ``input-required-result-*`` scenarios."""

    def ask_name() -> JSON:
        return elicit("What is your name?", NAME_FORM)

    @server.tool(
        name="test_input_required_result_elicitation",
        description="Asks for the user's name (user_name), then greets them",
        input_schema=NO_ARGUMENTS,
    )
    def ir_elicitation(arguments: Arguments, context: RequestContext) -> Any:
        # A missing, misnamed or malformed answer is asked for again, not an error.
        answer = _elicited(context.input_response("user_name"))
        if answer is not None and answer[0] != "accept":
            return f"No name was given (the user chose {answer[0]})."
        name = _accepted(context.input_response("user_name"), "name")
        if name is None:
            return input_required({"user_name": ask_name()})
        return f"Hello, {name}!"

    @server.tool(
        name="test_input_required_result_sampling",
        description="Asks the client's model for the capital of France (capital_question)",
        input_schema=NO_ARGUMENTS,
    )
    def ir_sampling(arguments: Arguments, context: RequestContext) -> Any:
        answer = _sampled(context.input_response("capital_question"))
        if answer is None:
            return input_required(
                {"capital_question": sample("What is the capital of France?", 100)}
            )
        return f"Model said: {answer}"

    @server.tool(
        name="test_input_required_result_list_roots",
        description="Asks for the client's roots (client_roots) and links to them",
        input_schema=NO_ARGUMENTS,
    )
    def ir_list_roots(arguments: Arguments, context: RequestContext) -> Any:
        found = _listed_roots(context.input_response("client_roots"))
        if found is None:
            return input_required({"client_roots": roots()})
        links = [resource_link(r["uri"], str(r.get("name") or r["uri"])) for r in found]
        return content([f"Client exposed {len(found)} root(s).", *links])

    @server.tool(
        name="test_input_required_result_request_state",
        description="Asks for confirmation with a requestState; answers state-ok once it verifies",
        input_schema=NO_ARGUMENTS,
    )
    def ir_request_state(arguments: Arguments, context: RequestContext) -> Any:
        fixture = "request_state"
        confirmed = _accepted(context.input_response("confirm"), "ok", bool)
        # The server verified the echoed state before calling; without one, start again.
        if confirmed is None or not _state_issued_by(context, fixture):
            state = context.state if _state_issued_by(context, fixture) else _fresh_state(fixture)
            return input_required({"confirm": elicit("Please confirm", CONFIRM_FORM)}, state=state)
        return f"state-ok: the echoed requestState verified (ok={str(confirmed).lower()})."

    @server.tool(
        name="test_input_required_result_multiple_inputs",
        description="Asks for a name, a model greeting and the client's roots in one result",
        input_schema=NO_ARGUMENTS,
    )
    def ir_multiple_inputs(arguments: Arguments, context: RequestContext) -> Any:
        fixture = "multiple_inputs"
        requests: JSON = {
            "user_name": ask_name(),
            "greeting": sample("Generate a greeting", 50),
            "client_roots": roots(),
        }
        if not _state_issued_by(context, fixture):
            return input_required(requests, state=_fresh_state(fixture))
        answer = _elicited(context.input_response("user_name"))
        name = _accepted(context.input_response("user_name"), "name")
        greeting = _sampled(context.input_response("greeting"))
        found = _listed_roots(context.input_response("client_roots"))
        if answer is not None and answer[0] == "accept" and name is None:
            answer = None  # accepted without a name: ask again
        answers = {"user_name": answer, "greeting": greeting, "client_roots": found}
        missing = {key: requests[key] for key, value in answers.items() if value is None}
        if missing or greeting is None or found is None:
            # Ask again only for what is still missing, under the same state.
            return input_required(missing, state=context.state)
        who = name if name is not None else "anonymous"
        return f"Hello, {who}! Model said: {greeting} Client exposed {len(found)} root(s)."

    @server.tool(
        name="test_input_required_result_multi_round",
        description="Asks for a name, then (with a new requestState) a favourite colour",
        input_schema=NO_ARGUMENTS,
    )
    def ir_multi_round(arguments: Arguments, context: RequestContext) -> Any:
        fixture = "multi_round"
        state = context.state if _state_issued_by(context, fixture) else None
        step = state.get("step") if state is not None else None
        if step == 2 and state is not None:
            color = _accepted(context.input_response("step2"), "color")
            if color is None:
                return _ask_color(state)
            return f"{state['name']} likes {color}."
        if step == 1:
            name = _accepted(context.input_response("step1"), "name")
            if name is not None:
                # A new state for the new round: the client must echo this one, not the first.
                return _ask_color(_fresh_state(fixture, step=2, name=name))
        return input_required(
            {"step1": elicit("Step 1: What is your name?", NAME_FORM)},
            state=state or _fresh_state(fixture, step=1),
        )

    def _ask_color(state: JSON) -> Any:
        return input_required(
            {"step2": elicit("Step 2: What is your favorite color?", COLOR_FORM)}, state=state
        )

    @server.tool(
        name="test_input_required_result_tampered_state",
        description="Issues a signed requestState; a tampered echo fails before this runs",
        input_schema=NO_ARGUMENTS,
    )
    def ir_tampered_state(arguments: Arguments, context: RequestContext) -> Any:
        fixture = "tampered_state"
        confirmed = _accepted(context.input_response("confirm"), "ok", bool)
        if confirmed is None or not _state_issued_by(context, fixture):
            state = context.state if _state_issued_by(context, fixture) else _fresh_state(fixture)
            return input_required({"confirm": elicit("Please confirm", CONFIRM_FORM)}, state=state)
        return "state-ok: the requestState came back intact."

    @server.tool(
        name="test_input_required_result_capabilities",
        description="Asks only for the kinds of input the client's capabilities declare",
        input_schema=NO_ARGUMENTS,
    )
    def ir_capabilities(arguments: Arguments, context: RequestContext) -> Any:
        fixture = "capabilities"
        capabilities = context.client_capabilities
        wanted: JSON = {}
        if _can_elicit_form(capabilities):
            wanted["user_name"] = ask_name()
        if isinstance(capabilities.get("sampling"), Mapping):
            wanted["greeting"] = sample("Generate a greeting", 50)
        if isinstance(capabilities.get("roots"), Mapping):
            wanted["client_roots"] = roots()
        if not wanted:
            return "The client declared no capability to answer input requests; nothing to ask."
        readers = {"user_name": _elicited, "greeting": _sampled, "client_roots": _listed_roots}
        missing = {
            key: request
            for key, request in wanted.items()
            if readers[key](context.input_response(key)) is None
        }
        if missing or not _state_issued_by(context, fixture):
            state = context.state if _state_issued_by(context, fixture) else _fresh_state(fixture)
            return input_required(missing or wanted, state=state)
        return f"Received input for: {', '.join(sorted(wanted))}."


def _register_task_tools(server: Server) -> None:
    """SEP-2663 (the tasks extension): the ``tasks-*`` scenarios."""

    @server.tool(
        name="slow_compute",
        description="Waits `seconds` seconds (stops early when cancelled), then answers",
        input_schema={
            "type": "object",
            "properties": {
                "seconds": {"type": "number", "minimum": 0, "maximum": 3600},
                "label": {"type": "string"},
            },
        },
        task="optional",
    )
    def slow_compute(arguments: Arguments, context: RequestContext) -> Any:
        seconds = float(arguments.get("seconds", 1))
        label = str(arguments.get("label", "job"))

        def work(task: RequestContext) -> str:
            if task.cancelled.wait(seconds):
                return f"{label}: stopped"
            return f"{label}: computed after {seconds:g}s"

        return run_as_task(work)

    @server.tool(
        name="failing_job",
        description="A task that ends with a tool error after about a second",
        input_schema=NO_ARGUMENTS,
        task="required",
    )
    def failing_job(arguments: Arguments, context: RequestContext) -> Any:
        def work(task: RequestContext) -> Any:
            task.cancelled.wait(1.0)
            return tool_error("The job failed: the input could not be processed.")

        return run_as_task(work)

    @server.tool(
        name="protocol_error_job",
        description="A task whose work fails with a JSON-RPC error",
        input_schema=NO_ARGUMENTS,
        task="optional",
    )
    def protocol_error_job(arguments: Arguments, context: RequestContext) -> Any:
        def work(task: RequestContext) -> Any:
            raise ProtocolError("The job's backend refused the request", code=-32603)

        return run_as_task(work)

    @server.tool(
        name="confirm_delete",
        description="A task that asks for confirmation (confirm) before it deletes",
        input_schema=NO_ARGUMENTS,
        task="optional",
    )
    def confirm_delete(arguments: Arguments, context: RequestContext) -> Any:
        def work(task: RequestContext) -> Any:
            answer = _elicited(task.input_response("confirm"))
            if answer is None:
                return input_required({"confirm": elicit("Delete the item?", CONFIRM_DELETE_FORM)})
            return "Deleted." if answer[0] == "accept" and answer[1].get("confirm") else "Kept."

        return run_as_task(work)

    @server.tool(
        name="multi_input",
        description="A task that asks two questions at once (name, color)",
        input_schema=NO_ARGUMENTS,
        task="optional",
    )
    def multi_input(arguments: Arguments, context: RequestContext) -> Any:
        def work(task: RequestContext) -> Any:
            name = _elicited(task.input_response("name"))
            color = _elicited(task.input_response("color"))
            if name is None or color is None:
                return input_required(
                    {
                        "name": elicit("What is your name?", NAME_FORM),
                        "color": elicit("What is your favourite color?", MAYBE_COLOR_FORM),
                    }
                )
            who = name[1].get("name") or "Someone"
            likes = color[1].get("color") or "no color in particular"
            return f"{who} likes {likes}."

        return run_as_task(work)

    @server.tool(
        name="test_tool_with_task",
        description="Asks for the user's name (user_name) in the request, then greets as a task",
        input_schema=NO_ARGUMENTS,
        task="required",
    )
    def tool_with_task(arguments: Arguments, context: RequestContext) -> Any:
        name = _accepted(context.input_response("user_name"), "name")
        if name is None:
            return input_required({"user_name": elicit("What is your name?", NAME_FORM)})
        return run_as_task(lambda task: f"Hello, {name}! (from a task)")


def _register_resources(server: Server) -> None:
    @server.resource(
        "test://static-text",
        name="static-text",
        mime_type="text/plain",
        description="A static text resource",
    )
    def static_text(context: RequestContext) -> Any:
        return STATIC_TEXT

    @server.resource(
        "test://static-binary",
        name="static-binary",
        mime_type="image/png",
        description="A static binary resource (a 1x1 PNG)",
    )
    def static_binary(context: RequestContext) -> Any:
        return PNG

    @server.resource(
        "test://watched-resource",
        name="watched-resource",
        mime_type="text/plain",
        description="A resource clients subscribe to and unsubscribe from",
    )
    def watched_resource(context: RequestContext) -> Any:
        return "This is the content of the watched resource."

    def complete_id(value: str, arguments: Mapping[str, str], context: RequestContext) -> Any:
        return [candidate for candidate in TEMPLATE_IDS if candidate.startswith(value)]

    @server.resource_template(
        "test://template/{id}/data",
        name="template-data",
        mime_type="application/json",
        description="JSON data for any id",
        complete={"id": complete_id},
    )
    def template_data(variables: Mapping[str, str], context: RequestContext) -> Any:
        item = variables["id"]
        payload = {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}
        return json.dumps(payload, separators=(",", ":"))


def _register_prompts(server: Server) -> None:
    @server.prompt(name="test_simple_prompt", description="A simple prompt without arguments")
    def simple_prompt(arguments: Mapping[str, str], context: RequestContext) -> Any:
        return SIMPLE_PROMPT

    def complete_arg1(value: str, arguments: Mapping[str, str], context: RequestContext) -> Any:
        prefix = value.lower()
        return [candidate for candidate in ARG1_VALUES if candidate.startswith(prefix)]

    @server.prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two required arguments",
        arguments=[
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
        complete={"arg1": complete_arg1},
    )
    def prompt_with_arguments(arguments: Mapping[str, str], context: RequestContext) -> Any:
        return f"Prompt with arguments: arg1='{arguments['arg1']}', arg2='{arguments['arg2']}'"

    @server.prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt that embeds a resource",
        arguments=[
            {
                "name": "resourceUri",
                "description": "URI of the resource to embed",
                "required": True,
            }
        ],
    )
    def prompt_with_embedded_resource(arguments: Mapping[str, str], context: RequestContext) -> Any:
        block = embedded_text(arguments["resourceUri"], PROMPT_RESOURCE_TEXT, "text/plain")
        return [
            {"role": "user", "content": block},
            "Please process the embedded resource above.",
        ]

    @server.prompt(name="test_prompt_with_image", description="A prompt with an image")
    def prompt_with_image(arguments: Mapping[str, str], context: RequestContext) -> Any:
        return [
            {"role": "user", "content": image(PNG, "image/png")},
            "Please analyze the image above.",
        ]

    @server.prompt(
        name="test_input_required_result_prompt",
        description="Asks the user what context to use (user_context), then returns messages",
    )
    def input_required_prompt(arguments: Mapping[str, str], context: RequestContext) -> Any:
        answer = _elicited(context.input_response("user_context"))
        given = _accepted(context.input_response("user_context"), "context")
        if answer is None or (answer[0] == "accept" and given is None):
            return input_required(
                {"user_context": elicit("What context should the prompt use?", CONTEXT_FORM)}
            )
        if given is None:
            return f"Answer without extra context (the user chose {answer[0]})."
        return [f"Use this context: {given}", "Now answer the question with that context in mind."]
