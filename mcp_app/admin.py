"""The admin of definition rows (tools, resources, resource templates, prompts) and of the audit trail."""

from __future__ import annotations

import datetime
import json
import logging
import re
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.views.main import ERROR_FLAG
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DatabaseError, connections, models, router, transaction
from django.db.models import Count, Q, QuerySet
from django.forms import ModelMultipleChoiceField
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.html import format_html

from . import playground, rows
from .exceptions import DefinitionError
from .forms import CodeTextarea, JSONTextarea, PrettyJSONField, RowForm
from .models import (
    ROW_MODELS,
    TEMPLATE_SYNTAX_RE,
    Definition,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Task,
    Tool,
    ToolCall,
    reads_problem,
)
from .registry import reserved_meta_key
from .server import servers

JSON_FIELD: dict[str, Any] = {"form_class": PrettyJSONField, "widget": JSONTextarea}
ACCESS: tuple[str, Any] = (
    "Access",
    {
        "fields": ("groups", "permissions"),
        "description": "Who may see and use this: members of any group, holders of any "
        "permission, and superusers. Leave both empty for everyone. The endpoint's own "
        "authentication and permission classes apply first.",
    },
)


logger = logging.getLogger(__name__)

#: Lookups a change list's query may not use: the admin makes none of them, and a pattern
#: the database cannot compile fails only as the page renders.
REFUSED_LOOKUPS = ("__regex", "__iregex")
#: A change list's own query keys, not filters: the page, ordering, and the like (not the
#: search, whose term makes a query that may fail: too long a pattern for SQLite's LIKE).
PAGE_KEYS = frozenset({ERROR_FLAG, "o", "p", "all", "_popup", "_to_field"})
#: A date lookup by year, which the database's bounds for it are made from as dates.
YEAR_LOOKUP_RE = re.compile(r"__(?:iso_)?year(?:__(?:exact|gt|gte|lt|lte))?\Z")


def _year_out_of_range(key: str, value: str) -> bool:
    """Whether ``key=value`` filters by a year no date has (0, 10000): the query's bounds
    would fail to be made as the page renders. A year that is no number is Django's to
    refuse."""
    if not YEAR_LOOKUP_RE.search(key):
        return False
    try:
        year = int(value)
    except ValueError:
        return False
    return not datetime.MINYEAR <= year <= datetime.MAXYEAR


class AppAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """What every admin of the app shares: a change list whose query, however written, is a
    bad lookup rather than a server error."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        items = _query_items(request)
        if (
            any("\x00" in key or "\x00" in value for key, value in items)
            or any(key.endswith(REFUSED_LOOKUPS) for key, _ in items)
            or any(_year_out_of_range(key, value) for key, value in items)
        ):
            # PostgreSQL takes no NUL in a query's text, and the filter or search would fail
            # as the page renders: shown again without it, as Django does for a bad lookup.
            return self._bad_lookup(request)
        if request.method == "POST" and not self._selected_are_keys(request):
            messages.warning(request, "The selected items are not ones this list holds.")
            return HttpResponseRedirect(request.get_full_path())
        if request.method != "GET" or all(key in PAGE_KEYS for key, _ in items):
            # Without a filter, a failure is not the query's doing (and the page without one
            # would fail again); Django checks its own keys. Left unrendered, for a subclass
            # or middleware to change.
            return super().changelist_view(request, extra_context)
        try:
            # A savepoint: on PostgreSQL a failed query would spoil the request's transaction.
            with transaction.atomic(using=router.db_for_read(self.model)):
                response = super().changelist_view(request, extra_context)
                # The rows are read as the page renders: render it here, to catch that.
                if isinstance(response, TemplateResponse) and not response.is_rendered:
                    response.render()
        except (DatabaseError, OverflowError):
            logger.warning("A change list's query failed", exc_info=True)
            return self._bad_lookup(request)
        return response

    def _bad_lookup(self, request: HttpRequest) -> HttpResponse:
        return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")

    def _selected_are_keys(self, request: HttpRequest) -> bool:
        """Whether each item an action was asked for is a primary key the database can hold
        (a hand-made ``abc`` or a 20-digit number would fail inside Django's action)."""
        return all(
            _storable_key(self.model, value) for value in request.POST.getlist(ACTION_CHECKBOX_NAME)
        )


def _storable_key(model: type[models.Model], value: Any) -> bool:
    """Whether ``value`` is a primary key of ``model`` the database can hold: a query with a
    number past its column's range fails (SQLite's driver cannot even send it)."""
    pk = model._meta.pk
    assert pk is not None
    return _storable(pk, connections[router.db_for_read(model)], value)


def _storable(field: Any, connection: Any, value: Any) -> bool:
    """Whether ``value`` is one ``field`` of ``connection``'s database can hold."""
    try:
        key = field.to_python(value)
    except ValidationError:
        return False
    if key is None or key == "":
        return False
    # Only the integer types have a range (a task's key is text).
    kind = field.get_internal_type()
    if isinstance(key, int) and kind in connection.ops.integer_field_ranges:
        low, high = connection.ops.integer_field_range(kind)
        return low is None or high is None or low <= key <= high
    return True


class StorableChoiceField(ModelMultipleChoiceField):  # type: ignore[type-arg]
    """Django's many-to-many choice field, where a key the database cannot hold is an invalid
    value (a form error) rather than a query that fails."""

    def clean(self, value: Any) -> Any:
        queryset = self.queryset
        if queryset is not None and isinstance(value, list | tuple):
            meta = queryset.model._meta
            field = meta.get_field(self.to_field_name) if self.to_field_name else meta.pk
            connection = connections[queryset.db]
            for key in value:
                # An instance: the initial value of a disabled field.
                if isinstance(key, models.Model) or key in self.empty_values:
                    continue
                if not _storable(field, connection, key):
                    raise ValidationError(
                        self.error_messages["invalid_pk_value"],
                        code="invalid_pk_value",
                        params={"pk": key},
                    )
        return super().clean(value)


def _query_items(request: HttpRequest) -> list[tuple[str, str]]:
    return [(key, value) for key, values in request.GET.lists() for value in values]


class DefinitionAdmin(AppAdmin):
    """What every definition's admin shares: filters, actions, and the catalog preview."""

    form = RowForm
    formfield_overrides = {
        models.JSONField: JSON_FIELD,
        models.TextField: {"widget": forms.Textarea(attrs={"rows": 3})},
    }
    list_filter: ClassVar[tuple[str, ...]] = ("server", "enabled")
    search_fields: ClassVar[tuple[str, ...]] = ("name", "title", "description")
    readonly_fields: ClassVar[tuple[str, ...]] = ("catalog_entry", "updated")
    filter_horizontal = ("groups", "permissions")
    actions = ("enable", "disable")
    save_on_top = True

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # The "access" column reads every listed row's groups and permissions.
        return super().get_queryset(request).prefetch_related("groups", "permissions")

    def formfield_for_manytomany(
        self, db_field: Any, request: HttpRequest, **kwargs: Any
    ) -> ModelMultipleChoiceField[Any] | None:
        if db_field.name == "permissions":
            # Each choice's label names its app and model: one query, not one per choice.
            qs = kwargs.get("queryset", db_field.remote_field.model.objects)
            kwargs["queryset"] = qs.select_related("content_type")
        kwargs.setdefault("form_class", StorableChoiceField)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    @admin.display(description="access")
    def access(self, obj: Definition) -> str:
        groups = [group.name for group in obj.groups.all()]
        permissions = [permission.codename for permission in obj.permissions.all()]
        if not groups and not permissions:
            return "everyone"
        return ", ".join(groups + permissions)

    # Only for those who may change rows: the changelist shows its actions to view-only staff.
    @admin.action(description="Enable selected %(verbose_name_plural)s", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected %(verbose_name_plural)s", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._set_enabled(request, queryset, False)

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[Any], value: bool) -> None:
        # Row by row, not QuerySet.update(): each save is an edit the catalog must hear of.
        refused: list[str] = []
        with transaction.atomic(using=queryset.db):
            changed = 0
            for row in queryset:
                if row.enabled != value:
                    row.enabled = value
                    if value:
                        # Checked as the form checks it: a disabled row is not held to the
                        # rules that keep enabled rows apart (one per URI template shape...).
                        problem = _invalid(row)
                        if problem:
                            refused.append(f"{row}: {problem}")
                            continue
                    row.save(update_fields=["enabled", "updated"])
                    changed += 1
        state = "enabled" if value else "disabled"
        self.message_user(request, f"{changed} row(s) {state}.", messages.SUCCESS)
        if refused:
            self.message_user(
                request,
                f"{len(refused)} row(s) not enabled, as saving them would fail: "
                + "; ".join(refused),
                messages.ERROR,
            )

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        for text in _reserved_meta_warnings(obj):
            messages.warning(request, text)

    @admin.display(description="As clients see it")
    def catalog_entry(self, obj: Definition) -> str:
        if obj.pk is None:
            return "Shown once saved."
        try:
            wire = self.wire(obj)
        except DefinitionError as exc:
            return f"Not listed: {exc}"
        if wire is None:
            return "Not listed (disabled)."
        return format_html(
            "<pre>{}</pre>", json.dumps(wire, indent=2, ensure_ascii=False, cls=DjangoJSONEncoder)
        )

    def wire(self, obj: Any) -> dict[str, Any] | None:
        """The row's entry in its list, or ``None`` when it is not listed.

        Raises:
            DefinitionError: the row does not make a valid definition.
        """
        raise NotImplementedError


def _reserved_meta_warnings(row: Definition) -> list[str]:
    """A warning for each ``_meta`` key under a prefix MCP reserves. Not an error: MCP's own
    extensions define keys there, and a row may carry one of theirs."""
    meta = row.meta if isinstance(row.meta, dict) else {}
    return [
        f"The _meta key “{key}” is under a prefix MCP reserves for itself and its extensions "
        "(one whose second label is modelcontextprotocol or mcp). Unless an MCP extension "
        "defines it, use a prefix of your own, such as com.example/."
        for key in meta
        if reserved_meta_key(key)
    ]


def _invalid(row: Definition) -> str:
    """Why the row fails the checks its change form makes, or ``""``."""
    try:
        row.full_clean()
    except ValidationError as exc:
        return " ".join(exc.messages)
    return ""


@admin.register(Tool)
class ToolAdmin(DefinitionAdmin):
    list_display = ("name", "title", "server", "runs", "access", "enabled", "order", "updated")
    list_filter = ("server", "enabled", "overrides_code", "handler", "groups")
    fieldsets = (
        (None, {"fields": ("server", "name", "title", "description")}),
        ("What runs", {"fields": ("overrides_code", "handler", "config")}),
        ("Schemas", {"fields": ("input_schema", "output_schema")}),
        ("Presentation", {"fields": ("annotations", "icons", "meta")}),
        ("Listing", {"fields": ("enabled", "order", "updated")}),
        ACCESS,
        ("Catalog", {"fields": ("catalog_entry",)}),
    )

    @admin.display(description="runs")
    def runs(self, obj: Tool) -> str:
        if obj.overrides_code:
            return "code (restyled)" if obj.enabled else "code (hidden)"
        return obj.handler or "-"

    def wire(self, obj: Tool) -> dict[str, Any] | None:
        if not obj.enabled:
            return None
        if obj.overrides_code:
            code = rows.code_definition(obj.server, "tools", obj.name)
            if code is None:
                raise DefinitionError(f"no tool {obj.name!r} is registered in code")
            return rows.restyled(code, obj).wire
        return rows.tool_def(obj).wire


@admin.register(Resource)
class ResourceAdmin(DefinitionAdmin):
    list_display = (
        "uri",
        "name",
        "server",
        "mime_type",
        "size",
        "access",
        "enabled",
        "order",
        "updated",
    )
    list_filter = ("server", "enabled", "mime_type", "groups")
    search_fields = ("uri", "name", "title", "description")
    readonly_fields = ("catalog_entry", "updated", "size", "digest")
    fieldsets = (
        (None, {"fields": ("server", "uri", "name", "title", "description")}),
        ("Content", {"fields": ("text", "file", "mime_type", "size", "digest")}),
        ("Presentation", {"fields": ("annotations", "icons", "meta")}),
        ("Listing", {"fields": ("enabled", "order", "updated")}),
        ACCESS,
        ("Catalog", {"fields": ("catalog_entry",)}),
    )
    formfield_overrides = {
        models.JSONField: JSON_FIELD,
        models.TextField: {"widget": CodeTextarea(attrs={"rows": 8})},
    }

    def wire(self, obj: Resource) -> dict[str, Any] | None:
        return rows.resource_def(obj).wire if obj.enabled else None

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # Called for the confirmation page and again for the deletion itself, by the delete
        # view and the bulk action alike: the warning shows on the page that asks, and on the
        # one after.
        for text in _embedding_warnings(list(objs)):
            messages.warning(request, text)
        return super().get_deleted_objects(objs, request)


def _embedding_warnings(resources: list[Resource]) -> list[str]:
    """What prompt rows whose messages embed one of ``resources`` by its URI would lose: not
    those a template of the server goes on serving it to."""
    found = []
    for resource in resources:
        server = servers.get(resource.server)
        if server is not None and server.catalog().find_template(resource.uri) is not None:
            continue
        candidates = PromptMessage.objects.filter(
            prompt__server=resource.server, resource_uri__contains=resource.uri
        ).values_list("prompt__name", "resource_uri")
        # A message's URI is rendered as a template and stripped: only the same text, give or
        # take the space around it, surely names this resource.
        names = {name for name, uri in candidates if uri.strip() == resource.uri}
        found += _losing(names, f"the resource {resource.uri}", "resource")
    return found


def _losing(prompts: set[str], what: str, deleted: str) -> list[str]:
    """The warning that ``prompts`` embed ``what``, which goes with the ``deleted`` row."""
    names = sorted(prompts)
    if len(names) == 1:
        return [
            f"The prompt “{names[0]}” embeds {what}; once the {deleted} is deleted, getting "
            "the prompt fails."
        ]
    if names:
        listed = ", ".join(f"“{name}”" for name in names)
        return [
            f"The prompts {listed} embed {what}; once the {deleted} is deleted, getting them fails."
        ]
    return []


def _template_embedding_warnings(templates: list[ResourceTemplate]) -> list[str]:
    """What prompt rows whose messages embed a URI that only ``templates`` serve would lose.

    A URI a resource has, or a template that stays matches, is still read once they are
    gone; a message whose URI is itself a template is not known to name one.
    """
    found = []
    for server_name in sorted({template.server for template in templates}):
        server = servers.get(server_name)
        if server is None:
            continue
        names = {template.name for template in templates if template.server == server_name}
        catalog = server.catalog()
        going = [t for t in catalog.templates if t.source == "row" and t.name in names]
        if not going:
            continue  # disabled ones serve nothing now
        staying = [t for t in catalog.templates if t not in going]
        lost: dict[str, set[str]] = {}
        candidates = PromptMessage.objects.filter(prompt__server=server_name).exclude(
            resource_uri=""
        )
        for prompt, raw in candidates.values_list("prompt__name", "resource_uri"):
            uri = raw.strip()
            if TEMPLATE_SYNTAX_RE.search(uri) or uri in catalog.resource_map:
                continue
            if any(t.matcher.match(uri) is not None for t in staying):
                continue
            serving = next((t for t in going if t.matcher.match(uri) is not None), None)
            if serving is not None:
                lost.setdefault(uri, set()).add(prompt)
        for uri, prompts in sorted(lost.items()):
            found += _losing(prompts, f"the resource {uri}", "template serving it")
    return found


@admin.register(ResourceTemplate)
class ResourceTemplateAdmin(DefinitionAdmin):
    list_display = (
        "name",
        "uri_template",
        "server",
        "mime_type",
        "access",
        "enabled",
        "order",
        "updated",
    )
    search_fields = ("name", "uri_template", "title", "description")
    fieldsets = (
        (None, {"fields": ("server", "name", "uri_template", "title", "description")}),
        ("Content", {"fields": ("text", "handler", "config", "mime_type")}),
        ("Presentation", {"fields": ("annotations", "icons", "meta")}),
        ("Listing", {"fields": ("enabled", "order", "updated")}),
        ACCESS,
        ("Catalog", {"fields": ("catalog_entry",)}),
    )

    def wire(self, obj: ResourceTemplate) -> dict[str, Any] | None:
        return rows.template_def(obj).wire if obj.enabled else None

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # As ResourceAdmin's: on the page that asks, and on the one after.
        for text in _template_embedding_warnings(list(objs)):
            messages.warning(request, text)
        return super().get_deleted_objects(objs, request)


class ArgumentForm(RowForm):
    """A prompt argument's inline form: its name is unique among the prompt's arguments as the
    formset holds them, not as they are stored (see ``PromptAdmin.save_formset``)."""

    def validate_constraints(self) -> None:
        # Django 6 checks each inline row's constraints against the stored rows, so two
        # arguments swapping names would each clash with the other's old row. The formset's
        # own validate_unique compares the names of all the prompt's arguments.
        exclude = self._get_validation_exclusions() | {"name"}  # type: ignore[attr-defined]
        try:
            self.instance.validate_constraints(exclude=exclude)
        except ValidationError as exc:
            self._update_errors(exc)  # type: ignore[attr-defined]


class PromptArgumentInline(admin.TabularInline):  # type: ignore[type-arg]
    model = PromptArgument
    form = ArgumentForm
    extra = 0
    fields = ("order", "name", "title", "description", "required")
    formfield_overrides = {models.TextField: {"widget": forms.Textarea(attrs={"rows": 1})}}


class MessageFormSet(forms.BaseInlineFormSet):  # type: ignore[type-arg]
    """A prompt's messages, at least one, whose templates may read only the arguments of the
    prompt as the arguments' formset (``arguments``, set by ``PromptAdmin``) holds them."""

    arguments: Any = None
    #: Whether a message is required: not of one who may not add messages (``PromptAdmin``).
    needs_one = True

    def clean(self) -> None:
        super().clean()
        # A blank extra form has empty cleaned_data; one with errors counts (they are shown).
        if self.needs_one and not any(
            getattr(form, "cleaned_data", None) and not form.cleaned_data.get("DELETE")
            for form in self.forms
        ):
            # prompts/get answers with the messages: none would give the client nothing.
            raise ValidationError(
                "A prompt needs at least one message: its text, or a resource URI to embed.",
                code="no_messages",
            )
        arguments = self.arguments
        if arguments is None or not arguments.is_valid():
            return  # the arguments' own errors come first
        names = [
            form.cleaned_data["name"]
            for form in arguments.forms
            if form.cleaned_data.get("name") and not form.cleaned_data.get("DELETE")
        ]
        for form in self.forms:
            if not getattr(form, "cleaned_data", None) or form.cleaned_data.get("DELETE"):
                continue
            for field in ("text", "resource_uri"):
                source = form.cleaned_data.get(field)
                problem = source and reads_problem(
                    source, names, "the prompt's arguments do not give"
                )
                if problem:
                    form.add_error(field, problem)


class PromptMessageInline(admin.StackedInline):  # type: ignore[type-arg]
    model = PromptMessage
    form = RowForm
    formset = MessageFormSet
    extra = 0
    fields = ("order", "role", "text", "resource_uri")


@admin.register(Prompt)
class PromptAdmin(DefinitionAdmin):
    list_display = ("name", "title", "server", "access", "enabled", "order", "updated")
    inlines = (PromptArgumentInline, PromptMessageInline)
    fieldsets = (
        (None, {"fields": ("server", "name", "title", "description")}),
        ("Presentation", {"fields": ("icons", "meta")}),
        ("Listing", {"fields": ("enabled", "order", "updated")}),
        ACCESS,
        ("Catalog", {"fields": ("catalog_entry",)}),
    )

    def wire(self, obj: Prompt) -> dict[str, Any] | None:
        return rows.prompt_def(obj).wire if obj.enabled else None

    def _create_formsets(self, request: HttpRequest, obj: Any, change: bool) -> Any:
        formsets, inlines = super()._create_formsets(request, obj, change)  # type: ignore[misc]
        by_model = {formset.model: formset for formset in formsets}
        for formset, inline in zip(formsets, inlines, strict=True):
            if isinstance(formset, MessageFormSet):
                formset.arguments = by_model.get(PromptArgument)
                formset.needs_one = inline.has_add_permission(request, obj)
        return formsets, inlines

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        if formset.model is PromptArgument:
            # Rows are saved one by one, so names swapped between two arguments (or taken
            # from one deleted) would clash with the row not saved yet: the arguments renamed
            # or deleted step aside first, in the admin's transaction.
            moving = [
                f.instance.pk
                for f in formset.initial_forms
                if f.instance.pk is not None
                and ("name" in f.changed_data or formset._should_delete_form(f))
            ]
            for pk in moving:
                PromptArgument.objects.filter(pk=pk).update(name=f"-{pk}")
        super().save_formset(request, form, formset, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        for text in _unserved_warnings(form.instance):
            messages.warning(request, text)


#: A name in single braces, as a URI template would have it.
_BRACED = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


def _unserved_warnings(prompt: Prompt) -> list[str]:
    """The URIs an enabled prompt's messages embed that nothing of its server serves now:
    getting the prompt fails until something does. A warning, not an error: the resource
    may well be added next. A URI made from the arguments is not known until then."""
    server = servers.get(prompt.server)
    if server is None or not prompt.enabled:
        return []
    catalog = server.catalog()
    unserved = []
    for raw in prompt.messages.exclude(resource_uri="").values_list("resource_uri", flat=True):
        uri = raw.strip()
        if TEMPLATE_SYNTAX_RE.search(uri):
            continue
        if uri in catalog.resource_map or catalog.find_template(uri) is not None:
            continue
        unserved.append(uri)
    return [
        f"The prompt “{prompt.name}” embeds {uri}, which no enabled resource or resource "
        f"template of the server “{prompt.server}” serves: getting the prompt fails until one does."
        + (" An argument goes in a URI as {{ name }}, not {name}." if _BRACED.search(uri) else "")
        for uri in sorted(set(unserved))
    ]


# -- deleting a group or permission that alone restricts rows -----------------------------


def _orphan_warnings(objs: list[Any]) -> list[str]:
    """What deleting ``objs`` (groups, or permissions) at once disables: each enabled row they
    restrict with no group and no permission left once they are all gone."""
    if not objs:
        return []
    deleted = objs[0]._meta
    field = "groups" if deleted.label_lower == "auth.group" else "permissions"
    other = "permissions" if field == "groups" else "groups"
    going = [obj.pk for obj in objs]
    using = objs[0]._state.db or router.db_for_write(type(objs[0]))
    found = []
    # The models rows.connect_access_signals watches, whose deletion receivers disable orphans.
    for model in ROW_MODELS:
        manager = model._default_manager.using(using)
        restricted = manager.filter(**{f"{field}__in": going}).values("pk")
        orphans = (
            manager.filter(pk__in=restricted, enabled=True)
            # rows.py's _close_orphans counts the links left after the deletion; before it,
            # those to the objects going are not counted.
            .annotate(
                _kept=Count(field, filter=~Q(**{f"{field}__in": going})),
                _others=Count(other),
            )
            .filter(_kept=0, _others=0)
            # All the links an orphan has are to objects going: the ones to name.
            .prefetch_related(field)
            .order_by("server", "name", "pk")
        )
        for row in orphans:
            names = sorted(str(obj) for obj in getattr(row, field).all())
            listed = ", ".join(f"“{name}”" for name in names)
            one = len(names) == 1
            found.append(
                f"Only the {deleted.verbose_name if one else deleted.verbose_name_plural} "
                f"{listed} {'restricts' if one else 'restrict'} the {model._meta.verbose_name} "
                f"“{row}”: once {'it is' if one else 'they are'} deleted, the row is disabled "
                "rather than opened to everyone."
            )
    return found


class AccessDeleteWarnings(admin.ModelAdmin):  # type: ignore[type-arg]
    """Mixed into the admin of Group or Permission: its delete confirmation warns of the rows
    the deletion disables (rows.py disables them rather than open them to everyone)."""

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # As ResourceAdmin's: on the page that asks, and on the one after.
        for text in _orphan_warnings(list(objs)):
            messages.warning(request, text)
        return super().get_deleted_objects(objs, request)


def add_access_delete_warnings(site: admin.AdminSite) -> None:
    """Mix ``AccessDeleteWarnings`` into the Group and Permission admins ``site`` has (if any).

    The admin registered stays in charge of the rest: a site's own subclass keeps its
    behaviour. Idempotent; an admin registered after this call is left as it is.
    """
    for model in (Group, Permission):
        if not site.is_registered(model):
            continue
        registered = type(site.get_model_admin(model))
        if issubclass(registered, AccessDeleteWarnings):
            continue
        wrapped: type[AccessDeleteWarnings] = type(
            registered.__name__,
            (AccessDeleteWarnings, registered),
            {"__module__": __name__, "__doc__": registered.__doc__},
        )
        site.unregister(model)
        site.register(model, wrapped)


# -- the audit trail ---------------------------------------------------------------------


@admin.register(ToolCall)
class ToolCallAdmin(AppAdmin):
    """Read-only: rows are written by the endpoint and removed by ``mcp_audit_clean``."""

    list_display = (
        "created",
        "server",
        "method",
        "name",
        "caller_id",
        "user",
        "era",
        "outcome",
        "duration_ms",
        "rounds",
    )
    list_filter = ("server", "method", "outcome", "era", "created")
    search_fields = ("name", "caller_id", "error")
    date_hierarchy = "created"
    list_select_related = ("user",)
    list_per_page = 100
    # A COUNT(*) over a long audit table on every page is slow; the paginator estimates.
    show_full_result_count = False
    fields = (
        "created",
        "server",
        "method",
        "name",
        "era",
        "user",
        "caller_id",
        "outcome",
        "error",
        "duration_ms",
        "rounds",
        "arguments_json",
    )
    readonly_fields = fields

    @admin.display(description="arguments")
    def arguments_json(self, obj: ToolCall) -> str:
        if obj.arguments is None:
            return "Not kept (MCP_APP['AUDIT_ARGUMENTS'] is off)."
        text = json.dumps(obj.arguments, indent=2, ensure_ascii=False)
        return format_html("<pre>{}</pre>", text)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A trail staff could prune would prove little; retention is the command's job.
        return False


@admin.register(Task)
class TaskAdmin(AppAdmin):
    """Read-only: tasks are made and moved on by the endpoint; staff may delete one."""

    list_display = ("created", "server", "tool", "status", "caller", "updated", "expires")
    list_filter = ("server", "status", "created")
    search_fields = ("id", "tool", "caller")
    date_hierarchy = "created"
    fields = (
        "id",
        "server",
        "tool",
        "caller",
        "status",
        "status_message",
        "created",
        "updated",
        "expires",
        "round",
        "arguments_json",
        "pending_json",
        "result_json",
        "error_json",
    )
    readonly_fields = fields

    @staticmethod
    def _json(value: Any) -> str:
        if value is None or value == {}:
            return "-"
        return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))

    @admin.display(description="arguments")
    def arguments_json(self, obj: Task) -> str:
        return self._json(obj.arguments)

    @admin.display(description="input requests")
    def pending_json(self, obj: Task) -> str:
        return self._json(obj.input_requests)

    @admin.display(description="result")
    def result_json(self, obj: Task) -> str:
        return self._json(obj.result)

    @admin.display(description="error")
    def error_json(self, obj: Task) -> str:
        return self._json(obj.error)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# The playground's pages under <admin>/mcp_app/playground/ (mcp_app.playground).
playground.install(admin.site)
# django.contrib.auth's GroupAdmin (or a site's own, registered before this module is imported).
add_access_delete_warnings(admin.site)
