"""The admin playground through the Django test client: every page, calls, and input rounds."""

from __future__ import annotations

import datetime
import html
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.template import Context as TemplateContext
from django.template import Template
from django.test import Client
from django.urls import path
from django.utils.safestring import mark_safe

import mcp_app
from mcp_app import Server, audit, elicit_url, input_required, playground, text
from mcp_app.models import Resource, Tool
from mcp_app.server import servers

# The demo site's URLs with the playground installed. Installing is idempotent, so this stays
# right once mcp_app/admin.py installs it too.
playground.install(admin.site)
urlpatterns = [path("admin/", admin.site.urls), path("mcp", mcp_app.site.urls)]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

BASE = "/admin/mcp_app/playground/"
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


@pytest.fixture
def staff() -> Client:
    """A client logged in as a superuser (no password: hashing one costs half a second)."""
    user = get_user_model().objects.create_superuser("admin", "admin@example.com", None)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def scratch() -> Iterator[Server]:
    """A server of its own for definitions the demo does not have."""
    server = Server("playground-tests", rows=False)
    yield server
    servers.pop(server.name, None)


def page(response: Any) -> str:
    assert response.status_code == 200, response.content[:2000]
    return str(response.content.decode())


def answer_form(response: Any) -> dict[str, str]:
    """The hidden fields of the page's answer form, as a browser would post them back."""
    content = page(response)
    start = content.index('id="mcp-answer"')
    form = content[start : content.index("</form>", start)]
    return {html.unescape(name): html.unescape(value) for name, value in HIDDEN.findall(form)}


def field_row(content: str, name: str) -> str:
    """The form row holding the input called ``name``."""
    at = content.index(f'name="{name}"')
    start = content.rindex('<div class="form-row', 0, at)
    end = content.find('<div class="form-row', at)
    return content[start : end if end != -1 else len(content)]


def sent(response: Any) -> Any:
    """The JSON-RPC request the page shows it sent."""
    match = re.search(r'<h3>Request</h3>\s*<pre class="mcp-json">(.*?)</pre>', page(response), re.S)
    assert match is not None
    return json.loads(html.unescape(match[1]))


def run(client: Client, url: str, **fields: Any) -> Any:
    return client.post(url, {"step": "run", **fields})


def reply(client: Client, url: str, previous: Any, **answers: Any) -> Any:
    return client.post(url, {**answer_form(previous), **answers})


def tool_url(name: str, server: str = "default") -> str:
    return f"{BASE}{server}/tool/{name}/"


# -- access ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [BASE, f"{BASE}default/", tool_url("add"), f"{BASE}default/resource/?uri=file:///readme.txt"],
)
def test_anonymous_is_sent_to_the_login_page(url: str) -> None:
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=")


def test_a_user_who_is_not_staff_is_sent_to_the_login_page() -> None:
    user = get_user_model().objects.create_user("visitor", "visitor@example.com", None)
    client = Client()
    client.force_login(user)
    response = client.get(tool_url("add"))
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_what_a_staff_user_may_not_use_only_those_who_see_its_rows_are_shown() -> None:
    editors = Group.objects.create(name="editors")
    secret = Tool.objects.create(
        name="secret", handler="template", config={"template": "s"}, description="Editors only"
    )
    secret.groups.add(editors)
    Tool.objects.create(
        name="sleepy", handler="template", config={"template": "z"}, description="Dormant"
    ).__class__.objects.filter(name="sleepy").update(enabled=False)
    Tool.objects.create(name="open", handler="template", config={"template": "o"})
    clerk = get_user_model().objects.create_user("clerk", "clerk@example.com", None, is_staff=True)
    client = Client()
    client.force_login(clerk)
    content = page(client.get(f"{BASE}default/"))
    assert tool_url("add") in content and tool_url("open") in content  # a row it may use
    assert "Editors only" not in content and tool_url("secret") not in content
    [default] = [row for row in client.get(BASE).context["servers"] if row["name"] == "default"]
    assert default["counts"][0] == ("tool", len(mcp_app.site.catalog().tools) - 1)
    assert "Dormant" not in content  # rows, disabled or not, are for those who may see them
    missing = client.get(tool_url("secret"))
    assert missing.status_code == 404
    assert "Editors only" not in missing.content.decode()

    clerk.user_permissions.add(Permission.objects.get(codename="view_tool"))
    content = page(client.get(f"{BASE}default/"))
    assert "Editors only" in content and "Dormant" in content
    shown = page(client.get(tool_url("secret")))
    assert "Editors only" in shown


def test_posts_need_the_csrf_token() -> None:
    user = get_user_model().objects.create_superuser("admin", "admin@example.com", None)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(tool_url("add"), {"step": "run", "arg:numbers": "1"}).status_code == 403


def test_install_is_idempotent() -> None:
    assert playground.install(admin.site) is playground.install(admin.site)


# -- the pages render ------------------------------------------------------------------------


def test_the_index_lists_the_servers(staff: Client) -> None:
    content = page(staff.get(BASE))
    assert f'href="{BASE}default/"' in content
    assert "Resource templates" in content


def test_the_catalog_lists_every_definition_with_source_and_permission(staff: Client) -> None:
    Tool.objects.create(name="welcome", handler="template", config={"template": "Hi {{ name }}"})
    Tool.objects.create(
        name="sleepy", handler="template", config={"template": "zzz"}, enabled=False
    )
    content = page(staff.get(f"{BASE}default/"))
    assert "Catalog generation" in content
    for url in (
        tool_url("add"),
        tool_url("welcome"),
        f"{BASE}default/resource/?uri=file%3A%2F%2F%2Freadme.txt",
        f"{BASE}default/template/person/",
        f"{BASE}default/prompt/introduce/",
    ):
        assert f'href="{url}"' in content, url
    welcome = content[content.index(tool_url("welcome")) :]
    assert '<span class="mcp-badge mcp-source">row</span>' in welcome[:1500]
    assert "/admin/mcp_app/tool/" in welcome[:1500]  # the row's own admin page
    sleepy = content[content.index('<tr class="mcp-unlisted">') :][:1500]
    assert "sleepy" in sleepy
    assert 'alt="No"' in sleepy and "disabled" in sleepy
    assert tool_url("sleepy") not in content  # a disabled row cannot be tried
    assert content.count("Anyone the endpoint admits") > 10


def test_the_catalog_tells_restyled_and_shadowed_rows(staff: Client) -> None:
    Tool.objects.create(name="add", overrides_code=True, title="Sum")
    Tool.objects.create(name="logo", overrides_code=True, enabled=False)
    Resource.objects.create(uri="file:///readme.txt", name="readme", text="Shadowed")
    content = page(staff.get(f"{BASE}default/"))
    add = content[content.index(f'href="{tool_url("add")}"') :][:1500]
    assert "code, restyled by a row" in add and "Sum" in add
    assert tool_url("logo") not in content
    assert "hides the code tool of this name" in content
    assert "not listed: the code definition of this name wins" in content


def test_another_admin_site_can_serve_the_playground() -> None:
    site = admin.AdminSite(name="otheradmin")
    playground.install(site)
    names = {getattr(pattern, "name", None) for pattern in site.get_urls()}
    assert {"mcp_app_playground", "mcp_app_playground_try", "index"} <= names
    assert {p.name for p in playground.get_urls(site)} == {
        "mcp_app_playground",
        "mcp_app_playground_catalog",
        "mcp_app_playground_resource",
        "mcp_app_playground_try",
        "mcp_app_playground_try_named",
    }


@pytest.mark.parametrize(
    "url",
    [
        tool_url("add"),
        tool_url("greet"),
        tool_url("json_schema_2020_12_tool"),
        f"{BASE}default/resource/?uri=file:///readme.txt",
        f"{BASE}default/template/person/",
        f"{BASE}default/prompt/introduce/",
        f"{BASE}default/prompt/test_prompt_with_arguments/",
    ],
)
def test_every_try_page_renders(staff: Client, url: str) -> None:
    content = page(staff.get(url))
    assert 'class="mcp-form" id="mcp-run"' in content
    assert "csrfmiddlewaretoken" in content


def test_an_unknown_definition_is_a_404_that_says_so(staff: Client) -> None:
    response = staff.get(tool_url("nope"))
    assert response.status_code == 404
    assert "lists no tool nope" in response.content.decode()
    assert staff.get(f"{BASE}nowhere/").status_code == 404


@pytest.mark.parametrize("name", [".", ".."])
def test_a_name_a_path_cannot_carry_is_linked_and_served_by_query(
    staff: Client, scratch: Server, name: str
) -> None:
    # A browser resolves /tool/../ away; the catalog links to /tool/?name=.. instead.
    scratch.add_tool(lambda arguments, context: f"ran {name}", name=name)
    url = f"{BASE}{scratch.name}/tool/?name={name}"
    assert f'href="{url}"' in page(staff.get(f"{BASE}{scratch.name}/"))
    assert f"ran {name}" in page(run(staff, url))
    assert staff.get(f"{BASE}{scratch.name}/tool/?name=nope").status_code == 404


def test_the_app_index_and_the_row_pages_link_to_the_playground(staff: Client) -> None:
    assert f'href="{BASE}"' in page(staff.get("/admin/mcp_app/"))
    assert f'href="{BASE}"' in page(staff.get("/admin/mcp_app/tool/"))
    for name in ("welcome", ".."):
        row = Tool.objects.create(name=name, handler="template", config={"template": "Hi"})
        url = f"{BASE}default/tool/?name={name}"
        assert f'href="{url}">Try it' in page(staff.get(f"/admin/mcp_app/tool/{row.pk}/change/"))
        assert "Hi" in page(run(staff, url))


# -- the form built from the input schema ----------------------------------------------------


def test_the_add_form_marks_the_required_field(staff: Client) -> None:
    row = field_row(page(staff.get(tool_url("add"))), "arg:numbers")
    assert "<textarea" in row and " required" in row
    assert 'class="required"' in row
    assert "One number per line." in row


def test_add_with_numbers_gives_the_sum(staff: Client) -> None:
    content = page(run(staff, tool_url("add"), **{"arg:numbers": "1\n2\n3.5\n"}))
    assert "<h2>Result" in content
    assert "&quot;sum&quot;: 6.5" in content  # the structured content, as formatted JSON
    assert "isError" not in content.split('id="mcp-response"')[1].split("</section>")[0]


def test_a_site_whose_authentication_reads_tokens_only_says_so_rather_than_call_anonymously(
    staff: Client, settings: Any
) -> None:
    tokens = ["mcp_app.auth.BearerTokenAuthentication"]
    settings.MCP_APP = {**settings.MCP_APP, "AUTHENTICATION_CLASSES": tokens}
    content = page(run(staff, tool_url("add"), **{"arg:numbers": "1\n2"}))
    assert "do not read the admin&#x27;s login" in content
    assert "&quot;sum&quot;: 3" not in content
    session = "rest_framework.authentication.SessionAuthentication"
    settings.MCP_APP = {**settings.MCP_APP, "AUTHENTICATION_CLASSES": [*tokens, session]}
    assert "&quot;sum&quot;: 3" in page(run(staff, tool_url("add"), **{"arg:numbers": "1\n2"}))


def test_bad_input_shows_the_servers_message_on_the_field(staff: Client) -> None:
    content = page(run(staff, tool_url("add"), **{"arg:numbers": "x\n2"}))
    assert "Invalid arguments at /numbers/0: expected number, got string" in content
    row = field_row(content, "arg:numbers")
    assert "errors" in row.split(">", 1)[0]
    assert '<ul class="errorlist"' in row and "at /numbers/0: expected number, got string" in row
    assert "x\n2</textarea>" in row  # what was typed stays
    assert "<strong>isError</strong>" in content


def test_a_missing_required_argument_is_put_on_its_field(staff: Client) -> None:
    content = page(run(staff, tool_url("add")))
    row = field_row(content, "arg:numbers")
    assert "missing required property &#x27;numbers&#x27;" in row


def test_further_arguments_as_json_are_merged_and_bad_json_is_an_inline_error(
    staff: Client,
) -> None:
    content = page(run(staff, tool_url("add"), extra='{"numbers": [4, 5]}'))
    assert "&quot;sum&quot;: 9" in content
    content = page(run(staff, tool_url("add"), **{"arg:numbers": "1", "extra": "{nope"}))
    assert "Not valid JSON" in content
    assert 'id="mcp-response"' not in content  # nothing was sent


def test_a_tool_defined_as_a_row(staff: Client) -> None:
    Tool.objects.create(
        name="welcome",
        handler="template",
        config={"template": "Welcome, {{ name }}!"},
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string", "title": "Who", "default": "you"}},
        },
    )
    content = page(staff.get(tool_url("welcome")))
    assert '<span class="mcp-badge mcp-source">row</span>' in content
    assert 'value="you"' in field_row(content, "arg:name")
    assert "Welcome, Ada!" in page(run(staff, tool_url("welcome"), **{"arg:name": "Ada"}))


def test_an_x_mcp_header_argument_is_sent_in_its_header_too(staff: Client) -> None:
    content = page(run(staff, tool_url("test_x_mcp_header"), **{"arg:region": "eu-west"}))
    assert "Region: eu-west" in content


def test_a_nested_x_mcp_header_argument_is_sent_in_its_header_too(
    staff: Client, scratch: Server
) -> None:
    scratch.add_tool(
        lambda arguments, context: f"limit {arguments['options']['limit']}",
        name="limited",
        input_schema={
            "type": "object",
            "properties": {
                "options": {
                    "type": "object",
                    "properties": {"limit": {"type": "integer", "x-mcp-header": "Limit"}},
                }
            },
        },
    )
    url = tool_url("limited", scratch.name)
    content = page(run(staff, url, extra='{"options": {"limit": 7}}'))
    assert "limit 7" in content  # the server found the header it checks


# -- results a person can read ---------------------------------------------------------------


def test_logo_renders_an_img_with_a_data_uri(staff: Client) -> None:
    content = page(run(staff, tool_url("logo")))
    assert "The django-mcp-app logo" in content
    assert re.search(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]+" alt=', content)


def test_audio_is_playable_and_an_embedded_resource_is_shown(staff: Client) -> None:
    content = page(run(staff, tool_url("test_audio_content")))
    assert re.search(r'<audio controls src="data:audio/wav;base64,[A-Za-z0-9+/=]+">', content)
    content = page(run(staff, tool_url("test_embedded_resource")))
    assert "test://embedded-resource" in content
    assert "This is an embedded resource content." in content


def test_an_iserror_result_is_marked(staff: Client) -> None:
    content = page(run(staff, tool_url("test_error_handling")))
    assert "<h2>Result: error" in content
    assert "This tool intentionally returns an error for testing" in content


@pytest.mark.parametrize(
    "made",
    [
        str,
        # What a template renders, and format_html(): safe for HTML the handler wrote, not
        # for the page that shows it.
        mark_safe,
        lambda source: Template(source).render(TemplateContext({})),
    ],
)
def test_text_from_a_tool_is_escaped(staff: Client, scratch: Server, made: Any) -> None:
    def loud(arguments: dict[str, Any], context: Any) -> Any:
        context.log("info", made("<b>logged</b>"))
        block = {"type": "text", "text": made("<script>alert(1)</script>")}
        return {"content": [block, block]}  # one object met twice

    scratch.add_tool(loud, name="loud")
    content = page(run(staff, tool_url("loud", scratch.name), log_level="info"))
    assert "<script>alert(1)</script>" not in content
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in content
    assert "<b>logged</b>" not in content
    assert "&lt;b&gt;logged&lt;/b&gt;" in content


@pytest.mark.parametrize("log_level", [None, "info"])
def test_an_answer_json_cannot_carry_shows_the_status_a_client_gets(
    staff: Client, scratch: Server, log_level: str | None
) -> None:
    def ratio(arguments: dict[str, Any], context: Any) -> Any:
        return {"content": [{"type": "text", "text": "x"}], "_meta": {"r": float("nan")}}

    scratch.add_tool(ratio, name="ratio")
    fields = {"log_level": log_level} if log_level else {}
    content = page(run(staff, tool_url("ratio", scratch.name), **fields))
    # A client gets -32603 with 500 (also when it could take a stream: none was sent).
    assert "The request and the response (HTTP 500)" in content


def test_a_tool_that_runs_only_as_a_task_says_it_cannot_be_tried_here(
    staff: Client, scratch: Server
) -> None:
    scratch.add_tool(lambda arguments, context: "x", name="later", task="required")
    scratch.add_tool(lambda arguments, context: "x", name="either", task="optional")
    said = "This tool runs only as a task, which the playground does not follow"
    assert said in page(staff.get(tool_url("later", scratch.name)))
    assert said not in page(staff.get(tool_url("either", scratch.name)))


def test_a_code_definitions_safe_string_title_and_description_are_escaped(
    staff: Client, scratch: Server
) -> None:
    scratch.add_tool(
        lambda arguments, context: "x",
        name="fancy",
        title=mark_safe("<i>Fancy</i>"),
        description=mark_safe("<img src=x onerror=alert(1)> & more"),
    )
    for url in (f"{BASE}{scratch.name}/", tool_url("fancy", scratch.name)):
        content = page(staff.get(url))
        assert "<img src=x" not in content and "<i>Fancy</i>" not in content
        assert "&lt;img src=x onerror=alert(1)&gt; &amp; more" in content
        assert "&lt;i&gt;Fancy&lt;/i&gt;" in content


def test_text_of_a_prompt_is_escaped(staff: Client, scratch: Server) -> None:
    scratch.add_prompt(
        lambda arguments, context: mark_safe("<img src=x onerror=alert(1)>"), name="p"
    )
    content = page(run(staff, f"{BASE}{scratch.name}/prompt/p/"))
    assert "<img src=x" not in content
    assert "&lt;img src=x onerror=alert(1)&gt;" in content


def test_a_resource_read(staff: Client) -> None:
    url = f"{BASE}default/resource/?uri=file:///readme.txt"
    content = page(staff.post(url, {"step": "run", "uri": "file:///readme.txt"}))
    assert "This is the django-mcp-app demo site." in content
    content = page(staff.post(f"{BASE}default/resource/?uri=test://static-binary", {"step": "run"}))
    assert re.search(r'<img src="data:image/png;base64,', content)


def test_a_template_read(staff: Client) -> None:
    url = f"{BASE}default/template/person/"
    content = page(run(staff, url, **{"arg:id": "ada"}))
    assert "people://ada" in content
    assert "Ada Lovelace" in content
    assert "&quot;born&quot;: 1815" in content  # application/json, formatted


def test_a_template_variable_is_required(staff: Client) -> None:
    content = page(run(staff, f"{BASE}default/template/person/"))
    assert "This variable is required to form the URI." in content
    assert 'id="mcp-response"' not in content


def test_a_template_read_of_nothing_is_an_error(staff: Client) -> None:
    content = page(run(staff, f"{BASE}default/template/person/", **{"arg:id": "nobody"}))
    assert "JSON-RPC error -32602" in content


def test_a_prompt_get(staff: Client) -> None:
    content = page(run(staff, f"{BASE}default/prompt/introduce/", **{"arg:id": "grace"}))
    assert "Introduce Grace Hopper (born 1906), known for the first compiler." in content
    assert '<span class="mcp-badge mcp-role">user</span>' in content


def test_a_prompt_without_its_required_argument(staff: Client) -> None:
    content = page(run(staff, f"{BASE}default/prompt/introduce/"))
    assert "Missing required arguments for prompt introduce: id" in content
    assert "This argument is required." in field_row(content, "arg:id")


def test_log_messages_and_progress_are_shown_when_asked_for(staff: Client) -> None:
    content = page(run(staff, tool_url("test_tool_with_logging"), log_level="info"))
    assert "Streamed before the response" in content
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        assert message in content
    assert '<span class="mcp-badge">info conformance</span>' in content
    content = page(run(staff, tool_url("test_tool_with_progress"), log_level="debug"))
    assert "50 of 100" in content
    assert "Streamed before" not in page(run(staff, tool_url("test_tool_with_logging")))


# -- input requests answered in the page ------------------------------------------------------


def test_greet_asks_a_form_then_says_hello(staff: Client) -> None:
    first = run(staff, tool_url("greet"))
    content = page(first)
    assert "The server asks for input (round 1)" in content
    assert "Who should I greet?" in content
    row = field_row(content, "in:name:name")
    assert " required" in row and 'class="required"' in row
    hidden = answer_form(first)
    assert hidden["state"] and json.loads(hidden["carried"]) == {"arguments": {}}
    done = page(
        reply(staff, tool_url("greet"), first, **{"action:name": "accept", "in:name:name": "Ada"})
    )
    assert "Hello, Ada!" in done
    assert "after 1 round of input" in done


def test_declining_greet_gives_its_error(staff: Client) -> None:
    first = run(staff, tool_url("greet"))
    content = page(reply(staff, tool_url("greet"), first, **{"action:name": "decline"}))
    assert "<h2>Result: error" in content
    assert "No name given" in content


def test_cancelling_is_an_answer_too(staff: Client) -> None:
    first = run(staff, tool_url("test_elicitation"), **{"arg:message": "Who are you?"})
    content = page(
        reply(staff, tool_url("test_elicitation"), first, **{"action:user_info": "cancel"})
    )
    assert "User response: action=cancel" in content


def test_a_required_answer_left_empty_is_asked_again_in_place(staff: Client) -> None:
    first = run(staff, tool_url("greet"))
    content = page(reply(staff, tool_url("greet"), first, **{"action:name": "accept"}))
    assert "This field is required." in field_row(content, "in:name:name")
    assert "The server asks for input (round 1)" in content  # the same round, not sent


def test_two_steps_takes_two_rounds(staff: Client) -> None:
    url = tool_url("two-steps")
    first = run(staff, url)
    assert "Name?" in page(first)
    second = reply(staff, url, first, **{"action:name": "accept", "in:name:name": "Ada"})
    content = page(second)
    assert "The server asks for input (round 2)" in content
    assert "Color?" in content
    third = reply(staff, url, second, **{"action:color": "accept", "in:color:color": "green"})
    assert "Ada likes green" in page(third)
    assert "after 2 rounds of input" in page(third)


def test_elicitation_fields_have_types_enums_titles_and_defaults(staff: Client) -> None:
    url = tool_url("test_elicitation_sep1034_defaults")
    first = run(staff, url)
    content = page(first)
    assert 'name="in:defaults:name" id="in0-0" value="John Doe"' in content
    assert (
        'type="number" name="in:defaults:age" id="in0-1" value="30" class="vTextField" step="1"'
        in content
    )
    assert 'value="95.5"' in content and 'step="any"' in content
    assert '<option value="active" selected>active</option>' in content
    assert re.search(r'type="checkbox" name="in:defaults:verified" id="in0-4" checked', content)
    done = page(
        reply(
            staff,
            url,
            first,
            **{
                "action:defaults": "accept",
                "in:defaults:name": "Ada",
                "in:defaults:age": "36",
                "in:defaults:score": "99.5",
                "in:defaults:status": "pending",
            },
        )
    )
    expected = '{"age": 36, "name": "Ada", "score": 99.5, "status": "pending", "verified": false}'
    assert html.escape(expected) in done


def test_elicitation_enums_single_and_multi_select(staff: Client) -> None:
    url = tool_url("test_elicitation_sep1330_enums")
    first = run(staff, url)
    content = page(first)
    assert '<option value="value2">Second Option</option>' in content
    assert '<option value="opt1">Option One</option>' in content  # legacy enumNames
    assert 'name="in:enums:untitledMulti" value="option2"' in content
    assert "> Third Choice</label>" in content
    done = page(
        reply(
            staff,
            url,
            first,
            **{
                "action:enums": "accept",
                "in:enums:titledSingle": "value2",
                "in:enums:untitledMulti": ["option1", "option3"],
                "in:enums:titledMulti": ["value3"],
            },
        )
    )
    assert html.escape('"titledSingle": "value2"') in done
    assert html.escape('"untitledMulti": ["option1", "option3"]') in done
    assert html.escape('"titledMulti": ["value3"]') in done


def test_a_choice_not_offered_is_an_inline_error(staff: Client) -> None:
    url = tool_url("test_elicitation_sep1330_enums")
    first = run(staff, url)
    content = page(reply(staff, url, first, **{"in:enums:titledSingle": "value9"}))
    assert "Select a valid choice." in field_row(content, "in:enums:titledSingle")


def test_sampling_roots_and_a_form_in_one_round(staff: Client) -> None:
    url = tool_url("test_input_required_result_multiple_inputs")
    first = run(staff, url)
    content = page(first)
    assert "The model is asked for a message" in content
    assert "Generate a greeting" in content
    assert "The client is asked for its roots" in content
    assert (
        'type="radio" class="mcp-action" name="action:user_name" value="accept" checked' in content
    )
    done = page(
        reply(
            staff,
            url,
            first,
            **{
                "action:user_name": "accept",
                "in:user_name:name": "Ada",
                "answer:greeting": "Good morning",
                "answer:client_roots": "file:///srv/one\n\nfile:///srv/two\n",
            },
        )
    )
    assert "Hello, Ada! Model said: Good morning Client exposed 2 root(s)." in done


def test_a_sampling_answer_is_an_assistant_text_from_human(staff: Client) -> None:
    url = tool_url("test_input_required_result_sampling")
    first = run(staff, url)
    assert "What is the capital of France?" in page(first)
    assert "Max tokens" in page(first)
    done = reply(staff, url, first, **{"answer:capital_question": "Paris"})
    assert "Model said: Paris" in page(done)
    assert sent(done)["params"]["inputResponses"]["capital_question"] == {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "human",
        "stopReason": "endTurn",
    }


def test_roots_answer_lists_one_uri_per_line(staff: Client) -> None:
    url = tool_url("test_input_required_result_list_roots")
    first = run(staff, url)
    done = page(reply(staff, url, first, **{"answer:client_roots": "file:///a\nfile:///b"}))
    assert "Client exposed 2 root(s)." in done
    assert "file:///b" in done


def test_a_url_elicitation_shows_the_link_and_waits(staff: Client, scratch: Server) -> None:
    def sign_in(arguments: dict[str, Any], context: Any) -> Any:
        answer = context.input_response("login")
        if answer is None:
            return input_required({"login": elicit_url("Sign in first", "https://example.com/in")})
        return f"Signed in: {answer['action']}"

    scratch.add_tool(sign_in)
    url = tool_url("sign_in", scratch.name)
    first = run(staff, url)
    content = page(first)
    assert 'href="https://example.com/in" target="_blank" rel="noopener noreferrer"' in content
    assert "<strong>example.com</strong>" in content
    assert "Done, continue</button>" in content
    assert "Signed in: accept" in page(reply(staff, url, first, **{"action:login": "accept"}))


def test_a_url_that_is_not_a_web_link_is_not_a_link(staff: Client, scratch: Server) -> None:
    def tricky(arguments: dict[str, Any], context: Any) -> Any:
        return input_required({"go": elicit_url("Go", "javascript:alert(1)")})

    scratch.add_tool(tricky)
    content = page(run(staff, tool_url("tricky", scratch.name)))
    assert 'href="javascript:' not in content
    assert "<code>javascript:alert(1)</code>" in content


def test_requests_and_content_of_odd_shapes_are_shown_as_they_came(
    staff: Client, scratch: Server
) -> None:
    def odd(arguments: dict[str, Any], context: Any) -> Any:
        return input_required(
            {
                "go": elicit_url("Visit", "http://[::1/login"),
                "think": {
                    "method": "sampling/createMessage",
                    "params": {"messages": 5, "maxTokens": 1},
                },
            }
        )

    def link(arguments: dict[str, Any], context: Any) -> Any:
        return {"content": [{"type": "resource_link", "uri": "http://[::1/x", "name": "broken"}]}

    scratch.add_tool(odd)
    scratch.add_tool(link)
    content = page(run(staff, tool_url("odd", scratch.name)))
    assert 'href="http://[::1' not in content
    assert "<code>http://[::1/login</code>" in content
    assert "&quot;messages&quot;: 5" in content
    content = page(run(staff, tool_url("link", scratch.name)))
    assert "broken" in content and 'href="http://[::1' not in content
    # A form whose required names are not all names, as a tampered page may post back.
    schema = {"type": "object", "properties": {"a": {}}, "required": [{"x": 1}, "a"]}
    (only,) = playground.object_fields(schema, prefix="in:f:", id_prefix="in0")
    assert only.key == "a" and only.required


def test_a_prompt_that_asks_for_input(staff: Client) -> None:
    url = f"{BASE}default/prompt/test_input_required_result_prompt/"
    first = run(staff, url)
    done = reply(
        staff, url, first, **{"action:user_context": "accept", "in:user_context:context": "tea"}
    )
    assert "Use this context: tea" in page(done)


# -- the same code path as any client --------------------------------------------------------


def test_a_permission_the_user_lacks_is_enforced_and_shown(scratch: Server) -> None:
    scratch.add_tool(lambda arguments, context: "secret", name="vault", permission="demo.open")
    user = get_user_model().objects.create_user("clerk", "clerk@example.com", None, is_staff=True)
    # Who may see the tool rows sees what others may use (else it is left out).
    user.user_permissions.add(Permission.objects.get(codename="view_tool"))
    client = Client()
    client.force_login(user)
    content = page(client.get(tool_url("vault", scratch.name)))
    assert "You lack the permission this tool needs" in content
    content = page(run(client, tool_url("vault", scratch.name)))
    assert "Unknown tool: vault" in content
    catalog = page(client.get(f"{BASE}{scratch.name}/"))
    assert "Users with the permission demo.open" in catalog
    assert 'alt="You may not use it"' in catalog


def test_the_request_is_a_2026_07_28_call_declaring_every_input_capability(
    staff: Client,
) -> None:
    request = sent(run(staff, tool_url("add"), **{"arg:numbers": "1"}))
    assert request["method"] == "tools/call"
    assert request["params"]["arguments"] == {"numbers": [1]}
    meta = request["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {},
        "roots": {},
    }


def test_who_may_use_a_definition_is_said_in_words() -> None:
    from dataclasses import dataclass

    from django.contrib.auth.models import Group

    @dataclass(frozen=True)
    class Access:  # the shape of a row's rule: group ids and permission codenames
        groups: frozenset[int]
        permissions: frozenset[str]

        def __call__(self, user: Any) -> bool:
            return False

    @dataclass(frozen=True)
    class Both:  # a code permission narrowed by a row's rule
        code: Any
        row: Access

        def __call__(self, user: Any) -> bool:
            return False

    editors = Group.objects.create(name="Editors")
    describe = playground.describe_permission
    assert describe(None) == "Anyone the endpoint admits"
    assert describe("demo.open") == "Users with the permission demo.open"
    assert describe(["demo.use", "demo.open"]) == (
        "Users with each of the permissions demo.open, demo.use"
    )
    assert describe(Access(frozenset({editors.pk}), frozenset({"demo.open"}))) == (
        "Superusers, members of Editors or users with demo.open"
    )
    assert describe(Both("demo.use", Access(frozenset(), frozenset({"demo.open"})))) == (
        "Users with the permission demo.use, who are also: Superusers, users with demo.open"
    )
    assert describe(lambda user: True).startswith("Decided by tests.test_playground.")


def test_calls_are_audited_as_the_user(staff: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    records: list[audit.Record] = []
    monkeypatch.setattr(audit, "record", records.append)
    page(run(staff, tool_url("add"), **{"arg:numbers": "1\n2"}))
    assert [(r.method, r.name, r.outcome, r.user.get_username()) for r in records] == [
        ("tools/call", "add", "complete", "admin")
    ]
    assert records[0].arguments == {"numbers": [1, 2]}


def test_a_number_past_pythons_digit_limit_is_not_a_number() -> None:
    from mcp_app.playground import _number

    assert _number("5" * 5000, "integer") is None
    assert _number("12", "integer") == 12
    assert (_number("1.0", "integer"), _number("1e2", "integer")) == (1, 100)
    assert _number("1.5", "integer") is None
    assert _number("9007199254740993.0", "integer") is None  # a float would change it


def test_an_optional_field_written_as_any_of_a_type_and_null_gets_that_types_input(
    staff: Client, scratch: Server
) -> None:
    @scratch.tool(
        input_schema={
            "type": "object",
            "properties": {
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"},
                "count": {"oneOf": [{"type": "null"}, {"type": "integer", "minimum": 1}]},
            },
        }
    )
    def echo(arguments: dict[str, Any], context: Any) -> str:
        return json.dumps(arguments, sort_keys=True)

    url = tool_url("echo", scratch.name)
    form = page(staff.get(url))
    assert 'type="number"' in field_row(form, "arg:count")
    assert 'min="1"' in field_row(form, "arg:count")
    assert "Note" in field_row(form, "arg:note")
    done = run(staff, url, **{"arg:note": "hi", "arg:count": "2"})
    assert sent(done)["params"]["arguments"] == {"note": "hi", "count": 2}


# -- JSON no page can hold, or Python cannot read --------------------------------------------

DEEP_ARRAY = "[" * 3000 + "]" * 3000
DEEP_OBJECT = '{"a":' * 3000 + "1" + "}" * 3000


@pytest.fixture
def addressed(scratch: Server) -> str:
    """The URL of a tool with an object argument, typed as JSON."""

    @scratch.tool(
        input_schema={
            "type": "object",
            "properties": {"address": {"type": "object", "title": "Address"}},
        }
    )
    def mail(arguments: dict[str, Any], context: Any) -> str:
        return "sent"

    return tool_url("mail", scratch.name)


def test_a_lone_surrogate_is_shown_escaped(staff: Client, addressed: str) -> None:
    content = page(run(staff, tool_url("add"), extra='{"a": "\\ud800"}'))
    assert '"a": "\\ud800"' in html.unescape(content)  # the request shown, and the extra box
    assert "JSON-RPC error -32700" in content  # the server refuses it, as from any client
    content = page(run(staff, addressed, **{"arg:address": '{"street": "\\ud800"}'}))
    assert '"street": "\\ud800"' in html.unescape(content)


@pytest.mark.parametrize(
    ("typed", "error"),
    [
        (DEEP_ARRAY, "it nests deeper than can be read"),
        (DEEP_OBJECT, "it nests deeper than can be read"),
        ('{"n": ' + "1" * 5000 + "}", "a number has more than 4300 digits"),
    ],
)
@pytest.mark.parametrize("name", ["extra", "arg:address"])
def test_json_too_deep_or_long_to_read_is_an_inline_error(
    staff: Client, addressed: str, name: str, typed: str, error: str
) -> None:
    content = page(run(staff, addressed, **{name: typed}))
    assert f"Not valid JSON: {error}." in content
    assert 'id="mcp-response"' not in content  # nothing was sent


@pytest.mark.parametrize(
    "tampered",
    [
        {"carried": DEEP_ARRAY},
        {"carried": DEEP_OBJECT},
        {"requests": DEEP_ARRAY},
    ],
)
def test_hidden_fields_that_cannot_be_read_say_to_start_again(
    staff: Client, tampered: dict[str, str]
) -> None:
    first = run(staff, tool_url("greet"))
    content = page(reply(staff, tool_url("greet"), first, **tampered))
    assert "The answers came without the request they answer; start again." in content


def test_carried_arguments_with_a_lone_surrogate_are_shown_escaped(
    staff: Client, addressed: str
) -> None:
    # Only a tampered page carries one: the server refuses it in the first call.
    carried = '{"arguments": {"address": {"street": "\\ud800"}, "more": "\\udfff"}}'
    content = page(staff.post(addressed, {"step": "answer", "carried": carried, "requests": "{}"}))
    shown = html.unescape(content)
    assert '"street": "\\ud800"' in field_row(shown, "arg:address")
    assert '"more": "\\udfff"' in shown  # in the further arguments


@pytest.mark.parametrize(
    ("text", "shown"),
    [('{"a":"\\ud800"}', '"a": "\\ud800"'), (DEEP_ARRAY, DEEP_ARRAY)],
)
def test_a_json_resource_no_page_can_hold_or_python_read_is_shown(
    staff: Client, text: str, shown: str
) -> None:
    Resource.objects.create(
        uri="test://odd.json", name="odd", mime_type="application/json", text=text
    )
    url = f"{BASE}default/resource/"
    content = page(staff.post(url, {"step": "run", "uri": "test://odd.json"}))
    assert shown in html.unescape(content)


def test_dumps_escapes_what_no_page_holds_and_says_what_json_cannot_carry() -> None:
    looped: list[Any] = []
    looped.append(looped)
    deep: list[Any] = []
    for _ in range(3000):
        deep = [deep]
    dumps = playground.dumps
    assert dumps({"a": "\ud800", "b": "é"}) == '{"a": "\\ud800", "b": "\\u00e9"}'
    assert dumps({"b": "é"}) == '{"b": "é"}'  # readable when it can be
    assert playground.pretty({"b": "é"}) == '{\n  "b": "é"\n}'
    assert (
        dumps(10**5000)
        == "(This value cannot be shown as JSON: a number has more than 4300 digits.)"
    )
    for value in (looped, deep, {(1, 2): 3}):
        assert dumps(value).startswith("(This value cannot be shown as JSON: ")


def test_structured_content_of_django_types_is_shown_as_the_endpoint_sends_it(
    staff: Client, scratch: Server
) -> None:
    from mcp_app import content as with_structured

    stamp = datetime.date(2026, 7, 28)
    scratch.add_tool(
        lambda arguments, context: with_structured("x", structured={"on": stamp, "who": object()}),
        name="dated",
    )
    shown = html.unescape(page(run(staff, tool_url("dated", scratch.name))))
    assert '"on": "2026-07-28"' in shown and '"who": "<object object at' in shown


def test_a_lone_surrogate_from_a_definition_or_handler_is_written_escaped(
    staff: Client, scratch: Server
) -> None:
    scratch.add_tool(lambda arguments, context: text("half \ud800"), name="half", title="\udfff")
    content = page(run(staff, tool_url("half", scratch.name)))
    assert "half \\ud800" in content and "\\udfff" in content
    assert "\\udfff" in page(staff.get(f"{BASE}{scratch.name}/"))
