"""``Server``: a registry of definitions with options and URLs, as ``AdminSite`` is for the admin."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from .conf import conf, imported
from .exceptions import AlreadyRegistered, DefinitionError, NotRegistered
from .protocol.engine import Engine, ServerOptions
from .registry import (
    Catalog,
    PromptArgument,
    PromptDef,
    ResourceDef,
    TemplateDef,
    ToolDef,
    permission_allows,
)
from .schema import SchemaError, Validator

F = TypeVar("F", bound=Callable[..., Any])
JSON = dict[str, Any]

__all__ = ["Server", "servers", "site"]

#: Every server by name, so management commands and the admin can find them.
servers: dict[str, Server] = {}


#: The attribute ``Server.urls`` sets on the views it builds: the ``Server`` they serve.
SERVER_ATTRIBUTE = "mcp_server"


def channel_name(server_name: str, topic: str) -> str:
    """The delivery channel of a server's topic, for processes that do not serve it."""
    return f"mcp:{server_name}:{topic}"


#: The catalog kind behind each label used in messages.
_KINDS = {
    "tool": "tools",
    "resource": "resources",
    "resource template": "templates",
    "prompt": "prompts",
}


def _bare_use(kind: str) -> TypeError:
    return TypeError(f"use @server.{kind}() with parentheses")


def _doc(fn: Callable[..., Any]) -> str | None:
    doc = (fn.__doc__ or "").strip()
    return doc or None


class Server:
    """One MCP server: its definitions, what it says about itself, and its URLs.

    ``site`` is the default one; create more for separate endpoints, each with its own
    definitions, and include ``server.urls`` where each should be served.
    """

    def __init__(
        self,
        name: str = "default",
        *,
        version: str = "0.1.0",
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: Sequence[JSON] | None = None,
        page_size: int | None = 100,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        logging: bool = True,
        server_name: str | None = None,
        rows: bool = True,
    ) -> None:
        if cache_scope not in ("private", "public"):
            raise ValueError("cache_scope must be 'private' or 'public'")
        if not _count(ttl_ms):
            # The wire's ttlMs is a non-negative integer.
            raise ValueError(
                f"ttl_ms must be a whole number of milliseconds, 0 or more: {ttl_ms!r}"
            )
        if page_size is not None and not _count(page_size):
            raise ValueError(
                f"page_size must be a whole number, 0 or more (0 or None: one page): {page_size!r}"
            )
        self.name = name
        self.options = ServerOptions(
            name=server_name or ("django-mcp-app" if name == "default" else name),
            version=version,
            title=title,
            description=description,
            website_url=website_url,
            icons=list(icons) if icons else None,
            instructions=instructions,
            page_size=page_size,
            ttl_ms=ttl_ms,
            cache_scope=cache_scope,
            logging=logging,
            list_changed=True,
            subscribe=True,
        )
        self.engine = SettingsEngine(self.options)
        self._lock = threading.RLock()
        # The endpoint views ``urls`` built: a route serves a request itself only for one of
        # these, never for a view wrapped around one (login_required and other decorators
        # copy the view's attributes, SERVER_ATTRIBUTE with them, onto their wrapper).
        self._views: weakref.WeakSet[Any] = weakref.WeakSet()
        self._tools: dict[str, ToolDef] = {}
        self._resources: dict[str, ResourceDef] = {}
        self._templates: dict[str, TemplateDef] = {}
        self._prompts: dict[str, PromptDef] = {}
        self._generation = 0
        self._builds = 0
        self._catalog: Catalog | None = None
        self._stamp: tuple[int, int] = (-1, -1)
        #: Whether definitions stored as rows (``mcp_app.models``) join this server's catalog.
        self.rows = rows
        self._listeners: list[Callable[[Server, set[str]], None]] = []
        if servers.get(name) is not None:
            # Both would take the name's channels and rows, and only the later one would be
            # found by name (mcp_stdio, MCPClient): the first one's tools silently gone.
            raise ImproperlyConfigured(
                f"A Server named {name!r} exists already; give this one a name of its own, "
                "as in Server('invoices')"
            )
        servers[name] = self

    def __repr__(self) -> str:
        return f"<Server {self.name!r}>"

    # -- the catalog ---------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Changes with every ``add_*``/``remove_*``."""
        return self._generation

    def catalog(self) -> Catalog:
        """The current snapshot; built once per generation and shared by requests.

        The generation combines this process's code changes with the committed edits of
        definitions stored as rows (one indexed query when this process does not know it):
        a worker sees an edit on its next request once the delivery backend tells it, and
        within ``RECHECK_SECONDS`` otherwise.
        """
        stamp = (self._generation, self._row_generation())
        catalog = self._catalog
        if catalog is not None and self._stamp == stamp:
            return catalog
        with self._lock:
            tools = list(self._tools.values())
            resources = list(self._resources.values())
            templates = list(self._templates.values())
            prompts = list(self._prompts.values())
            if self.rows:
                from . import rows

                tools, resources, templates, prompts = rows.merge(
                    self.name, tools, resources, templates, prompts
                )
            self._builds += 1
            catalog = Catalog(
                self._builds,
                tools=tools,
                resources=resources,
                templates=templates,
                prompts=prompts,
            )
            self._catalog, self._stamp = catalog, stamp
            return catalog

    def _row_generation(self) -> int:
        if not self.rows:
            return 0
        generation: Callable[[str], int] = imported("mcp_app.rows.generation")  # rows imports us
        return generation(self.name)

    def code_definitions(self, kind: str) -> Mapping[str, Any]:
        """The definitions of ``kind`` (``"tools"``, ``"resources"``, ``"templates"`` or
        ``"prompts"``) registered in code, by name (resources by URI), rows left out.

        A read-only view: it follows later ``add_*`` and ``remove_*`` calls.
        """
        registries: dict[str, Mapping[str, Any]] = {
            "tools": self._tools,
            "resources": self._resources,
            "templates": self._templates,
            "prompts": self._prompts,
        }
        return MappingProxyType(registries[kind])

    def on_change(self, listener: Callable[[Server, set[str]], None]) -> None:
        """Call ``listener(server, kinds)`` after definitions of those kinds change."""
        self._listeners.append(listener)

    def _changed(self, label: str) -> None:
        kind = _KINDS[label]
        self._generation += 1
        self._catalog = None
        for listener in list(self._listeners):
            listener(self, {kind})

    def _announce_change(self, label: str) -> None:
        # Not under the lock: a slow backend must not hold up every catalog() meanwhile.
        self.announce({"kinds": [_KINDS[label]]}, "lists")

    def channel(self, topic: str) -> str:
        """The delivery channel of one of this server's topics (``lists``, ``updated``)."""
        return channel_name(self.name, topic)

    def announce(self, message: JSON, topic: str) -> None:
        """Publish ``message`` on a topic once the current transaction commits.

        Nothing is published before the endpoint first serves: definitions registered at
        start-up have no listener to tell, and the backend is not built at import time.
        """
        if "_endpoint" not in self.__dict__:
            return
        from django.db import connections, transaction

        from .delivery import tell

        channel = self.channel(topic)
        alias = conf.DATABASE_ALIAS
        # Outside a transaction at once: on_commit would connect to the database to find that
        # out, which an event loop may not do and a database that is down cannot.
        if not connections[alias].in_atomic_block:
            tell(channel, message)
            return
        transaction.on_commit(lambda: tell(channel, message), using=alias)

    def notify_resource_updated(self, uri: str) -> None:
        """Tell clients subscribed to ``uri`` that its content changed (after commit)."""
        self.announce({"uri": uri}, "updated")

    def _add(
        self,
        registry: dict[str, Any],
        kind: str,
        key: str,
        definition: Any,
        check: Callable[[], None] | None = None,
    ) -> Any:
        with self._lock:
            existing = registry.get(key)
            if existing is not None:
                raise AlreadyRegistered(kind, key, existing.handler, definition.handler)
            if check is not None:
                check()  # under the lock, against what is registered now
            registry[key] = definition
            self._changed(kind)
        self._announce_change(kind)
        return definition

    def _remove(self, registry: dict[str, Any], kind: str, key: str) -> None:
        with self._lock:
            if key not in registry:
                raise NotRegistered(kind, key)
            del registry[key]
            self._changed(kind)
        self._announce_change(kind)

    # -- tools ---------------------------------------------------------------------------

    def add_tool(
        self,
        handler: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: JSON | None = None,
        output_schema: JSON | None = None,
        annotations: JSON | None = None,
        icons: Sequence[JSON] | None = None,
        meta: Mapping[str, Any] | None = None,
        permission: Any = None,
        task: str = "forbidden",
    ) -> ToolDef:
        """Register ``handler(arguments, context)`` as a tool.

        ``task`` says whether its work may go on as a task (``run_as_task``): ``"forbidden"``,
        ``"optional"`` (a task for a client that declared the tasks extension, done in the
        request for others) or ``"required"`` (only for such clients: others get -32021, or
        -32602 on an initialize-era session).

        Raises:
            AlreadyRegistered: a tool of that name exists.
            DefinitionError: a name or attribute is invalid; also (as a ``SchemaError`` too,
                naming the tool) the input or output schema is not one the default validator
                can use; or (a plain ``DefinitionError``) no value can pass one of them.
        """
        tool = ToolDef(
            name=name or handler.__name__,
            handler=handler,
            title=title,
            description=description if description is not None else _doc(handler),
            input_schema=input_schema if input_schema is not None else {"type": "object"},
            output_schema=output_schema,
            annotations=annotations,
            icons=icons,
            meta=meta,
            permission=permission,
            task=task,
        )
        from .schema import check_schema, unsatisfiable

        for which in ("input_schema", "output_schema"):
            schema = getattr(tool, which)
            if schema is None:
                continue
            try:
                check_schema(schema)
            except SchemaError as exc:
                raise InvalidSchema(f"tool {tool.name!r}: {which}", exc) from exc
            never = unsatisfiable(schema)
            if never is not None:
                what = "arguments" if which == "input_schema" else "result"
                raise DefinitionError(
                    f"tool {tool.name!r}: {which}: no {what} can pass it ({never})"
                )
        return self._add(self._tools, "tool", tool.name, tool)  # type: ignore[no-any-return]

    def remove_tool(self, name: str) -> None:
        """Raises: NotRegistered."""
        self._remove(self._tools, "tool", name)

    def tool(self, name: Any = None, **options: Any) -> Callable[[F], F]:
        """Decorator form of :meth:`add_tool`; returns the function unchanged."""
        if callable(name):
            raise _bare_use("tool")

        def decorator(fn: F) -> F:
            self.add_tool(fn, name=name, **options)
            return fn

        return decorator

    # -- resources -----------------------------------------------------------------------

    def add_resource(
        self,
        handler: Callable[..., Any],
        *,
        uri: str,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: JSON | None = None,
        icons: Sequence[JSON] | None = None,
        meta: Mapping[str, Any] | None = None,
        permission: Any = None,
    ) -> ResourceDef:
        """Register ``handler(context)`` as the resource at ``uri``.

        Raises:
            AlreadyRegistered: a resource at that URI exists.
            DefinitionError: the URI or an attribute is invalid.
        """
        resource = ResourceDef(
            uri=uri,
            name=name or handler.__name__,
            handler=handler,
            title=title,
            description=description if description is not None else _doc(handler),
            mime_type=mime_type,
            size=size,
            annotations=annotations,
            icons=icons,
            meta=meta,
            permission=permission,
        )
        return self._add(self._resources, "resource", uri, resource)  # type: ignore[no-any-return]

    def remove_resource(self, uri: str) -> None:
        """Raises: NotRegistered."""
        self._remove(self._resources, "resource", uri)

    def resource(self, uri: Any = None, **options: Any) -> Callable[[F], F]:
        """Decorator form of :meth:`add_resource`."""
        if callable(uri) or uri is None:
            raise TypeError("use @server.resource(uri) with the resource's URI")

        def decorator(fn: F) -> F:
            self.add_resource(fn, uri=uri, **options)
            return fn

        return decorator

    # -- resource templates --------------------------------------------------------------

    def add_resource_template(
        self,
        handler: Callable[..., Any],
        *,
        uri_template: str,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: JSON | None = None,
        icons: Sequence[JSON] | None = None,
        meta: Mapping[str, Any] | None = None,
        complete: Mapping[str, Callable[..., Any]] | None = None,
        permission: Any = None,
    ) -> TemplateDef:
        """Register ``handler(variables, context)`` for URIs matching ``uri_template``.

        Raises:
            AlreadyRegistered: a template of that name exists.
            DefinitionError: the template or an attribute is invalid, or another template has
                the same URI template.
        """
        template = TemplateDef(
            uri_template=uri_template,
            name=name or handler.__name__,
            handler=handler,
            title=title,
            description=description if description is not None else _doc(handler),
            mime_type=mime_type,
            annotations=annotations,
            icons=icons,
            meta=meta,
            complete=dict(complete or {}),
            permission=permission,
        )

        def unique() -> None:
            for other in self._templates.values():
                if other.uri_template == template.uri_template:
                    # The first would match every URI: the second would never be read.
                    raise DefinitionError(
                        f"resource template {template.name!r}: {template.uri_template!r} is "
                        f"already the URI template of {other.name!r}"
                    )

        return self._add(  # type: ignore[no-any-return]
            self._templates, "resource template", template.name, template, unique
        )

    def remove_resource_template(self, name: str) -> None:
        """Raises: NotRegistered."""
        self._remove(self._templates, "resource template", name)

    def resource_template(self, uri_template: Any = None, **options: Any) -> Callable[[F], F]:
        """Decorator form of :meth:`add_resource_template`."""
        if callable(uri_template) or uri_template is None:
            raise TypeError("use @server.resource_template(uri_template) with the template")

        def decorator(fn: F) -> F:
            self.add_resource_template(fn, uri_template=uri_template, **options)
            return fn

        return decorator

    # -- prompts -------------------------------------------------------------------------

    def add_prompt(
        self,
        handler: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        arguments: Iterable[PromptArgument | Mapping[str, Any] | str] = (),
        icons: Sequence[JSON] | None = None,
        meta: Mapping[str, Any] | None = None,
        complete: Mapping[str, Callable[..., Any]] | None = None,
        permission: Any = None,
    ) -> PromptDef:
        """Register ``handler(arguments, context)`` as a prompt.

        Raises:
            AlreadyRegistered: a prompt of that name exists.
            DefinitionError: an attribute is invalid.
        """
        prompt = PromptDef(
            name=name or handler.__name__,
            handler=handler,
            title=title,
            description=description if description is not None else _doc(handler),
            # Not taken apart here: PromptDef refuses text or a mapping, not a list of them.
            arguments=arguments,  # type: ignore[arg-type]
            icons=icons,
            meta=meta,
            complete=dict(complete or {}),
            permission=permission,
        )
        return self._add(self._prompts, "prompt", prompt.name, prompt)  # type: ignore[no-any-return]

    def remove_prompt(self, name: str) -> None:
        """Raises: NotRegistered."""
        self._remove(self._prompts, "prompt", name)

    def prompt(self, name: Any = None, **options: Any) -> Callable[[F], F]:
        """Decorator form of :meth:`add_prompt`."""
        if callable(name):
            raise _bare_use("prompt")

        def decorator(fn: F) -> F:
            self.add_prompt(fn, name=name, **options)
            return fn

        return decorator

    # -- serving -------------------------------------------------------------------------

    @property
    def endpoint(self) -> Any:
        """The transport that serves this server over HTTP (built on first use)."""
        endpoint = self.__dict__.get("_endpoint")
        if endpoint is None:
            from .transport.http import Endpoint

            endpoint = Endpoint(self)
            self.__dict__["_endpoint"] = endpoint
        return endpoint

    def is_endpoint(self, view: Any) -> bool:
        """Whether ``view`` is one of this server's endpoint views as ``urls`` built it."""
        try:
            return view in self._views
        except TypeError:  # an object no weak reference can be made to
            return False

    @property
    def urls(self) -> tuple[list[Any], str, str]:
        """URL patterns for ``path("mcp", server.urls)``, as ``admin.site.urls`` is used.

        Raises:
            ImproperlyConfigured: ``mcp_app`` is not in ``INSTALLED_APPS`` (its models, which
                every request uses, are not loaded).
        """
        from django.apps import apps
        from django.urls import re_path

        if apps.ready and not apps.is_installed("mcp_app"):
            raise ImproperlyConfigured(
                f"The endpoint of server {self.name!r} is routed, but 'mcp_app' is not in "
                "INSTALLED_APPS: add it there (and run migrate)."
            )

        from .transport.views import async_view, sync_view

        view: Any = sync_view(self) if conf.VIEW == "sync" else async_view(self)
        # How mcp_app.asgi.route knows this view's requests, to serve them itself.
        setattr(view, SERVER_ATTRIBUTE, self)
        self._views.add(view)
        # Both ``/mcp`` and ``/mcp/`` answer, so no client is redirected (a POST cannot be).
        patterns = [re_path(r"^(?:/)?$", view, name="endpoint")]
        return patterns, "mcp_app", self.name


class InvalidSchema(DefinitionError, SchemaError):
    """A definition's schema the validator cannot use: a ``DefinitionError`` that names the
    definition, and the ``SchemaError`` it was (its ``reason`` and ``pointer``)."""

    def __init__(self, what: str, error: SchemaError) -> None:
        SchemaError.__init__(self, error.reason, error.pointer)
        self.args = (f"{what}: {error}",)
        self._made_from = (what, error.reason, error.pointer)

    def __reduce__(self) -> tuple[Any, ...]:
        # Made again from what made it (pickled to another process, say).
        return _invalid_schema, (type(self), *self._made_from)


def _invalid_schema(
    cls: type[InvalidSchema], what: str, reason: str, pointer: str
) -> InvalidSchema:
    return cls(what, SchemaError(reason, pointer))


def _count(value: Any) -> bool:
    """Whether ``value`` is a whole number, 0 or more (``True`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class SettingsEngine(Engine):
    """The engine, reading validation settings from ``MCP_APP`` on every request."""

    def validate_input(self) -> bool:
        return conf.VALIDATE_INPUT

    def validate_output(self) -> bool:
        return conf.VALIDATE_OUTPUT

    def error_details(self) -> bool:
        return conf.TOOL_ERROR_DETAILS

    def permitted(self, definition: Any, ctx: Any) -> bool:
        """A permission codename (``app.codename``), a list of them (all needed), or a
        callable of the user decides."""
        return permission_allows(definition.permission, ctx.user)

    def validator(self) -> Validator:
        path = conf.VALIDATOR
        if path is None:
            return self.options.validator
        return _load_validator(path)


@functools.lru_cache(maxsize=8)
def _load_validator(path: str) -> Validator:
    from django.utils.module_loading import import_string

    return import_string(path)()  # type: ignore[no-any-return]


site = Server()
