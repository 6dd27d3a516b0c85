"""``mcp_app.testing``: the MCP test clients, against the demo site and servers of their own."""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import request_started
from django.test import override_settings
from django.urls import include, path

import mcp_app
from mcp_app import RequestContext, Server, elicit, input_required, roots, sample, tool_error
from mcp_app.conf import conf
from mcp_app.sessions import store as session_store
from mcp_app.testing import AsyncMCPClient, MCPClient, MCPClientError

pytestmark = pytest.mark.django_db(transaction=True)

MODERN = "2026-07-28"
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

# -- servers of these tests, and a URLconf that routes them ---------------------------------

paged = Server("paged-testing", page_size=2)
for number in range(5):
    paged.add_tool(lambda arguments, context, n=number: f"tool {n}", name=f"tool-{number}")

own = Server("testing-own", instructions="Tools for the test client's tests.")
nested = Server("testing-nested")
unrouted = Server("testing-unrouted")


@own.tool()
def whoami(arguments: dict[str, Any], context: RequestContext) -> str:
    """The caller's username."""
    user = context.user
    return str(user.username) if user is not None and user.is_authenticated else "anonymous"


@own.tool(name="request-kind")
def request_kind(arguments: dict[str, Any], context: RequestContext) -> str:
    """The class of the Django request the view was given."""
    return type(context.request).__name__


@own.tool()
def header(arguments: dict[str, Any], context: RequestContext) -> str:
    """The X-Testing header of the request."""
    return str(context.request.headers.get("X-Testing", ""))


@own.tool()
def declared(arguments: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    """The client capabilities the request declared."""
    return {"capabilities": dict(context.client_capabilities)}


@own.tool(
    input_schema={
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "options": {
                "type": "object",
                "properties": {"limit": {"type": "integer", "x-mcp-header": "Limit"}},
            },
        },
    }
)
def region(arguments: dict[str, Any], context: RequestContext) -> str:
    """The raw Mcp-Param headers the request carried."""
    headers = context.request.headers
    sent = [headers.get(f"Mcp-Param-{name}") for name in ("Region", "Priority", "Limit")]
    return "|".join(str(value) for value in sent)


@own.tool()
def again(arguments: dict[str, Any], context: RequestContext) -> Any:
    """Never satisfied: asks for a name on every round."""
    return input_required({"name": elicit("Again?", NAME_FORM)})


@own.tool(name="list-roots")
def list_roots(arguments: dict[str, Any], context: RequestContext) -> Any:
    """The client's root URIs; asks once."""
    answer = context.input_response("roots")
    if answer is None:
        if context.state == "asked":
            return "no roots"
        return input_required({"roots": roots()}, state="asked")
    return ", ".join(root["uri"] for root in answer["roots"])


@own.tool()
def summarize(arguments: dict[str, Any], context: RequestContext) -> Any:
    """What the client's model says."""
    answer = context.input_response("summary")
    if answer is None:
        return input_required({"summary": sample("Summarize MCP", 50)})
    if not isinstance(answer, dict) or "content" not in answer:
        return tool_error("no summary")
    return f"{answer['model']}: {answer['content']['text']}"


@own.tool()
def progress(arguments: dict[str, Any], context: RequestContext) -> str:
    """Reports progress and logs a line."""
    for step in (1, 2, 3):
        context.report_progress(step, 3)
    context.log("info", "working")
    context.log("debug", "details")
    return "done"


@own.prompt()
def broken(arguments: dict[str, Any], context: RequestContext) -> str:
    raise RuntimeError("a bug in a prompt")


@nested.tool()
def ping(arguments: dict[str, Any], context: RequestContext) -> str:
    return "pong"


#: Whether each call of ``stalls`` saw its cancellation.
stalled: list[bool] = []
stall_began = threading.Event()
stall_ended = threading.Event()


@own.tool()
def stalls(arguments: dict[str, Any], context: RequestContext) -> str:
    """Reports progress (when asked to) once, then waits (at most 30 s) to be cancelled."""
    stall_began.set()
    context.report_progress(1, 2)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not context.is_cancelled:
        time.sleep(0.02)
    stalled.append(context.is_cancelled)
    stall_ended.set()
    return "never cancelled"


watched = Server("testing-watched")


@watched.tool()
def noop(arguments: dict[str, Any], context: RequestContext) -> str:
    return "noop"


@watched.resource("memo://note", name="note", mime_type="text/plain")
def note(context: RequestContext) -> str:
    return "a note"


urlpatterns = [
    path("mcp", mcp_app.site.urls),
    path("paged/mcp", paged.urls),
    path("own/mcp", own.urls),
    path("watched/mcp", watched.urls),
    path("api/", include(([path("nested/mcp", nested.urls)], "api"), namespace="api")),
]
routed = override_settings(ROOT_URLCONF=__name__)

ANSWERS = {
    "elicitation/create": lambda p: {
        "action": "accept",
        "content": {
            "Who should I greet?": {"name": "Ada"},
            "Name?": {"name": "Ada"},
            "Color?": {"color": "blue"},
        }[p["message"]],
    }
}


def announce_tools(server: Server) -> None:
    server.announce({"kinds": ["tools"]}, "lists")


# -- the demo site ---------------------------------------------------------------------------


def test_input_rounds_with_handlers() -> None:
    c = MCPClient(handlers=ANSWERS)
    assert MCPClient.text(c.call_tool("greet")) == "Hello, Ada!"
    assert MCPClient.text(c.call_tool("two-steps")) == "Ada likes blue"
    assert c.capabilities == {"elicitation": {"form": {}, "url": {}}}


def test_without_handlers_the_capability_is_missing() -> None:
    with pytest.raises(MCPClientError) as caught:
        MCPClient().call_tool("greet")
    error = caught.value
    assert (error.kind, error.code, error.status) == ("protocol", -32021, 400)
    assert error.data == {"requiredCapabilities": {"elicitation": {}}}
    assert error.method == "tools/call"


def test_tools() -> None:
    c = MCPClient()
    names = [tool["name"] for tool in c.list_tools()["tools"]]
    assert {"add", "logo", "greet", "two-steps"} <= set(names)
    result = c.call_tool("add", {"numbers": [1, 2, 3.5]})
    assert result["structuredContent"] == {"sum": 6.5}
    assert result["resultType"] == "complete"
    assert MCPClient.text(c.call_tool("logo")) == "The django-mcp-app logo"
    assert c.call_tool("add", {"numbers": ["x"]})["isError"] is True


def test_resources() -> None:
    c = MCPClient()
    uris = [r["uri"] for r in c.list_resources()["resources"]]
    assert "file:///readme.txt" in uris
    assert MCPClient.text(c.read_resource("file:///readme.txt")).startswith("This is the django")
    templates = c.list_resource_templates()["resourceTemplates"]
    assert "people://{id}" in [t["uriTemplate"] for t in templates]
    assert '"Ada Lovelace"' in MCPClient.text(c.read_resource("people://ada"))
    with pytest.raises(MCPClientError) as caught:
        c.read_resource("people://nobody")
    assert (caught.value.kind, caught.value.code) == ("protocol", -32602)
    assert caught.value.data == {"uri": "people://nobody"}


def test_prompts() -> None:
    c = MCPClient()
    assert "introduce" in [p["name"] for p in c.list_prompts()["prompts"]]
    text = MCPClient.text(c.get_prompt("introduce", {"id": "ada"}))
    assert text.startswith("Introduce Ada Lovelace (born 1815)")
    with pytest.raises(MCPClientError) as caught:
        c.get_prompt("introduce", {"id": "nobody"})
    assert caught.value.code == -32602


def test_complete() -> None:
    c = MCPClient()
    assert c.complete("introduce", "id", "a")["completion"]["values"] == ["ada", "alan"]
    assert c.complete("people://{id}", "id", "g")["completion"]["values"] == ["grace"]
    ref = {"type": "ref/prompt", "name": "introduce"}
    assert c.complete(ref, "id", "", context={})["completion"]["values"] == ["ada", "alan", "grace"]


def test_info() -> None:
    info = MCPClient().info()
    assert set(info) == {
        "protocolVersion",
        "supportedVersions",
        "serverInfo",
        "capabilities",
        "instructions",
    }
    assert info["protocolVersion"] == MODERN and MODERN in info["supportedVersions"]
    assert info["serverInfo"]["name"] == "django-mcp-app"
    assert "tools" in info["capabilities"]


def test_text() -> None:
    tool = {
        "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
    }
    prompt = {
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "c"}},
            {"role": "user", "content": [{"type": "text", "text": "d"}, {"type": "audio"}]},
        ]
    }
    resource = {"contents": [{"uri": "x:", "text": "e"}, {"uri": "y:", "blob": "AA=="}]}
    assert MCPClient.text(tool) == "a\nb"
    assert MCPClient.text(prompt) == "c\nd"
    assert AsyncMCPClient.text(resource) == "e"
    assert MCPClient.text({}) == ""


def test_context_manager_and_request() -> None:
    with MCPClient() as c:
        page = c.request("tools/list")
        assert page["resultType"] == "complete" and "ttlMs" in page
    assert repr(c) == f"<MCPClient 'default' {MODERN}>"


# -- versions --------------------------------------------------------------------------------


def test_the_preferred_version_picks_the_era() -> None:
    assert MCPClient(versions=[MODERN, "2025-11-25"]).version == MODERN
    c = MCPClient(versions=["2025-11-25", MODERN])
    assert (c.version, c.session_id) == ("2025-11-25", None)  # no session before first use
    with pytest.raises(ValueError, match="at least one"):
        MCPClient(versions=[])


def test_unsupported_version_falls_back_to_another_of_the_list() -> None:
    c = MCPClient(versions=["2099-01-01", MODERN])
    assert c.version == "2099-01-01"
    assert c.info()["protocolVersion"] == MODERN
    with pytest.raises(MCPClientError) as caught:
        MCPClient(versions=["2099-01-01"]).list_tools()
    assert (caught.value.code, caught.value.status) == (-32022, 400)
    assert caught.value.data["requested"] == "2099-01-01"


# -- servers and routing ---------------------------------------------------------------------


@routed
def test_pagination_is_followed() -> None:
    c = MCPClient(paged)
    first = c.request("tools/list")
    assert len(first["tools"]) == 2 and "nextCursor" in first
    assert [t["name"] for t in c.list_tools()["tools"]] == [f"tool-{n}" for n in range(5)]
    assert MCPClient.text(c.call_tool("tool-4")) == "tool 4"


@routed
def test_server_by_name() -> None:
    c = MCPClient("testing-own")
    assert c.server is own and c.path == "/own/mcp"
    assert c.info()["instructions"] == "Tools for the test client's tests."
    with pytest.raises(ValueError, match="No MCP server named 'nope'"):
        MCPClient("nope")


@routed
def test_server_found_by_scanning_the_urlconf() -> None:
    c = MCPClient(nested)
    assert c.path == "/api/nested/mcp"
    assert MCPClient.text(c.call_tool("ping")) == "pong"


@routed
def test_unrouted_server() -> None:
    c = MCPClient(unrouted)
    with pytest.raises(ImproperlyConfigured, match="'testing-unrouted'> is not routed"):
        c.list_tools()


@routed
def test_user_is_logged_in() -> None:
    user = get_user_model().objects.create_user("ada", password="x")
    assert MCPClient.text(MCPClient(own, user=user).call_tool("whoami")) == "ada"
    assert MCPClient.text(MCPClient(own).call_tool("whoami")) == "anonymous"


@routed
def test_extra_headers() -> None:
    assert MCPClient.text(MCPClient(own, headers={"X-Testing": "yes"}).call_tool("header")) == "yes"
    # Extra headers replace the client's own, whatever their case.
    c = MCPClient(own, headers={"mcp-method": "tools/list"})
    with pytest.raises(MCPClientError) as caught:
        c.call_tool("header")
    assert (caught.value.code, caught.value.status) == (-32020, 400)


@routed
def test_param_headers_mirror_arguments() -> None:
    c = MCPClient(own)
    assert MCPClient.text(c.call_tool("region", {"region": "eu-west", "priority": 3})) == (
        "eu-west|3|None"
    )
    encoded = "=?base64?" + base64.b64encode("Zürich".encode()).decode() + "?="
    assert MCPClient.text(c.call_tool("region", {"region": "Zürich"})) == f"{encoded}|None|None"
    spaced = "=?base64?" + base64.b64encode(b" x ").decode() + "?="
    assert MCPClient.text(c.call_tool("region", {"region": " x "})) == f"{spaced}|None|None"
    assert MCPClient.text(c.call_tool("region", {})) == "None|None|None"
    # One nested in an object argument, as the server checks it.
    assert MCPClient.text(c.call_tool("region", {"options": {"limit": 9}})) == "None|None|9"
    assert MCPClient.text(c.call_tool("region", {"options": {}})) == "None|None|None"


# -- input handlers --------------------------------------------------------------------------


@routed
def test_capabilities_follow_handlers_and_merge() -> None:
    c = MCPClient(
        own,
        handlers={"roots/list": lambda p: {"roots": []}, "elicitation/create": lambda p: {}},
        capabilities={"elicitation": {"form": {"x": 1}}, "experimental": {"demo": {}}},
    )
    assert c.call_tool("declared")["structuredContent"]["capabilities"] == {
        "elicitation": {"form": {"x": 1}, "url": {}},
        "roots": {},
        "experimental": {"demo": {}},
    }
    assert MCPClient(own).call_tool("declared")["structuredContent"]["capabilities"] == {}
    with pytest.raises(ValueError, match="No such input request method: ping"):
        MCPClient(handlers={"ping": lambda p: {}})


def test_raising_elicitation_handler_answers_cancel() -> None:
    def broken(params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("no user here")

    result = MCPClient(handlers={"elicitation/create": broken}).call_tool("greet")
    assert result["isError"] is True
    assert MCPClient.text(result) == "No name given"


def test_declared_capability_without_handler_is_unsupported() -> None:
    c = MCPClient(capabilities={"elicitation": {}})
    with pytest.raises(MCPClientError) as caught:
        c.call_tool("greet")
    assert caught.value.kind == "unsupported"
    assert "elicitation/create" in caught.value.message


@routed
def test_max_rounds_counts_the_servers_requests_in_the_initialize_era() -> None:
    asked: list[str] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return {"action": "accept", "content": {"name": "Ada"}}

    c = MCPClient(
        own, versions=["2025-11-25"], handlers={"elicitation/create": answer}, max_rounds=3
    )
    with pytest.raises(MCPClientError) as caught:
        c.call_tool("again")
    assert caught.value.kind == "max_rounds"
    assert caught.value.data["method"] == "elicitation/create"
    assert asked == ["Again?"] * 3


def test_the_event_parser_takes_any_line_ending_split_anywhere() -> None:
    from mcp_app.testing import _EventParser

    parser = _EventParser()
    for chunk in (b"id: 7\r", b'\ndata: {"a":1}\r', b"\n\r", b"\n", b'data: {"b":2}\r\r'):
        parser.feed(chunk)
    assert (parser.pop(), parser.pop(), parser.last_id) == ({"a": 1}, {"b": 2}, "7")


def test_complete_takes_a_uri_template_of_any_scheme_as_a_resource() -> None:
    from mcp_app.testing import _ref

    assert _ref("urn:person:{id}") == {"type": "ref/resource", "uri": "urn:person:{id}"}
    assert _ref("introduce") == {"type": "ref/prompt", "name": "introduce"}
    assert _ref("git:commit") == {"type": "ref/prompt", "name": "git:commit"}  # a prompt's name


def test_a_result_with_an_error_status_is_not_accepted() -> None:
    from mcp_app.testing import _Stateless

    protocol = _Stateless.__new__(_Stateless)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
    assert protocol._result(body, 200, answer) == {"tools": []}
    with pytest.raises(MCPClientError) as caught:
        protocol._result(body, 500, answer)
    assert (caught.value.kind, caught.value.status) == ("transport", 500)


@routed
def test_max_rounds() -> None:
    asked: list[str] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return {"action": "accept", "content": {"name": "Ada"}}

    c = MCPClient(own, handlers={"elicitation/create": answer}, max_rounds=3)
    with pytest.raises(MCPClientError) as caught:
        c.call_tool("again")
    assert caught.value.kind == "max_rounds"
    assert caught.value.data["resultType"] == "input_required"
    assert asked == ["Again?"] * 3


@routed
def test_roots_and_sampling_handlers() -> None:
    seen: list[dict[str, Any]] = []

    def model(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m1"}

    c = MCPClient(
        own,
        handlers={
            "roots/list": lambda p: {"roots": [{"uri": "file:///work"}, {"uri": "file:///tmp"}]},
            "sampling/createMessage": model,
        },
    )
    assert MCPClient.text(c.call_tool("list-roots")) == "file:///work, file:///tmp"
    assert MCPClient.text(c.call_tool("summarize")) == "m1: short"
    assert seen[0]["maxTokens"] == 50
    assert seen[0]["messages"][0]["content"]["text"] == "Summarize MCP"


@routed
def test_raising_roots_handler_leaves_the_answer_out() -> None:
    def broken(params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("no roots here")

    c = MCPClient(own, handlers={"roots/list": broken})
    assert MCPClient.text(c.call_tool("list-roots")) == "no roots"


# -- streams ---------------------------------------------------------------------------------


@routed
def test_notifications_of_a_request_stream() -> None:
    c = MCPClient(own)
    meta = {"progressToken": "p1", "io.modelcontextprotocol/logLevel": "info"}
    assert MCPClient.text(c.call_tool("progress", meta=meta)) == "done"
    methods = [n["method"] for n in c.notifications]
    assert methods == ["notifications/progress"] * 3 + ["notifications/message"]
    assert [n["params"]["progress"] for n in c.notifications[:3]] == [1, 2, 3]
    assert c.notifications[3]["params"] == {"level": "info", "data": "working"}


@routed
def test_the_first_prompt_of_a_server_reaches_a_listener() -> None:
    c = MCPClient(nested)
    # No prompt yet, but one may be added and announced: the capability is offered.
    assert c.info()["capabilities"]["prompts"] == {"listChanged": True}
    assert c.list_prompts()["prompts"] == []

    def add_the_first_prompt() -> None:
        nested.add_prompt(lambda arguments, context: "hi", name="first-prompt")

    try:
        got = c.listen({"promptsListChanged": True}, during=add_the_first_prompt)
    finally:
        nested.remove_prompt("first-prompt")
    assert got["acknowledged"]["notifications"] == {"promptsListChanged": True}
    assert [n["method"] for n in got["notifications"]] == ["notifications/prompts/list_changed"]


@routed
def test_a_server_without_resources_yet_honours_resource_subscriptions() -> None:
    c = MCPClient(nested)
    assert c.info()["capabilities"]["resources"]["subscribe"] is True
    assert c.list_resources()["resources"] == []
    got = c.listen(
        {"resourceSubscriptions": ["later://a"]},
        during=lambda: nested.notify_resource_updated("later://a"),
    )
    assert got["acknowledged"]["notifications"] == {"resourceSubscriptions": ["later://a"]}
    assert [n["params"]["uri"] for n in got["notifications"]] == ["later://a"]


@routed
def test_listen_collects_notifications_after_the_acknowledgement() -> None:
    c = MCPClient(own)
    got = c.listen(
        {"toolsListChanged": True, "resourcesListChanged": True},
        during=lambda: announce_tools(own),
    )
    # The server has no resources yet; one added later would be announced, so it honours
    # resourcesListChanged too.
    assert got["acknowledged"]["notifications"] == {
        "toolsListChanged": True,
        "resourcesListChanged": True,
    }
    subscription = got["acknowledged"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
    [notification] = got["notifications"]
    assert notification["method"] == "notifications/tools/list_changed"
    assert notification["params"]["_meta"] == {
        "io.modelcontextprotocol/subscriptionId": subscription
    }

    def twice() -> None:
        announce_tools(own)
        announce_tools(own)

    again = c.listen(["toolsListChanged"], count=2, during=twice)
    assert len(again["notifications"]) == 2


@routed
def test_listen_times_out_with_what_arrived() -> None:
    c = MCPClient(own)
    with pytest.raises(MCPClientError) as caught:
        c.listen({"toolsListChanged": True}, timeout=0.3)
    assert caught.value.kind == "timeout"
    assert caught.value.data["acknowledged"]["notifications"] == {"toolsListChanged": True}
    assert caught.value.data["notifications"] == []


_names = (f"late-{n}" for n in itertools.count())


@routed
def test_listen_sees_add_tool() -> None:
    name = next(_names)
    try:
        got = MCPClient(own).listen(
            {"toolsListChanged": True},
            timeout=2,
            during=lambda: own.add_tool(lambda arguments, context: "late", name=name),
        )
    finally:
        own.remove_tool(name)
    assert [n["method"] for n in got["notifications"]] == ["notifications/tools/list_changed"]


# -- errors ----------------------------------------------------------------------------------


def test_error_kinds_and_repr() -> None:
    with pytest.raises(MCPClientError) as caught:
        MCPClient().call_tool("nope")
    error = caught.value
    assert (error.kind, error.code, error.status) == ("protocol", -32602, 200)
    assert repr(error).startswith("MCPClientError(kind='protocol', code=-32602, message=")
    assert str(error).startswith("protocol: ") and "(code -32602, HTTP 200, tools/call)" in str(
        error
    )

    # A refused Origin: an id-less JSON-RPC error.
    with pytest.raises(MCPClientError) as caught:
        MCPClient(headers={"Origin": "https://evil.example"}).list_tools()
    assert (caught.value.kind, caught.value.status) == ("protocol", 403)

    # Django refuses the Host before the view: the answer is not JSON-RPC.
    with pytest.raises(MCPClientError) as caught:
        MCPClient(headers={"Host": "evil.example"}).list_tools()
    assert (caught.value.kind, caught.value.status, caught.value.code) == ("transport", 400, None)


@routed
def test_internal_errors_are_re_raised_as_django_test_client_does() -> None:
    with pytest.raises(RuntimeError, match="a bug in a prompt"):
        MCPClient(own).get_prompt("broken")


# -- the async client ------------------------------------------------------------------------


@routed
def test_async_client() -> None:
    user = get_user_model().objects.create_user("grace", password="x")

    async def color(params: dict[str, Any]) -> dict[str, Any]:
        return ANSWERS["elicitation/create"](params)

    async def main() -> None:
        async with AsyncMCPClient(handlers={"elicitation/create": color}) as c:
            assert "greet" in [t["name"] for t in (await c.list_tools())["tools"]]
            assert MCPClient.text(await c.call_tool("greet")) == "Hello, Ada!"
            assert MCPClient.text(await c.call_tool("two-steps")) == "Ada likes blue"
            assert (await c.info())["protocolVersion"] == MODERN
            assert "file:///readme.txt" in [
                r["uri"] for r in (await c.list_resources())["resources"]
            ]
            assert (await c.list_resource_templates())["resourceTemplates"]
            assert "Ada" in c.text(await c.read_resource("people://ada"))
            assert (await c.list_prompts())["prompts"]
            assert "Alan Turing" in c.text(await c.get_prompt("introduce", {"id": "alan"}))
            assert (await c.complete("introduce", "id", "g"))["completion"]["values"] == ["grace"]

        with pytest.raises(MCPClientError) as caught:
            await AsyncMCPClient().call_tool("greet")
        assert (caught.value.kind, caught.value.code, caught.value.status) == (
            "protocol",
            -32021,
            400,
        )

        mine = AsyncMCPClient("testing-own", user=user, headers={"X-Testing": "async"})
        assert MCPClient.text(await mine.call_tool("whoami")) == "grace"
        assert MCPClient.text(await mine.call_tool("header")) == "async"
        meta = {"progressToken": 7}
        assert MCPClient.text(await mine.call_tool("progress", meta=meta)) == "done"
        assert [n["params"]["progress"] for n in mine.notifications] == [1, 2, 3]
        got = await mine.listen({"toolsListChanged": True}, during=lambda: announce_tools(own))
        assert got["notifications"][0]["method"] == "notifications/tools/list_changed"
        with pytest.raises(MCPClientError) as caught:
            await mine.listen({"toolsListChanged": True}, timeout=0.2)
        assert caught.value.kind == "timeout"
        await mine.close()

    async_to_sync(main)()


@routed
def test_async_client_rounds_with_sync_handlers() -> None:
    asked: list[str] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return {"action": "accept", "content": {"name": "Ada"}}

    async def main() -> None:
        c = AsyncMCPClient(own, handlers={"elicitation/create": answer}, max_rounds=2)
        with pytest.raises(MCPClientError) as caught:
            await c.call_tool("again")
        assert caught.value.kind == "max_rounds"

    async_to_sync(main)()
    assert asked == ["Again?", "Again?"]


# -- the initialize era ----------------------------------------------------------------------

LEGACY = ["2025-11-25", "2025-06-18", "2025-03-26"]


def test_the_issue_example_in_both_eras() -> None:
    answers = ANSWERS
    c = MCPClient(handlers=answers)
    assert MCPClient.text(c.call_tool("greet")) == "Hello, Ada!"
    assert MCPClient.text(c.call_tool("two-steps")) == "Ada likes blue"
    old = MCPClient(versions=["2025-11-25"], handlers=answers)
    assert MCPClient.text(old.call_tool("greet")) == "Hello, Ada!"
    assert MCPClient.text(old.call_tool("two-steps")) == "Ada likes blue"
    assert old.session_id is not None
    old.close()


def test_without_handlers_the_initialize_era_answers_an_error_result() -> None:
    with pytest.raises(MCPClientError) as caught:
        MCPClient().call_tool("greet")
    assert caught.value.code == -32021
    result = MCPClient(versions=["2025-11-25"]).call_tool("greet")
    assert result["isError"] is True
    assert "elicitation" in MCPClient.text(result)


@routed
@pytest.mark.parametrize("version", LEGACY)
def test_every_method_on_the_initialize_era(version: str) -> None:
    c = MCPClient(versions=[version], handlers=ANSWERS)
    assert repr(c) == f"<MCPClient 'default' {version}>"
    info = c.info()
    assert c.session_id and len(c.session_id) > 20
    assert set(info) == {"protocolVersion", "serverInfo", "capabilities", "instructions"}
    assert info["protocolVersion"] == c.version == version
    assert info["serverInfo"]["name"] == "django-mcp-app"
    assert {"tools", "resources", "prompts", "completions"} <= set(info["capabilities"])

    names = [tool["name"] for tool in c.list_tools()["tools"]]
    assert {"add", "logo", "greet", "two-steps", "test_sampling"} <= set(names)
    result = c.call_tool("add", {"numbers": [1, 2, 3.5]})
    if version >= "2025-06-18":
        assert result["structuredContent"] == {"sum": 6.5}
    else:  # no structured content yet: the text carries it
        assert "structuredContent" not in result
        assert json.loads(MCPClient.text(result)) == {"sum": 6.5}
    assert "resultType" not in result  # a 2026-07-28 field
    assert c.call_tool("add", {"numbers": ["x"]})["isError"] is True
    if version >= "2025-06-18":
        assert MCPClient.text(c.call_tool("greet")) == "Hello, Ada!"
        assert MCPClient.text(c.call_tool("two-steps")) == "Ada likes blue"
    else:  # a revision without elicitation, though the client has a handler for it
        assert "elicitation" not in c.capabilities
        said = f"The client's protocol revision ({version}) has no elicitation"
        assert MCPClient.text(c.call_tool("greet")) == said
    with pytest.raises(MCPClientError) as caught:
        c.call_tool("nope")
    assert (caught.value.kind, caught.value.code, caught.value.status) == ("protocol", -32602, 200)

    assert "file:///readme.txt" in [r["uri"] for r in c.list_resources()["resources"]]
    assert MCPClient.text(c.read_resource("file:///readme.txt")).startswith("This is the django")
    templates = c.list_resource_templates()["resourceTemplates"]
    assert "people://{id}" in [t["uriTemplate"] for t in templates]
    assert '"Ada Lovelace"' in MCPClient.text(c.read_resource("people://ada"))
    with pytest.raises(MCPClientError) as caught:
        c.read_resource("people://nobody")
    # The initialize era's own code for an unknown resource.
    assert (caught.value.code, caught.value.data) == (-32002, {"uri": "people://nobody"})

    assert "introduce" in [p["name"] for p in c.list_prompts()["prompts"]]
    text = MCPClient.text(c.get_prompt("introduce", {"id": "ada"}))
    assert text.startswith("Introduce Ada Lovelace (born 1815)")
    with pytest.raises(MCPClientError) as caught:
        c.get_prompt("introduce", {"id": "nobody"})
    assert caught.value.code == -32602
    assert c.complete("introduce", "id", "a")["completion"]["values"] == ["ada", "alan"]
    assert c.complete("people://{id}", "id", "g")["completion"]["values"] == ["grace"]
    assert c.request("ping") == {}
    assert c.notifications == []

    session = c.session_id
    c.close()
    assert session_store().get(str(session)) is None
    with pytest.raises(MCPClientError) as caught:
        c.list_tools()
    error = caught.value
    assert (error.kind, error.status, error.code, error.message) == (
        "protocol",
        404,
        -32600,
        "Session not found",
    )
    c.close()  # once ended, closing again does nothing


@routed
@pytest.mark.parametrize("version", LEGACY)
def test_pages_login_and_headers_on_the_initialize_era(version: str) -> None:
    assert [t["name"] for t in MCPClient(paged, versions=[version]).list_tools()["tools"]] == [
        f"tool-{n}" for n in range(5)
    ]
    user = get_user_model().objects.create_user("ada", password="x")
    c = MCPClient(own, versions=[version], user=user, headers={"X-Testing": "yes"})
    assert MCPClient.text(c.call_tool("whoami")) == "ada"
    assert MCPClient.text(c.call_tool("header")) == "yes"
    assert c.info()["instructions"] == "Tools for the test client's tests."


@routed
@pytest.mark.parametrize(
    ("version", "elicitation"),
    [("2025-11-25", {"form": {}, "url": {}}), ("2025-06-18", {}), ("2025-03-26", None)],
)
def test_initialize_declares_the_handlers_capabilities(
    version: str, elicitation: dict[str, Any] | None
) -> None:
    c = MCPClient(
        own,
        versions=[version],
        handlers={"elicitation/create": lambda p: {}, "sampling/createMessage": lambda p: {}},
        capabilities={"experimental": {"demo": {}}},
    )
    expected = {"sampling": {}, "experimental": {"demo": {}}}
    if elicitation is not None:  # 2025-03-26 has no elicitation
        expected["elicitation"] = elicitation
    assert c.capabilities == expected
    declared = json.loads(MCPClient.text(c.call_tool("declared")))["capabilities"]
    assert declared == c.capabilities


def test_the_server_answer_decides_the_version() -> None:
    c = MCPClient(versions=["2024-11-05", "2025-11-25"])
    assert c.info()["protocolVersion"] == c.version == "2025-11-25"

    refused = MCPClient(versions=["2024-11-05", "2025-06-18"])
    with pytest.raises(MCPClientError) as caught:
        refused.list_tools()
    assert (caught.value.kind, caught.value.method) == ("unsupported", "initialize")
    assert caught.value.data["protocolVersion"] == "2025-11-25"
    # The client left the session it could not use.
    assert session_store().get(str(refused.session_id)) is None


def model_answer(params: dict[str, Any]) -> dict[str, Any]:
    prompt = params["messages"][0]["content"]["text"]
    return {
        "role": "assistant",
        "content": {"type": "text", "text": f"echo {prompt}"},
        "model": "m1",
        "stopReason": "endTurn",
    }


@routed
@pytest.mark.parametrize("version", LEGACY)
def test_sampling_and_roots_handlers_on_the_initialize_era(version: str) -> None:
    c = MCPClient(versions=[version], handlers={"sampling/createMessage": model_answer})
    result = c.call_tool("test_sampling", {"prompt": "What is 2+2?"})
    assert MCPClient.text(result) == "LLM response: echo What is 2+2?"

    seen: list[dict[str, Any]] = []

    def listed(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"roots": [{"uri": "file:///work"}, {"uri": "file:///tmp"}]}

    mine = MCPClient(own, versions=[version], handlers={"roots/list": listed})
    assert MCPClient.text(mine.call_tool("list-roots")) == "file:///work, file:///tmp"
    assert seen == [{}]


@routed
def test_failed_and_missing_handlers_on_the_initialize_era() -> None:
    def broken(params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("nothing here")

    # A raising elicitation handler cancels, as on the stateless wire.
    greet = MCPClient(versions=["2025-11-25"], handlers={"elicitation/create": broken})
    result = greet.call_tool("greet")
    assert (result["isError"], MCPClient.text(result)) == (True, "No name given")
    # Any other raising handler answers -32603, which fails the call.
    failed = MCPClient(own, versions=["2025-11-25"], handlers={"roots/list": broken}).call_tool(
        "list-roots"
    )
    assert failed["isError"] is True
    assert MCPClient.text(failed) == (
        "The client refused the request: The roots/list handler failed: nothing here"
    )
    # A declared capability without a handler: the request is answered -32601.
    missing = MCPClient(own, versions=["2025-11-25"], capabilities={"roots": {}})
    text = MCPClient.text(missing.call_tool("list-roots"))
    assert text == (
        "The client refused the request: Method not found: this client has no handler for "
        "roots/list"
    )


@routed
@pytest.mark.parametrize("version", LEGACY)
def test_progress_and_log_notifications_on_the_initialize_era(version: str) -> None:
    c = MCPClient(versions=[version])
    result = c.call_tool("test_tool_with_progress", meta={"progressToken": "p1"})
    assert MCPClient.text(result).startswith("Progress test completed")
    assert [(n["method"], n["params"]["progressToken"]) for n in c.notifications] == [
        ("notifications/progress", "p1")
    ] * 3
    assert [n["params"]["progress"] for n in c.notifications] == [0, 50, 100]

    c.notifications.clear()
    c.call_tool("test_tool_with_logging")
    assert [n["params"] for n in c.notifications] == [
        {"level": "info", "logger": "conformance", "data": text}
        for text in ("Tool execution started", "Tool processing data", "Tool execution completed")
    ]

    # The stateless wire's per-request level becomes the session's level.
    mine = MCPClient(own, versions=[version])
    meta = {"progressToken": 5, "io.modelcontextprotocol/logLevel": "info"}
    assert MCPClient.text(mine.call_tool("progress", meta=meta)) == "done"
    assert [n["method"] for n in mine.notifications] == ["notifications/progress"] * 3 + [
        "notifications/message"
    ]
    assert mine.notifications[3]["params"] == {"level": "info", "data": "working"}


@routed
@pytest.mark.parametrize("version", LEGACY)
def test_listen_on_the_get_stream(version: str) -> None:
    c = MCPClient(watched, versions=[version])
    name = next(_names)
    try:
        got = c.listen(
            {"toolsListChanged": True, "promptsListChanged": True},
            timeout=3,
            during=lambda: watched.add_tool(lambda arguments, context: "late", name=name),
        )
    finally:
        watched.remove_tool(name)
    # The server has no prompts yet; its capabilities promise their list_changed all the same.
    assert got["acknowledged"] == {
        "notifications": {"toolsListChanged": True, "promptsListChanged": True}
    }
    assert got["notifications"] == [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    ]

    def changes() -> None:
        announce_tools(watched)  # not asked for: left out
        watched.notify_resource_updated("memo://other")  # not subscribed: not sent
        watched.notify_resource_updated("memo://note")

    updated = c.listen({"resourceSubscriptions": ["memo://note"]}, timeout=3, during=changes)
    assert updated["acknowledged"] == {"notifications": {"resourceSubscriptions": ["memo://note"]}}
    assert updated["notifications"] == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "memo://note"},
        }
    ]

    with pytest.raises(ValueError, match="list of URIs"):
        c.listen(["resourceSubscriptions"])
    with pytest.raises(MCPClientError) as caught:
        c.listen(["toolsListChanged"], timeout=0.3)
    assert caught.value.kind == "timeout"
    assert caught.value.data == {
        "acknowledged": {"notifications": {"toolsListChanged": True}},
        "notifications": [],
    }


def recording_gets(c: MCPClient, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Record the headers of the GETs that ``c`` sends (to a sync view or an async one)."""
    sent: list[dict[str, Any]] = []
    for django_client in (c.django_client, c._async_client):
        get = django_client.get

        def spy(
            path: str, *args: Any, headers: dict[str, Any] | None = None, _get: Any = get, **kw: Any
        ) -> Any:
            sent.append(dict(headers or {}))
            return _get(path, *args, headers=headers, **kw)

        monkeypatch.setattr(django_client, "get", spy)
    return sent


def test_a_stream_the_server_lets_go_of_is_resumed(monkeypatch: pytest.MonkeyPatch) -> None:
    c = MCPClient(versions=["2025-11-25"])
    gets = recording_gets(c, monkeypatch)
    started = time.monotonic()
    assert MCPClient.text(c.call_tool("test_reconnection")) == "Reconnection test completed."
    # After the retry delay the server asked for (SSE_RETRY_MS, 1000 ms by default).
    assert time.monotonic() - started >= 1.0
    [resumed] = gets
    assert resumed["Last-Event-ID"].endswith("-0")  # the priming event's id
    assert resumed["Mcp-Session-Id"] == c.session_id


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_close_stream_before_2025_11_25_keeps_the_stream(version: str) -> None:
    c = MCPClient(versions=[version], timeout=5)
    assert MCPClient.text(c.call_tool("test_reconnection")) == "Reconnection test completed."


def test_a_stream_of_another_session_is_not_resumed(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = MCPClient(versions=["2025-11-25"])
    gets = recording_gets(owner, monkeypatch)
    owner.call_tool("test_reconnection")
    [resumed] = gets
    other = MCPClient(versions=["2025-11-25"])
    other.info()
    headers = {
        "Accept": "text/event-stream",
        "Mcp-Session-Id": str(other.session_id),
        "MCP-Protocol-Version": "2025-11-25",
        "Last-Event-ID": resumed["Last-Event-ID"],
    }
    response = other.django_client.get(other.path, headers=headers)
    response.close()  # a stream if the server took it: not read
    assert response.status_code == 400


@routed
def test_a_timed_out_call_is_cancelled() -> None:
    stalled.clear()
    stall_ended.clear()
    c = short_timeout_session(2.0)
    started = time.monotonic()
    with pytest.raises(MCPClientError) as caught:
        c.call_tool("stalls", meta={"progressToken": "s"})
    assert time.monotonic() - started < c.timeout + 3
    assert (caught.value.kind, caught.value.method) == ("timeout", "tools/call")
    assert [n["params"]["progress"] for n in c.notifications] == [1]
    assert stall_ended.wait(30)
    assert stalled == [True]
    assert c.request("ping") == {}  # the session goes on


def short_timeout_session(timeout: float) -> MCPClient:
    """An initialize-era client of ``own`` whose session opened before ``timeout`` applies."""
    c = MCPClient(own, versions=["2025-11-25"])
    assert c.request("ping") == {}
    c.timeout = timeout
    return c


def test_a_call_timed_out_before_its_stream_began_is_cancelled(settings: Any) -> None:
    # Only the async view bounds, in process, the wait for an answer to begin.
    settings.MCP_APP = {**settings.MCP_APP, "VIEW": "async"}

    class Urls:
        urlpatterns = [path("own/mcp", own.urls)]

    settings.ROOT_URLCONF = Urls
    stalled.clear()
    stall_ended.clear()
    c = short_timeout_session(1.0)
    with pytest.raises(MCPClientError, match=r"No HTTP answer within 1\.0 seconds"):
        c.call_tool("stalls")  # no progress token: nothing is sent before the result
    assert stall_ended.wait(30)
    assert stalled == [True]


@routed
def test_a_cancel_slower_than_the_timeout_still_arrives() -> None:
    stalled.clear()
    stall_began.clear()
    stall_ended.clear()

    def slow(**kwargs: Any) -> None:
        if stall_began.is_set():
            time.sleep(2.0)  # twice the client's timeout, before the cancel is read

    c = short_timeout_session(1.0)
    request_started.connect(slow)
    try:
        with pytest.raises(MCPClientError, match=r"No response within 1\.0 seconds"):
            c.call_tool("stalls", meta={"progressToken": "s"})
        assert stall_ended.wait(30)
    finally:
        request_started.disconnect(slow)
    assert stalled == [True]


@routed
def test_internal_errors_are_re_raised_on_the_initialize_era() -> None:
    with pytest.raises(RuntimeError, match="a bug in a prompt"):
        MCPClient(own, versions=["2025-11-25"]).get_prompt("broken")


@routed
def test_async_client_on_the_initialize_era() -> None:
    async def color(params: dict[str, Any]) -> dict[str, Any]:
        return ANSWERS["elicitation/create"](params)

    async def main() -> None:
        async with AsyncMCPClient(
            versions=["2025-11-25"], handlers={"elicitation/create": color}
        ) as c:
            assert (await c.info())["protocolVersion"] == "2025-11-25"
            assert "greet" in [t["name"] for t in (await c.list_tools())["tools"]]
            assert MCPClient.text(await c.call_tool("greet")) == "Hello, Ada!"
            assert MCPClient.text(await c.call_tool("two-steps")) == "Ada likes blue"
            assert (await c.list_resource_templates())["resourceTemplates"]
            assert "Ada" in c.text(await c.read_resource("people://ada"))
            assert (await c.list_prompts())["prompts"]
            assert "Alan Turing" in c.text(await c.get_prompt("introduce", {"id": "alan"}))
            assert (await c.complete("introduce", "id", "g"))["completion"]["values"] == ["grace"]
            text = c.text(await c.call_tool("test_reconnection"))
            assert text == "Reconnection test completed."
            await c.call_tool("test_tool_with_progress", meta={"progressToken": 1})
            assert [n["params"]["progress"] for n in c.notifications] == [0, 50, 100]
            session = c.session_id
        assert await sync_to_async(session_store().get)(str(session)) is None
        with pytest.raises(MCPClientError) as caught:
            await c.list_tools()
        assert (caught.value.kind, caught.value.status) == ("protocol", 404)

        sync_model = AsyncMCPClient(
            own,
            versions=["2025-06-18"],
            handlers={
                "sampling/createMessage": model_answer,
                "roots/list": lambda p: {"roots": [{"uri": "file:///a"}]},
            },
        )
        assert MCPClient.text(await sync_model.call_tool("summarize")) == "m1: echo Summarize MCP"
        assert MCPClient.text(await sync_model.call_tool("list-roots")) == "file:///a"
        name = next(_names)
        try:
            got = await sync_model.listen(
                {"toolsListChanged": True},
                during=lambda: own.add_tool(lambda arguments, context: "late", name=name),
            )
        finally:
            await sync_to_async(own.remove_tool)(name)
        assert got["notifications"][0]["method"] == "notifications/tools/list_changed"
        result = await AsyncMCPClient(versions=["2025-03-26"]).call_tool("greet")
        assert result["isError"] is True
        await sync_model.close()

    async_to_sync(main)()


def test_a_server_made_in_the_urlconf_is_found_by_name() -> None:
    from mcp_app.server import servers

    assert "testing-urlconf-only" not in servers
    with override_settings(ROOT_URLCONF="tests.testing_urlconf"):
        assert MCPClient.text(MCPClient("testing-urlconf-only").call_tool("here")) == "here"


@routed
def test_each_view_is_served_as_under_its_own_kind_of_server() -> None:
    # The async view gets an ASGI request (as under uvicorn), the sync view a WSGI one.
    expected = "ASGIRequest" if conf.VIEW == "async" else "WSGIRequest"
    assert MCPClient.text(MCPClient(own).call_tool("request-kind")) == expected
    # AsyncMCPClient speaks ASGI: either view serves it as the async view does.
    called = async_to_sync(AsyncMCPClient(own).call_tool)("request-kind")
    assert AsyncMCPClient.text(called) == "ASGIRequest"
