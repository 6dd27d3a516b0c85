"""Generated bodies, headers and HTTP methods against the real view in both eras: never a 500."""

# Every answer is a well-formed JSON-RPC response (or a batch of them), an empty 202/200, or an
# event stream, with a status from a short list, and never a traceback. Another test flips
# every byte of a real requestState and sends each through the view: all are refused.

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any

import pytest
from django.test import Client
from django.urls import path
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from mcp_app import Server, elicit, input_required, tool_error
from mcp_app.testing import MCPClient
from tests.conftest import MODERN, modern_meta, modern_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

URL = "/fuzz/mcp"
#: What the endpoint may answer; a 500 (or anything else) fails the property.
STATUSES = {200, 202, 400, 401, 403, 404, 405, 406, 413, 429}
#: Seconds a finite event stream may take to end before the test gives up on it.
STREAM_TIMEOUT = 10.0

fuzzed = Server("fuzzed", rows=False, page_size=2)


@fuzzed.tool(
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string", "x-mcp-header": "Text"}},
    }
)
def echo(arguments: dict[str, Any], context: Any) -> Any:
    context.report_progress(1, 2)
    context.log("error", {"echo": arguments.get("text")})  # passes any level a session sets
    return {"content": [{"type": "text", "text": str(arguments.get("text"))}]}


@fuzzed.tool()
def ask(arguments: dict[str, Any], context: Any) -> Any:
    answer = context.input_response("name")
    if not isinstance(answer, dict):
        form = {"type": "object", "properties": {"name": {"type": "string"}}}
        return input_required({"name": elicit("Name?", form)}, state={"round": 1})
    return f"Hello, {answer.get('content')}"


@fuzzed.tool()
def fail(arguments: dict[str, Any], context: Any) -> Any:
    raise ValueError("a tool that raises is an isError result")


@fuzzed.tool()
def refuse(arguments: dict[str, Any], context: Any) -> Any:
    return tool_error("no")


@fuzzed.tool(permission="auth.view_group")
def secret(arguments: dict[str, Any], context: Any) -> str:
    return "hidden from anonymous callers"


@fuzzed.resource("memo://a", name="a", mime_type="text/plain")
def memo(context: Any) -> str:
    return "a"


@fuzzed.resource_template(
    "fuzz://{x}", name="x", complete={"x": lambda value, arguments, context: ["one", "two"]}
)
def template(variables: dict[str, str], context: Any) -> str:
    return f"x is {variables['x']}"


@fuzzed.prompt(name="p", arguments=[{"name": "topic", "required": True}])
def prompt(arguments: dict[str, str], context: Any) -> str:
    return f"About {arguments['topic']}"


urlpatterns = [path("fuzz/mcp", fuzzed.urls)]

# -- strategies ----------------------------------------------------------------------------
#
# Most generated requests are nearly right, so that they get past the wire's checks to the
# handlers of either era; then one thing in five is damaged. A share is plain garbage.

LEGACY = ["2025-03-26", "2025-11-25"]  # the versions of the two sessions, in that order
ENGINE_METHODS = [
    "tools/list",
    "tools/call",
    "tools/call",
    "tools/call",
    "tools/call",
    "resources/read",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
]
MODERN_METHODS = [*ENGINE_METHODS, "server/discover", "subscriptions/listen"]
SESSION_METHODS = [
    *ENGINE_METHODS,
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "initialize",
]
NOTIFICATIONS = ["notifications/initialized", "notifications/cancelled", "notifications/other"]
NAMES = ["echo", "echo", "echo", "ask", "fail", "refuse", "secret", "nope"]
URIS = ["memo://a", "fuzz://one", "fuzz://", "memo://none", "not a uri"]
VERBS = ["GET", "GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"]

short_text = st.text(max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | short_text
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(short_text, children, max_size=4)
    ),
    max_leaves=12,
)


def often(draw: Any, percent: int = 80) -> bool:
    return bool(draw(st.integers(0, 99)) < percent)


@st.composite
def metas(draw: Any) -> Any:
    """A stateless revision's ``_meta``: mostly right, sometimes damaged or replaced."""
    capabilities = draw(st.sampled_from([{}, {"elicitation": {}}, {"sampling": {}}]))
    meta: Any = modern_meta(capabilities)
    if often(draw, 30):
        meta["progressToken"] = draw(short_text | st.integers())
    if often(draw, 20):
        meta["io.modelcontextprotocol/logLevel"] = draw(st.sampled_from(["debug", "bogus"]))
    if often(draw, 15):
        damage = draw(st.integers(0, 2))
        if damage == 0:
            meta = draw(json_values)
        elif damage == 1:
            del meta[draw(st.sampled_from(sorted(meta)))]
        else:
            meta["io.modelcontextprotocol/protocolVersion"] = draw(
                st.sampled_from([*LEGACY, "1999-01-01", ""]) | json_values
            )
    return meta


@st.composite
def plausible_params(draw: Any, method: str) -> dict[str, Any]:
    """Params of the shape ``method`` takes, with values right or wrong."""
    params: dict[str, Any] = {}
    if method == "tools/call":
        params["name"] = draw(st.sampled_from(NAMES))
        params["arguments"] = draw(
            st.fixed_dictionaries({"text": short_text | json_values})
            | st.dictionaries(short_text, json_values, max_size=3)
        )
    elif method == "resources/read" or method.startswith("resources/"):
        if method != "resources/list":
            params["uri"] = draw(st.sampled_from(URIS))
    elif method == "prompts/get":
        params["name"] = draw(st.sampled_from(["p", "nope"]))
        params["arguments"] = draw(st.fixed_dictionaries({"topic": short_text | json_values}))
    elif method == "completion/complete":
        params["ref"] = draw(
            st.sampled_from(
                [
                    {"type": "ref/prompt", "name": "p"},
                    {"type": "ref/resource", "uri": "fuzz://{x}"},
                    {"type": "ref/other"},
                ]
            )
        )
        params["argument"] = {
            "name": draw(st.sampled_from(["x", "topic"])),
            "value": draw(short_text),
        }
    elif method == "subscriptions/listen":
        params["notifications"] = draw(
            st.sampled_from(
                [{"toolsListChanged": True}, {}, {"resourceSubscriptions": ["memo://a"]}]
            )
            | json_values
        )
    elif method == "logging/setLevel":
        params["level"] = draw(st.sampled_from(["debug", "error", "bogus"]))
    elif method == "initialize":
        params["protocolVersion"] = draw(st.sampled_from(["2026-07-28", *LEGACY, "1.0"]))
        params["capabilities"] = draw(st.sampled_from([{}, {"elicitation": {}}]) | json_values)
        params["clientInfo"] = {"name": "fuzz", "version": "1"}
    elif method.endswith("/list") and often(draw, 20):
        params["cursor"] = draw(short_text)
    if method in ("tools/call", "prompts/get", "resources/read") and often(draw, 15):
        params["requestState"] = draw(short_text | json_values)
        params["inputResponses"] = draw(
            st.just({"name": {"action": "accept", "content": {"name": "Ada"}}}) | json_values
        )
    if often(draw, 10):
        params[draw(st.sampled_from(sorted(params) or ["name"]))] = draw(json_values)
    return params


@st.composite
def message(draw: Any, methods: list[str], modern: bool) -> dict[str, Any]:
    """One request (or, now and then, a notification or response) of an era."""
    if not modern and often(draw, 10):
        notification: dict[str, Any] = {
            "jsonrpc": "2.0",
            "method": draw(st.sampled_from(NOTIFICATIONS)),
        }
        if often(draw, 50):
            notification["params"] = {"requestId": draw(st.integers(0, 3))}
        return notification
    if often(draw, 5):
        return {"jsonrpc": "2.0", "id": draw(st.integers(0, 3)), "result": draw(json_values)}
    method = draw(st.sampled_from(methods)) if often(draw, 90) else draw(short_text)
    params = draw(plausible_params(method))
    if modern:
        params["_meta"] = draw(metas())
    built: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(st.integers(0, 2**31) | short_text)}
    built["method"] = method
    built["params"] = params
    if often(draw, 10):
        # Damage the envelope: a wrong version, a bad id, params that are not an object.
        key = draw(st.sampled_from(["jsonrpc", "id", "params", "method"]))
        built[key] = draw(json_values)
    return built


def header_safe(headers: dict[str, str]) -> dict[str, str]:
    # Header values travel as latin-1 without line breaks; anything else is not HTTP.
    return {
        name: value
        for name, value in headers.items()
        if "\n" not in value and "\r" not in value and all(ord(c) < 256 for c in value)
    }


def named(body: dict[str, Any]) -> str | None:
    params = body.get("params")
    if not isinstance(params, dict):
        return None
    found = params.get("uri") if body.get("method") == "resources/read" else params.get("name")
    return found if isinstance(found, str) else None


@st.composite
def modern_requests(draw: Any) -> tuple[str, Any, dict[str, str]]:
    body = draw(message(MODERN_METHODS, modern=True))
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN}
    if isinstance(body.get("method"), str):
        headers["Mcp-Method"] = body["method"]
    name = named(body)
    if name is not None:
        headers["Mcp-Name"] = name
    arguments = (
        (body.get("params") or {}).get("arguments")
        if isinstance(body.get("params"), dict)
        else None
    )
    if isinstance(arguments, dict) and isinstance(arguments.get("text"), str):
        headers["Mcp-Param-Text"] = arguments["text"]
    return "POST", body, headers


@st.composite
def session_requests(draw: Any, sessions: list[str]) -> tuple[str, Any, dict[str, str]]:
    index = draw(st.integers(0, len(sessions) - 1))
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": LEGACY[index],
        "Mcp-Session-Id": sessions[index],
    }
    shape = draw(st.integers(0, 9))
    if shape < 6:
        return "POST", draw(message(SESSION_METHODS, modern=False)), headers
    if shape < 8:
        return "POST", draw(st.lists(message(SESSION_METHODS, modern=False), max_size=4)), headers
    verb = draw(st.sampled_from(["GET", "DELETE"]))
    if verb == "GET" and often(draw, 30):
        headers["Last-Event-ID"] = draw(st.sampled_from(["", "x-1", "0"]) | short_text)
    return verb, None, headers


@st.composite
def initialize_requests(draw: Any) -> tuple[str, Any, dict[str, str]]:
    body = draw(message(["initialize"], modern=False))
    headers = {"Accept": "application/json, text/event-stream"}
    if often(draw, 30):
        headers["MCP-Protocol-Version"] = draw(st.sampled_from(LEGACY))
    return "POST", body, headers


@st.composite
def garbage_requests(draw: Any) -> tuple[str, Any, dict[str, str]]:
    text = draw(
        st.binary(max_size=64).map(lambda data: data.decode("latin-1"))
        | json_values.map(json.dumps)
        | message(SESSION_METHODS, modern=False)
        .map(json.dumps)
        .flatmap(lambda text: st.integers(0, max(0, len(text) - 1)).map(lambda n: text[:n]))
    )
    return "POST", text, {"Accept": draw(st.sampled_from(["application/json", "*/*", ""]))}


@st.composite
def requests(draw: Any, sessions: list[str]) -> tuple[str, str, dict[str, str]]:
    """An HTTP verb, a body and headers, for either era or neither."""
    era = draw(st.sampled_from(["modern"] * 4 + ["session"] * 3 + ["initialize", "garbage"]))
    if era == "modern":
        verb, body, headers = draw(modern_requests())
    elif era == "session":
        verb, body, headers = draw(session_requests(sessions))
    elif era == "initialize":
        verb, body, headers = draw(initialize_requests())
    else:
        verb, body, headers = draw(garbage_requests())
    if often(draw, 8):
        verb = draw(st.sampled_from(VERBS))
    if often(draw, 20):
        # One damaged header: dropped, replaced, or one more that should not be there.
        name = draw(
            st.sampled_from(
                [
                    "Accept",
                    "MCP-Protocol-Version",
                    "Mcp-Method",
                    "Mcp-Name",
                    "Mcp-Session-Id",
                    "Origin",
                ]
            )
        )
        if often(draw, 40):
            headers.pop(name, None)
        else:
            headers[name] = draw(
                st.sampled_from(["", "https://evil.example", "http://testserver", "null", MODERN])
                | short_text
            )
    text = body if isinstance(body, str) else "" if body is None else json.dumps(body)
    return verb, text, header_safe(headers)


# -- what every answer must be ------------------------------------------------------------


def well_formed(message: Any) -> bool:
    """A JSON-RPC 2.0 response: ``result`` (an object) or ``error`` (code and message)."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if ("result" in message) == ("error" in message):
        return False
    # An id is text or a number; null only for an error to a request whose id could not be
    # read (JSON-RPC 2.0).
    request_id = message.get("id")
    if request_id is None and "id" in message and "result" in message:
        return False
    if request_id is not None and not isinstance(request_id, str | int):
        return False
    if "result" in message:
        return isinstance(message["result"], dict)
    error = message["error"]
    return (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and isinstance(error.get("message"), str)
    )


def stream_text(response: Any) -> str:
    """A finite event stream's text, read in a thread so a stream that never ends fails."""
    from tests.conftest import stream_bytes

    out: queue.Queue[Any] = queue.Queue()

    def read() -> None:
        try:
            out.put(stream_bytes(response).decode())
        except BaseException as exc:  # handed to the test
            out.put(exc)

    threading.Thread(target=read, daemon=True).start()
    try:
        result = out.get(timeout=STREAM_TIMEOUT)
    except queue.Empty:
        pytest.fail(f"an event stream did not end within {STREAM_TIMEOUT} s")
    if isinstance(result, BaseException):
        raise result
    return str(result)


def check_stream(response: Any, long_lived: bool, withheld: bool = False) -> None:
    assert response.status_code == 200
    if long_lived:
        response.close()  # a listen or GET stream: it would go on forever
        return
    text = stream_text(response)
    assert "Traceback" not in text
    # A priming event (an id to resume from) carries empty data.
    data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    events = [json.loads(item) for item in data if item]
    if withheld and not events:
        return  # a request whose id the client cancelled beforehand is answered with nothing
    assert events, text
    for item in events:
        assert isinstance(item, dict) and item.get("jsonrpc") == "2.0"
    assert well_formed(events[-1]), events[-1]


#: The ``(session, request id)`` of each cancel the property sent, and when: a request
#: with that id within ``EARLY_CANCEL_SECONDS`` is taken for the one cancelled.
CANCELS_SENT: dict[tuple[str, str], float] = {}


def note_cancel(body: str, headers: dict[str, str]) -> None:
    try:
        message = json.loads(body)
    except ValueError:
        return
    if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
        return
    params = message.get("params")
    if isinstance(params, dict) and "requestId" in params and "Mcp-Session-Id" in headers:
        key = (headers["Mcp-Session-Id"], json.dumps(params["requestId"]))
        CANCELS_SENT[key] = time.monotonic()


def cancelled_beforehand(body: str, headers: dict[str, str]) -> bool:
    from mcp_app.transport.legacy import EARLY_CANCEL_SECONDS

    try:
        message = json.loads(body)
    except ValueError:
        return False
    if not isinstance(message, dict) or "id" not in message:
        return False
    sent = CANCELS_SENT.get((headers.get("Mcp-Session-Id", ""), json.dumps(message["id"])))
    return sent is not None and time.monotonic() - sent < EARLY_CANCEL_SECONDS


def check(response: Any, verb: str, body: str, withheld: bool = False) -> None:
    status = response.status_code
    assert status in STATUSES, (status, verb, body[:300])
    if response.streaming:
        assert response["Content-Type"].startswith("text/event-stream")
        try:
            method = json.loads(body).get("method")
        except (ValueError, AttributeError):
            method = None
        long_lived = verb == "GET" or method == "subscriptions/listen"
        check_stream(response, long_lived, withheld)
        return
    content = response.content
    assert b"Traceback" not in content
    if not content:
        # A notification or response (202), an ended session (200), or HEAD's stripped body.
        assert status in (200, 202) or verb == "HEAD", (status, verb, body[:300])
        return
    assert response["Content-Type"] == "application/json", content[:300]
    answer = json.loads(content)
    if isinstance(answer, list):
        assert answer and all(well_formed(item) for item in answer), answer
    else:
        assert well_formed(answer), answer


# -- the properties -------------------------------------------------------------------------


def new_session(version: str) -> str:
    client = MCPClient(fuzzed, versions=[version])
    client.info()
    assert client.session_id
    return client.session_id


@pytest.fixture
def sessions(settings: Any) -> list[str]:
    """Live sessions of the initialize era, one batching (2025-03-26) and one not."""
    settings.MCP_APP = {**settings.MCP_APP, "INPUT_TIMEOUT_SECONDS": 0.2}
    return [new_session(version) for version in LEGACY]


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_any_request_gets_a_well_formed_answer(sessions: list[str], data: Any) -> None:
    verb, body, headers = data.draw(requests(sessions))
    client = Client(raise_request_exception=False)
    withheld = cancelled_beforehand(body, headers)
    response = client.generic(
        verb, URL, data=body.encode("utf-8"), content_type="application/json", headers=headers
    )
    note_cancel(body, headers)
    # Seen with --hypothesis-show-statistics: which answers the generated requests reach.
    kind = "stream" if response.streaming else "json" if response.content else "empty"
    event(f"{verb} {response.status_code} {kind}")
    check(response, verb, body, withheld)
    if verb == "DELETE" and response.status_code == 200:
        # A session the fuzzer ended is replaced, so later examples still reach one.
        index = sessions.index(headers["Mcp-Session-Id"])
        sessions[index] = new_session(LEGACY[index])


def test_the_answers_the_property_relies_on_do_occur(sessions: list[str]) -> None:
    """A guard on ``check``: JSON, streams, batches, errors and empty bodies pass it."""
    client = Client(raise_request_exception=False)
    call, call_headers = modern_request(
        "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, meta={"progressToken": "p"}
    )
    legacy = {"Mcp-Session-Id": sessions[1], "MCP-Protocol-Version": "2025-11-25"}
    batching = {"Mcp-Session-Id": sessions[0], "MCP-Protocol-Version": "2025-03-26"}
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    failing = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fail"}}
    cases: list[tuple[str, Any, dict[str, str], int, bool]] = [
        ("POST", call, {**call_headers, "Mcp-Param-Text": "hi"}, 200, True),
        ("POST", failing, legacy, 200, False),
        ("POST", batch, batching, 200, False),
        ("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, legacy, 202, False),
        ("POST", "{not json", {}, 400, False),
        ("PUT", "", {}, 405, False),
        ("DELETE", "", {"Mcp-Session-Id": "no-such-session"}, 404, False),
    ]
    for verb, body, headers, status, streamed in cases:
        text = body if isinstance(body, str) else json.dumps(body)
        response = client.generic(
            verb, URL, data=text.encode(), content_type="application/json", headers=headers
        )
        assert (response.status_code, response.streaming) == (status, streamed), text
        check(response, verb, text)


def test_every_flipped_byte_of_a_request_state_is_refused() -> None:
    """All positions, through the view (a few hundred requests, about a second)."""
    client = Client()
    capabilities = {"elicitation": {}}
    body, headers = modern_request("tools/call", {"name": "ask"}, capabilities=capabilities)
    first = client.post(
        URL, data=json.dumps(body), content_type="application/json", headers=headers
    )
    token = first.json()["result"]["requestState"]
    answers = {"name": {"action": "accept", "content": {"name": "Ada"}}}

    def retry(state: str) -> Any:
        params = {"name": "ask", "requestState": state, "inputResponses": answers}
        body, headers = modern_request("tools/call", params, capabilities=capabilities)
        return client.post(
            URL, data=json.dumps(body), content_type="application/json", headers=headers
        )

    assert retry(token).json()["result"]["content"][0]["text"].startswith("Hello")
    raw = token.encode("ascii")
    refused = 0
    for position in range(len(raw)):
        flipped = bytearray(raw)
        flipped[position] ^= 0x01
        error = retry(flipped.decode("ascii")).json()["error"]
        assert error["code"] == -32602 and error["message"].startswith("Invalid requestState"), (
            position,
            error,
        )
        refused += 1
    assert refused == len(raw) > 50


@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    keyword=st.sampled_from(["Token", "Bearer", "Basic", "token", ""]) | short_text,
    credentials=st.text(max_size=40) | st.binary(max_size=20).map(lambda b: b.decode("latin-1")),
)
def test_any_authorization_header_is_200_or_a_clean_401(
    settings: Any, keyword: str, credentials: str
) -> None:
    settings.MCP_APP = {
        **settings.MCP_APP,
        "AUTHENTICATION_CLASSES": [
            "rest_framework.authentication.TokenAuthentication",
            "mcp_app.auth.BearerTokenAuthentication",
        ],
        "PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    }
    value = f"{keyword} {credentials}".strip()
    assume(header_safe({"Authorization": value}))  # else not something HTTP can carry
    body, headers = modern_request("tools/list")
    response = Client(raise_request_exception=False).post(
        URL,
        data=json.dumps(body),
        content_type="application/json",
        headers={**headers, "Authorization": value},
    )
    assert response.status_code == 401, value
    assert well_formed(response.json())
    challenge = response["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and challenge.isascii()
    assert (
        'resource_metadata="http://testserver/.well-known/oauth-protected-resource/fuzz/mcp"'
        in challenge
    )
