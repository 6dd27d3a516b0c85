"""The demo site's definitions: the seed examples, then the conformance fixtures.

Discovered by ``mcp_app`` at start-up, as any installed app's ``mcp.py`` is.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import mcp_app
from mcp_app import RequestContext, content, elicit, image, input_required, text, tool_error

from . import conformance

# A 1x1 transparent PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)

PEOPLE = {
    "ada": {"name": "Ada Lovelace", "born": 1815, "known_for": "the first published program"},
    "alan": {"name": "Alan Turing", "born": 1912, "known_for": "computability and the Turing test"},
    "grace": {"name": "Grace Hopper", "born": 1906, "known_for": "the first compiler"},
}


@mcp_app.tool(
    title="Add numbers",
    input_schema={
        "type": "object",
        "properties": {"numbers": {"type": "array", "items": {"type": "number"}}},
        "required": ["numbers"],
    },
    output_schema={
        "type": "object",
        "properties": {"sum": {"type": "number"}},
        "required": ["sum"],
    },
    annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
)
def add(arguments: dict[str, Any], context: RequestContext) -> Any:
    """Add a list of numbers."""
    try:
        total = sum(arguments["numbers"])
    except OverflowError:  # a huge integer beside a float
        return tool_error("The sum is out of the range of a float.")
    if isinstance(total, float) and not math.isfinite(total):
        # JSON has no number for it.
        return tool_error("The sum is out of the range of a JSON number.")
    if isinstance(total, int) and total.bit_length() > 14_000:
        try:
            str(total)
        except ValueError:  # past the digits Python writes an integer with (4,300)
            return tool_error("The sum has too many digits to write.")
    return {"sum": total}


@mcp_app.tool(annotations={"readOnlyHint": True})
def logo(arguments: dict[str, Any], context: RequestContext) -> Any:
    """The project's logo: a caption and a one-pixel PNG."""
    return content([text("The django-mcp-app logo"), image(PIXEL, "image/png")])


@mcp_app.resource("file:///readme.txt", name="readme", mime_type="text/plain")
def readme(context: RequestContext) -> str:
    """A short text about this demo."""
    return "This is the django-mcp-app demo site. Try the tools add and logo."


def complete_person(value: str, arguments: dict[str, str], context: RequestContext) -> list[str]:
    return sorted(key for key in PEOPLE if key.startswith(value.lower()))


@mcp_app.resource_template(
    "people://{id}", name="person", mime_type="application/json", complete={"id": complete_person}
)
def person(variables: dict[str, str], context: RequestContext) -> dict[str, Any] | None:
    """A person from a small directory, by id."""
    found = PEOPLE.get(variables["id"])
    if found is None:
        return None
    import json

    return {"text": json.dumps({"id": variables["id"], **found})}


@mcp_app.prompt(
    arguments=[{"name": "id", "description": "Who to introduce", "required": True}],
    complete={"id": complete_person},
)
def introduce(arguments: dict[str, str], context: RequestContext) -> Any:
    """Ask the model to introduce a person from the directory."""
    found = PEOPLE.get(arguments["id"])
    if found is None:
        raise mcp_app.ProtocolError(f"No person with id {arguments['id']!r}", code=-32602)
    return f"Introduce {found['name']} (born {found['born']}), known for {found['known_for']}."


@mcp_app.tool()
def greet(arguments: dict[str, Any], context: RequestContext) -> Any:
    """Greet someone (``name``), asking who when no name is given."""
    given = arguments.get("name")
    if isinstance(given, str) and given:
        return f"Hello, {given}!"
    answer = context.input_response("name")
    if not isinstance(answer, dict):
        form = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        return input_required({"name": elicit("Who should I greet?", form)})
    name = _accepted(answer, "name")
    return f"Hello, {name}!" if name else tool_error("No name given")


def _accepted(answer: Any, field: str) -> str | None:
    if isinstance(answer, dict) and answer.get("action") == "accept":
        value = (answer.get("content") or {}).get(field)
        if isinstance(value, str) and value:
            return value
    return None


@mcp_app.tool(name="two-steps")
def two_steps(arguments: dict[str, Any], context: RequestContext) -> Any:
    """Ask for a name, then a color, carrying the name in the request state."""
    name = (context.state or {}).get("name") or _accepted(context.input_response("name"), "name")
    if name is None:
        form = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        return input_required({"name": elicit("Name?", form)})
    color = _accepted(context.input_response("color"), "color")
    if color is None:
        form = {
            "type": "object",
            "properties": {"color": {"type": "string"}},
            "required": ["color"],
        }
        return input_required({"color": elicit("Color?", form)}, state={"name": name})
    return f"{name} likes {color}"


conformance.register(mcp_app.site)
