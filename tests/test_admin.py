"""The admin of definition rows: every page renders, bad input is a field error and saves nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib import admin, messages
from django.contrib.admin import AdminSite
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpRequest
from django.test import Client
from django.urls import path as route  # "path" names the test pages' URLs below

import mcp_app
from mcp_app import rows
from mcp_app.admin import AccessDeleteWarnings, StorableChoiceField, add_access_delete_warnings
from mcp_app.models import Prompt, PromptArgument, PromptMessage, Resource, ResourceTemplate, Tool

pytestmark = pytest.mark.django_db(transaction=True)

DEFINITION = {
    "server": "default",
    "title": "",
    "description": "",
    "icons": "",
    "meta": "",
    "enabled": "on",
    "order": "0",
}


@pytest.fixture
def admin_client() -> Client:
    """A client logged in as a superuser (no password: hashing one costs half a second)."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("admin", "admin@example.com", None)
    client = Client()
    client.force_login(user)
    return client


def tool_data(**fields: Any) -> dict[str, Any]:
    data = {
        **DEFINITION,
        "name": "welcome",
        "handler": "template",
        "config": json.dumps({"template": "Hello {{ name }}"}),
        "input_schema": "",
        "output_schema": "",
        "annotations": "",
    }
    data.update(fields)
    return {key: value for key, value in data.items() if value is not None}


def resource_data(**fields: Any) -> dict[str, Any]:
    data = {
        **DEFINITION,
        "uri": "notes://one",
        "name": "one",
        "mime_type": "",
        "text": "Hello",
        "annotations": "",
    }
    data.update(fields)
    return data


def template_data(**fields: Any) -> dict[str, Any]:
    data = {
        **DEFINITION,
        "name": "notes",
        "uri_template": "notes://{topic}",
        "mime_type": "",
        "text": "Notes on {{ topic }}",
        "handler": "",
        "config": "",
        "annotations": "",
    }
    data.update(fields)
    return data


def inline(prefix: str, forms: list[dict[str, Any]], initial: int = 0) -> dict[str, Any]:
    data: dict[str, Any] = {
        f"{prefix}-TOTAL_FORMS": str(len(forms)),
        f"{prefix}-INITIAL_FORMS": str(initial),
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }
    for index, form in enumerate(forms):
        for key, value in form.items():
            data[f"{prefix}-{index}-{key}"] = value
    return data


NO_MESSAGE = "A prompt needs at least one message: its text, or a resource URI to embed."
#: A message that reads no argument.
HELLO = {"order": "0", "role": "user", "text": "Hello", "resource_uri": ""}


def prompt_data(
    arguments: list[dict[str, Any]] | None = None,
    messages: list[dict[str, Any]] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    data = {**DEFINITION, "name": "brief", **fields}
    data.update(
        inline(
            "arguments",
            arguments
            if arguments is not None
            else [
                {"order": "0", "name": "topic", "description": "", "title": "", "required": "on"}
            ],
        )
    )
    data.update(
        inline(
            "messages",
            messages
            if messages is not None
            else [{"order": "0", "role": "user", "text": "About {{ topic }}", "resource_uri": ""}],
        )
    )
    return data


def url(model: str, action: str = "add", pk: int | None = None) -> str:
    if pk is None:
        return f"/admin/mcp_app/{model}/{action}/"
    return f"/admin/mcp_app/{model}/{pk}/{action}/"


def form_errors(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, response.status_code
    errors = response.context["adminform"].form.errors
    return {field: list(messages) for field, messages in errors.items()}


def _inline_formset(response: Any, prefix: str) -> Any:
    assert response.status_code == 200, response.status_code
    for formset in response.context["inline_admin_formsets"]:
        if formset.formset.prefix == prefix:
            return formset.formset
    raise AssertionError(f"no inline {prefix}")


def non_form_errors(response: Any, prefix: str) -> list[str]:
    return list(_inline_formset(response, prefix).non_form_errors())


def inline_errors(response: Any, prefix: str) -> list[dict[str, list[str]]]:
    return [dict(errors) for errors in _inline_formset(response, prefix).errors]


# -- pages render --------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["tool", "resource", "resourcetemplate", "prompt"])
def test_add_and_changelist_pages_render(admin_client: Client, model: str) -> None:
    assert admin_client.get(url(model)).status_code == 200
    assert admin_client.get(f"/admin/mcp_app/{model}/?q=x&server=default").status_code == 200


@pytest.mark.parametrize(
    "model", ["tool", "resource", "resourcetemplate", "prompt", "toolcall", "task"]
)
@pytest.mark.parametrize("query", ["q=%00", "server=a%00b", "e%00x=1"])
def test_a_nul_in_a_changelist_query_is_shown_as_a_bad_lookup(
    admin_client: Client, model: str, query: str
) -> None:
    # PostgreSQL takes no NUL in a query's text: the list would fail as it renders.
    response = admin_client.get(f"/admin/mcp_app/{model}/?{query}")
    assert response.status_code == 302
    assert response["Location"] == f"/admin/mcp_app/{model}/?e=1"
    assert admin_client.get(response["Location"]).status_code == 200


@pytest.mark.parametrize(
    "query", ["name__regex=(", "name__iregex=[", "id__in=1,99999999999999999999"]
)
def test_a_changelist_query_the_database_cannot_run_is_shown_as_a_bad_lookup(
    admin_client: Client, query: str
) -> None:
    Tool.objects.create(name="listed", handler="template", config={"template": "x"})
    response = admin_client.get(f"/admin/mcp_app/tool/?{query}")
    if "regex" in query:
        assert response.status_code == 302
    # A database that compares the number as it is answers with the list (PostgreSQL).
    assert response.status_code in (200, 302)
    if response.status_code == 302:
        assert response["Location"] == "/admin/mcp_app/tool/?e=1"
        assert admin_client.get(response["Location"]).status_code == 200


def test_a_changelist_failing_without_a_query_is_not_taken_for_a_bad_lookup(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.contrib.admin.views.main import ChangeList
    from django.db import DatabaseError

    def fail(self: Any, request: Any) -> None:
        raise DatabaseError("the database is down")

    monkeypatch.setattr(ChangeList, "get_results", fail)
    with pytest.raises(DatabaseError):
        admin_client.get("/admin/mcp_app/tool/")
    response = admin_client.get("/admin/mcp_app/tool/?server=default")
    assert response["Location"] == "/admin/mcp_app/tool/?e=1"
    # Ordering or paging is no filter: the page is Django's, left unrendered.
    with pytest.raises(DatabaseError):
        admin_client.get("/admin/mcp_app/tool/?o=1&p=1")
    # A search is one.
    response = admin_client.get("/admin/mcp_app/tool/?q=x&o=1")
    assert response["Location"] == "/admin/mcp_app/tool/?e=1"


@pytest.mark.parametrize(
    "model", ["tool", "resource", "resourcetemplate", "prompt", "toolcall", "task"]
)
@pytest.mark.parametrize("query", ["updated__year=0", "updated__year__gte=10000"])
def test_a_changelist_year_out_of_range_is_shown_as_a_bad_lookup(
    admin_client: Client, model: str, query: str
) -> None:
    field = "created" if model == "toolcall" else "updated"
    response = admin_client.get(f"/admin/mcp_app/{model}/?{query.replace('updated', field)}")
    assert response.status_code == 302
    assert response["Location"] == f"/admin/mcp_app/{model}/?e=1"


def test_a_search_term_the_database_cannot_match_is_shown_as_a_bad_lookup(
    admin_client: Client,
) -> None:
    from django.db import connection

    Tool.objects.create(name="listed", handler="template", config={"template": "x"})
    # SQLite refuses a LIKE pattern over 50,000 bytes; PostgreSQL matches it.
    response = admin_client.get("/admin/mcp_app/tool/?q=" + "_" * 25_001)
    if connection.vendor == "sqlite":
        assert response.status_code == 302
        assert response["Location"] == "/admin/mcp_app/tool/?e=1"
    else:
        assert response.status_code == 200


@pytest.mark.parametrize("action", ["enable", "delete_selected"])
@pytest.mark.parametrize("selected", ["abc", "99999999999999999999", "1.5", ""])
def test_an_action_on_items_no_row_could_be_is_refused_with_a_message(
    admin_client: Client, action: str, selected: str
) -> None:
    tool = Tool.objects.create(
        name="kept", handler="template", config={"template": "x"}, enabled=False
    )
    data = {"action": action, "_selected_action": [str(tool.pk), selected], "index": 0}
    response = admin_client.post("/admin/mcp_app/tool/", data)
    assert response.status_code == 302 and response["Location"] == "/admin/mcp_app/tool/"
    shown = [str(m) for m in messages.get_messages(response.wsgi_request)]
    assert shown == ["The selected items are not ones this list holds."]
    assert Tool.objects.get(pk=tool.pk).enabled is False


def test_an_action_on_tasks_is_served_on_any_database(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connection
    from django.db.backends.base.operations import BaseDatabaseOperations

    # As PostgreSQL's: a range for the integer types only (a task's key is text).
    monkeypatch.setattr(
        type(connection.ops), "integer_field_range", BaseDatabaseOperations.integer_field_range
    )
    data = {"action": "delete_selected", "_selected_action": ["no-such-task"], "index": 0}
    response = admin_client.post("/admin/mcp_app/task/", data)
    assert response.status_code in (200, 302)


def test_tool_changelist_says_what_runs(admin_client: Client) -> None:
    Tool.objects.create(name="welcome", handler="template", config={"template": "x"})
    Tool.objects.create(name="add", overrides_code=True, title="Sum")
    Tool.objects.create(name="logo", overrides_code=True, enabled=False)
    page = admin_client.get("/admin/mcp_app/tool/").content.decode()
    for text in ("code (restyled)", "code (hidden)", ">template<"):
        assert text in page


def test_change_pages_render_with_the_catalog_entry(admin_client: Client) -> None:
    tool = Tool.objects.create(name="welcome", handler="template", config={"template": "x"})
    restyle = Tool.objects.create(name="add", overrides_code=True, title="Sum")
    hidden = Tool.objects.create(name="logo", overrides_code=True, enabled=False)
    broken = Tool.objects.create(name="orphan", handler="gone")
    resource = Resource.objects.create(uri="notes://one", name="one", text="Hello")
    template = ResourceTemplate.objects.create(name="notes", uri_template="n://{t}", text="x")
    prompt = Prompt.objects.create(name="brief")
    PromptArgument.objects.create(prompt=prompt, name="topic")
    PromptMessage.objects.create(prompt=prompt, text="{{ topic }}")
    for model, row, expected in [
        ("tool", tool, "&quot;name&quot;: &quot;welcome&quot;"),
        ("tool", restyle, "&quot;title&quot;: &quot;Sum&quot;"),
        ("tool", hidden, "Not listed (disabled)."),
        ("tool", broken, "Not listed: no row handler"),
        ("resource", resource, "&quot;uri&quot;: &quot;notes://one&quot;"),
        ("resourcetemplate", template, "&quot;uriTemplate&quot;: &quot;n://{t}&quot;"),
        ("prompt", prompt, "&quot;name&quot;: &quot;topic&quot;"),
    ]:
        response = admin_client.get(url(model, "change", row.pk))
        assert response.status_code == 200
        assert expected in response.content.decode(), (model, row)


def test_catalog_entry_of_a_row_restyling_a_tool_with_lazy_text(admin_client: Client) -> None:
    from django.utils.translation import gettext_lazy

    from mcp_app import Server, servers

    server = Server("admin-lazy")
    server.add_tool(lambda arguments, context: "x", name="lazy", title=gettext_lazy("Lazy title"))
    try:
        row = Tool.objects.create(
            server="admin-lazy", name="lazy", overrides_code=True, description="Restyled"
        )
        response = admin_client.get(url("tool", "change", row.pk))
        assert response.status_code == 200
        assert "&quot;title&quot;: &quot;Lazy title&quot;" in response.content.decode()
    finally:
        servers.pop("admin-lazy", None)


def test_catalog_entry_of_a_restyling_row_whose_code_tool_is_gone(admin_client: Client) -> None:
    row = Tool.objects.create(name="vanished", overrides_code=True, title="x")
    response = admin_client.get(url("tool", "change", row.pk))
    assert (
        "Not listed: no tool &#x27;vanished&#x27; is registered in code"
        in response.content.decode()
    )


def test_json_is_shown_indented_and_empty_not_null(admin_client: Client) -> None:
    row = Tool.objects.create(
        name="welcome", handler="template", config={"template": "x"}, output_schema=None
    )
    form = admin_client.get(url("tool", "change", row.pk)).context["adminform"].form
    assert form["config"].value() == '{\n  "template": "x"\n}'
    assert form["output_schema"].value() == ""


# -- adding --------------------------------------------------------------------------------


def test_add_a_tool_bumps_the_generation(admin_client: Client) -> None:
    before = rows.generation("default")
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    response = admin_client.post(url("tool"), tool_data(input_schema=json.dumps(schema)))
    assert response.status_code == 302, form_errors(response)
    tool = Tool.objects.get(name="welcome")
    assert tool.input_schema == schema and tool.icons == [] and tool.annotations == {}
    assert rows.generation("default") != before


@pytest.mark.parametrize("field", ["groups", "permissions"])
@pytest.mark.parametrize("key", ["99999999999999999999", "-9223372036854775809", "abc"])
def test_a_group_or_permission_no_row_could_be_is_a_form_error(
    admin_client: Client, field: str, key: str
) -> None:
    response = admin_client.post(url("tool"), tool_data(**{field: [key]}))
    assert form_errors(response)[field] == [f"“{key}” is not a valid value."]
    assert not Tool.objects.filter(name="welcome").exists()


def test_the_storable_choice_field_takes_what_django_s_does() -> None:
    staff = Group.objects.create(name="staff")
    # A disabled field cleans its initial value: instances.
    disabled = StorableChoiceField(queryset=Group.objects.all(), disabled=True)
    assert list(disabled.clean([staff])) == [staff]
    by_name = StorableChoiceField(queryset=Group.objects.all(), to_field_name="name")
    assert list(by_name.clean(["staff"])) == [staff]
    with pytest.raises(ValidationError, match="is not one of the available choices"):
        by_name.clean(["9" * 30])  # a name no group has: Django's own error
    optional = StorableChoiceField(queryset=Group.objects.all(), required=False)
    assert list(optional.clean([])) == []
    with pytest.raises(ValidationError, match="is not a valid value"):
        StorableChoiceField(queryset=Group.objects.all()).clean([str(staff.pk), "9" * 30])


def test_add_a_file_resource(admin_client: Client, settings: Any, tmp_path: Any) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    upload = SimpleUploadedFile("notes.md", b"# Notes\n", content_type="text/markdown")
    response = admin_client.post(
        url("resource"), resource_data(uri="files://notes", text="", file=upload)
    )
    assert response.status_code == 302, form_errors(response)
    resource = Resource.objects.get(uri="files://notes")
    assert (resource.size, resource.mime_type) == (8, "text/markdown")


def test_a_guessed_mime_type_is_guessed_again_when_the_content_changes(
    admin_client: Client, settings: Any, tmp_path: Any
) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    png = SimpleUploadedFile("a.png", b"x", content_type="image/png")
    admin_client.post(url("resource"), resource_data(uri="f://x", text="", file=png))
    resource = Resource.objects.get()
    assert resource.mime_type == "image/png"
    # The form shows the guess; sent back unchanged with another file, it is guessed again.
    pdf = SimpleUploadedFile("b.pdf", b"%PDF", content_type="application/pdf")
    change = resource_data(uri="f://x", text="", mime_type="image/png", file=pdf)
    assert admin_client.post(url("resource", "change", resource.pk), change).status_code == 302
    resource.refresh_from_db()
    assert resource.mime_type == "application/pdf"
    # Text in place of the file: text/plain.
    change = resource_data(uri="f://x", text="plain", mime_type="application/pdf")
    change["file-clear"] = "on"
    assert admin_client.post(url("resource", "change", resource.pk), change).status_code == 302
    resource.refresh_from_db()
    assert (resource.file.name, resource.mime_type) == ("", "text/plain")


def test_a_mime_type_given_for_the_content_is_kept(admin_client: Client) -> None:
    admin_client.post(url("resource"), resource_data(text="# Hi", mime_type="text/markdown"))
    resource = Resource.objects.get()
    change = resource_data(text="# Hello", mime_type="text/markdown")
    assert admin_client.post(url("resource", "change", resource.pk), change).status_code == 302
    resource.refresh_from_db()
    assert resource.mime_type == "text/markdown"
    # A text row left with its guess keeps text/plain for new text.
    change = resource_data(text="other", mime_type="")
    admin_client.post(url("resource", "change", resource.pk), change)
    resource.refresh_from_db()
    assert resource.mime_type == "text/plain"


def test_add_a_prompt_with_inline_rows_is_one_generation(admin_client: Client) -> None:
    Tool.objects.create(name="welcome", handler="template", config={"template": "x"})
    before = rows.generation("default")
    response = admin_client.post(
        url("prompt"),
        prompt_data(
            messages=[
                {"order": "0", "role": "user", "text": "About {{ topic }}", "resource_uri": ""},
                {"order": "1", "role": "assistant", "text": "", "resource_uri": "notes://x"},
            ]
        ),
    )
    assert response.status_code == 302, form_errors(response)
    prompt = Prompt.objects.get(name="brief")
    assert [a.name for a in prompt.arguments.all()] == ["topic"]
    assert [m.resource_uri for m in prompt.messages.all()] == ["", "notes://x"]
    assert rows.generation("default") == before + 1


def test_add_a_template_row(admin_client: Client) -> None:
    response = admin_client.post(url("resourcetemplate"), template_data())
    assert response.status_code == 302, form_errors(response)
    assert ResourceTemplate.objects.filter(name="notes").exists()


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "text"),
    [
        ({"name": "has space"}, "name", "1-64 characters"),
        ({"name": "add"}, "name", "registered in code"),
        ({"handler": ""}, "handler", "Choose what runs"),
        ({"config": "{not json"}, "config", "Enter a valid JSON."),
        ({"config": json.dumps({"template": "{% if %}"})}, "config", "Template syntax error"),
        ({"input_schema": json.dumps({"type": "array"})}, "input_schema", '"type": "object"'),
        (
            {"input_schema": json.dumps({"type": "object", "required": "name"})},
            "input_schema",
            "invalid schema at /required",
        ),
        (
            {
                "input_schema": json.dumps(
                    {"type": "object", "$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}
                )
            },
            "input_schema",
            "refers to itself without end",
        ),
        (
            {
                "input_schema": json.dumps(
                    {"type": "object", "properties": {"a": {"allOf": [{"$ref": "#/properties/a"}]}}}
                )
            },
            "input_schema",
            "invalid schema at /properties/a: the schema refers to itself without end",
        ),
        ({"output_schema": "[1]"}, "output_schema", "is an object"),
        ({"annotations": json.dumps({"readOnlyHint": 1})}, "annotations", "/readOnlyHint"),
        ({"icons": json.dumps([{"theme": "neon"}])}, "icons", "Invalid icons"),
        ({"meta": "[]"}, "meta", "expected object"),
        # Stored by no PostgreSQL jsonb column: a form error on every database.
        (
            {"input_schema": '{"type": "object", "description": "a\\u0000b"}'},
            "input_schema",
            "null character",
        ),
        ({"annotations": '{"t\\u0000": true}'}, "annotations", "null character"),
        ({"meta": '{"x": "\\udc00"}'}, "meta", "lone surrogate"),
        ({"annotations": '{"title": NaN}'}, "annotations", "NaN or Infinity"),
        ({"server": "nowhere"}, "server", "Select a valid choice"),
        (
            {"overrides_code": "on", "name": "missing", "config": "", "handler": ""},
            "name",
            "No tool 'missing' is registered in code",
        ),
    ],
)
def test_bad_tool_input_is_a_field_error(
    admin_client: Client, fields: dict[str, Any], field: str, text: str
) -> None:
    response = admin_client.post(url("tool"), tool_data(**fields))
    errors = form_errors(response)
    assert any(text in message for message in errors.get(field, [])), errors
    assert not Tool.objects.exists()


def test_a_duplicate_name_is_an_error_on_the_name(admin_client: Client) -> None:
    Tool.objects.create(name="welcome", handler="template", config={"template": "x"})
    errors = form_errors(admin_client.post(url("tool"), tool_data()))
    assert errors["name"] == ["MCP tool with this name already exists on server 'default'."]
    assert Tool.objects.count() == 1


def test_a_bad_edit_leaves_the_row_as_it_was(admin_client: Client) -> None:
    row = Tool.objects.create(name="welcome", handler="template", config={"template": "x"})
    before = rows.generation("default")
    response = admin_client.post(
        url("tool", "change", row.pk), tool_data(title="New", config='{"template": "{% if %}"}')
    )
    assert "Template syntax error" in form_errors(response)["config"][0]
    row.refresh_from_db()
    assert row.title == "" and row.config == {"template": "x"}
    assert rows.generation("default") == before


@pytest.mark.parametrize(
    ("fields", "field", "text"),
    [
        ({"uri": "nope"}, "uri", "absolute URI"),
        ({"text": ""}, "text", "or upload a file"),
        ({"mime_type": "plain"}, "mime_type", "MIME type"),
        ({"annotations": '{"priority": "high"}'}, "annotations", "/priority"),
    ],
)
def test_bad_resource_input_is_a_field_error(
    admin_client: Client, fields: dict[str, Any], field: str, text: str
) -> None:
    errors = form_errors(admin_client.post(url("resource"), resource_data(**fields)))
    assert any(text in message for message in errors.get(field, [])), errors
    assert not Resource.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field", "text"),
    [
        ({"uri_template": "notes://{topic"}, "uri_template", "invalid URI template"),
        (
            {"name": "people2", "uri_template": "people://{id}"},
            "uri_template",
            "registered in code",
        ),
        ({"text": "{% block %}"}, "text", "Template syntax error"),
        # Tags whose parsers fail with other errors than TemplateSyntaxError.
        ({"text": "{% filter %}"}, "text", "Template syntax error"),
        ({"text": '{% if _("x" %}'}, "text", "Template syntax error"),
        ({"text": "{% load static %}{% static as x %}"}, "text", "Template syntax error"),
        ({"text": "{% include 'x.html' %}"}, "text", "{% include %} cannot work here"),
        ({"text": "{% extends 'base.html' %}"}, "text", "{% extends %} cannot work here"),
        ({"text": "{% if a %}{% include t %}{% endif %}"}, "text", "{% include %} cannot"),
        ({"text": "{% url 'nowhere' %}"}, "text", "{% url %} names no URL of the site"),
        ({"text": "", "handler": "missing"}, "handler", "Select a valid choice"),
    ],
)
def test_bad_template_input_is_a_field_error(
    admin_client: Client, fields: dict[str, Any], field: str, text: str
) -> None:
    errors = form_errors(admin_client.post(url("resourcetemplate"), template_data(**fields)))
    assert any(text in message for message in errors.get(field, [])), errors
    assert not ResourceTemplate.objects.exists()


def test_bad_inline_input_saves_no_prompt(admin_client: Client) -> None:
    response = admin_client.post(
        url("prompt"),
        prompt_data(
            arguments=[
                {"order": "0", "name": "2fast", "description": "", "title": "", "required": ""}
            ],
            messages=[
                {"order": "0", "role": "user", "text": "{{ x|nosuchfilter }}", "resource_uri": ""}
            ],
        ),
    )
    assert "Use letters, digits" in inline_errors(response, "arguments")[0]["name"][0]
    assert "Template syntax error" in inline_errors(response, "messages")[0]["text"][0]
    assert not Prompt.objects.exists()
    assert not PromptArgument.objects.exists()


def test_a_message_reading_no_argument_of_the_prompt_is_a_form_error(
    admin_client: Client,
) -> None:
    message = {"order": "0", "role": "user", "text": "About {{ topc }}", "resource_uri": ""}
    response = admin_client.post(url("prompt"), prompt_data(messages=[message]))
    assert inline_errors(response, "messages")[0]["text"] == [
        "The template reads topc, which the prompt's arguments do not give, so it would always "
        "be empty; it gives topic."
    ]
    assert not Prompt.objects.exists()
    # Judged against the arguments as the same form holds them: one renamed there, one added.
    renamed = {"order": "0", "name": "topc", "description": "", "title": "", "required": ""}
    embed = {"order": "1", "role": "user", "text": "", "resource_uri": "notes://{{ topc }}"}
    response = admin_client.post(url("prompt"), prompt_data([renamed], [message, embed]))
    assert response.status_code == 302, inline_errors(response, "messages")
    # No arguments at all: any variable is one no argument gives.
    bare = prompt_data([], [{**message, "text": "Hello {{ you }}"}], name="hello")
    response = admin_client.post(url("prompt"), bare)
    assert "it gives none" in inline_errors(response, "messages")[0]["text"][0]


def test_saving_a_prompt_that_embeds_a_uri_nothing_serves_warns(admin_client: Client) -> None:
    def add(name: str, *uris: str) -> list[str]:
        embeds = [
            {"order": str(n), "role": "user", "text": "", "resource_uri": f" {uri} "}
            for n, uri in enumerate(uris)
        ]
        topic = {"order": "0", "name": "topic", "description": "", "title": "", "required": ""}
        data = prompt_data([topic], embeds, name=name)
        response = admin_client.post(url("prompt"), data, follow=True)
        assert response.redirect_chain, inline_errors(response, "messages")
        return [str(m) for m in response.context["messages"] if "serves" in str(m)]

    # The demo's code resource, a URI its code template serves, a URI made from arguments.
    assert add("served", "file:///readme.txt", "people://ada", "notes://{{ topic }}") == []
    assert add("unserved", "notes://nowhere", "file:///readme.txt") == [
        "The prompt “unserved” embeds notes://nowhere, which no enabled resource or resource "
        "template of the server “default” serves: getting the prompt fails until one does."
    ]
    # Saved all the same: the resource may come next.
    assert PromptMessage.objects.filter(prompt__name="unserved").count() == 2
    Resource.objects.create(uri="notes://nowhere", name="nowhere", text="here now")
    assert add("now-served", "notes://nowhere") == []
    # Single braces are no argument: the URI is taken as it is, and nothing serves it.
    assert add("braced", "notes://{topic}") == [
        "The prompt “braced” embeds notes://{topic}, which no enabled resource or resource "
        "template of the server “default” serves: getting the prompt fails until one does. "
        "An argument goes in a URI as {{ name }}, not {name}."
    ]
    assert add("stray", "notes://a{b") == [
        "The prompt “stray” embeds notes://a{b, which no enabled resource or resource "
        "template of the server “default” serves: getting the prompt fails until one does."
    ]


def test_a_meta_key_under_a_reserved_prefix_is_saved_with_a_warning(admin_client: Client) -> None:
    def save(data: dict[str, Any]) -> list[str]:
        response = admin_client.post(url(data.pop("model")), data, follow=True)
        assert response.redirect_chain, form_errors(response)
        return [str(m) for m in response.context["messages"] if "reserves" in str(m)]

    meta = {"io.modelcontextprotocol/ui": {}, "com.example.mcp/x": 1, "owner": "docs"}
    assert save({"model": "tool", **tool_data(meta=json.dumps(meta))}) == [
        "The _meta key “io.modelcontextprotocol/ui” is under a prefix MCP reserves for itself "
        "and its extensions (one whose second label is modelcontextprotocol or mcp). Unless an "
        "MCP extension defines it, use a prefix of your own, such as com.example/."
    ]
    # Saved all the same: MCP's extensions define keys there.
    assert Tool.objects.get(name="welcome").meta == meta
    warned = save({"model": "resource", **resource_data(meta=json.dumps({"dev.mcp/a": 1}))})
    assert len(warned) == 1 and "“dev.mcp/a”" in warned[0]
    assert save({"model": "resource", **resource_data(uri="notes://two", name="two")}) == []


def test_a_prompt_with_no_message_is_a_form_error(admin_client: Client) -> None:
    response = admin_client.post(url("prompt"), prompt_data(messages=[]))
    assert non_form_errors(response, "messages") == [NO_MESSAGE]
    assert not Prompt.objects.exists() and not PromptArgument.objects.exists()
    # Nor may an edit delete the last one; a blank extra form is no message either.
    admin_client.post(url("prompt"), prompt_data())
    prompt = Prompt.objects.get()
    message = prompt.messages.get()
    data = prompt_data(
        messages=[
            {
                "id": str(message.pk),
                "prompt": str(prompt.pk),
                "order": "0",
                "role": "user",
                "text": message.text,
                "resource_uri": "",
                "DELETE": "on",
            },
            {"order": "0", "role": "user", "text": "", "resource_uri": ""},
        ]
    )
    data["messages-INITIAL_FORMS"] = "1"
    data.update(inline("arguments", [_kept_argument(prompt)], initial=1))
    response = admin_client.post(url("prompt", "change", prompt.pk), data)
    assert non_form_errors(response, "messages") == [NO_MESSAGE]
    assert list(prompt.messages.values_list("pk", flat=True)) == [message.pk]
    # A new message with errors of its own is one meant: its errors are what it shows.
    data["messages-1-text"] = "{{ x|nosuchfilter }}"
    response = admin_client.post(url("prompt", "change", prompt.pk), data)
    assert non_form_errors(response, "messages") == []
    # (The formset's errors leave out the form marked for deletion.)
    assert "Template syntax error" in inline_errors(response, "messages")[0]["text"][0]
    # Deleting one message while another is kept saves.
    data["messages-1-text"] = "Still here"
    response = admin_client.post(url("prompt", "change", prompt.pk), data)
    assert response.status_code == 302, inline_errors(response, "messages")
    assert list(prompt.messages.values_list("text", flat=True)) == ["Still here"]


def test_who_may_not_add_messages_may_save_a_prompt_without_one(db: None) -> None:
    from django.contrib.auth import get_user_model

    editor = get_user_model().objects.create_user("editor", "e@example.com", None, is_staff=True)
    # Messages shown, read-only: the inline is there, and no message can be added.
    codenames = ["add_prompt", "change_prompt", "add_promptargument", "view_promptmessage"]
    editor.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(editor)
    response = client.post(url("prompt"), prompt_data(messages=[]))
    assert response.status_code == 302
    assert Prompt.objects.get().name == "brief"
    # Given the permission, the same form is refused.
    editor.user_permissions.add(Permission.objects.get(codename="add_promptmessage"))
    editor = get_user_model().objects.get(pk=editor.pk)  # its permissions cached afresh
    client.force_login(editor)
    response = client.post(url("prompt"), prompt_data(messages=[], name="other"))
    assert non_form_errors(response, "messages") == [NO_MESSAGE]


def _kept_argument(prompt: Prompt) -> dict[str, str]:
    """The inline fields of ``prompt``'s one argument, unchanged, as the change form posts them."""
    argument = prompt.arguments.get()
    return {
        "id": str(argument.pk),
        "prompt": str(prompt.pk),
        "order": str(argument.order),
        "name": argument.name,
        "title": argument.title,
        "description": argument.description,
        "required": "on" if argument.required else "",
    }


def test_arguments_may_swap_names_or_take_a_deleted_ones(admin_client: Client) -> None:
    prompt = Prompt.objects.create(name="brief")
    a = PromptArgument.objects.create(prompt=prompt, name="a", order=0)
    b = PromptArgument.objects.create(prompt=prompt, name="b", order=1)
    c = PromptArgument.objects.create(prompt=prompt, name="c", order=2)

    def argument(row: PromptArgument, name: str, **extra: str) -> dict[str, Any]:
        fields = {"description": "", "title": "", "required": "", "prompt": str(prompt.pk)}
        return {"id": str(row.pk), "order": str(row.order), "name": name, **fields, **extra}

    data = prompt_data(messages=[HELLO])
    data.update(
        inline(
            "arguments",
            [argument(a, "b"), argument(b, "a"), argument(c, "c", DELETE="on")],
            initial=3,
        )
    )
    data["messages-INITIAL_FORMS"] = "0"
    response = admin_client.post(url("prompt", "change", prompt.pk), data)
    assert response.status_code == 302, inline_errors(response, "arguments")
    kept = PromptArgument.objects.order_by("order").values_list("pk", "name")
    assert list(kept) == [(a.pk, "b"), (b.pk, "a")]
    # And into the name of one deleted in the same edit.
    data.update(inline("arguments", [argument(a, "b", DELETE="on"), argument(b, "b")], initial=2))
    response = admin_client.post(url("prompt", "change", prompt.pk), data)
    assert response.status_code == 302, inline_errors(response, "arguments")
    assert list(PromptArgument.objects.values_list("pk", "name")) == [(b.pk, "b")]


def test_two_arguments_of_one_name_are_a_form_error(admin_client: Client) -> None:
    twice = {"order": "0", "name": "topic", "description": "", "title": "", "required": ""}
    response = admin_client.post(url("prompt"), prompt_data(arguments=[twice, twice]))
    assert response.status_code == 200
    assert not Prompt.objects.exists()


def test_a_new_argument_may_not_take_a_kept_ones_name(admin_client: Client) -> None:
    prompt = Prompt.objects.create(name="brief")
    kept = PromptArgument.objects.create(prompt=prompt, name="a", order=0)
    fields = {"description": "", "title": "", "required": "", "prompt": str(prompt.pk)}
    data = prompt_data(messages=[HELLO])
    data.update(
        inline(
            "arguments",
            [
                {"id": str(kept.pk), "order": "0", "name": "a", **fields},
                {"id": "", "order": "1", "name": "a", **fields},
            ],
            initial=1,
        )
    )
    data["messages-INITIAL_FORMS"] = "0"
    response = admin_client.post(url("prompt", "change", prompt.pk), data)
    assert response.status_code == 200
    assert "Please correct the duplicate data for name" in response.content.decode()
    assert list(PromptArgument.objects.values_list("pk", "name")) == [(kept.pk, "a")]


def test_a_bad_prompt_name_with_good_inlines_saves_nothing(admin_client: Client) -> None:
    errors = form_errors(admin_client.post(url("prompt"), prompt_data(name="bad name")))
    assert "1-64 characters" in errors["name"][0]
    assert not Prompt.objects.exists() and not PromptMessage.objects.exists()


# -- actions -------------------------------------------------------------------------------


def test_enable_and_disable_actions_save_each_row(admin_client: Client) -> None:
    rows_ = [
        Tool.objects.create(name=f"t{i}", handler="template", config={"template": "x"})
        for i in range(2)
    ]
    before = rows.generation("default")
    selected = [str(row.pk) for row in rows_]
    response = admin_client.post(
        "/admin/mcp_app/tool/", {"action": "disable", "_selected_action": selected}
    )
    assert response.status_code == 302
    assert not Tool.objects.filter(enabled=True).exists()
    assert rows.generation("default") == before + 1  # one transaction
    admin_client.post(
        "/admin/mcp_app/tool/", {"action": "enable", "_selected_action": selected[:1]}
    )
    assert list(Tool.objects.filter(enabled=True).values_list("name", flat=True)) == ["t0"]


def test_enabling_a_row_that_would_clash_leaves_it_disabled_and_says_why(
    admin_client: Client,
) -> None:
    served = ResourceTemplate.objects.create(name="ok", uri_template="notes://{topic}", text="x")
    # Saved while disabled, so the rule that keeps enabled templates apart did not apply.
    clash = ResourceTemplate.objects.create(
        name="same-shape", uri_template="notes://{other}", text="y", enabled=False
    )
    fine = ResourceTemplate.objects.create(
        name="fine", uri_template="memo://{x}", text="z", enabled=False
    )
    before = rows.generation("default")
    selected = [str(clash.pk), str(fine.pk)]
    response = admin_client.post(
        "/admin/mcp_app/resourcetemplate/",
        {"action": "enable", "_selected_action": selected},
        follow=True,
    )
    clash.refresh_from_db()
    fine.refresh_from_db()
    assert (clash.enabled, fine.enabled) == (False, True)
    shown = [str(message) for message in response.context["messages"]]
    assert shown[0] == "1 row(s) enabled."
    assert shown[1].startswith("1 row(s) not enabled, as saving them would fail: same-shape")
    assert rows.generation("default") != before
    served_names = [t.name for t in mcp_app.site.catalog().templates]
    assert "ok" in served_names and "same-shape" not in served_names
    assert served.enabled


def test_staff_who_may_only_view_rows_cannot_enable_or_disable_them() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    viewer = get_user_model().objects.create_user("viewer", "v@example.com", None, is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_tool"))
    client = Client()
    client.force_login(viewer)
    row = Tool.objects.create(name="t0", handler="template", config={"template": "x"})
    assert "disable" not in client.get("/admin/mcp_app/tool/").content.decode()
    client.post("/admin/mcp_app/tool/", {"action": "disable", "_selected_action": [str(row.pk)]})
    row.refresh_from_db()
    assert row.enabled


def test_content_is_saved_as_typed_with_its_whitespace(admin_client: Client) -> None:
    text = "    indented\n\n"
    assert admin_client.post(url("resource"), resource_data(text=text)).status_code == 302
    resource = Resource.objects.get()
    assert resource.text == text
    assert resource.size == len(text.encode())
    body = "  - item {{ topic }}\n"
    response = admin_client.post(url("resourcetemplate"), template_data(text=body))
    assert response.status_code == 302
    assert ResourceTemplate.objects.get().text == body
    message = {"order": "0", "role": "user", "text": body, "resource_uri": ""}
    assert admin_client.post(url("prompt"), prompt_data(messages=[message])).status_code == 302
    assert Prompt.objects.get().messages.get().text == body


# -- deleting a resource a prompt embeds ---------------------------------------------------


def embedded_in(prompt_name: str, uri: str, server: str = "default") -> None:
    prompt = Prompt.objects.create(server=server, name=prompt_name)
    PromptMessage.objects.create(prompt=prompt, role="user", resource_uri=uri)


def warnings_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"] if m.level_tag == "warning"]


def bulk_delete_warnings(
    client: Client, model: str, rows: list[Any], app: str = "mcp_app"
) -> list[str]:
    """The warnings of the changelist's delete action asking to delete ``rows``."""
    action = {"action": "delete_selected", "_selected_action": [row.pk for row in rows]}
    return warnings_of(client.post(f"/admin/{app}/{model}/", action))


def test_deleting_a_resource_a_prompt_embeds_warns_before_and_after(admin_client: Client) -> None:
    resource = Resource.objects.create(server="default", uri="notes://one", name="one", text="x")
    embedded_in("brief", " notes://one ")
    embedded_in("also", "notes://one")
    embedded_in("other", "notes://one/more")  # another URI
    embedded_in("templated", "notes://{{ topic }}")  # not known to name it
    path = f"/admin/mcp_app/resource/{resource.pk}/delete/"
    expected = (
        "The prompts “also”, “brief” embed the resource notes://one; once the resource "
        "is deleted, getting them fails."
    )

    asking = admin_client.get(path)
    assert warnings_of(asking) == [expected]

    done = admin_client.post(path, {"post": "yes"}, follow=True)
    assert not Resource.objects.filter(pk=resource.pk).exists()
    assert warnings_of(done) == [expected]


def test_the_bulk_delete_warns_of_each_embedded_resource(admin_client: Client) -> None:
    one = Resource.objects.create(server="default", uri="notes://one", name="one", text="x")
    two = Resource.objects.create(server="default", uri="notes://two", name="two", text="x")
    embedded_in("brief", "notes://one")
    embedded_in("elsewhere", "notes://two", server="other")  # another server's prompt
    assert bulk_delete_warnings(admin_client, "resource", [one, two]) == [
        "The prompt “brief” embeds the resource notes://one; once the resource is deleted, "
        "getting the prompt fails."
    ]


def test_deleting_a_resource_a_template_still_serves_gives_no_warning(
    admin_client: Client,
) -> None:
    resource = Resource.objects.create(server="default", uri="notes://one", name="one", text="x")
    ResourceTemplate.objects.create(name="notes", uri_template="notes://{topic}", text="x")
    embedded_in("brief", "notes://one")
    response = admin_client.get(f"/admin/mcp_app/resource/{resource.pk}/delete/")
    assert warnings_of(response) == []


def test_deleting_the_only_template_serving_an_embedded_uri_warns(admin_client: Client) -> None:
    notes = ResourceTemplate.objects.create(name="notes", uri_template="notes://{topic}", text="x")
    ResourceTemplate.objects.create(name="wide", uri_template="wide://{+path}", text="x")
    Resource.objects.create(server="default", uri="notes://kept", name="kept", text="x")
    embedded_in("brief", " notes://one ")
    embedded_in("also", "notes://one")
    embedded_in("third", "notes://two")
    embedded_in("resource", "notes://kept")  # a resource of its own
    embedded_in("templated", "notes://{{ topic }}")  # not known to name one
    embedded_in("other", "wide://notes/one")  # served by the template that stays
    path = f"/admin/mcp_app/resourcetemplate/{notes.pk}/delete/"
    expected = [
        "The prompts “also”, “brief” embed the resource notes://one; once the template serving "
        "it is deleted, getting them fails.",
        "The prompt “third” embeds the resource notes://two; once the template serving it is "
        "deleted, getting the prompt fails.",
    ]
    assert warnings_of(admin_client.get(path)) == expected
    done = admin_client.post(path, {"post": "yes"}, follow=True)
    assert not ResourceTemplate.objects.filter(pk=notes.pk).exists()
    assert warnings_of(done) == expected


def test_deleting_a_template_another_one_also_serves_gives_no_warning(
    admin_client: Client,
) -> None:
    first = ResourceTemplate.objects.create(name="a", uri_template="notes://{topic}", text="x")
    second = ResourceTemplate.objects.create(name="b", uri_template="notes://{+rest}", text="x")
    off = ResourceTemplate.objects.create(
        name="off", uri_template="off://{x}", text="x", enabled=False
    )
    embedded_in("brief", "notes://one")
    embedded_in("dark", "off://one")  # already unread: its template is disabled
    for template in (first, off):
        path = f"/admin/mcp_app/resourcetemplate/{template.pk}/delete/"
        assert warnings_of(admin_client.get(path)) == []
    # Both at once: nothing serves notes://one any more.
    assert bulk_delete_warnings(admin_client, "resourcetemplate", [first, second]) == [
        "The prompt “brief” embeds the resource notes://one; once the template serving it is "
        "deleted, getting the prompt fails."
    ]


def test_deleting_a_resource_no_prompt_embeds_gives_no_warning(admin_client: Client) -> None:
    resource = Resource.objects.create(server="default", uri="notes://one", name="one", text="x")
    response = admin_client.get(f"/admin/mcp_app/resource/{resource.pk}/delete/")
    assert response.status_code == 200
    assert warnings_of(response) == []


# -- deleting a group or permission that alone restricts rows ------------------------------


def template_tool(name: str = "welcome", **fields: Any) -> Tool:
    return Tool.objects.create(name=name, handler="template", config={"template": "x"}, **fields)


def test_deleting_the_group_that_alone_restricts_a_row_warns_before_and_after(
    admin_client: Client,
) -> None:
    staff = Group.objects.create(name="staff")
    tool = template_tool()
    tool.groups.add(staff)
    template_tool("open")  # restricted by nothing: no business of this deletion
    path = f"/admin/auth/group/{staff.pk}/delete/"
    expected = [
        "Only the group “staff” restricts the MCP tool “welcome (default)”: once it is deleted, "
        "the row is disabled rather than opened to everyone."
    ]

    assert warnings_of(admin_client.get(path)) == expected

    done = admin_client.post(path, {"post": "yes"}, follow=True)
    assert not Group.objects.filter(pk=staff.pk).exists()
    assert warnings_of(done) == expected
    tool.refresh_from_db()
    assert not tool.enabled


def test_the_bulk_delete_of_a_group_warns_of_each_row_it_alone_restricts(
    admin_client: Client,
) -> None:
    staff = Group.objects.create(name="staff")
    for row in (
        Resource.objects.create(uri="notes://one", name="one", text="x"),
        ResourceTemplate.objects.create(name="notes", uri_template="notes://{topic}", text="x"),
        Prompt.objects.create(server="other", name="brief"),
    ):
        row.groups.add(staff)
    assert bulk_delete_warnings(admin_client, "group", [staff], app="auth") == [
        "Only the group “staff” restricts the MCP resource “notes://one (default)”: once it is "
        "deleted, the row is disabled rather than opened to everyone.",
        "Only the group “staff” restricts the MCP resource template “notes (default)”: once it "
        "is deleted, the row is disabled rather than opened to everyone.",
        "Only the group “staff” restricts the MCP prompt “brief (other)”: once it is deleted, "
        "the row is disabled rather than opened to everyone.",
    ]


def test_a_row_also_restricted_by_another_group_or_a_permission_gives_no_warning(
    admin_client: Client,
) -> None:
    staff = Group.objects.create(name="staff")
    editors = Group.objects.create(name="editors")
    template_tool("alone").groups.add(staff)
    template_tool("shared").groups.add(staff, editors)
    prompt = Prompt.objects.create(name="brief")
    prompt.groups.add(staff)
    prompt.permissions.add(Permission.objects.get(codename="view_tool"))
    expected = [
        "Only the group “staff” restricts the MCP tool “alone (default)”: once it is deleted, "
        "the row is disabled rather than opened to everyone."
    ]
    assert warnings_of(admin_client.get(f"/admin/auth/group/{staff.pk}/delete/")) == expected
    assert bulk_delete_warnings(admin_client, "group", [staff], app="auth") == expected


def test_a_disabled_row_gives_no_warning(admin_client: Client) -> None:
    staff = Group.objects.create(name="staff")
    template_tool("off", enabled=False).groups.add(staff)
    template_tool("on").groups.add(staff)
    assert warnings_of(admin_client.get(f"/admin/auth/group/{staff.pk}/delete/")) == [
        "Only the group “staff” restricts the MCP tool “on (default)”: once it is deleted, "
        "the row is disabled rather than opened to everyone."
    ]


def test_groups_deleted_together_warn_of_a_row_they_restrict_together(
    admin_client: Client,
) -> None:
    a = Group.objects.create(name="a")
    b = Group.objects.create(name="b")
    Prompt.objects.create(name="brief").groups.add(a, b)
    # One of them: the other still restricts the row.
    assert warnings_of(admin_client.get(f"/admin/auth/group/{a.pk}/delete/")) == []
    assert bulk_delete_warnings(admin_client, "group", [a, b], app="auth") == [
        "Only the groups “a”, “b” restrict the MCP prompt “brief (default)”: once they are "
        "deleted, the row is disabled rather than opened to everyone."
    ]


class SiteGroupAdmin(GroupAdmin):
    """A site's own Group admin, registered before mcp_app's admin is imported."""

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        messages.info(request, "The site's own check ran.")
        return super().get_deleted_objects(objs, request)


# A site of the test's own: Permission registered (the default site leaves it out) and Group
# by the site's own admin, each then given the warnings as mcp_app.admin gives admin.site's.
access_site = AdminSite(name="access")
access_site.register(Group, SiteGroupAdmin)
access_site.register(Permission)
add_access_delete_warnings(access_site)
urlpatterns = [route("admin/", admin.site.urls), route("access/", access_site.urls)]


@pytest.mark.urls(__name__)
def test_a_permission_admin_and_a_sites_own_group_admin_warn_too(admin_client: Client) -> None:
    staff = Group.objects.create(name="staff")
    view_tool = Permission.objects.get(codename="view_tool")
    template_tool().permissions.add(view_tool)
    Prompt.objects.create(name="brief").groups.add(staff)

    asking = admin_client.get(f"/access/auth/permission/{view_tool.pk}/delete/")
    assert warnings_of(asking) == [
        f"Only the permission “{view_tool}” restricts the MCP tool “welcome (default)”: once it "
        "is deleted, the row is disabled rather than opened to everyone."
    ]

    asking = admin_client.get(f"/access/auth/group/{staff.pk}/delete/")
    assert warnings_of(asking) == [
        "Only the group “staff” restricts the MCP prompt “brief (default)”: once it is "
        "deleted, the row is disabled rather than opened to everyone."
    ]
    # The site's admin keeps its own behaviour, and is wrapped once however often asked.
    assert "The site's own check ran." in [str(m) for m in asking.context["messages"]]
    wrapped = type(access_site.get_model_admin(Group))
    assert issubclass(wrapped, SiteGroupAdmin) and issubclass(wrapped, AccessDeleteWarnings)
    add_access_delete_warnings(access_site)
    assert type(access_site.get_model_admin(Group)) is wrapped
