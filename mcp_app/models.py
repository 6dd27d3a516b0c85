"""Database tables of the app: sessions, stream events, delivery messages, definitions as rows, audit."""

from __future__ import annotations

import hashlib
import mimetypes
import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation, ValidationError
from django.core.files.storage import Storage
from django.db import models, router, transaction
from django.utils import timezone
from django.utils.text import capfirst

from . import rows
from . import schema as schema_module
from .fields import OrderedJSONField, WireJSONField
from .registry import (
    NAME_RE,
    URI_RE,
    annotations_problems,
    header_problem,
    icons_problems,
    meta_problems,
    uri_identity,
)
from .uritemplate import URITemplate, URITemplateError


class Session(models.Model):
    """An initialize-era session, found by every worker process through the database."""

    id = models.CharField(primary_key=True, max_length=64)
    server = models.CharField(max_length=100)
    protocol_version = models.CharField(max_length=20)
    client_info = WireJSONField(default=dict, blank=True)
    capabilities = WireJSONField(default=dict, blank=True)
    log_level = models.CharField(max_length=16, blank=True, default="")
    subscriptions = WireJSONField(default=list, blank=True)
    caller = models.CharField(max_length=100, default="anonymous")
    initialized = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(db_index=True)

    class Meta:
        verbose_name = "MCP session"

    def __str__(self) -> str:
        return f"{self.server} session {self.id[:8]}…"


class StreamEvent(models.Model):
    """One event sent on a session's stream, kept for a while so a client can resume."""

    session_id = models.CharField(max_length=64, db_index=True)
    stream = models.CharField(max_length=64)
    seq = models.PositiveIntegerField()
    message = WireJSONField()
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = "MCP stream event"
        constraints = [
            models.UniqueConstraint(fields=["stream", "seq"], name="mcp_app_event_stream_seq")
        ]

    def __str__(self) -> str:
        return f"{self.stream}-{self.seq}"


class DeliveryMessage(models.Model):
    """A message published through the database delivery backend, polled by every process."""

    id = models.BigAutoField(primary_key=True)
    channel = models.CharField(max_length=200)
    message = WireJSONField()
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = "MCP delivery message"

    def __str__(self) -> str:
        return f"{self.channel} #{self.id}"


# -- definitions as data -----------------------------------------------------------------
#
# Site staff edit these rows in the admin; ``mcp_app.rows`` merges them with the code
# definitions of their server, and ``mcp_app.signals`` announces every committed edit.

#: Prompt argument names: usable as ``{{ name }}`` in the messages' templates (which refuse
#: a variable starting with ``_``).
ARGUMENT_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}\Z")
#: A type and subtype, and parameters on the same line (no line break anywhere).
MIME_RE = re.compile(r"^[\w.+-]+/[\w.+-]+(?:[ \t]*;[^\r\n]*)?\Z", re.ASCII)
#: A name a Django template reads as a variable: not a number, a lookup ("a.b") or "_x".
TEMPLATE_VARIABLE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\Z")
#: A URI's scheme and its colon, as a URI template must begin.
SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
#: Django template syntax ({{ x }}, {% tag %}, {# note #}): a prompt message's resource URI
#: with it is made from the arguments, and known only when the prompt is got.
TEMPLATE_SYNTAX_RE = re.compile(r"\{[{%#]")

META_SCHEMA: dict[str, Any] = {"type": "object"}


def server_choices() -> list[tuple[str, str]]:
    """The servers whose catalogs take rows, for the ``server`` field of every definition."""
    from .server import servers

    return [(name, name) for name, server in servers.items() if server.rows]


def tool_handler_choices() -> list[tuple[str, str]]:
    """The row handlers offered to tool rows."""
    return rows.handler_choices("tools")


def template_handler_choices() -> list[tuple[str, str]]:
    """The row handlers offered to resource template rows."""
    return rows.handler_choices("templates")


Errors = dict[str, list[str]]


def _add(errors: Errors, field: str, message: str) -> None:
    errors.setdefault(field, []).append(message)


def _check_json(errors: Errors, field: str, value: Any, schema: dict[str, Any], what: str) -> None:
    if value is None:
        return
    problems = schema_module.validate(schema, value)
    if problems:
        _add(errors, field, schema_module.format_problems(problems, prefix=f"Invalid {what}"))


def _check_annotations(errors: Errors, value: Any, kind: str = "resource") -> None:
    for problem in annotations_problems(value, kind):
        _add(errors, "annotations", problem)


def _check_name(errors: Errors, name: str, kind: str) -> None:
    if name and not NAME_RE.match(name):
        _add(
            errors,
            "name",
            f"A {kind} name is 1-64 characters of letters, digits, '_', '-' and '.'.",
        )


def _check_meets(errors: Errors, field: str, code: Any, row: Any, lead: str) -> None:
    """A restyling row's schema in ``field`` that no value passing the code's could pass."""
    if not isinstance(row, dict):
        return
    clashes = schema_module.incompatible(code, row, ("the code tool's schema", "this one"))
    if clashes:
        _add(errors, field, f"{lead}, so every call would fail: {'; '.join(clashes)}.")


def _check_template(errors: Errors, field: str, source: str) -> None:
    problem = rows.template_error(source)
    if problem:
        _add(errors, field, problem)


def _check_reads(errors: Errors, field: str, source: str, given: Sequence[str], lack: str) -> None:
    problem = reads_problem(source, given, lack)
    if problem:
        _add(errors, field, problem)


def reads_problem(source: str, given: Sequence[str], lack: str) -> str | None:
    """Why a template that reads a variable none of ``given`` is would always render it
    empty (``lack`` says who does not give it), or ``None`` (also for a template that does
    not compile, which says so elsewhere)."""
    if rows.template_error(source):
        return None
    unknown = unread(source, given)
    if not unknown:
        return None
    gives = f"it gives {', '.join(given)}" if given else "it gives none"
    return (
        f"The template reads {', '.join(unknown)}, which {lack}, so it would always be empty; "
        f"{gives}."
    )


def unread(source: str, given: Iterable[str]) -> list[str]:
    """The variables a compiled template reads that are none of ``given``, sorted; none for a
    template whose reads ``rows.template_reads`` cannot follow."""
    reads = rows.template_reads(source)
    return sorted(reads - set(given)) if reads is not None else []


def _check_handler_config(errors: Errors, handler: str, kind: str, config: Any) -> None:
    found = rows.get_handler(handler)
    if found is None or kind not in found.kinds or found.check is None:
        return  # an unknown handler is the choice field's error
    try:
        found.check(config)
    except ValidationError as exc:
        for message in exc.messages:
            _add(errors, "config", message)


def _check_schema_field(errors: Errors, field: str, value: Any, *, root_object: bool) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        _add(errors, field, 'A JSON Schema here is an object, e.g. {"type": "object"}.')
        return
    if root_object and value.get("type") != "object":
        _add(errors, field, 'The root of an input schema must have "type": "object".')
        return
    try:
        schema_module.check_schema(value)
    except schema_module.SchemaError as exc:
        _add(errors, field, str(exc))
        return
    never = schema_module.unsatisfiable(value)
    if never is not None:
        what = "arguments" if root_object else "result"
        _add(errors, field, f"No {what} can pass this schema ({never}).")
        return
    problem = header_problem(value) if root_object else None
    if problem:
        _add(errors, field, f"{problem}.")  # it begins with the keyword, kept as spelled


class _Tracked(models.Model):
    """A row whose every save commits together with its server's catalog generation."""

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        using = kwargs.get("using") or router.db_for_write(type(self), instance=self)
        # ``post_save`` (where ``mcp_app.signals`` bumps the generation) runs after Django's
        # own atomic block; this one holds the row and the bump in the same transaction.
        with transaction.atomic(using=using):
            super().save(*args, **kwargs)


class Definition(_Tracked):
    """What every kind of definition row has: its server, identity, face and listing place."""

    KIND = ""

    server = models.CharField(
        max_length=100,
        choices=server_choices,
        default="default",
        help_text="The MCP server (mcp_app.servers) whose catalog lists this.",
    )
    name = models.CharField(max_length=200)
    title = models.CharField(max_length=200, blank=True, help_text="A display name for people.")
    description = models.TextField(blank=True)
    icons = models.JSONField(
        default=list,
        blank=True,
        help_text='A list of icons, e.g. [{"src": "https://example.com/i.png", '
        '"mimeType": "image/png", "sizes": ["48x48"]}].',
    )
    meta = models.JSONField(
        "_meta",
        default=dict,
        blank=True,
        help_text="An object sent as the definition's _meta.",
    )
    enabled = models.BooleanField(default=True, help_text="Only enabled rows are listed.")
    order = models.IntegerField(
        default=0,
        help_text="Rows list after code definitions, by this number, then by name.",
    )
    updated = models.DateTimeField(auto_now=True)
    groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="mcp_%(class)ss",
        help_text="Members of any of these groups may see and use this; with no groups and no "
        "permissions, everyone may. Superusers always may.",
    )
    permissions = models.ManyToManyField(
        "auth.Permission",
        blank=True,
        related_name="mcp_%(class)ss",
        help_text="Users holding any of these permissions (directly or through a group) may "
        "see and use this too.",
    )

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.name} ({self.server})"

    #: The fields identifying a row within its server, for the uniqueness error.
    UNIQUE_FIELDS: tuple[str, ...] = ("name",)

    def unique_error_message(
        self, model_class: type[models.Model], unique_check: Sequence[str]
    ) -> ValidationError:
        """Put a per-server duplicate on the field that repeats, not on the whole form."""
        checked = tuple(unique_check)
        if len(checked) == 2 and checked[0] == "server" and checked[1] in self.UNIQUE_FIELDS:
            field = checked[1]
            label = getattr(self._meta.get_field(field), "verbose_name", field)
            message = (
                f"{capfirst(self._meta.verbose_name)} with this {label} already exists on "
                f"server {self.server!r}."
            )
            error = ValidationError({field: [ValidationError(message, code="unique")]})
            # UniqueConstraint.validate() re-raises this with its code.
            error.code = "unique_together"
            return error
        return super().unique_error_message(model_class, unique_check)

    def _normalize_json(self, fields: Mapping[str, Callable[[], Any]]) -> None:
        # A JSON field the form left empty is None; store the field's empty value instead.
        for name, empty in fields.items():
            if getattr(self, name) is None:
                setattr(self, name, empty())

    def clean(self) -> None:
        """Raises: ValidationError, keyed by field."""
        self._normalize_json({"icons": list, "meta": dict})
        errors: Errors = {}
        for problem in icons_problems(self.icons):
            _add(errors, "icons", problem)
        _check_json(errors, "meta", self.meta, META_SCHEMA, "_meta")
        if "meta" not in errors and self.meta:
            for problem in meta_problems(self.meta):
                _add(errors, "meta", problem)
        self.check_definition(errors)
        if errors:
            raise ValidationError(errors)

    def check_definition(self, errors: Errors) -> None:
        """Add this kind's problems to ``errors``."""

    def _stored_as_is(self, field: str) -> bool:
        """Whether this row is stored, enabled, on this server, with this value of ``field``:
        then a rule newer than the row leaves it alone (a pair saved before stays editable)."""
        if self.pk is None:
            return False
        stored = (
            type(self)
            ._default_manager.filter(pk=self.pk)
            .values_list("server", field, "enabled")
            .first()
        )
        return stored == (self.server, getattr(self, field), True)

    def code_clash(self, errors: Errors, field: str, key: str, kind: str, noun: str) -> None:
        if key and key in rows.code_keys(self.server, kind):
            _add(
                errors,
                field,
                f"A {noun} {key!r} is registered in code on server {self.server!r}; "
                "code definitions take precedence, so this row would never be listed.",
            )


#: Keywords by which an object schema admits or describes property names beyond
#: ``properties`` (``False`` for the first two closes it instead).
OPEN_NAMES = (
    "additionalProperties",
    "unevaluatedProperties",
    "patternProperties",
    "propertyNames",
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
    "$dynamicRef",
    "if",
    "then",
    "else",
    "dependentSchemas",
)


class Tool(Definition):
    """A tool defined as a row: bound to a row handler, or restyling a tool defined in code."""

    KIND = "tools"

    name = models.CharField(
        max_length=64, help_text="1-64 letters, digits, '_', '-', '.'; unique per server."
    )
    overrides_code = models.BooleanField(
        "restyles a code tool",
        default=False,
        help_text="Change the tool of this name registered in code instead of defining a new "
        "one: each attribute set here replaces the code's, blank ones keep it; unticking "
        "'enabled' removes the code tool from the catalog. No handler or config then.",
    )
    handler = models.CharField(
        max_length=100,
        blank=True,
        choices=tool_handler_choices,
        help_text="What runs when the tool is called (offered by code with "
        "@mcp_app.rows.row_handler).",
    )
    config = models.JSONField(
        default=dict,
        blank=True,
        help_text="Passed to the handler as context.config; the template handler takes "
        '{"template": "Hello {{ name }}"}.',
    )
    input_schema = OrderedJSONField(
        null=True,
        blank=True,
        help_text='A JSON Schema (2020-12) of the arguments, root "type": "object". Blank: no '
        "arguments (a new tool) or the code tool's schema (a restyling row).",
    )
    output_schema = OrderedJSONField(
        null=True,
        blank=True,
        help_text="A JSON Schema (2020-12) of the structured result, if any.",
    )
    annotations = models.JSONField(
        default=dict,
        blank=True,
        help_text='Hints such as {"readOnlyHint": true, "openWorldHint": false}.',
    )

    class Meta:
        verbose_name = "MCP tool"
        ordering = ["server", "order", "name"]
        constraints = [
            models.UniqueConstraint(fields=["server", "name"], name="mcp_app_tool_server_name")
        ]

    def _check_template_reads(self, errors: Errors) -> None:
        """A template argument the input schema's properties do not name is one clients do
        not know to send (a typo, most often): it would render empty. Judged only where the
        properties are the schema's whole say on names: with none, or with a keyword that
        admits or describes others (``additionalProperties``, ``allOf``), it is left alone."""
        schema = self.input_schema if isinstance(self.input_schema, dict) else {}
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return
        if any(schema.get(keyword, False) is not False for keyword in OPEN_NAMES):
            return
        unknown = unread(self.config["template"], properties)
        if unknown:
            _add(
                errors,
                "config",
                f"The template reads {', '.join(unknown)}, which the input schema's properties "
                f"do not name, so clients would not know to send it; they name "
                f"{', '.join(properties)}.",
            )

    def check_definition(self, errors: Errors) -> None:
        self._normalize_json({"annotations": dict, "config": dict})
        _check_name(errors, self.name, "tool")
        _check_schema_field(errors, "input_schema", self.input_schema, root_object=True)
        _check_schema_field(errors, "output_schema", self.output_schema, root_object=False)
        _check_annotations(errors, self.annotations, "tool")
        if self.overrides_code:
            if self.handler:
                _add(errors, "handler", "A row restyling a code tool runs the code's handler.")
            if self.config:
                _add(errors, "config", "A row restyling a code tool has no config.")
            code = rows.code_definition(self.server, "tools", self.name) if self.name else None
            if self.name and code is None:
                _add(
                    errors,
                    "name",
                    f"No tool {self.name!r} is registered in code on server {self.server!r}.",
                )
            elif code is not None and code.output_schema is None and self.output_schema is not None:
                _add(
                    errors,
                    "output_schema",
                    "The code tool declares no output schema, so its results carry no "
                    "structured content for one to describe: every call would fail.",
                )
            elif code is not None:
                # The code's results, which follow its schema, must pass this one too.
                _check_meets(
                    errors,
                    "output_schema",
                    code.output_schema,
                    self.output_schema,
                    "No result the code tool's schema allows could pass this one",
                )
            if code is not None:
                # Arguments must pass the code's schema as well as this one.
                _check_meets(
                    errors,
                    "input_schema",
                    code.input_schema,
                    self.input_schema,
                    "No arguments could pass both this schema and the code tool's",
                )
            return
        if not self.handler:
            _add(errors, "handler", "Choose what runs when the tool is called.")
        else:
            _check_handler_config(errors, self.handler, "tools", self.config)
        if self.handler == "template" and self.output_schema is not None:
            # The engine would refuse every call: a rendered template is text, not structure.
            _add(errors, "output_schema", "The template handler returns text; leave this blank.")
        if self.handler == "template" and not errors.keys() & {"config", "input_schema"}:
            self._check_template_reads(errors)
        if self.name in rows.code_keys(self.server, "tools"):
            _add(
                errors,
                "name",
                f"A tool {self.name!r} is registered in code on server {self.server!r}; tick "
                "'restyles a code tool' to change it.",
            )


def resource_storage() -> Storage:
    """Where uploaded resource files go: ``STORAGES["mcp_app"]`` if set, else the default."""
    from django.conf import settings
    from django.core.files.storage import default_storage, storages

    if "mcp_app" in settings.STORAGES:
        return storages["mcp_app"]
    return default_storage


def resource_upload_to(instance: Any, filename: str) -> str:
    """An uploaded file's name in its storage: a folder of its own, named by 128 random bits,
    so that a storage the site serves (``MEDIA_URL``, a public bucket) gives no one a way to
    guess it; the file keeps its own name within."""
    return f"{UPLOADS}{secrets.token_urlsafe(16)}/{filename}"


#: Where uploaded resource files go in their storage.
UPLOADS = "mcp_app/resources/"


OCTET_STREAM = "application/octet-stream"


def _guessed_mime(file_name: str) -> str:
    """The type a resource's content gets when none is given: from the file's name, else
    ``text/plain`` for text."""
    if not file_name:
        return "text/plain"
    return mimetypes.guess_type(file_name)[0] or OCTET_STREAM


class Resource(Definition):
    """A resource defined as a row: a text, or an uploaded file served as a blob."""

    KIND = "resources"
    UNIQUE_FIELDS = ("uri",)

    uri = models.CharField("URI", max_length=512, help_text="An absolute URI, unique per server.")
    name = models.CharField(max_length=200, help_text="A short identifier, e.g. readme.")
    mime_type = models.CharField(
        "MIME type",
        max_length=100,
        blank=True,
        help_text="Blank: text/plain for text, guessed from the file name for a file.",
    )
    text = models.TextField(blank=True, help_text="The content, served as text.")
    file = models.FileField(
        upload_to=resource_upload_to,
        storage=resource_storage,
        # Room for the random folder and a long file name.
        max_length=255,
        blank=True,
        help_text="Or a file, served as a base64 blob (instead of text).",
    )
    size = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    digest = models.CharField("SHA-256", max_length=64, blank=True, editable=False)
    annotations = models.JSONField(
        default=dict,
        blank=True,
        help_text='E.g. {"audience": ["user"], "priority": 0.5}.',
    )

    class Meta:
        verbose_name = "MCP resource"
        ordering = ["server", "order", "name"]
        constraints = [
            models.UniqueConstraint(fields=["server", "uri"], name="mcp_app_resource_server_uri")
        ]

    def __str__(self) -> str:
        return f"{self.uri} ({self.server})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self._forget_stale_guess()
        if self.file:
            # A new upload (not yet committed to storage), or a file named through the ORM,
            # is measured once, here; the digest tells later saves whether content changed.
            uploaded = not getattr(self.file, "_committed", True)
            if uploaded or self.size is None or not self.digest:
                self.size, self.digest = _measure(self.file.chunks())
            if not self.mime_type:
                sent = getattr(self.file.file, "content_type", None) if uploaded else None
                guessed = mimetypes.guess_type(self.file.name or "")[0]
                self.mime_type = guessed or self._storable_mime(sent) or OCTET_STREAM
        else:
            self.size, self.digest = _measure([self.text.encode()])
            if not self.mime_type:
                self.mime_type = "text/plain"
        super().save(*args, **kwargs)

    def _storable_mime(self, sent: Any) -> str | None:
        """The type a browser sent with an upload, if it is a MIME type the field holds: the
        client's word, which may be anything."""
        field = self._meta.get_field("mime_type")
        assert isinstance(field, models.CharField)
        if isinstance(sent, str) and len(sent) <= (field.max_length or 0) and MIME_RE.match(sent):
            return sent
        return None

    def _forget_stale_guess(self) -> None:
        """A MIME type that was guessed for the content being replaced is guessed again.

        The admin shows the guess in the field, so an unchanged field comes back holding it.
        """
        if self.pk is None or not self.mime_type:
            return
        old = type(self)._default_manager.filter(pk=self.pk).values("file", "text").first()
        if old is None:
            return
        name = self.file.name if self.file else ""
        if (old["file"] or "", old["text"]) == (name, "" if name else self.text):
            return  # the same content
        if self.mime_type == _guessed_mime(old["file"] or ""):
            self.mime_type = ""

    def check_definition(self, errors: Errors) -> None:
        self._normalize_json({"annotations": dict})
        if self.uri and (not URI_RE.match(self.uri) or "{" in self.uri):
            _add(
                errors,
                "uri",
                "Enter an absolute URI such as file:///notes.txt (a URI with {variables} is a "
                "resource template).",
            )
        if self.mime_type and not MIME_RE.match(self.mime_type):
            _add(errors, "mime_type", "Enter a MIME type such as text/markdown.")
        if self.text and self.file:
            _add(errors, "text", "Give either text or a file, not both.")
        elif not self.text and not self.file:
            _add(errors, "text", "Give the resource's text, or upload a file.")
        if self.file and not getattr(self.file, "_committed", True):
            self._check_storable_name(errors)
        _check_annotations(errors, self.annotations)
        self.code_clash(errors, "uri", self.uri, "resources", "resource at")
        if self.uri and "uri" not in errors:
            template = rows.code_template_for(self.server, self.uri)
            if template is not None:
                _add(
                    errors,
                    "uri",
                    f"The resource template {template.uri_template!r} registered in code on "
                    f"server {self.server!r} serves this URI; code definitions take precedence, "
                    "so a row must not take it over.",
                )
        if self.uri and "uri" not in errors:
            twin = self._look_alike()
            if twin is not None:
                _add(
                    errors,
                    "uri",
                    f"{twin[0]} on server {self.server!r} {twin[1]} a URI that differs from this "
                    "one only in what RFC 3986 normalizes (the case of its scheme or host, "
                    "percent-encoding, '.' and '..' segments of a path that begins with '/', an "
                    "empty or default port, an empty path for '/') or in Unicode normalization: "
                    "clients may take the two for one. Choose a URI that differs otherwise.",
                )

    def _look_alike(self) -> tuple[str, str] | None:
        """What has or serves another URI that ``uri_identity`` takes for this one, of this
        server's code resources and templates or enabled rows ("The resource at 'x'", "has");
        ``None`` if there is none, or if this row is disabled or keeps the URI and state it was
        stored with (a pair saved before this rule stays editable)."""
        if not self.enabled or self._stored_as_is("uri"):
            return None  # checked when it is enabled, as the rules for listed rows are
        manager = type(self)._default_manager
        mine = uri_identity(self.uri)
        for uri in rows.code_keys(self.server, "resources"):
            if uri != self.uri and uri_identity(uri) == mine:
                return f"The resource at {uri!r}", "has"
        template = rows.code_template_for(self.server, mine)
        if template is not None:
            return f"The resource template {template.uri_template!r} registered in code", "serves"
        # Compared here, not in SQL: a database's case folding and Unicode forms differ.
        others = (
            manager.filter(server=self.server, enabled=True)
            .exclude(pk=self.pk)
            .exclude(uri=self.uri)
            .values_list("uri", flat=True)
        )
        twin = next((uri for uri in others if uri_identity(uri) == mine), None)
        return None if twin is None else (f"The resource at {twin!r}", "has")

    def _check_storable_name(self, errors: Errors) -> None:
        """An upload the storage could not name within the column (a long extension leaves it
        nothing to shorten) is a form error, not a failure when it is saved."""
        field = self._meta.get_field("file")
        assert isinstance(field, models.FileField)
        try:
            name = field.generate_filename(self, self.file.name or "")
            self.file.storage.get_available_name(name, max_length=field.max_length)
        except SuspiciousFileOperation as exc:
            _add(
                errors,
                "file",
                f"This file cannot be stored under its name ({exc}). Its stored path may have "
                f"{field.max_length} characters: give it a shorter name or extension.",
            )


def _measure(chunks: Iterable[bytes]) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


class ResourceTemplate(Definition):
    """A resource template defined as a row: a Django template of the URI's variables."""

    KIND = "templates"
    UNIQUE_FIELDS = ("name", "uri_template")

    name = models.CharField(
        max_length=64, help_text="1-64 letters, digits, '_', '-', '.'; unique per server."
    )
    uri_template = models.CharField(
        "URI template",
        max_length=512,
        help_text="An RFC 6570 template, e.g. notes://{topic}; unique per server.",
    )
    mime_type = models.CharField("MIME type", max_length=100, blank=True)
    text = models.TextField(
        blank=True,
        help_text="A Django template rendered with the URI's variables, e.g. Notes on {{ topic }}.",
    )
    handler = models.CharField(
        max_length=100,
        blank=True,
        choices=template_handler_choices,
        help_text="Or a handler offered by code, called with the variables (instead of text).",
    )
    config = models.JSONField(
        default=dict, blank=True, help_text="Passed to the handler as context.config."
    )
    annotations = models.JSONField(
        default=dict,
        blank=True,
        help_text='E.g. {"audience": ["user"], "priority": 0.5}.',
    )

    class Meta:
        verbose_name = "MCP resource template"
        ordering = ["server", "order", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["server", "name"], name="mcp_app_resourcetemplate_server_name"
            ),
            models.UniqueConstraint(
                fields=["server", "uri_template"], name="mcp_app_resourcetemplate_server_uri"
            ),
        ]

    def check_definition(self, errors: Errors) -> None:
        self._normalize_json({"annotations": dict, "config": dict})
        _check_name(errors, self.name, "resource template")
        variables: tuple[str, ...] = ()
        if self.uri_template:
            try:
                parsed = URITemplate(self.uri_template)
                parsed.match("")  # what the matcher cannot serve fails here, not on a read
            except URITemplateError as exc:
                _add(errors, "uri_template", str(exc))
            else:
                variables = parsed.variables
                if not parsed.variables:
                    _add(
                        errors,
                        "uri_template",
                        "A URI template has {variables}; without any, add a resource instead.",
                    )
                elif not URI_RE.match(self.uri_template.replace("{", "x").replace("}", "x")):
                    _add(errors, "uri_template", "The template must make absolute URIs.")
                elif not SCHEME_RE.match(self.uri_template):
                    # A variable in the scheme may make no scheme at all ({a}://x with a=1).
                    _add(
                        errors,
                        "uri_template",
                        "The template must make absolute URIs: begin it with its scheme, "
                        "as in notes://{topic}.",
                    )
        if self.text and self.handler:
            _add(errors, "text", "Give either a template text or a handler, not both.")
        elif not self.text and not self.handler:
            _add(errors, "text", "Give a template text, or choose a handler.")
        elif self.text:
            _check_template(errors, "text", self.text)
            if variables:  # none: the URI template's own error
                _check_reads(errors, "text", self.text, variables, "the URI template does not give")
            unreadable = [name for name in variables if not TEMPLATE_VARIABLE_RE.match(name)]
            if unreadable:
                _add(
                    errors,
                    "uri_template",
                    f"The template text cannot read the variable(s) {', '.join(unreadable)}: "
                    "a Django template names a variable with letters, digits and '_', not "
                    "first ('.' reads an attribute). Rename them, or choose a handler.",
                )
        else:
            _check_handler_config(errors, self.handler, "templates", self.config)
        if self.config and not self.handler:
            _add(errors, "config", "Only a handler takes a config.")
        if self.mime_type and not MIME_RE.match(self.mime_type):
            _add(errors, "mime_type", "Enter a MIME type such as text/markdown.")
        _check_annotations(errors, self.annotations)
        self.code_clash(errors, "name", self.name, "templates", "resource template")
        if "uri_template" in errors:
            return  # a template that does not parse has no shape to compare
        shape = rows.template_shape(self.uri_template)
        if shape in rows.code_uri_templates(self.server):
            _add(
                errors,
                "uri_template",
                f"A resource template of this URI template's shape is registered in code on server "
                f"{self.server!r}; it matches first, so this row would never be read.",
            )
        elif self.enabled and self.uri_template:
            twin, alike = self._twins(shape)
            if twin is not None:
                _add(
                    errors,
                    "uri_template",
                    f"The template row {twin.name!r} ({twin.uri_template}) has this URI "
                    f"template's shape on server {self.server!r}: the two match the same URIs, "
                    "so one would never be read.",
                )
            elif alike is not None:
                _add(
                    errors,
                    "uri_template",
                    f"{alike} on server {self.server!r} makes URIs that differ from this one's "
                    "only in the case of their scheme or host, in percent-encoding or in "
                    "Unicode normalization: clients may take them for one. Choose a URI "
                    "template that differs otherwise.",
                )
            else:
                self._check_shadowing(errors)

    def _twins(self, shape: str) -> tuple[ResourceTemplate | None, str | None]:
        """Another enabled row of this server whose URI template has ``shape``; else, what makes
        URIs that look like this template's (``rows.templates_alike``) among this server's code
        templates and enabled rows, unless this row keeps the template and state it was stored
        with."""
        alike = None
        looking = not self._stored_as_is("uri_template")
        code = rows.code_template_alike(self.server, self.uri_template) if looking else None
        if code is not None:
            alike, looking = f"The resource template {code!r} registered in code", False
        for other in self._other_rows().only("name", "uri_template"):
            theirs = other.uri_template
            if rows.template_shape(theirs) == shape:
                return other, None
            if looking and rows.templates_alike(theirs, self.uri_template):
                alike, looking = f"The template row {other.name!r} ({theirs})", False
        return None, alike

    def _other_rows(self) -> models.QuerySet[ResourceTemplate]:
        """This server's other enabled rows, but for one of this very template, which the
        unique constraint refuses in its own words."""
        others = ResourceTemplate.objects.filter(server=self.server, enabled=True)
        if self.pk is not None:
            others = others.exclude(pk=self.pk)
        return others.exclude(uri_template=self.uri_template)

    def _check_shadowing(self, errors: Errors) -> None:
        """Refuse a template every URI of which one read first also matches (``{+path}``
        before ``{topic}/summary``), or one that would so hide a row read after it."""
        mine = URITemplate(self.uri_template)
        code = rows.code_template_covering(self.server, mine)
        if code is not None:
            _add(
                errors,
                "uri_template",
                f"The resource template {code!r} registered in code on server {self.server!r} "
                "matches every URI of this one and is read first, so this row would never be "
                "read.",
            )
            return
        others = self._other_rows()
        # Read first as the catalog orders rows: by the database's collation of names.
        before = set(
            others.filter(
                models.Q(order__lt=self.order) | models.Q(order=self.order, name__lt=self.name)
            ).values_list("pk", flat=True)
        )
        for other in others.only("name", "uri_template", "order"):
            try:
                theirs = URITemplate(other.uri_template)
            except URITemplateError:
                continue  # a row saved without validation: left out of the catalog anyway
            first = other.pk in before
            hidden, by = (mine, theirs) if first else (theirs, mine)
            if rows.covers(by, hidden):
                _add(
                    errors,
                    "uri_template",
                    f"The template row {other.name!r} ({other.uri_template}) is read "
                    f"{'before' if first else 'after'} this one, and "
                    + (
                        "it matches every URI of this one, so this row would never be read."
                        if first
                        else "this one matches every URI of it, so it would never be read."
                    ),
                )
                return


class Prompt(Definition):
    """A prompt defined as a row: its arguments and ordered messages are inline rows."""

    KIND = "prompts"

    name = models.CharField(
        max_length=64, help_text="1-64 letters, digits, '_', '-', '.'; unique per server."
    )

    class Meta:
        verbose_name = "MCP prompt"
        ordering = ["server", "order", "name"]
        constraints = [
            models.UniqueConstraint(fields=["server", "name"], name="mcp_app_prompt_server_name")
        ]

    def check_definition(self, errors: Errors) -> None:
        _check_name(errors, self.name, "prompt")
        self.code_clash(errors, "name", self.name, "prompts", "prompt")


class PromptArgument(_Tracked):
    """One argument of a prompt row."""

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="arguments")
    name = models.CharField(
        max_length=64, help_text="Letters, digits and '_', usable as {{ name }} in messages."
    )
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    required = models.BooleanField(default=False)
    order = models.IntegerField(default=0)

    class Meta:
        verbose_name = "argument"
        ordering = ["order", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["prompt", "name"], name="mcp_app_promptargument_prompt_name"
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Raises: ValidationError, keyed by field."""
        if self.name and not ARGUMENT_RE.match(self.name):
            raise ValidationError({"name": "Use letters, digits and '_', starting with a letter."})


class PromptMessage(_Tracked):
    """One message of a prompt row: a text template, or a resource embedded by URI."""

    ROLES = [("user", "user"), ("assistant", "assistant")]

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="messages")
    order = models.IntegerField(default=0)
    role = models.CharField(max_length=16, choices=ROLES, default="user")
    text = models.TextField(
        blank=True,
        help_text="A Django template rendered with the arguments, e.g. Summarize {{ topic }}.",
    )
    resource_uri = models.CharField(
        "resource URI",
        max_length=512,
        blank=True,
        help_text="Or the URI of a resource to embed; it may use the arguments, as in "
        "notes://{{ topic|urlencode }}.",
    )

    class Meta:
        verbose_name = "message"
        ordering = ["order", "id"]

    def __str__(self) -> str:
        return f"{self.role} message {self.order}"

    def clean(self) -> None:
        """Raises: ValidationError, keyed by field."""
        errors: Errors = {}
        if self.text and self.resource_uri:
            _add(errors, "text", "Give either text or a resource URI, not both.")
        elif not self.text and not self.resource_uri:
            _add(errors, "text", "Give the message's text, or a resource URI to embed.")
        elif self.text:
            _check_template(errors, "text", self.text)
        else:
            _check_template(errors, "resource_uri", self.resource_uri)
            made = TEMPLATE_SYNTAX_RE.search(self.resource_uri)
            if not made and not URI_RE.match(self.resource_uri):
                _add(errors, "resource_uri", "Enter an absolute URI such as file:///notes.txt.")
        if errors:
            raise ValidationError(errors)


class CatalogGeneration(models.Model):
    """A counter per server that moves with every committed edit of its definition rows."""

    server = models.CharField(max_length=100, unique=True)
    value = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "MCP catalog generation"

    def __str__(self) -> str:
        return f"{self.server} @ {self.value}"


# -- the audit trail ---------------------------------------------------------------------


class ToolCall(models.Model):
    """One finished tool call, resource read or prompt get, written by ``mcp_app.audit``."""

    OUTCOMES = [
        ("complete", "complete"),
        ("error", "error (isError result)"),
        ("input_required", "input required"),
        ("failed", "failed (JSON-RPC error)"),
        ("cancelled", "cancelled (by the client, or a task)"),
    ]
    ERAS = [("modern", "2026-07-28 (stateless)"), ("legacy", "initialize era (session)")]

    # Named ``user``: a foreign key called ``caller`` would take the ``caller_id`` column.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="mcp_tool_calls",
        help_text="The authenticated caller; empty for anonymous callers and deleted users.",
    )
    caller_id = models.CharField(
        "caller ID",
        max_length=100,
        help_text="user:<pk> or anonymous; kept when the user is deleted.",
    )
    server = models.CharField(max_length=100)
    method = models.CharField(max_length=32)
    name = models.CharField(max_length=512, help_text="The tool or prompt name, or the URI read.")
    era = models.CharField(max_length=16, choices=ERAS)
    duration_ms = models.FloatField("duration (ms)")
    outcome = models.CharField(max_length=16, choices=OUTCOMES)
    error = models.TextField(blank=True)
    rounds = models.PositiveIntegerField(default=0, help_text="Rounds of input asked for.")
    arguments = WireJSONField(
        null=True,
        blank=True,
        help_text="Kept only with MCP_APP['AUDIT_ARGUMENTS'] = True.",
    )
    created = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name = "MCP tool call"
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["server", "created"], name="mcp_app_toolcall_server")]

    def __str__(self) -> str:
        return f"{self.method} {self.name} by {self.caller_id} ({self.outcome})"


#: The definition rows that groups and permissions restrict.
ROW_MODELS: tuple[type[Definition], ...] = (Tool, Resource, ResourceTemplate, Prompt)

# Access edits made without saving the row (``tool.groups.add(group)``, deleting a group)
# change the catalog too.
rows.connect_access_signals(ROW_MODELS)


# -- tasks -----------------------------------------------------------------------------------


class Task(models.Model):
    """A tool call going on as a task (the 2026-07-28 tasks extension), for every worker to
    answer ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` about."""

    STATUSES = [
        ("working", "working"),
        ("input_required", "input required"),
        ("completed", "completed"),
        ("failed", "failed"),
        ("cancelled", "cancelled"),
    ]

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    server = models.CharField(max_length=100)
    tool = models.CharField(max_length=128)
    #: Who created it (``state.caller_id``): only they may follow it.
    caller = models.CharField(max_length=100)
    status = models.CharField(max_length=16, choices=STATUSES, default="working")
    status_message = models.TextField(blank=True)
    arguments = WireJSONField(null=True, blank=True)
    #: The input requests the work waits for, by their key on the task's wire.
    input_requests = WireJSONField(default=dict, blank=True)
    #: The answers to them received so far, by the same keys.
    answers = WireJSONField(default=dict, blank=True)
    round = models.PositiveIntegerField(default=0)
    result = WireJSONField(null=True, blank=True)
    error = WireJSONField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)
    ttl_ms = models.PositiveBigIntegerField(null=True, blank=True)
    expires = models.DateTimeField(null=True, blank=True, db_index=True)
    #: Until when the process running the work vouches for it; renewed while it runs.
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "MCP task"
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.tool} task {self.id} ({self.status})"
