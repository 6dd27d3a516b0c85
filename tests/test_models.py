"""Definition rows: what ``full_clean`` refuses, what the database refuses, and what save fills in."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, transaction

from mcp_app import Server, rows, servers
from mcp_app.exceptions import AlreadyRegistered, DefinitionError
from mcp_app.models import (
    CatalogGeneration,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
    server_choices,
    template_handler_choices,
    tool_handler_choices,
)
from mcp_app.registry import reserved_meta_key

pytestmark = pytest.mark.django_db

PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010804000000b51c0c02"
    "0000000b4944415478da63646000000006000230819d0000000049454e44ae426082"
)


def errors_of(row: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        row.full_clean()
    return caught.value.message_dict


def template_tool(**fields: Any) -> Tool:
    values: dict[str, Any] = {
        "name": "welcome",
        "handler": "template",
        "config": {"template": "Hello {{ name }}"},
        "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
    }
    values.update(fields)
    return Tool(**values)


# -- tools ---------------------------------------------------------------------------------


def test_the_models_need_no_migration_beyond_those_shipped() -> None:
    from django.core.management import call_command

    # --check exits non-zero when a model changed without its migration.
    call_command("makemigrations", "mcp_app", "--check", "--dry-run", verbosity=0)


def test_a_template_tool_is_valid() -> None:
    tool = template_tool(
        title="Greet",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        annotations={"readOnlyHint": True},
        icons=[
            {"src": "https://example.com/i.png", "sizes": ["48x48"], "theme": "dark"},
            {"src": "data:image/png;base64,iVBORw0KGgo="},
        ],
        # Unprefixed, prefixed, an empty name after a prefix, a reserved prefix (extensions).
        meta={
            "owner": "docs",
            "example.com/owner": "docs",
            "a.b/": 1,
            "io.modelcontextprotocol/ui": {},
        },
    )
    tool.full_clean()
    assert tool.server == "default"
    structured = template_tool(name="echoed", handler="echo", output_schema={"type": "object"})
    structured.full_clean()


@pytest.mark.parametrize(
    ("fields", "field", "text"),
    [
        ({"name": "has space"}, "name", "1-64 characters"),
        ({"name": "x" * 65}, "name", "at most 64"),
        ({"handler": ""}, "handler", "Choose what runs"),
        ({"handler": "nope"}, "handler", "not a valid choice"),
        ({"config": {}}, "config", '{"template": "Hello {{ name }}"}'),
        ({"config": {"template": "{% if %}"}}, "config", "Template syntax error"),
        ({"input_schema": {"type": "string"}}, "input_schema", '"type": "object"'),
        ({"input_schema": ["x"]}, "input_schema", "is an object"),
        (
            {"input_schema": {"type": "object", "properties": 3}},
            "input_schema",
            "invalid schema at /properties",
        ),
        (
            {
                "input_schema": {
                    "type": "object",
                    "properties": {"r": {"type": "number", "x-mcp-header": "R"}},
                }
            },
            "input_schema",
            "x-mcp-header of 'r' needs \"type\" string, integer or boolean (not number).",
        ),
        (
            {"input_schema": {"$schema": "https://example.com/dialect", "type": "object"}},
            "input_schema",
            "invalid schema at /$schema: unsupported dialect 'https://example.com/dialect'",
        ),
        (
            {"input_schema": {"type": "object", "not": {}}},
            "input_schema",
            "No arguments can pass this schema (at the root: its not refuses every value).",
        ),
        (
            {"output_schema": {"type": "array", "minItems": 2, "maxItems": 1}},
            "output_schema",
            "No result can pass this schema (at the root: its minItems 2 is over its maxItems 1).",
        ),
        ({"output_schema": {"type": 12}}, "output_schema", "invalid schema at /type"),
        ({"output_schema": {"type": "object"}}, "output_schema", "returns text"),
        ({"annotations": {"readOnlyHint": "yes"}}, "annotations", "/readOnlyHint"),
        ({"annotations": []}, "annotations", "expected object"),
        ({"icons": [{"mimeType": "image/png"}]}, "icons", "src"),
        ({"icons": {"src": "x"}}, "icons", "expected array"),
        ({"meta": "x"}, "meta", "expected object"),
        ({"icons": [{"src": "icon.png"}]}, "icons", "Icon 1's src must be a URI"),
        ({"icons": [{"src": "javascript:alert(1)"}]}, "icons", "Icon 1's src must be a URI"),
        ({"icons": [{"src": "file:///etc/passwd"}]}, "icons", "Icon 1's src must be a URI"),
        ({"meta": {"bad key": 1}}, "meta", "'bad key' is not a _meta key"),
        ({"meta": {"1.example/x": 1}}, "meta", "'1.example/x' is not a _meta key"),
        ({"meta": {"com.example/-x": 1}}, "meta", "is not a _meta key"),
        ({"meta": {"": 1}}, "meta", "'' is not a _meta key"),
        ({"server": "no-such-server"}, "server", "not a valid choice"),
        ({"name": "add"}, "name", "registered in code"),
    ],
)
def test_tool_validation_names_the_field(fields: dict[str, Any], field: str, text: str) -> None:
    errors = errors_of(template_tool(**fields))
    assert field in errors, errors
    assert any(text in message for message in errors[field]), errors[field]


@pytest.mark.parametrize(
    ("key", "reserved"),
    [
        ("io.modelcontextprotocol/ui", True),
        ("dev.mcp/x", True),
        ("com.MCP.tools/x", True),
        ("io.modelcontextprotocol/", True),
        # The second label decides: not a later one, nor a prefix of one label.
        ("com.example.mcp/x", False),
        ("mcp/x", False),
        ("modelcontextprotocol/x", False),
        ("ui", False),
        ("progressToken", False),
    ],
)
def test_reserved_meta_prefixes_are_those_whose_second_label_is_mcps(
    key: str, reserved: bool
) -> None:
    assert reserved_meta_key(key) is reserved
    template_tool(meta={key: 1}).full_clean()  # MCP's extensions define keys there too


def test_restyling_row_needs_a_code_tool_and_no_handler() -> None:
    ok = Tool(name="add", overrides_code=True, title="Sum")
    ok.full_clean()
    errors = errors_of(
        Tool(name="nothing", overrides_code=True, handler="template", config={"a": 1})
    )
    assert "No tool 'nothing' is registered in code" in errors["name"][0]
    assert "runs the code's handler" in errors["handler"][0]
    assert "has no config" in errors["config"][0]


def test_a_restyle_describes_structured_output_only_of_a_tool_that_has_it() -> None:
    # logo returns an image and text, and declares no output schema: one from a row would
    # make every call fail for want of structured content.
    errors = errors_of(Tool(name="logo", overrides_code=True, output_schema={"type": "object"}))
    assert "declares no output schema" in errors["output_schema"][0]
    Tool(name="logo", overrides_code=True, title="Logo").full_clean()
    # add declares one, which a row may describe otherwise.
    sums = {"type": "object", "properties": {"sum": {"type": "number", "minimum": 0}}}
    Tool(name="add", overrides_code=True, output_schema=sums).full_clean()


def test_a_restyle_whose_output_schema_no_result_of_the_code_could_pass_is_refused() -> None:
    # add's results carry "sum" as a number: a row describing text there would fail every call.
    texts = {"type": "object", "properties": {"sum": {"type": "string"}}, "required": ["sum"]}
    errors = errors_of(Tool(name="add", overrides_code=True, output_schema=texts))
    assert errors["output_schema"] == [
        "No result the code tool's schema allows could pass this one, so every call would "
        "fail: 'sum' is number in the code tool's schema and string in this one."
    ]
    errors = errors_of(Tool(name="add", overrides_code=True, output_schema={"type": "array"}))
    assert errors["output_schema"] == [
        "No result the code tool's schema allows could pass this one, so every call would "
        "fail: the value is object in the code tool's schema and array in this one."
    ]
    # Narrowing what the results are said to be is what a restyle may do.
    whole = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}
    Tool(name="add", overrides_code=True, output_schema=whole).full_clean()


def test_a_restyle_whose_input_schema_no_arguments_could_pass_with_the_codes_is_refused() -> None:
    # add takes "numbers" as an array: a row taking text there would fail every call.
    texts = {"type": "object", "properties": {"numbers": {"type": "string"}}}
    errors = errors_of(Tool(name="add", overrides_code=True, input_schema=texts))
    assert errors["input_schema"] == [
        "No arguments could pass both this schema and the code tool's, so every call would "
        "fail: 'numbers' is array in the code tool's schema and string in this one."
    ]
    closed = {"type": "object", "properties": {"values": {"type": "array"}}}
    closed["additionalProperties"] = False
    errors = errors_of(Tool(name="add", overrides_code=True, input_schema=closed))
    assert (
        "'numbers' is required by the code tool's schema and not allowed by this one"
        in (errors["input_schema"][0])
    )
    # Narrowing what the code takes is what a restyle is for.
    fewer = {"type": "object", "properties": {"numbers": {"type": "array", "maxItems": 3}}}
    Tool(name="add", overrides_code=True, input_schema=fewer).full_clean()


def test_a_template_tool_reading_an_argument_its_schema_does_not_declare_is_refused() -> None:
    typo = template_tool(
        config={"template": "Hello {{ nmae }}{% for x in items %}{{ x }}{% endfor %}"}
    )
    assert errors_of(typo) == {
        "config": [
            "The template reads items, nmae, which the input schema's properties do not name, "
            "so clients would not know to send it; they name name."
        ]
    }
    # What its own tags bind is no argument; a schema or config already refused says so alone.
    template_tool(config={"template": "{% with n=name %}{{ n }}{% endwith %}"}).full_clean()
    bad_schema = errors_of(template_tool(input_schema={"type": "string"}))
    assert "config" not in bad_schema
    bad_template = errors_of(template_tool(config={"template": "{% if %}"}))
    assert bad_template["config"] == [m for m in bad_template["config"] if "Template" in m]


@pytest.mark.parametrize(
    "schema",
    [
        None,
        {"type": "object"},
        {"type": "object", "properties": {}},
        {"type": "object", "properties": {"x": {}}, "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"x": {}}, "additionalProperties": True},
        {"type": "object", "properties": {"x": {}}, "patternProperties": {"^n": {}}},
        {"type": "object", "properties": {"x": {}}, "allOf": [{"properties": {"name": {}}}]},
        {"type": "object", "properties": {"x": {}}, "$ref": "#/$defs/more", "$defs": {"more": {}}},
    ],
)
def test_a_schema_that_admits_or_describes_other_names_leaves_the_template_alone(
    schema: Any,
) -> None:
    template_tool(input_schema=schema).full_clean()


def test_a_schema_closed_to_other_names_is_judged_as_well() -> None:
    closed = {"type": "object", "properties": {"x": {}}, "additionalProperties": False}
    assert "config" in errors_of(template_tool(input_schema=closed))


def test_empty_json_from_a_form_becomes_the_fields_empty_value() -> None:
    tool = template_tool(icons=None, meta=None, annotations=None)
    tool.full_clean()
    assert (tool.icons, tool.meta, tool.annotations) == ([], {}, {})


@pytest.fixture
def other_server() -> Iterator[Server]:
    server = Server("models-other")
    yield server
    servers.pop(server.name, None)


def test_names_are_unique_per_server_on_the_field_and_in_the_database(
    other_server: Server,
) -> None:
    template_tool().save()
    errors = errors_of(template_tool())
    assert errors["name"] == ["MCP tool with this name already exists on server 'default'."]
    template_tool(server=other_server.name).full_clean()  # another server may reuse it
    with pytest.raises(IntegrityError), transaction.atomic():
        template_tool().save()


# -- resources -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "text"),
    [
        ({"uri": "not a uri"}, "uri", "absolute URI"),
        ({"uri": "notes://a\n"}, "uri", "absolute URI"),
        ({"uri": "notes://{topic}"}, "uri", "resource template"),
        ({"text": ""}, "text", "or upload a file"),
        ({"mime_type": "text"}, "mime_type", "MIME type"),
        ({"mime_type": "text/plain\n"}, "mime_type", "MIME type"),
        ({"mime_type": "text/plain\n; x=1"}, "mime_type", "MIME type"),
        ({"mime_type": "text/plain; x=1\r"}, "mime_type", "MIME type"),
        ({"mime_type": "tëxt/plain"}, "mime_type", "MIME type"),
        ({"annotations": {"priority": 2}}, "annotations", "/priority"),
        ({"annotations": {"audience": ["robots"]}}, "annotations", "/audience/0"),
        ({"uri": "file:///readme.txt"}, "uri", "registered in code"),
        # The demo's code template people://{id} serves it, and is read after fixed resources.
        ({"uri": "people://ada"}, "uri", "'people://{id}' registered in code"),
    ],
)
def test_resource_validation_names_the_field(fields: dict[str, Any], field: str, text: str) -> None:
    values: dict[str, Any] = {"uri": "notes://one", "name": "one", "text": "hello"}
    values.update(fields)
    errors = errors_of(Resource(**values))
    assert any(text in message for message in errors[field]), errors


def test_resource_text_and_file_are_exclusive(settings: Any, tmp_path: Any) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    both = Resource(
        uri="notes://both", name="both", text="x", file=SimpleUploadedFile("a.txt", b"a")
    )
    assert "not both" in errors_of(both)["text"][0]


def test_resource_save_measures_text_and_defaults_its_mime_type() -> None:
    resource = Resource.objects.create(uri="notes://one", name="one", text="héllo")
    assert resource.size == len("héllo".encode())
    assert resource.mime_type == "text/plain"
    assert len(resource.digest) == 64


def test_resource_save_measures_an_upload_and_guesses_its_type(
    settings: Any, tmp_path: Any
) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    upload = SimpleUploadedFile("pixel.png", PIXEL, content_type="application/octet-stream")
    resource = Resource(uri="images://pixel", name="pixel", file=upload)
    resource.full_clean()
    resource.save()
    assert resource.size == len(PIXEL)
    assert resource.mime_type == "image/png"
    first_digest = resource.digest
    resource.title = "Pixel"
    resource.save()  # an unchanged file is not read again, and keeps its digest
    assert resource.digest == first_digest
    assert resource.file.storage.exists(resource.file.name or "")


def test_an_upload_is_stored_in_a_folder_no_one_can_guess(settings: Any, tmp_path: Any) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    names = []
    for uri in ("images://one", "images://two"):
        resource = Resource(uri=uri, name=uri[-3:], file=SimpleUploadedFile("pixel.png", PIXEL))
        resource.full_clean()
        resource.save()
        names.append(resource.file.name or "")
    # The same file name, each in a folder of 128 random bits: neither is at a known path.
    top, kind, folder, name = names[0].split("/")
    assert (top, kind, len(folder), name) == ("mcp_app", "resources", 22, "pixel.png")
    assert names[0] != names[1] and names[1].endswith("/pixel.png")
    assert not (tmp_path / "mcp_app" / "resources" / "pixel.png").exists()


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("application/yaml", "application/yaml"),
        ("not a mime", "application/octet-stream"),
        ("application/" + "x" * 120, "application/octet-stream"),
        ("", "application/octet-stream"),
    ],
    ids=["usable", "not-a-mime", "too-long", "none"],
)
def test_an_uploads_sent_type_is_kept_only_if_it_is_a_mime_type_that_fits(
    settings: Any, tmp_path: Any, sent: str, stored: str
) -> None:
    # Python guesses nothing for .blob, so only the browser's word could name the type.
    settings.MEDIA_ROOT = str(tmp_path)
    upload = SimpleUploadedFile("data.blob", b"\x00\x01", content_type=sent)
    resource = Resource(uri="files://data", name="data", file=upload)
    resource.full_clean()
    resource.save()
    assert Resource.objects.get(pk=resource.pk).mime_type == stored
    # The row stays editable: what it holds passes its own validation.
    resource.title = "Data"
    resource.full_clean()


def test_an_upload_whose_extension_leaves_no_room_in_the_path_is_a_form_error(
    settings: Any, tmp_path: Any
) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    name = "a." + "x" * 250  # with mcp_app/resources/<folder>/ in front, over the column's 255
    upload = SimpleUploadedFile(name, b"data")
    errors = errors_of(Resource(uri="files://long", name="long", file=upload))
    assert "give it a shorter name or extension" in errors["file"][0]
    # A long name with a short extension is shortened to fit, as Django does.
    fits = SimpleUploadedFile("b" * 250 + ".txt", b"data")
    resource = Resource(uri="files://fits", name="fits", file=fits)
    resource.full_clean()
    resource.save()
    assert len(resource.file.name or "") <= 255


def test_resource_uri_unique_per_server() -> None:
    Resource.objects.create(uri="notes://one", name="one", text="a")
    errors = errors_of(Resource(uri="notes://one", name="two", text="b"))
    assert "already exists on server 'default'" in errors["uri"][0]


@pytest.mark.parametrize(
    ("stored", "given"),
    [
        ("notes://one", "NOTES://one"),
        ("https://example.com/a", "https://EXAMPLE.com/a"),
        ("notes://a%2fb", "notes://a%2Fb"),
        ("notes://caf\u00e9", "notes://cafe\u0301"),  # composed and decomposed
        ("notes://cafe\u0301", "notes://caf\u00e9"),
        # Case a database may not fold, and a URI whose two forms are mixed.
        ("https://\u00c9x.example/a", "https://\u00e9x.example/a"),
        ("notes://caf\u00e9/cafe\u0301", "notes://caf\u00e9/caf\u00e9"),
        # An octet encoded that needs no encoding, dot segments, a default port.
        ("notes://a/%7Eb", "notes://a/~b"),
        ("file:///docs/./guide/../intro", "file:///docs/intro"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com", "http://example.com/"),
    ],
)
def test_a_resource_uri_that_only_looks_like_another_is_refused(stored: str, given: str) -> None:
    Resource.objects.create(uri=stored, name="one", text="a")
    errors = errors_of(Resource(uri=given, name="two", text="b"))
    assert errors["uri"][0].startswith(f"The resource at {stored!r} on server 'default' has a URI")
    # Another server's, or one that differs otherwise, is not.
    Resource(uri=given, name="two", text="b", server="other").full_clean(exclude=["server"])
    Resource(uri=given + "x", name="two", text="b").full_clean()


def test_a_resource_may_change_its_uri_to_a_look_alike_of_its_own() -> None:
    resource = Resource.objects.create(uri="notes://one", name="one", text="a")
    resource.uri = "NOTES://one"
    resource.full_clean()


def test_look_alikes_are_kept_apart_among_enabled_rows_only() -> None:
    Resource.objects.create(uri="notes://one", name="one", text="a", enabled=False)
    # A disabled row is not listed, and one being saved disabled is checked once enabled.
    twin = Resource(uri="NOTES://one", name="two", text="b")
    twin.full_clean()
    twin.save()
    first = Resource.objects.get(name="one")
    first.text = "edited while disabled"
    first.full_clean()
    first.enabled = True
    assert "'NOTES://one'" in errors_of(first)["uri"][0]


def test_a_look_alike_pair_saved_before_the_rule_stays_editable() -> None:
    Resource.objects.create(uri="notes://one", name="one", text="a")
    Resource.objects.create(uri="NOTES://one", name="two", text="b")
    second = Resource.objects.get(name="two")
    second.text = "edited"
    second.full_clean()  # its URI and state unchanged
    second.uri = "Notes://one"
    assert "'notes://one'" in errors_of(second)["uri"][0]


def test_a_resource_moved_to_a_server_with_a_look_alike_is_refused() -> None:
    Resource.objects.create(uri="notes://one", name="one", text="a")
    elsewhere = Resource.objects.create(uri="NOTES://one", name="two", text="b", server="other")
    elsewhere.server = "default"
    with pytest.raises(ValidationError) as raised:
        elsewhere.full_clean()
    assert "'notes://one'" in raised.value.message_dict["uri"][0]


def test_a_resource_uri_that_looks_like_a_code_resources_is_refused() -> None:
    # The demo site registers file:///readme.txt in code.
    errors = errors_of(Resource(uri="FILE:///readme.txt", name="readme", text="b"))
    assert errors["uri"][0].startswith("The resource at 'file:///readme.txt' on server 'default'")


# -- resource templates --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "text"),
    [
        ({"uri_template": "notes://{topic"}, "uri_template", "invalid URI template"),
        ({"uri_template": "notes://{topic*}"}, "uri_template", ""),
        ({"uri_template": "notes://plain"}, "uri_template", "add a resource instead"),
        ({"uri_template": "{topic}"}, "uri_template", "absolute URIs"),
        ({"uri_template": "{a}://x"}, "uri_template", "begin it with its scheme"),
        ({"uri_template": "no{a}tes://x"}, "uri_template", "begin it with its scheme"),
        ({"text": "{% for %}"}, "text", "Template syntax error"),
        ({"text": ""}, "text", "or choose a handler"),
        ({"handler": "echo"}, "text", "not both"),
        ({"config": {"a": 1}}, "config", "Only a handler"),
        ({"name": "person"}, "name", "registered in code"),
        ({"name": "bad name"}, "name", "1-64 characters"),
        ({"mime_type": "not a mime"}, "mime_type", "Enter a MIME type"),
        ({"uri_template": "t8://{a.b}"}, "uri_template", "cannot read the variable(s) a.b"),
        ({"uri_template": "t8://{%41x}/{_z}"}, "uri_template", "variable(s) %41x, _z:"),
        ({"uri_template": "t8://{1}"}, "uri_template", "cannot read the variable(s) 1:"),
        (
            {"text": "Notes on {{ subject }}{% if on %}{{ topic|default:when }}{% endif %}"},
            "text",
            "The template reads on, subject, when, which the URI template does not give, so it "
            "would always be empty; it gives topic.",
        ),
        (
            {"text": "{% for word in words %}{{ word }}{% endfor %}"},
            "text",
            "The template reads words, which the URI template does not give",
        ),
    ],
)
def test_template_validation_names_the_field(fields: dict[str, Any], field: str, text: str) -> None:
    values: dict[str, Any] = {
        "name": "notes",
        "uri_template": "notes://{topic}",
        "text": "Notes on {{ topic }}",
    }
    values.update(fields)
    errors = errors_of(ResourceTemplate(**values))
    assert any(text in message for message in errors[field]), errors


@pytest.mark.parametrize(
    "text",
    [
        "{% for word in topic.split %}{{ forloop.counter }} {{ word|upper }}{% endfor %}",
        "{% with t=topic %}{{ t }}{% endwith %}{% firstof topic 'none' as f %}{{ f }}",
        "{% if topic == None or topic is True %}{{ 'x' }}{{ 3 }}{% endif %}{# {{ nothing }} #}",
        "{% now 'Y' as year %}{{ year }} {% cycle 'a' topic as c %}{{ c }}",
        "{% filter upper %}{{ topic }}{% endfilter %}{% verbatim %}{{ raw }}{% endverbatim %}",
        # A tag whose reads are not followed: nothing is said.
        "{% load i18n %}{% blocktranslate %}{{ anything }}{% endblocktranslate %}",
    ],
)
def test_a_template_reading_only_its_variables_and_its_own_names_is_valid(text: str) -> None:
    ResourceTemplate(name="notes", uri_template="notes://{topic}", text=text).full_clean()


def test_a_template_row_read_after_one_matching_all_its_uris_is_refused() -> None:
    ResourceTemplate.objects.create(
        name="all-notes", uri_template="notes://{+path}", text="{{ path }}", order=0
    )
    later = ResourceTemplate(
        name="summary", uri_template="notes://{topic}/summary", text="{{ topic }}", order=1
    )
    errors = errors_of(later)
    assert "'all-notes' (notes://{+path}) is read before this one" in errors["uri_template"][0]
    # Read first instead, it is served for its URIs and the other for the rest.
    later.order = -1
    later.full_clean()


def test_a_template_row_that_would_hide_one_read_after_it_is_refused() -> None:
    ResourceTemplate.objects.create(
        name="summary", uri_template="notes://{topic}/summary", text="{{ topic }}", order=5
    )
    errors = errors_of(
        ResourceTemplate(name="all", uri_template="notes://{+path}", text="{{ path }}", order=1)
    )
    assert "'summary' (notes://{topic}/summary) is read after this one" in errors["uri_template"][0]
    assert "it would never be read" in errors["uri_template"][0]


def test_templates_that_share_only_some_uris_are_both_kept() -> None:
    ResourceTemplate.objects.create(name="one", uri_template="notes://{topic}", text="1", order=0)
    # notes://x/summary is not a URI of notes://{topic} ({topic} takes no "/").
    ResourceTemplate(
        name="two", uri_template="notes://{topic}/summary", text="2", order=1
    ).full_clean()
    # A disabled row is in no catalog: it hides nothing.
    ResourceTemplate(
        name="off", uri_template="notes://{+p}", text="3", order=-1, enabled=False
    ).full_clean()


def test_a_template_row_every_uri_of_which_a_code_template_matches_is_refused() -> None:
    site = servers["default"]
    site.add_resource_template(
        lambda v, c: "", uri_template="files://{+path}", name="files_for_test"
    )
    try:
        # Code templates are read before every row.
        errors = errors_of(ResourceTemplate(name="docs", uri_template="files://{d}/x", text="x"))
        assert "'files://{+path}' registered in code" in errors["uri_template"][0]
        ResourceTemplate(name="photo", uri_template="people://{id}/photo", text="x").full_clean()
    finally:
        site.remove_resource_template("files_for_test")


def test_a_handler_takes_variables_a_template_text_could_not_read() -> None:
    # The handler gets the variables as a dict, whatever their names.
    ResourceTemplate(name="dotted", uri_template="echo://{a.b}/{_z}", handler="echo").full_clean()


def test_template_bound_to_a_handler() -> None:
    row = ResourceTemplate(
        name="echoed", uri_template="echo://{word}", handler="echo", config={"loud": True}
    )
    row.full_clean()


def test_template_names_and_uri_templates_are_unique_per_server() -> None:
    ResourceTemplate.objects.create(name="notes", uri_template="notes://{topic}", text="x")
    errors = errors_of(ResourceTemplate(name="notes", uri_template="other://{t}", text="y"))
    assert "already exists" in errors["name"][0]
    errors = errors_of(ResourceTemplate(name="other", uri_template="notes://{topic}", text="y"))
    assert "already exists" in errors["uri_template"][0]


def test_two_template_rows_of_one_shape_are_refused(other_server: Server) -> None:
    ResourceTemplate.objects.create(name="notes", uri_template="notes://{topic}", text="x")
    errors = errors_of(ResourceTemplate(name="other", uri_template="notes://{t}", text="y"))
    assert (
        "The template row 'notes' (notes://{topic}) has this URI template's shape"
        in (errors["uri_template"][0])
    )
    # Disabled, or on another server, it clashes with nothing.
    ResourceTemplate(name="other", uri_template="notes://{t}", text="y", enabled=False).full_clean()
    ResourceTemplate(
        name="other", uri_template="notes://{t}", text="y", server=other_server.name
    ).full_clean()
    # A row edited keeps its own shape.
    ResourceTemplate.objects.get(name="notes").full_clean()


@pytest.mark.parametrize(
    ("stored", "given"),
    [
        ("notes://{topic}", "Notes://{t}"),
        ("http://example.com/{topic}", "http://EXAMPLE.com/{topic}"),
        ("http://example.com{/p}", "http://Example.COM{/q}"),
        ("notes://a%2fb/{x}", "notes://a%2Fb/{x}"),
        ("notes://a/%7E{x}", "notes://a/~{x}"),
        ("notes://caf\u00e9/{x}", "notes://cafe\u0301/{x}"),
    ],
)
def test_a_uri_template_whose_uris_only_look_like_another_s_is_refused(
    stored: str, given: str
) -> None:
    ResourceTemplate.objects.create(name="one", uri_template=stored, text="x")
    errors = errors_of(ResourceTemplate(name="two", uri_template=given, text="y"))
    assert errors["uri_template"][0].startswith(
        f"The template row 'one' ({stored}) on server 'default' makes URIs that differ"
    )
    # Disabled, or differing otherwise, it is not.
    ResourceTemplate(name="two", uri_template=given, text="y", enabled=False).full_clean()
    ResourceTemplate(name="two", uri_template=given + "x", text="y").full_clean()
    # A pair saved before the rule stays editable.
    ResourceTemplate.objects.create(name="two", uri_template=given, text="y")
    ResourceTemplate.objects.get(name="two").full_clean()


@pytest.mark.parametrize(
    "given",
    [
        # The case of a host an expression is part of, or of a user name, is not the host's.
        "notes://{h}.Example/x",
        "http://User@example.com/{p}",
        "notes://Ex{x}/",
    ],
)
def test_a_uri_template_differing_otherwise_is_not_a_look_alike(given: str) -> None:
    stored = given.replace("Example", "example").replace("User", "user").replace("Ex{", "ex{")
    ResourceTemplate.objects.create(name="one", uri_template=stored, text="x")
    ResourceTemplate(name="two", uri_template=given, text="y").full_clean()


def test_look_alikes_of_code_templates_are_refused() -> None:
    # The demo's code template people://{id}.
    errors = errors_of(ResourceTemplate(name="folk", uri_template="PEOPLE://{who}", text="x"))
    assert errors["uri_template"][0].startswith(
        "The resource template 'people://{id}' registered in code on server 'default' makes"
    )
    errors = errors_of(Resource(uri="PEOPLE://ada", name="ada", text="x"))
    assert errors["uri"][0].startswith(
        "The resource template 'people://{id}' registered in code on server 'default' serves a"
        " URI that differs"
    )


@pytest.mark.parametrize("uri_template", ["notes://{!topic}", "notes://{}"])
def test_a_uri_template_that_does_not_parse_gets_its_parse_error_alone(uri_template: str) -> None:
    ResourceTemplate.objects.create(name="notes", uri_template="notes://{topic}", text="x")
    errors = errors_of(ResourceTemplate(name="other", uri_template=uri_template, text="y"))
    assert len(errors["uri_template"]) == 1
    assert errors["uri_template"][0].startswith(f"invalid URI template {uri_template!r}")


@pytest.mark.parametrize(
    ("modified", "valid"),
    [
        ("2025-01-12T15:00:58Z", True),
        ("2025-01-12T15:00:58.123+02:00", True),
        ("2025-01-12t15:00:58z", True),
        ("yesterday", False),
        ("2025-01-12", False),
        ("2025-01-12T15:00:58", False),  # no offset
        ("2025-13-12T15:00:58Z", False),
        ("2025-02-30T15:00:58Z", False),
    ],
)
def test_last_modified_is_an_rfc_3339_date_time(modified: str, valid: bool) -> None:
    for row in (
        Resource(uri="notes://one", name="one", text="x", annotations={"lastModified": modified}),
        ResourceTemplate(
            name="n", uri_template="n://{t}", text="x", annotations={"lastModified": modified}
        ),
    ):
        if valid:
            row.full_clean()
        else:
            assert (
                "'lastModified' must be an RFC 3339 date-time" in (errors_of(row)["annotations"][0])
            )


# -- prompts -------------------------------------------------------------------------------


def test_prompt_and_its_inline_rows() -> None:
    prompt = Prompt(name="summarize", title="Summarize")
    prompt.full_clean()
    prompt.save()
    argument = PromptArgument(prompt=prompt, name="topic", required=True)
    argument.full_clean()
    argument.save()
    assert "Use letters, digits" in errors_of(PromptArgument(prompt=prompt, name="1x"))["name"][0]
    # Django's templates refuse a variable starting with "_": no message could use it.
    assert (
        "starting with a letter" in errors_of(PromptArgument(prompt=prompt, name="_x"))["name"][0]
    )
    assert "already exists" in str(errors_of(PromptArgument(prompt=prompt, name="topic")))
    PromptMessage(prompt=prompt, text="About {{ topic }}").full_clean()
    PromptMessage(prompt=prompt, resource_uri="notes://{{ topic }}").full_clean()
    assert (
        "not both"
        in errors_of(PromptMessage(prompt=prompt, text="a", resource_uri="b:c"))["text"][0]
    )
    assert "or a resource URI" in errors_of(PromptMessage(prompt=prompt))["text"][0]
    assert (
        "Template syntax"
        in errors_of(PromptMessage(prompt=prompt, text="{{ a|nofilter }}"))["text"][0]
    )
    bad_uri = errors_of(PromptMessage(prompt=prompt, resource_uri="no uri"))
    assert "absolute URI" in bad_uri["resource_uri"][0]
    # Single braces are not template syntax: the URI is judged as it is.
    bad_uri = errors_of(PromptMessage(prompt=prompt, resource_uri="{topic} notes"))
    assert "absolute URI" in bad_uri["resource_uri"][0]
    PromptMessage(prompt=prompt, resource_uri="{% if topic %}notes://a{% endif %}").full_clean()
    assert "registered in code" in errors_of(Prompt(name="introduce"))["name"][0]
    assert str(prompt) == "summarize (default)"
    assert str(argument) == "topic"


# -- choices and the row handler registry --------------------------------------------------


@rows.row_handler("echo", label="Echo the variables", kinds=("templates", "tools"))
def echo(values: dict[str, Any], context: Any) -> str:
    return f"{values} {context.config}"


def test_choices_come_from_the_registries() -> None:
    assert ("default", "default") in server_choices()
    assert ("echo", "Echo the variables") in template_handler_choices()
    assert "template" in dict(tool_handler_choices())
    assert "template" not in dict(template_handler_choices())


def test_row_handler_refuses_duplicates_and_bad_declarations() -> None:
    with pytest.raises(AlreadyRegistered):
        rows.row_handler("echo")(echo)
    with pytest.raises(ValueError):
        rows.row_handler("")
    with pytest.raises(ValueError):
        rows.row_handler("x", kinds=("prompts",))
    assert rows.get_handler("echo") is not None
    assert rows.get_handler("missing") is None


def test_row_handler_refuses_a_function_that_cannot_take_its_arguments() -> None:
    def lookup(arguments: Any) -> str:
        return "x"

    with pytest.raises(DefinitionError) as raised:
        rows.row_handler("lookup-one-argument")(lookup)
    assert str(raised.value) == (
        "row handler 'lookup-one-argument': its handler must take (arguments, context): "
        "too many positional arguments"
    )
    with pytest.raises(DefinitionError, match=r"must take \(variables, context\)"):
        rows.row_handler("tpl-one-argument", kinds=("templates",))(lookup)
    assert rows.get_handler("lookup-one-argument") is None
    assert rows.get_handler("tpl-one-argument") is None


def test_catalog_generation_str() -> None:
    assert str(CatalogGeneration(server="default", value=3)) == "default @ 3"
