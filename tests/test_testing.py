"""``mcp_app.testing``: the MCP test clients, against the demo site and servers of their own."""

from __future__ import annotations

import base64
import itertools
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.urls import include, path

import mcp_app
from mcp_app import RequestContext, Server, elicit, input_required, roots, sample, tool_error
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
        },
    }
)
def region(arguments: dict[str, Any], context: RequestContext) -> str:
    """The raw Mcp-Param headers the request carried."""
    headers = context.request.headers
    return f"{headers.get('Mcp-Param-Region')}|{headers.get('Mcp-Param-Priority')}"


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


urlpatterns = [
    path("mcp", mcp_app.site.urls),
    path("paged/mcp", paged.urls),
    path("own/mcp", own.urls),
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
    assert set(info) == {"protocolVersion", "serverInfo", "capabilities", "instructions"}
    assert info["protocolVersion"] == MODERN
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


def test_initialize_era_not_served_yet() -> None:
    with pytest.raises(NotImplementedError, match="initialize-era sessions are not served yet"):
        MCPClient(versions=["2025-11-25"])
    assert MCPClient(versions=["2025-11-25", MODERN]).version == MODERN


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
        "eu-west|3"
    )
    encoded = "=?base64?" + base64.b64encode("Zürich".encode()).decode() + "?="
    assert MCPClient.text(c.call_tool("region", {"region": "Zürich"})) == f"{encoded}|None"
    spaced = "=?base64?" + base64.b64encode(b" x ").decode() + "?="
    assert MCPClient.text(c.call_tool("region", {"region": " x "})) == f"{spaced}|None"
    assert MCPClient.text(c.call_tool("region", {})) == "None|None"


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
def test_listen_collects_notifications_after_the_acknowledgement() -> None:
    c = MCPClient(own)
    got = c.listen(
        {"toolsListChanged": True, "resourcesListChanged": True},
        during=lambda: announce_tools(own),
    )
    # The server has no resources, so it does not honour resourcesListChanged.
    assert got["acknowledged"]["notifications"] == {"toolsListChanged": True}
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
