"""Multi round-trip requests (digest section 9.5) through the real view, and their transactions."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client, override_settings

from mcp_app import Server, elicit, input_required, tool_error
from mcp_app.protocol.context import RequestContext
from mcp_app.server import servers
from mcp_app.transport.http import Incoming
from tests.conftest import modern_request

pytestmark = pytest.mark.django_db(transaction=True)

ELICIT = {"elicitation": {}}
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "django-mcp-app", "version": "0.1.0"}}
NAME_REQUEST = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Who should I greet?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    },
}
COLOR_REQUEST = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Color?",
        "requestedSchema": {
            "type": "object",
            "properties": {"color": {"type": "string"}},
            "required": ["color"],
        },
    },
}
BAD_SIGNATURE = "Invalid requestState: the signature does not verify"


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def call(
    client: Client,
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    request_id: Any = 1,
    capabilities: dict[str, Any] | None = ELICIT,
    **extra: Any,
) -> Any:
    """POST one ``tools/call``; ``extra`` goes into params (inputResponses, requestState)."""
    params = {"name": tool, "arguments": {} if arguments is None else arguments, **extra}
    body, headers = modern_request(
        "tools/call", params, request_id=request_id, capabilities=capabilities
    )
    response = client.post(
        "/mcp", data=json.dumps(body), content_type="application/json", headers=headers
    )
    assert response["Content-Type"] == "application/json"
    return response


def first_round(client: Client, tool: str = "greet", arguments: Any = None) -> str:
    response = call(client, tool, arguments)
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["resultType"] == "input_required"
    return str(result["requestState"])


def error_of(response: Any, request_id: Any = 2) -> dict[str, Any]:
    body = response.json()
    assert "result" not in body
    assert body["id"] == request_id
    return dict(body["error"])


def text_of(response: Any) -> str:
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert len(result["content"]) == 1
    return str(result["content"][0]["text"])


@pytest.fixture
def client() -> Client:
    return Client()


# -- the demo's greet --------------------------------------------------------------------


def test_greet_first_round_asks_for_a_name(client: Client) -> None:
    response = call(client, "greet", request_id="r-1")
    assert response.status_code == 200
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == "r-1" and "error" not in body
    result = body["result"]
    assert set(result) == {"resultType", "inputRequests", "requestState", "_meta"}
    assert result["resultType"] == "input_required"
    assert result["inputRequests"] == {"name": NAME_REQUEST}
    assert isinstance(result["requestState"], str) and result["requestState"]
    assert result["_meta"] == SERVER_INFO
    assert "ttlMs" not in result and "cacheScope" not in result


def test_greet_retry_with_the_answer_and_state_completes(client: Client) -> None:
    token = first_round(client)
    response = call(
        client,
        "greet",
        request_id=2,
        inputResponses={"name": accept(name="Ada")},
        requestState=token,
    )
    assert response.json()["id"] == 2
    assert text_of(response) == "Hello, Ada!"
    result = response.json()["result"]
    assert not result.get("isError")
    assert result["_meta"] == SERVER_INFO
    assert "ttlMs" not in result and "cacheScope" not in result


def test_greet_decline_is_a_tool_error(client: Client) -> None:
    token = first_round(client)
    response = call(
        client,
        "greet",
        request_id=2,
        inputResponses={"name": {"action": "decline"}},
        requestState=token,
    )
    assert text_of(response) == "No name given"
    assert response.json()["result"]["isError"] is True


def test_greet_accepted_without_a_name_is_a_tool_error(client: Client) -> None:
    token = first_round(client)
    response = call(
        client,
        "greet",
        request_id=2,
        inputResponses={"name": accept(name="")},
        requestState=token,
    )
    assert text_of(response) == "No name given"
    assert response.json()["result"]["isError"] is True


@pytest.mark.parametrize(
    "responses",
    [{}, {"nom": accept(name="Ada")}, {"Name": accept(name="Ada")}, {"name": None}, None],
    ids=["none", "unknown-key", "key-case", "null-answer", "null-object"],
)
def test_greet_without_a_usable_answer_asks_again(client: Client, responses: Any) -> None:
    token = first_round(client)
    response = call(client, "greet", request_id=2, inputResponses=responses, requestState=token)
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["resultType"] == "input_required"
    assert result["inputRequests"] == {"name": NAME_REQUEST}
    assert isinstance(result["requestState"], str)
    retry = call(
        client,
        "greet",
        request_id=3,
        inputResponses={"name": accept(name="Ada")},
        requestState=result["requestState"],
    )
    assert text_of(retry) == "Hello, Ada!"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("Ada", "the answer must be an object"),
        ({"action": "maybe"}, "an elicitation's answer needs 'action': accept, decline or cancel"),
        (
            {"action": "accept", "content": "Ada"},
            "an accepted elicitation's 'content' must be an object",
        ),
        (
            {"action": "accept", "content": None},
            "an accepted elicitation's 'content' must be an object",
        ),
        (
            {"action": "accept", "content": {"name": {"first": "Ada"}}},
            "an elicitation's content holds only text, numbers, booleans and lists of text; "
            "'name' is dict",
        ),
        (
            {"action": "accept", "content": {"nom": "Ada"}},
            "its content does not fit the form asked for: at the root: missing required property 'name'",
        ),
        (
            {"action": "accept"},
            "its content does not fit the form asked for: at the root: missing required property 'name'",
        ),
        (
            {"action": "accept", "content": {"name": 7}},
            "its content does not fit the form asked for: at /name: expected string, got integer",
        ),
    ],
)
def test_a_malformed_answer_to_what_was_asked_is_invalid_params(
    client: Client, answer: Any, problem: str
) -> None:
    # The handler would read it as an elicitation's result and fail on it.
    token = first_round(client)
    response = call(
        client, "greet", request_id=2, inputResponses={"name": answer}, requestState=token
    )
    assert error_of(response) == {
        "code": -32602,
        "message": f"Invalid inputResponses['name']: {problem}",
    }


def test_without_a_state_an_answer_must_still_be_an_input_requests_result(client: Client) -> None:
    # Answers sent up front, before any round: each is taken as the result it is shaped as.
    malformed = {"name": {"action": "accept", "content": "Ada"}}
    response = call(client, "greet", request_id=2, inputResponses=malformed)
    assert error_of(response)["message"] == (
        "Invalid inputResponses['name']: an accepted elicitation's 'content' must be an object"
    )
    answered = call(client, "greet", request_id=3, inputResponses={"name": accept(name="Ada")})
    assert text_of(answered) == "Hello, Ada!"
    # Answers shaped as no input request's result are ignored, as unknown keys are.
    unknown = {"name": "junk", "other": {"foo": 1}}
    again = call(client, "greet", request_id=4, inputResponses=unknown).json()["result"]
    assert again["resultType"] == "input_required"


def test_an_answer_to_what_this_round_did_not_ask_is_not_handed_over() -> None:
    server = Server("answers-test")

    def peek(arguments: dict[str, Any], context: RequestContext) -> Any:
        if context.state is None:
            return input_required({"name": elicit("Name?")}, state={"round": 2})
        return ",".join(sorted(context.input_responses))

    server.add_tool(peek, name="peek")

    def round_of(request_id: int, **extra: Any) -> Any:
        body, headers = modern_request(
            "tools/call",
            {"name": "peek", "arguments": {}, **extra},
            request_id=request_id,
            capabilities=ELICIT,
        )
        incoming = Incoming(
            method="POST",
            headers={k.lower(): v for k, v in headers.items()},
            body=json.dumps(body).encode(),
            host="testserver",
        )
        return server.endpoint.handle(incoming).body["result"]

    try:
        token = round_of(1)["requestState"]
        answers = {"name": accept(name="Ada"), "other": "junk", "roots": {"roots": []}}
        done = round_of(2, inputResponses=answers, requestState=token)
        assert done["content"][0]["text"] == "name"
    finally:
        servers.pop("answers-test", None)


def test_extra_unknown_input_responses_are_ignored(client: Client) -> None:
    token = first_round(client)
    response = call(
        client,
        "greet",
        request_id=2,
        inputResponses={
            "name": accept(name="Ada"),
            "color": accept(color="blue"),
            "roots": {"roots": [{"uri": "file:///tmp"}]},
            "junk": "???",
        },
        requestState=token,
    )
    assert text_of(response) == "Hello, Ada!"


@pytest.mark.parametrize("responses", [[], ["name"], "name", 3, True])
def test_input_responses_that_are_not_an_object_are_invalid_params(
    client: Client, responses: Any
) -> None:
    token = first_round(client)
    response = call(client, "greet", request_id=2, inputResponses=responses, requestState=token)
    assert response.status_code == 200
    assert error_of(response) == {
        "code": -32602,
        "message": "inputResponses must be an object keyed by input request",
    }


@pytest.mark.parametrize("capabilities", [{}, {"sampling": {}, "roots": {}}, {"elicitation": 1}])
def test_greet_without_the_elicitation_capability_is_refused(
    client: Client, capabilities: dict[str, Any]
) -> None:
    response = call(client, "greet", request_id=7, capabilities=capabilities)
    assert response.status_code == 400
    assert error_of(response, 7) == {
        "code": -32021,
        "message": "Missing required client capability: elicitation",
        "data": {"requiredCapabilities": {"elicitation": {}}},
    }


# -- two-steps: three rounds, the name carried in the state ---------------------------------


def test_two_steps_takes_three_rounds_and_carries_the_name_in_the_state(client: Client) -> None:
    round_1 = call(client, "two-steps", request_id=1).json()["result"]
    assert round_1["resultType"] == "input_required"
    assert round_1["inputRequests"]["name"]["params"]["message"] == "Name?"

    round_2 = call(
        client,
        "two-steps",
        request_id=2,
        inputResponses={"name": accept(name="Ada")},
        requestState=round_1["requestState"],
    ).json()["result"]
    assert round_2["resultType"] == "input_required"
    assert round_2["inputRequests"] == {"color": COLOR_REQUEST}
    assert round_2["requestState"] != round_1["requestState"]

    # The third round answers only the color: the name comes from the signed state.
    round_3 = call(
        client,
        "two-steps",
        request_id=3,
        inputResponses={"color": accept(color="blue")},
        requestState=round_2["requestState"],
    )
    assert round_3.json()["id"] == 3
    assert text_of(round_3) == "Ada likes blue"

    # With the first round's state the same answer is not enough: the name is asked again.
    again = call(
        client,
        "two-steps",
        request_id=4,
        inputResponses={"color": accept(color="blue")},
        requestState=round_1["requestState"],
    ).json()["result"]
    assert again["resultType"] == "input_required"
    assert set(again["inputRequests"]) == {"name"}


def test_two_steps_partial_rounds_ask_again_for_what_is_missing(client: Client) -> None:
    round_1 = call(client, "two-steps").json()["result"]
    round_2 = call(
        client,
        "two-steps",
        request_id=2,
        inputResponses={"name": accept(name="Ada")},
        requestState=round_1["requestState"],
    ).json()["result"]
    for responses in (
        {},
        {"colour": accept(color="red")},
        {"color": {"action": "cancel"}},
    ):
        partial = call(
            client,
            "two-steps",
            request_id=3,
            inputResponses=responses,
            requestState=round_2["requestState"],
        )
        assert partial.status_code == 200, responses
        result = partial.json()["result"]
        assert result["resultType"] == "input_required", responses
        assert result["inputRequests"] == {"color": COLOR_REQUEST}, responses
    # An accepted form without the field it asks for is the client's error, not a new round.
    wrong = call(
        client,
        "two-steps",
        request_id=4,
        inputResponses={"color": accept(colour="red")},
        requestState=round_2["requestState"],
    )
    assert "does not fit the form asked for" in error_of(wrong, 4)["message"]


# -- what a request state will not do -------------------------------------------------------


def test_a_tampered_state_is_invalid_params(client: Client) -> None:
    token = first_round(client)
    payload, stamp, signature = token.split(":")
    forged = f"{payload}:{stamp}:{signature[:-1]}{'A' if signature[-1] != 'A' else 'B'}"
    response = call(
        client,
        "greet",
        request_id=2,
        inputResponses={"name": accept(name="Ada")},
        requestState=forged,
    )
    assert response.status_code == 200
    assert error_of(response) == {"code": -32602, "message": BAD_SIGNATURE}


@pytest.mark.parametrize("token", ["", None, 42, {"s": None}])
def test_a_state_that_is_not_a_string_is_invalid_params(client: Client, token: Any) -> None:
    response = call(client, "greet", request_id=2, requestState=token)
    assert error_of(response) == {
        "code": -32602,
        "message": "Invalid requestState: must be a non-empty string",
    }


def test_a_state_replayed_on_another_tool_is_refused(client: Client) -> None:
    token = first_round(client, "greet")
    response = call(
        client,
        "two-steps",
        request_id=2,
        inputResponses={"name": accept(name="Ada")},
        requestState=token,
    )
    assert error_of(response) == {
        "code": -32602,
        "message": "Invalid requestState: it was issued for another request target",
    }


def test_a_state_replayed_with_other_arguments_is_refused(client: Client) -> None:
    token = first_round(client, "greet", {"formal": True})
    response = call(
        client,
        "greet",
        {"formal": False},
        request_id=2,
        inputResponses={"name": accept(name="Ada")},
        requestState=token,
    )
    assert error_of(response) == {
        "code": -32602,
        "message": "Invalid requestState: it was issued for other arguments",
    }


def test_a_state_is_bound_to_the_logged_in_user(client: Client) -> None:
    users = get_user_model().objects
    ada = users.create_user("ada", password="pw-ada-123")
    alan = users.create_user("alan", password="pw-alan-123")
    client.force_login(ada)
    token = first_round(client)
    answer = {"name": accept(name="Ada")}

    other = Client()
    other.force_login(alan)
    refused = call(other, "greet", request_id=2, inputResponses=answer, requestState=token)
    anonymous = call(Client(), "greet", request_id=2, inputResponses=answer, requestState=token)
    for response in (refused, anonymous):
        assert error_of(response) == {
            "code": -32602,
            "message": "Invalid requestState: it was issued to another caller",
        }

    same = call(client, "greet", request_id=3, inputResponses=answer, requestState=token)
    assert text_of(same) == "Hello, Ada!"


def test_an_anonymous_state_is_refused_to_a_logged_in_user(client: Client) -> None:
    token = first_round(Client())
    client.force_login(get_user_model().objects.create_user("grace", password="pw-grace-1"))
    response = call(
        client,
        "greet",
        request_id=2,
        inputResponses={"name": accept(name="Ada")},
        requestState=token,
    )
    assert error_of(response)["message"] == "Invalid requestState: it was issued to another caller"


@override_settings(MCP_APP={"REQUEST_STATE_MAX_AGE_MS": 1})
def test_an_expired_state_is_invalid_params(client: Client) -> None:
    token = first_round(client)
    time.sleep(0.02)
    response = call(
        client,
        "greet",
        request_id=2,
        inputResponses={"name": accept(name="Ada")},
        requestState=token,
    )
    assert error_of(response) == {
        "code": -32602,
        "message": "Invalid requestState: it has expired; start the request again",
    }


# -- transactions: an attempt that asks for input or fails is undone ------------------------


@pytest.fixture
def rollback_server() -> Iterator[Server]:
    server = Server("rollback-test")

    def make_group(arguments: dict[str, Any], context: RequestContext) -> Any:
        Group.objects.create(name=f"group-{arguments['label']}")
        if arguments.get("fail") == "error":
            return tool_error("Could not finish")
        if arguments.get("fail") == "raise":
            raise RuntimeError("handler crashed after writing")
        answer = context.input_response("confirm")
        if answer is None:
            return input_required({"confirm": elicit("Create it?")}, state={"asked": True})
        return f"created {arguments['label']} after asking={context.state['asked']}"

    server.add_tool(make_group, name="make-group")
    yield server
    servers.pop("rollback-test", None)


def handle(server: Server, arguments: dict[str, Any], request_id: int = 1, **extra: Any) -> Any:
    body, headers = modern_request(
        "tools/call",
        {"name": "make-group", "arguments": arguments, **extra},
        request_id=request_id,
        capabilities=ELICIT,
    )
    reply = server.endpoint.handle(
        Incoming(
            method="POST",
            headers={k.lower(): v for k, v in headers.items()},
            body=json.dumps(body).encode(),
            host="testserver",
        )
    )
    assert reply.call is None
    return reply


def group_names() -> list[str]:
    return list(Group.objects.order_by("name").values_list("name", flat=True))


def test_a_round_that_asks_for_input_is_rolled_back_and_the_completing_round_commits(
    rollback_server: Server,
) -> None:
    first = handle(rollback_server, {"label": "a"})
    assert first.status == 200
    result = first.body["result"]
    assert result["resultType"] == "input_required"
    assert result["_meta"] == {
        "io.modelcontextprotocol/serverInfo": {"name": "rollback-test", "version": "0.1.0"}
    }
    assert group_names() == []

    second = handle(
        rollback_server,
        {"label": "a"},
        request_id=2,
        inputResponses={"confirm": accept()},
        requestState=result["requestState"],
    )
    assert second.status == 200
    assert second.body["result"]["content"][0]["text"] == "created a after asking=True"
    assert group_names() == ["group-a"]


@pytest.mark.parametrize("fail", ["error", "raise"])
def test_a_failed_attempt_is_rolled_back(rollback_server: Server, fail: str) -> None:
    reply = handle(rollback_server, {"label": "b", "fail": fail})
    assert reply.status == 200
    result = reply.body["result"]
    assert result["isError"] is True
    assert (
        result["content"][0]["text"]
        == {"error": "Could not finish", "raise": "handler crashed after writing"}[fail]
    )
    assert group_names() == []


def test_a_refused_capability_leaves_nothing_behind(rollback_server: Server) -> None:
    body, headers = modern_request(
        "tools/call", {"name": "make-group", "arguments": {"label": "c"}}, capabilities={}
    )
    reply = rollback_server.endpoint.handle(
        Incoming("POST", {k.lower(): v for k, v in headers.items()}, json.dumps(body).encode())
    )
    assert reply.status == 400
    assert reply.body["error"]["code"] == -32021
    assert group_names() == []


def test_without_atomic_the_asking_round_keeps_its_writes(rollback_server: Server) -> None:
    with override_settings(MCP_APP={"ATOMIC": False}):
        reply = handle(rollback_server, {"label": "d"})
    assert reply.body["result"]["resultType"] == "input_required"
    assert group_names() == ["group-d"]


@pytest.mark.parametrize("atomic_requests", [True, False])
def test_by_default_the_attempt_follows_the_databases_atomic_requests(
    rollback_server: Server, atomic_requests: bool
) -> None:
    from django.conf import settings

    database = settings.DATABASES["default"]
    before = database.get("ATOMIC_REQUESTS", False)
    database["ATOMIC_REQUESTS"] = atomic_requests
    try:
        with override_settings(MCP_APP={"AUDIT": False}):
            reply = handle(rollback_server, {"label": "f"})
    finally:
        database["ATOMIC_REQUESTS"] = before
    assert reply.body["result"]["resultType"] == "input_required"
    assert group_names() == ([] if atomic_requests else ["group-f"])


def test_a_call_that_uses_no_database_does_not_touch_it_by_default(
    rollback_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connection

    def quiet(arguments: dict[str, Any], ctx: Any) -> str:
        return "no database"

    rollback_server.add_tool(quiet, name="quiet")
    rollback_server.catalog()  # the generation, read once and then known
    touched: list[str] = []
    real = connection.ensure_connection

    def spy() -> None:
        touched.append("connection")
        real()

    monkeypatch.setattr(connection, "ensure_connection", spy)
    with override_settings(MCP_APP={"AUDIT": False}):
        body, headers = modern_request("tools/call", {"name": "quiet", "arguments": {}})
        reply = rollback_server.endpoint.handle(
            Incoming("POST", {k.lower(): v for k, v in headers.items()}, json.dumps(body).encode())
        )
    assert reply.body["result"]["content"] == [{"type": "text", "text": "no database"}]
    assert touched == []
    with override_settings(MCP_APP={"ATOMIC": True, "AUDIT": False}):
        rollback_server.endpoint.handle(
            Incoming("POST", {k.lower(): v for k, v in headers.items()}, json.dumps(body).encode())
        )
    assert touched  # the transaction needs the connection


def test_dispatch_rolls_back_input_required_and_commits_a_completed_call(
    rollback_server: Server,
) -> None:
    endpoint = rollback_server.endpoint
    catalog = rollback_server.catalog()
    params = {"name": "make-group", "arguments": {"label": "e"}}

    asking = endpoint.dispatch("tools/call", params, RequestContext(method="tools/call"), catalog)
    assert asking.requests == {"confirm": elicit("Create it?")}
    assert group_names() == []

    ctx = RequestContext(
        method="tools/call", input_responses={"confirm": accept()}, state={"asked": True}
    )
    done = endpoint.dispatch("tools/call", params, ctx, catalog)
    assert done["content"] == [{"type": "text", "text": "created e after asking=True"}]
    assert group_names() == ["group-e"]


# -- state is bound to the definition it was issued for ---------------------------------------


def test_a_state_from_another_server_with_the_same_tool_name_is_refused() -> None:
    def ask(arguments: dict[str, Any], context: RequestContext) -> Any:
        if context.input_response("ok") is None:
            return input_required({"ok": elicit("OK?")}, state={"role": "viewer"})
        return f"state={context.state}"

    first, second = Server("state-server-one"), Server("state-server-two")
    try:
        for server in (first, second):
            server.add_tool(ask, name="same")

        def post(server: Server, **extra: Any) -> Any:
            body, headers = modern_request(
                "tools/call", {"name": "same", "arguments": {}, **extra}, capabilities=ELICIT
            )
            return server.endpoint.handle(
                Incoming(
                    "POST", {k.lower(): v for k, v in headers.items()}, json.dumps(body).encode()
                )
            ).body

        token = post(first)["result"]["requestState"]
        replayed = post(second, inputResponses={"ok": accept()}, requestState=token)
        assert replayed.get("error", {}).get("code") == -32602, replayed
    finally:
        servers.pop("state-server-one", None)
        servers.pop("state-server-two", None)
