"""The method table: one request's params and context in, a result (or input request) out."""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

from .. import results
from ..input import InputRequired
from ..registry import Catalog, PromptDef, TemplateDef, ToolDef, _is_async
from ..schema import JSONSchemaValidator, SchemaError, Validator, format_problems
from . import tasks, versions
from .context import RequestContext
from .jsonrpc import (
    InternalError,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    ResourceNotFound,
    clip,
)
from .tasks import TaskWork

logger = logging.getLogger("mcp_app")

JSON = dict[str, Any]
#: What serving a request comes to: a result, a request for input, or (for a client that can
#: follow a task) work to go on as a task.
Outcome = JSON | InputRequired | TaskWork
#: What a handler's answer comes to: a result, or a request for input.
Answer = JSON | InputRequired


@dataclass
class ServerOptions:
    """What a server says about itself and how it treats requests."""

    name: str = "django-mcp-app"
    version: str = "0.1.0"
    title: str | None = None
    description: str | None = None
    website_url: str | None = None
    icons: list[JSON] | None = None
    instructions: str | None = None
    page_size: int | None = 100
    ttl_ms: int = 0
    cache_scope: str = "private"
    logging: bool = True
    validate_input: bool = True
    validate_output: bool = True
    validator: Validator = field(default_factory=JSONSchemaValidator)
    list_changed: bool = False
    subscribe: bool = False

    @property
    def server_info(self) -> JSON:
        info: JSON = {"name": self.name, "version": self.version}
        if self.title:
            info["title"] = self.title
        if self.description:
            info["description"] = self.description
        if self.website_url:
            info["websiteUrl"] = self.website_url
        if self.icons:
            info["icons"] = self.icons
        return info

    def offers(self, kind: str, catalog: Catalog) -> bool:
        """Whether the ``tools``, ``resources`` or ``prompts`` capability is advertised: when
        something of the kind is defined, or (``list_changed``) may be added and announced."""
        if self.list_changed:
            return True
        if kind == "resources":
            return bool(catalog.resources or catalog.templates)
        return bool(catalog.tools if kind == "tools" else catalog.prompts)

    def capabilities(self, catalog: Catalog) -> JSON:
        """Capabilities as they follow from what is defined."""
        caps: JSON = {}
        if self.offers("tools", catalog):
            caps["tools"] = {"listChanged": True} if self.list_changed else {}
        if self.offers("resources", catalog):
            res: JSON = {}
            if self.subscribe:
                res["subscribe"] = True
            if self.list_changed:
                res["listChanged"] = True
            caps["resources"] = res
        if self.offers("prompts", catalog):
            caps["prompts"] = {"listChanged": True} if self.list_changed else {}
        if catalog.can_complete:
            caps["completions"] = {}
        if self.logging:
            caps["logging"] = {}
        if catalog.offers_tasks:
            caps["extensions"] = {tasks.EXTENSION: {}}
        return caps


def _none_of(kind: str, method: str) -> MethodNotFound:
    return MethodNotFound(f"Method not found: {clip(method)} (this server has no {kind})")


def as_caller(user: Any) -> RequestContext:
    """What a permission check reads of a request's context, its user, for ``user``."""
    return cast(RequestContext, SimpleNamespace(user=user))


def _encode_cursor(fingerprint: str, offset: int) -> str:
    raw = json.dumps([fingerprint, offset], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: Any, fingerprint: str, count: int) -> int:
    """The offset a cursor of this list (``fingerprint``, ``count`` entries) points at."""
    if not isinstance(cursor, str):
        raise InvalidParams("Invalid cursor: must be a string")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, offset = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, RecursionError) as exc:
        raise InvalidParams("Invalid cursor") from exc
    # A cursor is only issued where more entries follow (a bool is an int to Python).
    if type(offset) is not int or not isinstance(stamp, str):
        raise InvalidParams("Invalid cursor")
    if stamp != fingerprint:
        raise InvalidParams("Invalid cursor: the list has changed since it was issued; list again")
    if not 0 <= offset < count:
        raise InvalidParams("Invalid cursor")
    return offset


def _not_task_only(tool: Any) -> bool:
    return bool(tool.task != "required")


class Engine:
    """Serves the MCP methods over one catalog snapshot, whichever era asked."""

    #: Methods served on every revision (the era adapters add their own).
    COMMON = (
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    )
    #: Methods whose handlers may answer ``input_required``.
    INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self._table: dict[str, Callable[[Mapping[str, Any], RequestContext, Catalog], Outcome]] = {
            "tools/list": self.tools_list,
            "tools/call": self.tools_call,
            "resources/list": self.resources_list,
            "resources/templates/list": self.templates_list,
            "resources/read": self.resources_read,
            "prompts/list": self.prompts_list,
            "prompts/get": self.prompts_get,
            "completion/complete": self.complete,
        }

    # Hooks a framework layer overrides to read its own settings on every request.
    def validate_input(self) -> bool:
        return self.options.validate_input

    def validate_output(self) -> bool:
        return self.options.validate_output

    def error_details(self) -> bool:
        """Whether the message of an exception a handler raised goes to the client (a tool's
        in its ``isError`` result, a resource's or prompt's in its -32603 error)."""
        return True

    def validator(self) -> Validator:
        return self.options.validator

    def knows(self, method: str) -> bool:
        return method in self._table

    def handle(
        self, method: str, params: Mapping[str, Any], ctx: RequestContext, catalog: Catalog
    ) -> Outcome:
        """Serve one request.

        Raises:
            MethodNotFound: the method is not served.
            ProtocolError: the request is invalid or the server failed.
        """
        try:
            method_handler = self._table[method]
        except KeyError:
            raise MethodNotFound(f"Method not found: {clip(method)}") from None
        if method == "completion/complete" and not self._can_complete(catalog, ctx):
            raise MethodNotFound("Method not found: completion/complete (nothing can complete)")
        kind = method.partition("/")[0]
        if kind == "completion":
            return method_handler(params, ctx, catalog)
        if not self.options.offers(kind, catalog):
            # A method behind a capability the server does not advertise.
            raise _none_of(kind, method)
        # A caller who may use nothing of the kind is answered as if the server had none. A
        # method that names a definition fails for it anyway, and is checked only then: its
        # success must not wait on asking about every definition before the one it names.
        hidden_kind = catalog.restricted and not self.options.list_changed
        if (
            hidden_kind
            and method not in self.INPUT_METHODS
            and not self._sees_kind(kind, catalog, ctx)
        ):
            raise _none_of(kind, method)
        try:
            return method_handler(params, ctx, catalog)
        except ProtocolError:
            if hidden_kind and not self._sees_kind(kind, catalog, ctx):
                raise _none_of(kind, method) from None
            raise

    def capabilities(self, catalog: Catalog, user: Any) -> JSON:
        """The capabilities ``user`` is offered: ``ServerOptions.capabilities`` without those
        only definitions it may not use would offer.

        A permission check that fails leaves its capability offered (``_sees_any``).
        """
        caps = self.options.capabilities(catalog)
        if not catalog.restricted:
            return caps
        ctx = as_caller(user)
        checks: list[tuple[str, Callable[[], bool]]] = [
            ("completions", lambda: self._can_complete(catalog, ctx)),
            (tasks.EXTENSION, lambda: self.offers_tasks(catalog, ctx)),
        ]
        if not self.options.list_changed:
            checks += [
                (kind, functools.partial(self._sees_kind, kind, catalog, ctx))
                for kind in ("tools", "resources", "prompts")
            ]
        extensions = caps.get("extensions", {})
        unseen = [key for key, sees in checks if (key in caps or key in extensions) and not sees()]
        for key in unseen:
            if key in extensions:
                del extensions[key]
                if not extensions:
                    del caps["extensions"]
            else:
                del caps[key]
        return caps

    def offers_tasks(self, catalog: Catalog, ctx: RequestContext) -> bool:
        """Whether the caller sees a tool that may run as a task (``Catalog.offers_tasks``)."""
        if not catalog.offers_tasks or not catalog.restricted:
            return catalog.offers_tasks
        return self._sees_any(catalog, ctx, ("tools",), lambda tool: tool.task != "forbidden")

    def _can_complete(self, catalog: Catalog, ctx: RequestContext) -> bool:
        if not catalog.can_complete or not catalog.restricted:
            return catalog.can_complete
        return self._sees_any(catalog, ctx, ("prompts", "templates"), lambda d: bool(d.complete))

    def _sees_kind(self, kind: str, catalog: Catalog, ctx: RequestContext) -> bool:
        return self._sees_any(
            catalog, ctx, ("resources", "templates") if kind == "resources" else (kind,)
        )

    def _sees_any(
        self,
        catalog: Catalog,
        ctx: RequestContext,
        kinds: tuple[str, ...],
        wanted: Callable[[Any], bool] = bool,
    ) -> bool:
        """Whether the caller may use a definition of ``kinds`` that is ``wanted``.

        ``True`` if a permission check fails (logged): what this decides is only whether a
        capability is offered or a method served, and each definition used is checked again.
        """
        usable = self.usable(ctx)
        try:
            return any(
                wanted(item) and usable(item) for kind in kinds for item in catalog.items(kind)
            )
        except Exception:
            logger.warning(
                "Could not check which definitions a caller may use; taken as one it may use",
                exc_info=True,
            )
            return True

    # -- listing -------------------------------------------------------------------------

    def permitted(self, definition: Any, ctx: RequestContext) -> bool:
        """Whether the caller may see and use ``definition``; a framework layer decides."""
        return True

    def visible(self, definition: Any, ctx: RequestContext) -> Any:
        """The definition if the caller may use it; else ``None``, as if it did not exist."""
        if definition is None or definition.permission is None:
            return definition
        return definition if self.permitted(definition, ctx) else None

    def hides(self, uri: str, ctx: RequestContext, catalog: Catalog) -> bool:
        """Whether ``uri`` is a resource, or matches a template, that the caller may not read:
        its updates are not the caller's to hear of."""
        resource = catalog.resource_map.get(uri)
        if resource is not None:
            return self.visible(resource, ctx) is None
        # Hidden only if no template the caller may read matches it (a hidden one claims no
        # URI of a visible one read after it).
        if catalog.find_template(uri, self.usable(ctx)) is not None:
            return False
        return catalog.find_template(uri) is not None

    def usable(self, ctx: RequestContext) -> Callable[[Any], bool]:
        """Whether the caller may use a definition (``visible`` as a test)."""
        return lambda definition: self.visible(definition, ctx) is not None

    def _page(
        self,
        kind: str,
        key: str,
        params: Mapping[str, Any],
        catalog: Catalog,
        ctx: RequestContext,
        usable: Callable[[Any], bool] | None = None,
    ) -> JSON:
        keep = usable
        if catalog.restricted:
            seen = self.usable(ctx)
            keep = seen if usable is None else lambda item: seen(item) and usable(item)
        items, fingerprint = catalog.listing(kind, keep)
        start = 0
        if params.get("cursor") is not None:
            start = _decode_cursor(params["cursor"], fingerprint, len(items))
        size = self.options.page_size or len(items) or 1
        page = items[start : start + size]
        result: JSON = {key: [item.wire for item in page]}
        if start + size < len(items):
            result["nextCursor"] = _encode_cursor(fingerprint, start + size)
        return result

    def tools_list(self, params: Mapping[str, Any], ctx: RequestContext, catalog: Catalog) -> JSON:
        if ctx.era == "modern":
            return self._page("tools", "tools", params, catalog, ctx)
        # A tool that runs only as a task cannot be called before 2026-07-28: not listed there.
        return self._page("tools", "tools", params, catalog, ctx, _not_task_only)

    def resources_list(
        self, params: Mapping[str, Any], ctx: RequestContext, catalog: Catalog
    ) -> JSON:
        return self._page("resources", "resources", params, catalog, ctx)

    def templates_list(
        self, params: Mapping[str, Any], ctx: RequestContext, catalog: Catalog
    ) -> JSON:
        return self._page("templates", "resourceTemplates", params, catalog, ctx)

    def prompts_list(
        self, params: Mapping[str, Any], ctx: RequestContext, catalog: Catalog
    ) -> JSON:
        return self._page("prompts", "prompts", params, catalog, ctx)

    # -- calling -------------------------------------------------------------------------

    def _run(
        self, handler: Callable[..., Any], is_async: bool, ctx: RequestContext, *args: Any
    ) -> Any:
        try:
            if is_async:
                return ctx.run_async(handler(*args, ctx))
            return _awaited(handler(*args, ctx), ctx)
        except Exception as exc:
            ctx.handler_error = exc
            raise

    def internal_error(self, exc: BaseException, ctx: RequestContext | None) -> InternalError:
        """The -32603 for a request whose serving raised ``exc``: the message of the handler's
        own exception when ``error_details()`` allows it, as a tool's ``isError`` result has;
        for anything else (or with it off) only ``Internal error``."""
        told = self._told(exc, ctx) if ctx is not None and exc is ctx.handler_error else None
        return InternalError(told or "Internal error")

    def _told(self, exc: BaseException, ctx: RequestContext) -> str | None:
        """What the client may read of a handler's exception: its message, unless
        ``error_details()`` is off or the server's own work raised it (``None`` then)."""
        if not self.error_details() or ctx.raised_by_server(exc):
            return None
        return str(exc) or type(exc).__name__

    def tools_call(
        self, params: Mapping[str, Any], ctx: RequestContext, catalog: Catalog
    ) -> Outcome:
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("tools/call needs a tool 'name' (a string)")
        tool = self.visible(catalog.tool_map.get(name), ctx)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {name}", {"name": name})
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("tools/call 'arguments' must be an object")
        if self.validate_input():
            problems = self._problems(tool, "input", arguments)
            if not problems and tool.code_input_schema is not None:
                # A restyled tool: its handler was written against the code's schema.
                problems = self._problems(tool, "code_input", arguments)
            if problems:
                return {
                    "content": [{"type": "text", "text": format_problems(problems)}],
                    "isError": True,
                }
        ctx.definition = tool
        ctx.config = tool.config
        if tool.task == "required" and not ctx.follows_tasks:
            if ctx.era == "modern":
                raise tasks.missing_extension(
                    f"Tool {name} runs only as a task: declare the {tasks.EXTENSION} extension"
                )
            raise InvalidParams(
                f"Tool {name} runs only as a task, which needs 2026-07-28", {"name": name}
            )
        try:
            value = self._run(tool.handler, tool.is_async, ctx, arguments)
        except ProtocolError:
            raise
        except Exception as exc:
            logger.exception("tool %r failed", name)
            return self._failed_tool(name, exc, ctx)
        if isinstance(value, TaskWork):
            if ctx.follows_tasks and tool.task != "forbidden":
                return value
            # Done in the request, for a client that cannot follow a task.
            return self.run_work(tool, value, ctx)
        return self.tool_outcome(tool, value)

    def run_work(self, tool: ToolDef, work: TaskWork, ctx: RequestContext) -> Answer:
        """Run work a tool handed to a task, as its handler is run: its result, or its
        request for input.

        Raises:
            ProtocolError: the work raised one, or returned an answer that is not valid.
        """
        try:
            value = _call_work(work.work, ctx)
        except ProtocolError:
            raise
        except Exception as exc:
            logger.exception("tool %r failed", tool.name)
            return self._failed_tool(tool.name, exc, ctx)
        if isinstance(value, TaskWork):
            raise InternalError(f"Tool {tool.name} handed a task's work to another task")
        return self.tool_outcome(tool, value)

    def _failed_tool(self, name: str, exc: Exception, ctx: RequestContext) -> JSON:
        """A tool whose code raised: its ``isError`` result, which no output schema checks.

        Its message may hold what the client should not read (a path, a row of another
        user's, SQL): ``error_details()`` off sends only that the tool failed, as does an
        error of the server's own work for the tool (sending its progress).
        """
        text = self._told(exc, ctx) or f"Tool {name} failed"
        return {"content": [{"type": "text", "text": text}], "isError": True}

    def tool_outcome(self, tool: ToolDef, value: Any) -> Answer:
        """A tool's answer as a result (checked against its output schema), or its request
        for input."""
        if isinstance(value, InputRequired):
            return value
        result = results.tool_result(value, has_output_schema=tool.output_schema is not None)
        self._check_output(tool, result)
        return result

    def _problems(self, tool: ToolDef, which: str, instance: Any) -> list[Any]:
        """How ``instance`` fails the tool's ``which`` schema; a schema that cannot be used
        (a reference met only now that does not resolve, or loops) is the server's error."""
        validator = self.validator()
        try:
            if isinstance(validator, JSONSchemaValidator) and (
                type(validator).problems is JSONSchemaValidator.problems
            ):
                # The tool's schemas never change: their key is made once, not per call.
                return validator.problems_of(tool.schema_key(which), instance)
            schema = tool.schema(which)
            return validator.problems(schema if schema is not None else True, instance)
        except SchemaError as exc:
            logger.error("tool %r has an %s schema that cannot be used: %s", tool.name, which, exc)
            raise InternalError(
                f"Tool {tool.name} has an {which} schema that cannot be used: {exc}"
            ) from exc

    def _check_output(self, tool: ToolDef, result: JSON) -> None:
        if tool.output_schema is None or result.get("isError") or not self.validate_output():
            return
        if "structuredContent" not in result:
            raise InternalError(
                f"Tool {tool.name} has an output schema but returned no structured content"
            )
        problems = self._problems(tool, "output", result["structuredContent"])
        if problems:
            raise InternalError(
                format_problems(
                    problems, prefix=f"Tool {tool.name} returned invalid structured content"
                )
            )

    def resources_read(
        self, params: Mapping[str, Any], ctx: RequestContext, catalog: Catalog
    ) -> Answer:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise InvalidParams("resources/read needs a 'uri' (a string)")
        resource = self.visible(catalog.resource_map.get(uri), ctx)
        if resource is not None:
            ctx.definition = resource
            value = self._run(resource.handler, resource.is_async, ctx)
            mime_type = resource.mime_type
        else:
            # The first template the caller may read: one hidden from it matches nothing, as
            # if it did not exist.
            found = catalog.find_template(uri, self.usable(ctx))
            if found is None:
                raise ResourceNotFound(uri)
            template, variables = found
            ctx.definition = template
            value = self._run(template.handler, template.is_async, ctx, variables)
            mime_type = template.mime_type
        if value is None or (isinstance(value, list | tuple) and not value):
            # No content means no resource: a read never answers an empty list.
            raise ResourceNotFound(uri)
        if isinstance(value, InputRequired):
            return value
        return {"contents": results.resource_contents(value, uri, mime_type)}

    def prompts_get(
        self, params: Mapping[str, Any], ctx: RequestContext, catalog: Catalog
    ) -> Answer:
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("prompts/get needs a prompt 'name' (a string)")
        prompt = self.visible(catalog.prompt_map.get(name), ctx)
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {name}", {"name": name})
        arguments = params.get("arguments")
        arguments = {} if arguments is None else arguments
        if not isinstance(arguments, dict) or not all(
            isinstance(v, str) for v in arguments.values()
        ):
            raise InvalidParams("prompts/get 'arguments' must be an object of strings")
        missing = [a for a in prompt.required if a not in arguments]
        if missing:
            raise InvalidParams(
                f"Missing required arguments for prompt {name}: {', '.join(missing)}",
                {"missing": missing},
            )
        ctx.definition = prompt
        value = self._run(prompt.handler, prompt.is_async, ctx, arguments)
        if isinstance(value, InputRequired):
            return value
        return results.prompt_result(value, prompt.description)

    def complete(self, params: Mapping[str, Any], ctx: RequestContext, catalog: Catalog) -> JSON:
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise InvalidParams("completion/complete needs 'ref' and 'argument' objects")
        arg_name, value = argument.get("name"), argument.get("value")
        if not isinstance(arg_name, str) or not isinstance(value, str):
            raise InvalidParams("completion 'argument' needs a string 'name' and 'value'")
        context = params.get("context")
        if context is not None and not isinstance(context, dict):
            raise InvalidParams("completion 'context' must be an object")
        context_args = context.get("arguments") if context else None
        context_args = {} if context_args is None else context_args
        if not isinstance(context_args, dict) or not all(
            isinstance(v, str) for v in context_args.values()
        ):
            raise InvalidParams("completion 'context.arguments' must be an object of strings")
        target: PromptDef | TemplateDef | None
        if ref.get("type") == "ref/prompt":
            target = self.visible(catalog.prompt_map.get(str(ref.get("name"))), ctx)
            if target is None:
                raise InvalidParams(f"Unknown prompt: {ref.get('name')}")
        elif ref.get("type") == "ref/resource":
            uri = str(ref.get("uri"))
            usable = self.usable(ctx)
            target = next(
                (t for t in catalog.templates if t.uri_template == uri and usable(t)), None
            )
            if target is None:
                raise InvalidParams(f"Unknown resource template: {uri}")
        else:
            raise InvalidParams("completion 'ref.type' must be 'ref/prompt' or 'ref/resource'")
        completer = target.complete.get(arg_name)
        if completer is None:
            return results.completion_result([])
        ctx.definition = target
        if _is_async(completer):
            found = ctx.run_async(completer(value, context_args, ctx))
        else:
            found = _awaited(completer(value, context_args, ctx), ctx)
        return results.completion_result(found)


def resource_not_found_code(version: str) -> int:
    """-32602 on the stateless revision, -32002 before it."""
    from .jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND

    return INVALID_PARAMS if versions.is_modern(version) else RESOURCE_NOT_FOUND


def _call_work(work: Callable[[Any], Any], ctx: RequestContext) -> Any:
    return _awaited(work(ctx), ctx)


#: What handlers return nearly always, and no coroutine is: told apart by type alone, where
#: ``asyncio.iscoroutine`` asks an abstract class too.
_PLAIN_VALUES = frozenset({str, dict, list, tuple, int, float, bool, type(None)})


def _awaited(value: Any, ctx: RequestContext) -> Any:
    """``value``, or what it comes to if it is a coroutine: an async function behind a plain
    wrapper (a decorator that did not keep it a coroutine function) returns one."""
    if type(value) not in _PLAIN_VALUES and asyncio.iscoroutine(value):
        return ctx.run_async(value)
    return value
