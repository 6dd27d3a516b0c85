"""The stateless HTTP wire through the real Django view and URLconf (digest section 9)."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import path

from mcp_app import Server, elicit, input_required
from mcp_app.transport.http import one_at_a_time
from tests.conftest import MODERN, modern_request, sse_messages

pytestmark = pytest.mark.django_db(transaction=True)

cached = Server("http-cached", ttl_ms=60_000, cache_scope="public", rows=False)


@cached.resource("form://name", name="name-form", mime_type="text/plain")
def name_form(context: Any) -> Any:
    answer = context.input_response("name")
    if not isinstance(answer, dict):
        form = {"type": "object", "properties": {"name": {"type": "string"}}}
        return input_required({"name": elicit("Name?", form)})
    return f"Hello, {answer['content']['name']}"


@cached.resource("plain://a", name="plain", mime_type="text/plain")
def plain(context: Any) -> str:
    return "a"


urlpatterns = [path("cached/mcp", cached.urls)]


def post(
    client: Client, body: Any, headers: dict[str, str], path: str = "/mcp", **environ: str
) -> Any:
    return client.post(
        path, data=json.dumps(body), content_type="application/json", headers=headers, **environ
    )


def call(client: Client, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
    body, headers = modern_request(method, params, **kw)
    return post(client, body, headers)


@pytest.fixture
def client() -> Client:
    return Client()


def test_discover(client: Client) -> None:
    response = call(client, "server/discover")
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == [MODERN]
    assert {"tools", "resources", "prompts", "completions", "logging"} <= set(
        result["capabilities"]
    )
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "django-mcp-app"
    assert result["ttlMs"] == 0 and result["cacheScope"] == "private"


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
def test_both_paths_answer_without_redirect(client: Client, path: str) -> None:
    body, headers = modern_request("tools/list")
    response = post(client, body, headers, path=path)
    assert response.status_code == 200
    names = [t["name"] for t in response.json()["result"]["tools"]]
    assert names[:2] == ["add", "logo"]


def test_call_add_structured(client: Client) -> None:
    response = call(client, "tools/call", {"name": "add", "arguments": {"numbers": [1, 2, 3.5]}})
    result = response.json()["result"]
    assert result["structuredContent"] == {"sum": 6.5}
    assert json.loads(result["content"][0]["text"]) == {"sum": 6.5}
    assert result["resultType"] == "complete"
    assert "ttlMs" not in result


def test_invalid_arguments_named_by_pointer(client: Client) -> None:
    response = call(client, "tools/call", {"name": "add", "arguments": {"numbers": ["x"]}})
    result = response.json()["result"]
    assert result["isError"] is True
    assert (
        result["content"][0]["text"]
        == "Invalid arguments at /numbers/0: expected number, got string"
    )


def test_unknown_tool(client: Client) -> None:
    response = call(client, "tools/call", {"name": "nope"})
    assert response.json()["error"]["code"] == -32602


def test_read_template_and_not_found(client: Client) -> None:
    response = call(client, "resources/read", {"uri": "people://ada"})
    result = response.json()["result"]
    assert json.loads(result["contents"][0]["text"])["name"] == "Ada Lovelace"
    assert result["contents"][0]["mimeType"] == "application/json"
    assert "ttlMs" in result
    missing = call(client, "resources/read", {"uri": "people://nobody"}).json()
    assert missing["error"]["code"] == -32602
    assert missing["error"]["data"] == {"uri": "people://nobody"}


def test_prompt_missing_argument(client: Client) -> None:
    response = call(client, "prompts/get", {"name": "introduce", "arguments": {}})
    error = response.json()["error"]
    assert error["code"] == -32602 and "id" in error["message"]


def test_complete(client: Client) -> None:
    response = call(
        client,
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "people://{id}"},
            "argument": {"name": "id", "value": "a"},
        },
    )
    assert response.json()["result"]["completion"]["values"] == ["ada", "alan"]


def test_notification_is_accepted(client: Client) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response = post(client, body, {"MCP-Protocol-Version": MODERN})
    assert response.status_code == 202 and response.content == b""


def test_parse_error(client: Client) -> None:
    response = client.post("/mcp", data=b"{nope", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_numbers_json_has_not_are_a_parse_error(client: Client, constant: str) -> None:
    body, headers = modern_request("tools/call", {"name": "add", "arguments": {"numbers": [1]}})
    data = json.dumps(body).replace("[1]", f"[{constant}]")
    response = client.post("/mcp", data=data, content_type="application/json", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700
    assert constant in response.json()["error"]["message"]


def _with_note(escape: str) -> tuple[str, dict[str, str]]:
    """A call of ``add`` whose extra argument ``note`` is spelt ``escape`` in the JSON text."""
    arguments = {"numbers": [1], "note": "NOTE"}
    body, headers = modern_request("tools/call", {"name": "add", "arguments": arguments})
    return json.dumps(body).replace("NOTE", escape), headers


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "x\\ud800y", "\\ude00\\ud83d"])
def test_a_lone_surrogate_is_a_parse_error(client: Client, escape: str) -> None:
    # JSON text may spell one, but no UTF-8 (the answer's encoding, PostgreSQL's text) holds it.
    data, headers = _with_note(escape)
    response = client.post("/mcp", data=data, content_type="application/json", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700
    assert "surrogate" in response.json()["error"]["message"]


def test_a_surrogate_pair_is_one_character(client: Client) -> None:
    data, headers = _with_note("\\ud83d\\ude00")
    response = client.post("/mcp", data=data, content_type="application/json", headers=headers)
    assert response.status_code == 200
    assert response.json()["result"]["structuredContent"] == {"sum": 1}


@pytest.mark.parametrize("body", [[{"jsonrpc": "2.0", "id": 1, "method": "ping"}], {"id": 1}, 3])
def test_invalid_request(client: Client, body: Any) -> None:
    response = post(client, body, {})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


@pytest.mark.parametrize("method", ["get", "delete"])
def test_other_http_methods(client: Client, method: str) -> None:
    response = getattr(client, method)("/mcp")
    assert response.status_code == 405
    # What the endpoint serves: GET and DELETE with an initialize-era session's header.
    assert response["Allow"] == "GET, POST, DELETE"


@pytest.mark.parametrize(
    ("accept", "status"),
    [
        ("application/xml", 406),
        ("text/html, image/png;q=0.5", 406),
        ("application/json", 200),
        ("text/event-stream", 200),
        ("text/*", 200),
        ("*/*;q=0.1", 200),
        ("", 200),
        ("text/event-stream;q=0", 406),
        ("application/json;q=0, text/event-stream", 200),
        # The most specific range weighs a type, whatever a wildcard says.
        ("*/*, application/json;q=0, text/event-stream;q=0", 406),
        ("application/json;q=0, application/*", 406),
        ("Application/JSON", 200),
    ],
)
def test_a_post_whose_accept_takes_neither_json_nor_a_stream_is_406(
    client: Client, accept: str, status: int
) -> None:
    body, headers = modern_request("tools/list")
    response = post(client, body, {**headers, "Accept": accept})
    assert response.status_code == status
    if status == 406:
        assert response.json()["error"] == {
            "code": -32600,
            "message": "Not Acceptable: the answer is application/json or text/event-stream",
        }


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("application/json; charset=utf-8", 200),
        ("Application/JSON", 200),
        ("application/vnd.example+json", 200),
    ],
)
def test_a_post_whose_body_is_declared_as_no_json_is_415(
    client: Client, content_type: str, status: int
) -> None:
    body, headers = modern_request("tools/list")
    response = client.post(
        "/mcp", data=json.dumps(body), content_type=content_type, headers=headers
    )
    assert response.status_code == status
    if status == 415:
        assert response.json()["error"]["message"] == (
            f"Unsupported Media Type: {content_type}; send application/json"
        )


@pytest.mark.parametrize("method", ["get", "delete"])
@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
def test_get_or_delete_of_an_initialize_era_client_without_its_session_is_400(
    client: Client, method: str, version: str
) -> None:
    response = getattr(client, method)("/mcp", headers={"MCP-Protocol-Version": version})
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": -32600,
        "message": "Missing Mcp-Session-Id header",
    }


@pytest.mark.parametrize("method", ["get", "delete"])
@pytest.mark.parametrize("session", [None, "abc", "0123456789abcdef0123456789abcdef"])
def test_get_or_delete_of_a_2026_07_28_client_is_405(
    client: Client, method: str, session: str | None
) -> None:
    headers = {"MCP-Protocol-Version": "2026-07-28"}
    if session is not None:
        # That revision has no sessions: an id sent all the same changes nothing.
        headers["Mcp-Session-Id"] = session
    response = getattr(client, method)("/mcp", headers=headers)
    assert response.status_code == 405
    assert response.json()["error"]["message"].endswith("is not served here; POST MCP messages")


@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "unknown/method"]
)
def test_removed_methods_are_not_found(client: Client, method: str) -> None:
    response = call(client, method, request_id="abc")
    assert response.status_code == 404
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": "abc",
        "error": {"code": -32601, "message": f"Method not found: {method}"},
    }


def test_missing_meta(client: Client) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = post(client, body, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32602


def test_header_mismatch(client: Client) -> None:
    body, headers = modern_request("tools/call", {"name": "add", "arguments": {"numbers": [1]}})
    headers["Mcp-Name"] = "logo"
    response = post(client, body, headers)
    assert response.status_code == 400 and response.json()["error"]["code"] == -32020


def test_unsupported_version(client: Client) -> None:
    body, headers = modern_request("server/discover")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "v999"
    headers["MCP-Protocol-Version"] = "v999"
    error = post(client, body, headers).json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": [MODERN], "requested": "v999"}


def test_foreign_origin_refused(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    body, headers = modern_request("tools/list")
    headers["Origin"] = "http://evil.example.com"
    with caplog.at_level("WARNING", logger="django.security.mcp_app"):
        assert post(client, body, headers).status_code == 403
    # The client reads only that it was refused; the site's log says which setting lets it in.
    (record,) = [r for r in caplog.records if r.name == "django.security.mcp_app"]
    assert record.levelname == "WARNING"
    assert record.getMessage() == (
        "Refused a request from Origin 'http://evil.example.com'; if browsers on that origin "
        "should call the endpoint, add it to MCP_APP['ALLOWED_ORIGINS']"
    )


@pytest.mark.parametrize("allowed_hosts", [["testserver"], ["*"]])
def test_own_origin_is_trusted_unless_any_host_is_let_in(
    client: Client, settings: Any, allowed_hosts: list[str]
) -> None:
    # With "*", a page whose name was rebound to this server sends a matching Host and Origin.
    settings.ALLOWED_HOSTS = allowed_hosts
    body, headers = modern_request("tools/list")
    headers["Origin"] = "http://testserver"
    expected = 200 if allowed_hosts == ["testserver"] else 403
    assert post(client, body, headers).status_code == expected
    settings.MCP_APP = {**settings.MCP_APP, "ALLOWED_ORIGINS": ["http://testserver"]}
    assert post(client, body, headers).status_code == 200


@override_settings(MCP_APP={"ALLOWED_ORIGINS": ["https://app.example.com"]})
def test_allowed_origin(client: Client) -> None:
    body, headers = modern_request("tools/list")
    headers["Origin"] = "https://app.example.com"
    assert post(client, body, headers).status_code == 200


def test_disallowed_host_refused(client: Client) -> None:
    body, headers = modern_request("tools/list")
    response = post(client, body, headers, HTTP_HOST="evil.example.com")
    # CommonMiddleware refuses it first (400); without it, the endpoint itself does (403).
    assert response.status_code == 400


@pytest.mark.parametrize(
    "accept",
    [
        "application/json",
        "application/json, text/event-stream;q=0",
        "*/*, text/event-stream;q=0",
        "application/json, text/*, text/event-stream;q=0",
    ],
)
def test_a_client_taking_json_only_gets_its_answer_in_json_without_its_progress(
    client: Client, accept: str
) -> None:
    body, headers = modern_request(
        "tools/call", {"name": "test_tool_with_progress"}, meta={"progressToken": "p1"}
    )
    response = post(client, body, {**headers, "Accept": accept})
    assert response["Content-Type"] == "application/json"
    answer = response.json()
    assert answer["id"] == 1 and answer["result"]["resultType"] == "complete"


def test_a_listen_stream_is_not_acceptable_to_a_client_taking_json_only(client: Client) -> None:
    body, headers = modern_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id=5
    )
    response = post(client, body, {**headers, "Accept": "application/json"})
    assert response.status_code == 406
    assert response.json()["id"] == 5
    assert "Accept header does not take" in response.json()["error"]["message"]


def test_progress_streams_events(client: Client) -> None:
    body, headers = modern_request(
        "tools/call", {"name": "test_tool_with_progress"}, meta={"progressToken": "p1"}
    )
    response = post(client, body, headers)
    assert response["Content-Type"] == "text/event-stream"
    assert response["X-Accel-Buffering"] == "no"
    messages = sse_messages(response)
    progress = [
        m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"
    ]
    assert progress == [0, 50, 100]
    assert messages[-1]["id"] == 1 and messages[-1]["result"]["resultType"] == "complete"


@pytest.mark.parametrize("logs", [True, False])
def test_a_server_that_does_no_logging_sends_no_log_messages(
    client: Client, monkeypatch: pytest.MonkeyPatch, logs: bool
) -> None:
    import mcp_app

    monkeypatch.setattr(mcp_app.site.options, "logging", logs)
    meta = {"io.modelcontextprotocol/logLevel": "debug"}
    response = call(client, "tools/call", {"name": "test_tool_with_logging"}, meta=meta)
    if logs:
        messages = sse_messages(response)
        assert [m.get("method") for m in messages[:3]] == ["notifications/message"] * 3
    else:
        assert response["Content-Type"] == "application/json"
        assert response.json()["result"]["content"][0]["text"].startswith("Logging test completed")


@pytest.mark.parametrize("origin", ["http://[::1", "http://example.com:99999", "http://[bad]"])
def test_an_origin_that_is_not_a_url_is_forbidden(client: Client, origin: str) -> None:
    body, headers = modern_request("tools/list")
    response = post(client, body, {**headers, "Origin": origin})
    assert response.status_code == 403


def test_a_cursor_nested_past_the_parser_is_an_invalid_cursor(client: Client) -> None:
    import base64

    cursor = base64.urlsafe_b64encode(b"[" * 5000 + b"]" * 5000).decode()
    response = call(client, "tools/list", {"cursor": cursor})
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602


@pytest.mark.parametrize("token", [{"a": 1}, 1.5, True, [1], None])
def test_a_progress_token_is_a_string_or_an_integer(client: Client, token: Any) -> None:
    meta = {"progressToken": token}
    response = call(client, "tools/call", {"name": "test_simple_text"}, meta=meta)
    if token is None:
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
    else:
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32602
        assert "progressToken" in response.json()["error"]["message"]


@pytest.mark.urls(__name__)
def test_content_read_with_the_callers_input_is_never_cached(client: Client) -> None:
    body, headers = modern_request("resources/read", {"uri": "plain://a"})
    shared = post(client, body, headers, path="/cached/mcp").json()["result"]
    assert (shared["ttlMs"], shared["cacheScope"]) == (60_000, "public")
    asks = {"elicitation": {}}
    body, headers = modern_request("resources/read", {"uri": "form://name"}, capabilities=asks)
    first = post(client, body, headers, path="/cached/mcp").json()["result"]
    assert first["resultType"] == "input_required"
    answer = {"action": "accept", "content": {"name": "Ada"}}
    retries = [{"inputResponses": {"name": answer}}]
    if "requestState" in first:
        retries.append({"inputResponses": {"name": answer}, "requestState": first["requestState"]})
    for extra in retries:
        body, headers = modern_request(
            "resources/read", {"uri": "form://name", **extra}, capabilities=asks
        )
        result = post(client, body, headers, path="/cached/mcp").json()["result"]
        assert result["contents"][0]["text"] == "Hello, Ada"
        assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


@pytest.mark.parametrize(
    ("method", "params"),
    [("tools/call", {}), ("tools/call", {"name": 5}), ("resources/read", {"uri": None})],
)
def test_a_named_method_without_its_name_is_invalid_params(
    client: Client, method: str, params: dict[str, Any]
) -> None:
    body, headers = modern_request(method, params)
    headers.pop("Mcp-Name")
    response = post(client, body, headers)
    # Malformed, not a header out of step (-32020 would have the client list again).
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


@pytest.mark.parametrize("length", ["abc", "-5", "\u00b2"])
def test_a_content_length_that_is_no_number_is_a_json_rpc_400(client: Client, length: str) -> None:
    body, headers = modern_request("tools/list")
    response = post(client, body, headers, CONTENT_LENGTH=length)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Bad Request: invalid Content-Length header"


@pytest.mark.parametrize("request_id", [{"x": 1}, 1.5, True, [1]])
def test_arguments_too_large_answer_no_id_that_is_not_one(client: Client, request_id: Any) -> None:
    body, headers = modern_request(
        "tools/call", {"name": "add", "arguments": {"numbers": [1] * 200}}, request_id=request_id
    )
    with override_settings(MCP_APP={"MAX_ARGUMENTS_BYTES": 100}):
        response = post(client, body, headers)
    assert response.status_code == 413
    assert "id" not in response.json()  # no id to answer to, as for any unreadable request


@pytest.mark.parametrize("order", ["left first", "followed first"])
def test_a_departure_cancels_the_request_whichever_side_comes_first(order: str) -> None:
    from mcp_app.protocol.context import RequestContext
    from mcp_app.transport.http import Departure

    departure = Departure()
    ctx = RequestContext(method="tools/call", params={})
    if order == "left first":
        departure.left()
        assert not ctx.is_cancelled
        departure.follow(ctx)
    else:
        departure.follow(ctx)
        assert not ctx.is_cancelled
        departure.left()
    assert ctx.is_cancelled


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"wsgi.multithread": False, "wsgi.multiprocess": False}, True),
        ({"wsgi.multithread": True, "wsgi.multiprocess": False}, False),  # gthread, runserver
        ({"wsgi.multithread": False, "wsgi.multiprocess": True}, False),  # several workers
        ({}, False),  # not WSGI (ASGI, the playground)
    ],
)
def test_one_at_a_time_is_a_wsgi_server_of_one_process_and_one_thread(
    meta: dict[str, Any], expected: bool
) -> None:
    assert one_at_a_time(SimpleNamespace(META=meta)) is expected
    assert one_at_a_time(None) is False


class FakeMonkey:
    def __init__(self, patched: bool) -> None:
        self.patched = patched

    def is_module_patched(self, name: str) -> bool:
        return self.patched and name == "threading"

    def is_monkey_patched(self, name: str) -> bool:
        return self.patched and name == "thread"


@pytest.mark.parametrize("module", ["gevent.monkey", "eventlet.patcher"])
def test_green_threads_serve_more_than_one_request_at_a_time(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    alone = SimpleNamespace(META={"wsgi.multithread": False, "wsgi.multiprocess": False})
    monkeypatch.setitem(sys.modules, module, FakeMonkey(patched=False))
    assert one_at_a_time(alone) is True  # imported, not patched
    monkeypatch.setitem(sys.modules, module, FakeMonkey(patched=True))
    assert one_at_a_time(alone) is False
