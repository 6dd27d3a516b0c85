"""Receivers that turn every save and delete of a definition row into a catalog change."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import Model
from django.db.models.signals import post_delete, post_save, pre_save

from . import rows
from .conf import conf
from .models import (
    UPLOADS,
    Definition,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
)

__all__ = ["DEFINITION_MODELS", "INLINE_MODELS", "connect"]

DEFINITION_MODELS: tuple[type[Definition], ...] = (Tool, Resource, ResourceTemplate, Prompt)
INLINE_MODELS: tuple[type[PromptArgument] | type[PromptMessage], ...] = (
    PromptArgument,
    PromptMessage,
)
#: What a resource read returns depends on these; a change to any is an ``updated``.
CONTENT_FIELDS = ("server", "uri", "digest", "mime_type", "enabled")
_BEFORE = "_mcp_app_before"

logger = logging.getLogger(__name__)


def _stored(sender: type[Model], instance: Any, using: str) -> dict[str, Any] | None:
    """The row as the database holds it before this save, for the fields that matter."""
    if instance.pk is None:
        return None
    # Read, not remembered from loading: an instance saved by primary key alone, or loaded
    # long ago, says nothing reliable about the server or content it replaces.
    fields = (*CONTENT_FIELDS, "file") if sender is Resource else ("server",)
    return sender._default_manager.using(using).filter(pk=instance.pk).values(*fields).first()


def _state(instance: Any) -> dict[str, Any]:
    fields = CONTENT_FIELDS if isinstance(instance, Resource) else ("server",)
    return {name: getattr(instance, name) for name in fields}


def _record(
    kind: str, before: dict[str, Any] | None, after: dict[str, Any] | None, using: str
) -> None:
    """Touch every server the row was or is on; resources also name the URIs that changed."""
    states = [s for s in (before, after) if s is not None]
    content_changed = kind == "resources" and (
        before is None or after is None or any(before[f] != after[f] for f in CONTENT_FIELDS)
    )
    touched: dict[str, set[str]] = {}
    for state in states:
        uris = touched.setdefault(state["server"], set())
        if content_changed:
            uris.add(state["uri"])
    for server, uris in touched.items():
        rows.touch(server, [kind], uris, using=using)


def _before_save(sender: type[Model], instance: Any, raw: bool, using: str, **kwargs: Any) -> None:
    instance.__dict__[_BEFORE] = _stored(sender, instance, using)


def _after_save(
    sender: type[Model], instance: Any, using: str, raw: bool = False, **kwargs: Any
) -> None:
    before = instance.__dict__.pop(_BEFORE, None)
    _record(instance.KIND, before, _state(instance), using)
    former = before.get("file") if before is not None else None
    # Loading fixtures (a raw save) replaces no one's upload.
    if former and former != instance.file.name and not raw:
        _let_go_of(former, using)


def _after_delete(sender: type[Model], instance: Any, using: str, **kwargs: Any) -> None:
    _record(instance.KIND, _state(instance), None, using)
    if isinstance(instance, Resource) and instance.file.name:
        _let_go_of(instance.file.name, using)


def _let_go_of(name: str, using: str) -> None:
    """With ``DELETE_REPLACED_FILES``, delete a resource's former upload from storage once
    the change commits, unless a row still names it (a copy saved as new). Only what the
    admin uploaded (``mcp_app/resources/``): a row may name any file of the storage."""
    if not conf.DELETE_REPLACED_FILES or not name.startswith(UPLOADS):
        return

    def delete() -> None:
        if Resource._default_manager.using(using).filter(file=name).exists():
            return
        try:
            Resource._meta.get_field("file").storage.delete(name)
        except Exception:
            # The change stands; only the storage keeps a file no row names.
            logger.exception("Could not delete %s, a resource's former file, from storage", name)

    transaction.on_commit(delete, using=using)


def _inline_changed(sender: type[Model], instance: Any, using: str, **kwargs: Any) -> None:
    # An argument or message changes its prompt, on the prompt's server.
    if type(instance).prompt.is_cached(instance):
        server = instance.prompt.server
    else:
        server = (
            Prompt.objects.using(using)
            .filter(pk=instance.prompt_id)
            .values_list("server", flat=True)
            .first()
        )
    if server is not None:
        rows.touch(server, ["prompts"], using=using)


def connect() -> None:
    """Connect the receivers (idempotent: each has a ``dispatch_uid``)."""
    for model in DEFINITION_MODELS:
        label = model._meta.label_lower
        pre_save.connect(_before_save, sender=model, dispatch_uid=f"mcp_app:{label}:pre_save")
        post_save.connect(_after_save, sender=model, dispatch_uid=f"mcp_app:{label}:post_save")
        post_delete.connect(
            _after_delete, sender=model, dispatch_uid=f"mcp_app:{label}:post_delete"
        )
    for inline in INLINE_MODELS:
        label = inline._meta.label_lower
        post_save.connect(_inline_changed, sender=inline, dispatch_uid=f"mcp_app:{label}:post_save")
        post_delete.connect(
            _inline_changed, sender=inline, dispatch_uid=f"mcp_app:{label}:post_delete"
        )


connect()
