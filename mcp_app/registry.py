"""Definitions of tools, resources, templates and prompts, merged into immutable catalog snapshots."""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, cast

from django.utils.functional import Promise

from .exceptions import DefinitionError
from .protocol.tasks import SUPPORT as TASK_SUPPORT
from .uritemplate import URITemplate, URITemplateError

__all__ = [
    "Catalog",
    "PromptArgument",
    "PromptDef",
    "ResourceDef",
    "TemplateDef",
    "ToolDef",
]

Handler = Callable[..., Any]
Completer = Callable[..., Any]
JSON = dict[str, Any]

#: Tool names: the spec allows 1-128 characters of ``[A-Za-z0-9_.-]``; common clients cap at
#: 64, so longer names are refused up front rather than breaking a client later.
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")
#: An HTTP field name (RFC 9110 token): what an ``x-mcp-header`` value may be.
HEADER_TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
#: An absolute URI: a scheme, a colon, and no white space.
URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S*\Z")
#: A percent-encoded octet, whose hex digits may be written in either case.
_PERCENT_RE = re.compile(r"%[0-9A-Fa-f]{2}")
#: Characters a URI means the same by, whether written as they are or percent-encoded.
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
#: A port at the end of an authority's host (an IPv6 literal ends with "]" instead).
_PORT_RE = re.compile(r":([0-9]*)\Z")
#: The port each scheme means when its URI names none (RFC 9110, RFC 6455).
_DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443"}


def uri_identity(uri: str) -> str:
    """``uri`` as RFC 3986 (section 6.2) compares it, in Unicode's composed form (NFC).

    The scheme and the host are in lower case; a percent-encoded octet is decoded if it
    encodes a character that needs no encoding, else its hex digits are in upper case; a path
    that begins with ``/`` has no ``.`` or ``..`` segment; an empty port goes, and so does the
    default port of ``http``, ``https``, ``ws`` and ``wss``, whose empty path is ``/``. Two
    URIs that differ only there name one resource to a client that normalizes them, and look
    alike to a reader.
    """
    scheme, colon, rest = uri.partition(":")
    scheme = scheme.lower()
    rest = percent_identity(rest)
    authority = None
    if rest.startswith("//"):
        end = authority_end(rest)
        authority, rest = rest[2:end], rest[end:]
    end = next((i for i, c in enumerate(rest) if c in "?#"), len(rest))
    path, tail = rest[:end], rest[end:]
    if path.startswith("/"):
        path = _without_dot_segments(path)
        if authority is None and path.startswith("//"):
            # "notes:/..//x" must not read as the host of "notes://x".
            path = "/." + path
    if authority is not None:
        userinfo, at, host = authority.rpartition("@")
        host = _PERCENT_RE.sub(_upper, host.lower())
        port = _PORT_RE.search(host)
        if port and port.group(1) in ("", _DEFAULT_PORTS.get(scheme)):
            host = host[: port.start()]
        if not path and scheme in _DEFAULT_PORTS:
            path = "/"
        path = "//" + userinfo + at + host + path
    return unicodedata.normalize("NFC", scheme + colon + path + tail)


def authority_end(rest: str) -> int:
    """Where the authority ends in ``rest``, the text after a scheme's colon that begins with
    ``//``: at its path, query or fragment, or at the end."""
    return next((i for i, c in enumerate(rest[2:], 2) if c in "/?#"), len(rest))


def percent_identity(text: str) -> str:
    """``text`` with each percent-encoded octet decoded if it encodes a character that needs
    no encoding, else in upper case (RFC 3986, 6.2.2)."""
    return _PERCENT_RE.sub(_percent_identity, text)


def _upper(match: re.Match[str]) -> str:
    return match.group().upper()


def _percent_identity(match: re.Match[str]) -> str:
    char = chr(int(match.group()[1:], 16))
    return char if char in _UNRESERVED else match.group().upper()


def _without_dot_segments(path: str) -> str:
    """An absolute path with its ``.`` and ``..`` segments resolved (RFC 3986, 5.2.4)."""
    segments: list[str] = []
    parts = path.split("/")[1:]
    for part in parts:
        if part == "..":
            if segments:
                segments.pop()
        elif part != ".":
            segments.append(part)
    if parts[-1] in (".", "..") and segments:
        # "/a/b/.." is the folder "/a/", not the resource "/a".
        segments.append("")
    return "/" + "/".join(segments)


#: A ``_meta`` key: an optional prefix of dot-separated labels and "/", then a name that
#: begins and ends with a letter or digit (or is empty).
META_KEY_RE = re.compile(
    r"^(?:[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*/)?"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?\Z"
)


def meta_problems(meta: Mapping[str, Any] | None) -> list[str]:
    """Why each key of a definition's ``_meta`` is not one MCP allows; empty if all are."""
    return [
        f"{key!r} is not a _meta key: an optional prefix of dot-separated labels and '/' "
        "(com.example/), then a name that begins and ends with a letter or digit."
        for key in meta or ()
        if not isinstance(key, str) or not key or not META_KEY_RE.match(key)
    ]


#: Second labels of the ``_meta`` prefixes MCP reserves for itself (``io.modelcontextprotocol/``).
RESERVED_META_LABELS = frozenset({"modelcontextprotocol", "mcp"})


def reserved_meta_key(key: str) -> bool:
    """Whether ``key``'s prefix is one MCP reserves: its second label is ``modelcontextprotocol``
    or ``mcp`` (``io.modelcontextprotocol/``, ``dev.mcp/``; not ``com.example.mcp/``)."""
    prefix, slash, _ = key.rpartition("/")
    labels = prefix.split(".") if slash else []
    return len(labels) > 1 and labels[1].lower() in RESERVED_META_LABELS


#: The types of parameter an ``x-mcp-header`` may mirror (``number`` is not one).
HEADER_TYPES = frozenset({"string", "integer", "boolean"})


def _annotated(input_schema: Any) -> Iterator[tuple[tuple[str, ...], JSON]]:
    """Each property schema carrying ``x-mcp-header``, with its path of property names.

    Only chains of ``properties`` are followed, at any depth: what a client reaches from the
    arguments object without choosing among alternatives (``anyOf``, ``items`` and the like).
    A sub-schema used in two places is read in both; one holding itself, only once.
    """
    # Each entry keeps the ids of the properties dicts above it: a loop, not a shared part.
    stack: list[tuple[Any, tuple[str, ...], frozenset[int]]] = [(input_schema, (), frozenset())]
    while stack:
        schema, path, above = stack.pop()
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict) or id(properties) in above:
            continue
        inside = above | {id(properties)}
        # Reversed onto the stack, so properties come out in the schema's order.
        for name, prop in reversed(properties.items()):
            stack.append((prop, (*path, str(name)), inside))
        for name, prop in properties.items():
            if isinstance(prop, dict) and "x-mcp-header" in prop:
                yield (*path, str(name)), prop


#: Keywords whose value is a map of names to schemas, a schema, or a list of schemas: every
#: place in a schema where another schema may sit (draft-04 to 2020-12).
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
_SCHEMA_PLACES = frozenset(
    {
        "additionalProperties",
        "unevaluatedProperties",
        "items",
        "additionalItems",
        "unevaluatedItems",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "allOf",
        "anyOf",
        "oneOf",
        "prefixItems",
    }
)


def _stray_header(schema: Any) -> bool:
    """Whether an ``x-mcp-header`` sits where no chain of ``properties`` from the arguments
    leads (the root, ``anyOf``, ``items``, ``$defs``...): clients leave out such a tool.

    Places are told apart by identity: ``schema`` must hold no dict in two places (a copy
    made by ``_json_copy`` holds none).
    """
    reached = {id(prop) for _, prop in _annotated(schema)}
    seen: set[int] = set()
    stack = [schema]
    while stack:
        schema = stack.pop()
        if not isinstance(schema, dict) or id(schema) in seen:
            continue
        seen.add(id(schema))
        if "x-mcp-header" in schema and id(schema) not in reached:
            return True
        for keyword, value in schema.items():
            if keyword in _SCHEMA_MAPS and isinstance(value, dict):
                stack.extend(value.values())
            elif keyword in _SCHEMA_PLACES:
                stack.extend(value if isinstance(value, list) else [value])
    return False


def header_annotations(input_schema: Any) -> list[tuple[tuple[str, ...], str]]:
    """Each ``x-mcp-header`` name in ``input_schema`` (as written), with the path of property
    names of the argument it mirrors, in the order a client finds them."""
    return [
        (path, prop["x-mcp-header"])
        for path, prop in _annotated(input_schema)
        if isinstance(prop["x-mcp-header"], str)
    ]


def path_text(names: Sequence[str]) -> str:
    """A path of property names as text: dotted, or as a list if a name holds a dot."""
    if any("." in name for name in names):
        return str(list(names))
    return ".".join(names)


def header_problem(input_schema: Any) -> str | None:
    """What breaks the rules for ``x-mcp-header`` annotations in ``input_schema`` (a client
    leaves out a tool that breaks them), or ``None``. Properties at every depth are read."""
    # A copy, in which each place is a dict of its own: a dict the caller's schema uses both
    # under properties and elsewhere is judged in each place, as a client reads it. A schema
    # holding itself (refused as such) is read as it is.
    with contextlib.suppress(RecursionError):
        input_schema = _json_copy(input_schema)
    if _stray_header(input_schema):
        return (
            "x-mcp-header must be on a property reached from the arguments through "
            "'properties' alone (not at the root, nor in anyOf, items, $defs and the like)"
        )
    seen: dict[str, tuple[str, ...]] = {}
    for names, prop in _annotated(input_schema):
        path = path_text(names)
        header = prop["x-mcp-header"]
        if not isinstance(header, str) or not HEADER_TOKEN_RE.match(header):
            return (
                f"x-mcp-header of {path!r} must be an HTTP header name: letters, digits "
                "and !#$%&'*+-.^`|~, not empty"
            )
        if "_" in header:
            # A token, but WSGI servers (gunicorn), Django's request headers and many proxies
            # drop or rename a header named with "_": the client's header could never arrive.
            return (
                f"x-mcp-header of {path!r} must not contain '_': servers and proxies drop "
                "header names with an underscore; use '-'"
            )
        kind = prop.get("type")
        if not isinstance(kind, str) or kind not in HEADER_TYPES:
            return f'x-mcp-header of {path!r} needs "type" string, integer or boolean (not number)'
        # By path, not its dotted text: a property named "a.b" is not "b" inside "a".
        other = seen.setdefault(header.lower(), names)
        if other != names:
            return f"x-mcp-header {header!r} of {path!r} repeats that of {path_text(other)!r}"
    return None


def argument_at(arguments: Any, path: Sequence[str]) -> Any:
    """The value at ``path`` (property names) in ``arguments``; ``None`` where there is none."""
    value = arguments
    for name in path:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


EMPTY_OBJECT_SCHEMA: JSON = {"type": "object"}


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - callable objects
    )


def _common(
    wire: JSON,
    *,
    title: str | None,
    description: str | None,
    icons: Sequence[JSON] | None,
    meta: Mapping[str, Any] | None,
) -> JSON:
    if title:
        wire["title"] = title
    if description:
        wire["description"] = description
    if icons:
        wire["icons"] = [dict(i) for i in icons]
    if meta:
        wire["_meta"] = dict(meta)
    return wire


def permission_allows(permission: Any, user: Any) -> bool:
    """Whether ``user`` may use a definition whose ``permission`` is this: ``None`` (anyone),
    a codename (``user.has_perm``), a list of codenames (all of them) or a function of the
    user."""
    if permission is None:
        return True
    if callable(permission):
        return bool(permission(user))
    if user is None:
        return False
    if isinstance(permission, str):
        return bool(user.has_perm(permission))
    return bool(user.has_perms(list(permission)))


def _check_text(what: str, definition: Any) -> None:
    for attribute in ("title", "description"):
        value = getattr(definition, attribute)
        # Text, or Django's lazy text (gettext_lazy), which is listed translated.
        if value is not None and not isinstance(value, str | Promise):
            raise DefinitionError(f"{what}: {attribute} must be text")


ICONS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["src"],
        "properties": {
            "src": {"type": "string", "minLength": 1},
            "mimeType": {"type": "string"},
            "sizes": {"type": "array", "items": {"type": "string"}},
            "theme": {"enum": ["light", "dark"]},
        },
    },
}
TOOL_ANNOTATIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "readOnlyHint": {"type": "boolean"},
        "destructiveHint": {"type": "boolean"},
        "idempotentHint": {"type": "boolean"},
        "openWorldHint": {"type": "boolean"},
    },
}
RESOURCE_ANNOTATIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "audience": {"type": "array", "items": {"enum": ["user", "assistant"]}},
        "priority": {"type": "number", "minimum": 0, "maximum": 1},
        "lastModified": {"type": "string", "format": "date-time"},
    },
}
#: The schemes an icon's ``src`` may have: what the spec says an icon is, a web URL or image
#: data (clients must not follow ``javascript:``, ``file:`` and their like).
ICON_SCHEMES = frozenset({"https", "http", "data"})
#: An RFC 3339 date-time, which ``lastModified`` must be (jsonschema checks the ``date-time``
#: format only with an optional package installed).
DATE_TIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$"
)


def icons_problems(icons: Any) -> list[str]:
    """What is wrong with ``icons`` (``None``: none given), as sentences; empty if nothing."""
    from . import schema
    from .transport.sse import as_sent

    if icons is None:
        return []
    # Judged as clients read them: lazy text, tuples and dates as the encoder writes them.
    icons = as_sent(icons)
    problems = schema.validate(ICONS_SCHEMA, icons)
    if problems:
        return [schema.format_problems(problems, prefix="Invalid icons")]
    return [
        f"Icon {index + 1}'s src must be a URI (https://… or data:…), not {icon['src']!r}."
        for index, icon in enumerate(icons)
        if not URI_RE.match(icon["src"]) or icon["src"].split(":", 1)[0].lower() not in ICON_SCHEMES
    ]


def _no_leap_second(stamp: str) -> str:
    # RFC 3339 allows a 60th second, which Python's datetime does not.
    return stamp[:17] + "59" + stamp[19:] if stamp[17:19] == "60" else stamp


def annotations_problems(annotations: Any, kind: str) -> list[str]:
    """What is wrong with a ``kind`` ("tool", or "resource" for resources and templates) of
    definition's ``annotations`` (``None``: none given), as sentences; empty if nothing."""
    from . import schema
    from .transport.sse import as_sent

    if annotations is None:
        return []
    # As the definition lists them: a mapping copied to a dict.
    annotations = as_sent(dict(annotations) if isinstance(annotations, Mapping) else annotations)
    shape = TOOL_ANNOTATIONS_SCHEMA if kind == "tool" else RESOURCE_ANNOTATIONS_SCHEMA
    problems = schema.validate(shape, annotations)
    if problems:
        return [schema.format_problems(problems, prefix="Invalid annotations")]
    modified = annotations.get("lastModified") if kind != "tool" else None
    if not isinstance(modified, str):
        return []
    try:
        valid = bool(DATE_TIME_RE.match(modified)) and bool(
            datetime.fromisoformat(_no_leap_second(modified.upper().replace("Z", "+00:00")))
        )
    except ValueError:
        valid = False
    if valid:
        return []
    return [
        "Invalid annotations: 'lastModified' must be an RFC 3339 date-time, such as "
        "2025-01-12T15:00:58Z."
    ]


def check_call(what: str, handler: Callable[..., Any], *parameters: str) -> None:
    """Refuse now a handler that cannot be called with ``parameters`` (positional), which
    would otherwise fail each call.

    Raises:
        DefinitionError: its signature takes fewer or more arguments, or needs keywords.
    """
    try:
        # What is called: a decorator's wrapper may take other arguments than what it wraps.
        signature = inspect.signature(handler, follow_wrapped=False)
    except (TypeError, ValueError):
        return  # a callable Python cannot describe (some builtins): its calls will tell
    try:
        signature.bind(*parameters)
    except TypeError as exc:
        raise DefinitionError(
            f"{what}: its handler must take ({', '.join(parameters)}): {exc}"
        ) from None


def _check_face(kind: str, name: str, definition: Any) -> None:
    """What every definition lists the same way: its name, text, icons, annotations and
    ``_meta``."""
    if not isinstance(definition.name, str) or not definition.name:
        raise DefinitionError(f"{kind} {name!r}: name must be text, not {definition.name!r}")
    _check_text(f"{kind} {name!r}", definition)
    mime_type = getattr(definition, "mime_type", None)
    if mime_type is not None and not isinstance(mime_type, str):
        raise DefinitionError(f"{kind} {name!r}: mime_type must be text")
    icons = definition.icons
    if icons is not None and (
        isinstance(icons, str | bytes | Mapping)
        or not isinstance(icons, Sequence)
        or not all(isinstance(icon, Mapping) for icon in icons)
    ):
        raise DefinitionError(f"{kind} {name!r}: icons must be a list of objects")
    for attribute in ("annotations", "meta"):
        value = getattr(definition, attribute, None)
        if value is not None and not isinstance(value, Mapping):
            raise DefinitionError(f"{kind} {name!r}: {attribute} must be an object")
    # As a row's form checks them: a code definition's are listed to clients alike.
    problems = icons_problems(icons) + meta_problems(definition.meta)
    if hasattr(definition, "annotations"):
        problems += annotations_problems(definition.annotations, kind)
    if problems:
        raise DefinitionError(f"{kind} {name!r}: {' '.join(problems)}")
    permission = definition.permission
    if not (
        permission is None
        or callable(permission)
        or (isinstance(permission, str) and permission)
        or (
            isinstance(permission, list | tuple | frozenset | set)
            and permission
            and all(isinstance(each, str) and each for each in permission)
        )
    ):
        raise DefinitionError(
            f"{kind} {name!r}: permission must be a permission codename ('app.codename'), a "
            "list of them (all needed), or a function of the user"
        )


def _check_completers(
    kind: str, name: str, complete: Mapping[str, Completer], known: Iterable[str]
) -> None:
    names = set(known)
    for argument, fn in complete.items():
        if not callable(fn):
            raise DefinitionError(f"{kind} {name!r}: completion for {argument!r} is not callable")
        if argument not in names:
            raise DefinitionError(
                f"{kind} {name!r}: completion for unknown argument {argument!r} "
                f"(known: {', '.join(sorted(names))})"
            )


def _json_copy(value: Any) -> Any:
    """A copy of a JSON-like value: mappings (read-only ones too) become dicts, sequences
    lists; anything else (strings, numbers, lazy translations) is kept as it is."""
    if isinstance(value, Mapping):
        return {key: _json_copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_copy(item) for item in value]
    return value


@dataclass(frozen=True, eq=False)
class ToolDef:
    """A tool: its public face and the handler called with ``(arguments, context)``."""

    name: str
    handler: Handler
    title: str | None = None
    description: str | None = None
    input_schema: JSON = field(default_factory=lambda: dict(EMPTY_OBJECT_SCHEMA))
    output_schema: JSON | None = None
    annotations: JSON | None = None
    icons: Sequence[JSON] | None = None
    meta: Mapping[str, Any] | None = None
    permission: Any = None
    source: str = "code"
    config: Any = None
    #: Whether its work may go on as a task: "forbidden", "optional" or "required".
    task: str = "forbidden"
    #: The code's input schema of a tool a row restyled with another: arguments must pass
    #: both, since the handler relies on the code's. Not listed.
    code_input_schema: JSON | None = None

    def __post_init__(self) -> None:
        if self.task not in TASK_SUPPORT:
            raise DefinitionError(
                f"tool {self.name!r}: task must be one of {', '.join(TASK_SUPPORT)}"
            )
        if not NAME_RE.match(self.name):
            raise DefinitionError(
                f"tool name {self.name!r} must be 1-64 characters of letters, digits, '_', '-', '.'"
            )
        if not callable(self.handler):
            raise DefinitionError(f"tool {self.name!r}: handler is not callable")
        check_call(f"tool {self.name!r}", self.handler, "arguments", "context")
        if not isinstance(self.input_schema, dict) or self.input_schema.get("type") != "object":
            raise DefinitionError(f"tool {self.name!r}: input_schema must be an object schema")
        if self.output_schema is not None and not isinstance(self.output_schema, dict):
            raise DefinitionError(f"tool {self.name!r}: output_schema must be a JSON Schema object")
        _check_face("tool", self.name, self)
        # The tool's own copies: what it validates against (keyed once, in ``schema_key``)
        # and what it lists stay the same, whatever the registrant does with its dicts later.
        # Checked as copied (read-only mappings become dicts, shared parts separate dicts).
        try:
            copies = {
                which: _json_copy(getattr(self, which))
                for which in ("input_schema", "output_schema", "code_input_schema")
            }
        except RecursionError:
            raise DefinitionError(
                f"tool {self.name!r}: a schema that holds itself, or nests too deeply, is not JSON"
            ) from None
        for which, copy in copies.items():
            object.__setattr__(self, which, copy)
        problem = header_problem(self.input_schema)
        if problem:
            raise DefinitionError(f"tool {self.name!r}: {problem}")

    @cached_property
    def is_async(self) -> bool:
        return _is_async(self.handler)

    @cached_property
    def wire(self) -> JSON:
        wire: JSON = {"name": self.name}
        _common(wire, title=self.title, description=self.description, icons=self.icons, meta=None)
        wire["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            wire["outputSchema"] = self.output_schema
        if self.annotations:
            wire["annotations"] = dict(self.annotations)
        if self.meta:
            wire["_meta"] = dict(self.meta)
        return wire

    def schema(self, which: str) -> JSON | None:
        """The ``"input"``, ``"output"`` or ``"code_input"`` schema."""
        return cast("JSON | None", getattr(self, f"{which}_schema"))

    def schema_key(self, which: str) -> str:
        """The canonical text of the ``"input"``, ``"output"`` or ``"code_input"`` schema,
        made once.

        Raises:
            SchemaError: the schema is not JSON.
        """
        keys: dict[str, str] = self.__dict__.setdefault("_schema_keys", {})
        key = keys.get(which)
        if key is None:
            from .schema import canonical

            key = keys[which] = canonical(self.schema(which))
        return key

    @cached_property
    def header_params(self) -> dict[str, tuple[str, ...]]:
        """The argument each ``Mcp-Param-*`` header (by lower-case name) mirrors, as its path
        of property names (``("options", "limit")`` for one nested in ``options``)."""
        return {
            "mcp-param-" + header.lower(): path
            for path, header in header_annotations(self.input_schema)
        }


@dataclass(frozen=True, eq=False)
class ResourceDef:
    """A resource at a fixed URI; the handler is called with ``(context)``."""

    uri: str
    name: str
    handler: Handler
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: JSON | None = None
    icons: Sequence[JSON] | None = None
    meta: Mapping[str, Any] | None = None
    permission: Any = None
    source: str = "code"

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or not URI_RE.match(self.uri):
            raise DefinitionError(f"resource {self.name!r}: {self.uri!r} is not an absolute URI")
        if "{" in self.uri:
            raise DefinitionError(
                f"resource {self.name!r}: {self.uri!r} is a URI template; register it with "
                "add_resource_template (or @resource_template)"
            )
        if not callable(self.handler):
            raise DefinitionError(f"resource {self.uri!r}: handler is not callable")
        check_call(f"resource {self.uri!r}", self.handler, "context")
        if self.size is not None and (
            isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0
        ):
            raise DefinitionError(f"resource {self.uri!r}: size must be a number of bytes")
        _check_face("resource", self.uri, self)

    @cached_property
    def is_async(self) -> bool:
        return _is_async(self.handler)

    @cached_property
    def wire(self) -> JSON:
        wire: JSON = {"uri": self.uri, "name": self.name}
        _common(wire, title=self.title, description=self.description, icons=self.icons, meta=None)
        if self.mime_type:
            wire["mimeType"] = self.mime_type
        if self.size is not None:
            wire["size"] = self.size
        if self.annotations:
            wire["annotations"] = dict(self.annotations)
        if self.meta:
            wire["_meta"] = dict(self.meta)
        return wire


@dataclass(frozen=True, eq=False)
class TemplateDef:
    """A resource template; the handler is called with ``(variables, context)``.

    A handler that returns ``None`` means there is no resource at that URI.
    """

    uri_template: str
    name: str
    handler: Handler
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: JSON | None = None
    icons: Sequence[JSON] | None = None
    meta: Mapping[str, Any] | None = None
    complete: Mapping[str, Completer] = field(default_factory=dict)
    permission: Any = None
    source: str = "code"

    def __post_init__(self) -> None:
        if not callable(self.handler):
            raise DefinitionError(f"resource template {self.name!r}: handler is not callable")
        check_call(f"resource template {self.name!r}", self.handler, "variables", "context")
        try:
            matcher = URITemplate(self.uri_template)
            # Templates the matcher cannot serve are refused now, not on the first read.
            matcher.match("")
        except URITemplateError as exc:
            raise DefinitionError(f"resource template {self.name!r}: {exc}") from exc
        object.__setattr__(self, "matcher", matcher)
        _check_completers("resource template", self.name, self.complete, matcher.variables)
        _check_face("resource template", self.name, self)

    matcher: URITemplate = field(init=False, repr=False)

    @cached_property
    def is_async(self) -> bool:
        return _is_async(self.handler)

    @cached_property
    def wire(self) -> JSON:
        wire: JSON = {"uriTemplate": self.uri_template, "name": self.name}
        _common(wire, title=self.title, description=self.description, icons=self.icons, meta=None)
        if self.mime_type:
            wire["mimeType"] = self.mime_type
        if self.annotations:
            wire["annotations"] = dict(self.annotations)
        if self.meta:
            wire["_meta"] = dict(self.meta)
        return wire


@dataclass(frozen=True)
class PromptArgument:
    """One argument a prompt takes."""

    name: str
    description: str | None = None
    required: bool = False
    title: str | None = None

    @classmethod
    def coerce(cls, value: PromptArgument | Mapping[str, Any] | str) -> PromptArgument:
        if isinstance(value, PromptArgument):
            return value
        if isinstance(value, str):
            return cls(value)
        try:
            return cls(**dict(value))
        except TypeError as exc:
            raise DefinitionError(f"bad prompt argument {value!r}: {exc}") from exc

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DefinitionError(f"a prompt argument's name must be text, not {self.name!r}")
        if not isinstance(self.required, bool):
            raise DefinitionError(
                f"prompt argument {self.name!r}: required must be True or False, "
                f"not {self.required!r}"
            )
        _check_text(f"prompt argument {self.name!r}", self)

    @property
    def wire(self) -> JSON:
        wire: JSON = {"name": self.name}
        if self.title:
            wire["title"] = self.title
        if self.description:
            wire["description"] = self.description
        if self.required:
            wire["required"] = True
        return wire


@dataclass(frozen=True, eq=False)
class PromptDef:
    """A prompt; the handler is called with ``(arguments, context)``."""

    name: str
    handler: Handler
    title: str | None = None
    description: str | None = None
    arguments: tuple[PromptArgument, ...] = ()
    icons: Sequence[JSON] | None = None
    meta: Mapping[str, Any] | None = None
    complete: Mapping[str, Completer] = field(default_factory=dict)
    permission: Any = None
    source: str = "code"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DefinitionError(f"a prompt needs a name (text), not {self.name!r}")
        if isinstance(self.arguments, str | bytes | Mapping):
            raise DefinitionError(
                f"prompt {self.name!r}: arguments must be a list, as in arguments=['id'], "
                f"not {self.arguments!r}"
            )
        if not callable(self.handler):
            raise DefinitionError(f"prompt {self.name!r}: handler is not callable")
        check_call(f"prompt {self.name!r}", self.handler, "arguments", "context")
        args = tuple(PromptArgument.coerce(a) for a in self.arguments)
        object.__setattr__(self, "arguments", args)
        seen = [a.name for a in args]
        if len(set(seen)) != len(seen):
            raise DefinitionError(f"prompt {self.name!r}: argument names repeat: {seen}")
        _check_completers("prompt", self.name, self.complete, seen)
        _check_face("prompt", self.name, self)

    @cached_property
    def is_async(self) -> bool:
        return _is_async(self.handler)

    @cached_property
    def wire(self) -> JSON:
        wire: JSON = {"name": self.name}
        _common(
            wire, title=self.title, description=self.description, icons=self.icons, meta=self.meta
        )
        if self.arguments:
            wire["arguments"] = [a.wire for a in self.arguments]
        return wire

    @cached_property
    def required(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arguments if a.required)


KINDS = ("tools", "resources", "templates", "prompts")


def _fingerprint(digests: Iterable[bytes]) -> str:
    """A list's fingerprint, from its entries' digests in order."""
    h = hashlib.blake2s(digest_size=6)
    for digest in digests:
        h.update(digest)
    return h.hexdigest()


class Catalog:
    """One immutable snapshot of a server's definitions, in listing order."""

    def __init__(
        self,
        generation: int,
        tools: Sequence[ToolDef] = (),
        resources: Sequence[ResourceDef] = (),
        templates: Sequence[TemplateDef] = (),
        prompts: Sequence[PromptDef] = (),
    ) -> None:
        self.generation = generation
        self.tools = tuple(tools)
        self.resources = tuple(resources)
        self.templates = tuple(templates)
        self.prompts = tuple(prompts)
        self.tool_map = {t.name: t for t in self.tools}
        self.resource_map = {r.uri: r for r in self.resources}
        self.prompt_map = {p.name: p for p in self.prompts}
        self.template_map = {t.name: t for t in self.templates}

    def items(self, kind: str) -> tuple[Any, ...]:
        return tuple(getattr(self, kind))

    @cached_property
    def fingerprints(self) -> dict[str, str]:
        """A short digest of each kind's listing, stable across processes.

        Pagination cursors carry it, so a cursor taken before the listing changed is refused
        by any worker, whatever its local generation counter says.
        """
        return {kind: _fingerprint(self._digests[kind]) for kind in KINDS}

    @cached_property
    def _digests(self) -> dict[str, tuple[bytes, ...]]:
        """Each entry's own digest, by kind, in listing order: what fingerprints are made of."""
        return {
            kind: tuple(
                hashlib.blake2s(repr(sorted(item.wire.items())).encode(), digest_size=16).digest()
                for item in getattr(self, kind)
            )
            for kind in KINDS
        }

    def listing(
        self, kind: str, keep: Callable[[Any], bool] | None = None
    ) -> tuple[tuple[Any, ...], str]:
        """The entries of ``kind`` that ``keep`` accepts (all without it), and the fingerprint
        of that list: of the entries a caller is shown, so the cursors it is given change
        with what it sees, never with what is hidden from it."""
        items = self.items(kind)
        if keep is None:
            return items, self.fingerprints[kind]
        kept = [index for index, item in enumerate(items) if keep(item)]
        if len(kept) == len(items):
            return items, self.fingerprints[kind]
        digests = self._digests[kind]
        return tuple(items[i] for i in kept), _fingerprint(digests[i] for i in kept)

    def find_template(
        self, uri: str, usable: Callable[[TemplateDef], bool] | None = None
    ) -> tuple[TemplateDef, dict[str, str]] | None:
        """The first template matching ``uri`` (of those ``usable`` accepts), and its values."""
        for template in self.templates:
            variables = template.matcher.match(uri)
            # Matched first: a permission check runs only for templates that match.
            if variables is not None and (usable is None or usable(template)):
                return template, variables
        return None

    @cached_property
    def restricted(self) -> bool:
        """Whether any definition limits who may use it (so listings depend on the caller)."""
        return any(item.permission is not None for kind in KINDS for item in getattr(self, kind))

    @cached_property
    def offers_tasks(self) -> bool:
        """Whether any tool may run as a task (the server then offers the tasks extension)."""
        return any(tool.task != "forbidden" for tool in self.tools)

    @cached_property
    def can_complete(self) -> bool:
        return any(p.complete for p in self.prompts) or any(t.complete for t in self.templates)
