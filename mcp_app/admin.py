"""The admin of definition rows: tools, resources, resource templates and prompts."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.db import models, transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from . import rows
from .exceptions import DefinitionError
from .forms import CodeTextarea, JSONTextarea, PrettyJSONField, RowForm
from .models import (
    Definition,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
)
from .server import servers

JSON_FIELD = {"form_class": PrettyJSONField, "widget": JSONTextarea}


class DefinitionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """What every definition's admin shares: filters, actions, and the catalog preview."""

    form = RowForm
    formfield_overrides = {
        models.JSONField: JSON_FIELD,
        models.TextField: {"widget": forms.Textarea(attrs={"rows": 3})},
    }
    list_filter: ClassVar[tuple[str, ...]] = ("server", "enabled")
    search_fields: ClassVar[tuple[str, ...]] = ("name", "title", "description")
    readonly_fields: ClassVar[tuple[str, ...]] = ("catalog_entry", "updated")
    actions = ("enable", "disable")
    save_on_top = True

    @admin.action(description="Enable selected %(verbose_name_plural)s")
    def enable(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected %(verbose_name_plural)s")
    def disable(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._set_enabled(request, queryset, False)

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[Any], value: bool) -> None:
        # Row by row, not QuerySet.update(): each save is an edit the catalog must hear of.
        with transaction.atomic(using=queryset.db):
            changed = 0
            for row in queryset:
                if row.enabled != value:
                    row.enabled = value
                    row.save(update_fields=["enabled", "updated"])
                    changed += 1
        state = "enabled" if value else "disabled"
        self.message_user(request, f"{changed} row(s) {state}.", messages.SUCCESS)

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
        return format_html("<pre>{}</pre>", json.dumps(wire, indent=2, ensure_ascii=False))

    def wire(self, obj: Any) -> dict[str, Any] | None:
        """The row's entry in its list, or ``None`` when it is not listed.

        Raises:
            DefinitionError: the row does not make a valid definition.
        """
        raise NotImplementedError


@admin.register(Tool)
class ToolAdmin(DefinitionAdmin):
    list_display = ("name", "title", "server", "runs", "enabled", "order", "updated")
    list_filter = ("server", "enabled", "overrides_code", "handler")
    fieldsets = (
        (None, {"fields": ("server", "name", "title", "description")}),
        ("What runs", {"fields": ("overrides_code", "handler", "config")}),
        ("Schemas", {"fields": ("input_schema", "output_schema")}),
        ("Presentation", {"fields": ("annotations", "icons", "meta")}),
        ("Listing", {"fields": ("enabled", "order", "updated")}),
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
            server = servers.get(obj.server)
            code = server._tools.get(obj.name) if server is not None else None
            if code is None:
                raise DefinitionError(f"no tool {obj.name!r} is registered in code")
            return rows.restyled(code, obj).wire
        return rows.tool_def(obj).wire


@admin.register(Resource)
class ResourceAdmin(DefinitionAdmin):
    list_display = ("uri", "name", "server", "mime_type", "size", "enabled", "order", "updated")
    list_filter = ("server", "enabled", "mime_type")
    search_fields = ("uri", "name", "title", "description")
    readonly_fields = ("catalog_entry", "updated", "size", "digest")
    fieldsets = (
        (None, {"fields": ("server", "uri", "name", "title", "description")}),
        ("Content", {"fields": ("text", "file", "mime_type", "size", "digest")}),
        ("Presentation", {"fields": ("annotations", "icons", "meta")}),
        ("Listing", {"fields": ("enabled", "order", "updated")}),
        ("Catalog", {"fields": ("catalog_entry",)}),
    )
    formfield_overrides = {
        models.JSONField: JSON_FIELD,
        models.TextField: {"widget": CodeTextarea(attrs={"rows": 8})},
    }

    def wire(self, obj: Resource) -> dict[str, Any] | None:
        return rows.resource_def(obj).wire if obj.enabled else None


@admin.register(ResourceTemplate)
class ResourceTemplateAdmin(DefinitionAdmin):
    list_display = ("name", "uri_template", "server", "mime_type", "enabled", "order", "updated")
    search_fields = ("name", "uri_template", "title", "description")
    fieldsets = (
        (None, {"fields": ("server", "name", "uri_template", "title", "description")}),
        ("Content", {"fields": ("text", "handler", "config", "mime_type")}),
        ("Presentation", {"fields": ("annotations", "icons", "meta")}),
        ("Listing", {"fields": ("enabled", "order", "updated")}),
        ("Catalog", {"fields": ("catalog_entry",)}),
    )

    def wire(self, obj: ResourceTemplate) -> dict[str, Any] | None:
        return rows.template_def(obj).wire if obj.enabled else None


class PromptArgumentInline(admin.TabularInline):  # type: ignore[type-arg]
    model = PromptArgument
    form = RowForm
    extra = 0
    fields = ("order", "name", "title", "description", "required")
    formfield_overrides = {models.TextField: {"widget": forms.Textarea(attrs={"rows": 1})}}


class PromptMessageInline(admin.StackedInline):  # type: ignore[type-arg]
    model = PromptMessage
    form = RowForm
    extra = 0
    fields = ("order", "role", "text", "resource_uri")


@admin.register(Prompt)
class PromptAdmin(DefinitionAdmin):
    list_display = ("name", "title", "server", "enabled", "order", "updated")
    inlines = (PromptArgumentInline, PromptMessageInline)
    fieldsets = (
        (None, {"fields": ("server", "name", "title", "description")}),
        ("Presentation", {"fields": ("icons", "meta")}),
        ("Listing", {"fields": ("enabled", "order", "updated")}),
        ("Catalog", {"fields": ("catalog_entry",)}),
    )

    def wire(self, obj: Prompt) -> dict[str, Any] | None:
        return rows.prompt_def(obj).wire if obj.enabled else None
