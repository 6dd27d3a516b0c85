"""The admin playground: staff try any definition of any server, as a client would.

``install(admin.site)`` serves these pages under ``<admin>/mcp_app/playground/``:

- ``playground/``: every server;
- ``playground/<server>/``: a server's catalog, with the rows it does not list;
- ``playground/<server>/tool/<name>/`` (``prompt/``, ``template/``; ``tool/?name=..`` for a
  name a path cannot carry) and
  ``playground/<server>/resource/?uri=...``: a form built from the definition's input, the
  result as a person reads it, and the server's input requests answered in the page.

Every call is a 2026-07-28 request handed to the server's endpoint with the staff user and the
admin's request: authentication, permissions, validation, transactions and the audit trail
apply exactly as they do for any client.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import json
import math
import re
import sys
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, URLPattern, URLResolver, path, re_path, reverse

from . import __version__
from .auth import admit
from .conf import conf
from .fields import holds_unstorable
from .protocol import jsonrpc, versions
from .protocol.jsonrpc import LONE_SURROGATE, InvalidRequest
from .protocol.modern import encode_header_value, mirrored
from .registry import Catalog, PromptDef, ResourceDef, TemplateDef, ToolDef
from .server import Server, servers
from .transport.http import Incoming
from .transport.views import call_answer, reply_content

__all__ = ["Playground", "get_urls", "install"]

JSON = dict[str, Any]
Definition = ToolDef | ResourceDef | TemplateDef | PromptDef

#: What the playground declares it can answer: every kind of input request, since a person
#: at the page answers them all.
CAPABILITIES: JSON = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
CLIENT_INFO: JSON = {"name": "django-admin-playground", "version": __version__}

#: Each kind of definition: its catalog attribute, the method that uses it, its label.
KINDS: dict[str, tuple[str, str, str]] = {
    "tool": ("tools", "tools/call", "tool"),
    "resource": ("resources", "resources/read", "resource"),
    "template": ("templates", "resources/read", "resource template"),
    "prompt": ("prompts", "prompts/get", "prompt"),
}
RUN_LABELS = {"tool": "Call", "resource": "Read", "template": "Read", "prompt": "Get"}
LOG_LEVELS = versions.LOG_LEVELS
ACTIONS = ("accept", "decline", "cancel")

_ids = itertools.count(1)
_installed: weakref.WeakKeyDictionary[admin.AdminSite, Playground] = weakref.WeakKeyDictionary()


# -- wiring ----------------------------------------------------------------------------------


def install(site: admin.AdminSite | None = None) -> Playground:
    """Serve the playground from ``site`` (the default admin site if none is given).

    Call it once the site exists, e.g. at the end of an ``admin.py``; the URLs join the
    site's own the next time its ``urls`` are read. Calling it again does nothing more.
    """
    site = site if site is not None else admin.site
    found = _installed.get(site)
    if found is not None:
        return found
    playground = Playground(site)
    own_urls = site.get_urls

    def get_urls() -> list[URLPattern | URLResolver]:
        # Ahead of the site's own patterns, whose catch-all would otherwise answer first.
        return [*playground.get_urls(), *own_urls()]

    site.get_urls = get_urls  # type: ignore[method-assign]
    _installed[site] = playground
    return playground


def get_urls(site: admin.AdminSite | None = None) -> list[URLPattern]:
    """The playground's URL patterns for a site that adds them itself (``AdminSite.get_urls``)."""
    site = site if site is not None else admin.site
    found = _installed.get(site)
    return (found or Playground(site)).get_urls()


# -- calling the endpoint --------------------------------------------------------------------


@dataclass
class Exchange:
    """One request sent to the endpoint and what came back."""

    status: int
    sent: JSON
    message: Any
    notifications: list[JSON] = field(default_factory=list)

    @property
    def result(self) -> JSON | None:
        found = self.message.get("result") if isinstance(self.message, dict) else None
        return found if isinstance(found, dict) else None

    @property
    def error(self) -> JSON | None:
        found = self.message.get("error") if isinstance(self.message, dict) else None
        return found if isinstance(found, dict) else None


def send(
    server: Server,
    request: HttpRequest,
    method: str,
    params: Mapping[str, Any],
    *,
    log_level: str = "",
) -> Exchange:
    """Send one 2026-07-28 request to ``server``'s endpoint as the logged-in user.

    With a ``log_level`` the request asks for log messages at that level and above, and for
    progress: the endpoint then streams them, and they are kept in ``notifications``.
    """
    body_params = dict(params)
    request_id = next(_ids)
    meta: JSON = {
        versions.META_PROTOCOL_VERSION: versions.MODERN,
        versions.META_CLIENT_CAPABILITIES: CAPABILITIES,
        versions.META_CLIENT_INFO: CLIENT_INFO,
    }
    if log_level in versions.LOG_LEVELS:
        meta[versions.META_LOG_LEVEL] = log_level
        meta["progressToken"] = f"playground-{request_id}"
    body_params["_meta"] = meta
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}
    named = "uri" if method == "resources/read" else "name"
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": versions.MODERN,
        "mcp-method": method,
        "mcp-name": encode_header_value(str(params.get(named, ""))),
    }
    if method == "tools/call":
        # Arguments a tool marks with x-mcp-header travel in headers too, and must match.
        tool = server.catalog().tool_map.get(str(params.get("name")))
        if tool is not None:
            headers.update(mirrored(tool.header_params, params.get("arguments")))
    if _runs_as_anonymous(server, request):
        refusal = InvalidRequest(
            "The site's AUTHENTICATION_CLASSES do not read the admin's login, so this call would "
            "run as an anonymous caller, not as you. To try definitions here as yourself, add "
            "rest_framework.authentication.SessionAuthentication to them."
        )
        return Exchange(401, body, jsonrpc.error_response(request_id, refusal))
    incoming = Incoming(
        method="POST",
        headers=headers,
        body=json.dumps(body).encode(),
        host=request.get_host(),
        scheme=request.scheme or "http",
        user=request.user,
        request=request,
    )
    reply = server.endpoint.handle(incoming)
    notifications: list[JSON] = []
    if reply.call is not None:

        def keep(event: Any) -> None:
            if isinstance(event.message, dict):
                notifications.append(as_sent(event.message))

        status, final = reply.call.run(keep)
        if not reply.call.streaming:
            # The status a client gets (500 for an answer JSON cannot carry); the page still
            # shows the answer as the handler gave it.
            status = call_answer(reply.call, status, final.message).status
        return Exchange(status, body, as_sent(final.message), notifications)
    reply_content(reply)  # the same, for a plain reply
    return Exchange(reply.status, body, as_sent(reply.body))


def _runs_as_anonymous(server: Server, request: HttpRequest) -> bool:
    """Whether the endpoint would take the logged-in staff member for an anonymous caller (a
    site whose authentication classes read tokens only, with no permission class refusing
    anonymous callers): the page would show what they may use and call as someone else."""
    if conf.AUTHENTICATION_CLASSES is None or not request.user.is_authenticated:
        return False
    user, refusal = admit(request, server.name, throttle=False)
    return refusal is None and not getattr(user, "is_authenticated", False)


def as_sent(message: Any) -> Any:
    """``message`` with every text in it a plain ``str``, as a client would read it.

    A handler's text may be a ``SafeString`` (what a template renders, ``format_html()``),
    which a page would show unescaped. Anything else is kept as the handler gave it, so the
    page can show what JSON cannot carry. Containers are copied, not changed.
    """
    holder = [message]
    stack: list[tuple[Any, Any]] = [(holder, 0)]
    # Each container's copy, by the original's id: one met twice (or holding itself) is
    # the same copy each time, so none is left with its text as it was.
    copies: dict[int, Any] = {}
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if isinstance(item, str):
            if type(item) is not str:
                parent[key] = str.__str__(item)
        elif isinstance(item, dict | list | tuple):
            if id(item) in copies:
                parent[key] = copies[id(item)]
                continue
            if isinstance(item, dict):
                copy: Any = {
                    str.__str__(k) if isinstance(k, str) else k: v for k, v in item.items()
                }
                stack.extend((copy, k) for k in copy)
            else:
                copy = list(item)
                stack.extend((copy, index) for index in range(len(copy)))
            copies[id(item)] = copy
            parent[key] = copy
    return holder[0]


# -- JSON as a page shows it, and as a person types it ---------------------------------------


class _Encoder(DjangoJSONEncoder):
    """Django's types as the endpoint sends them; anything else as its text."""

    def default(self, o: Any) -> Any:
        try:
            return super().default(o)
        except TypeError:
            return str(o)


def _unreadable(exc: Exception) -> str:
    """Why Python cannot read or write a JSON value, in words."""
    if isinstance(exc, RecursionError):
        return "it nests deeper than can be read"
    said = str(exc)
    if not isinstance(exc, json.JSONDecodeError) and said.startswith("Exceeds the limit"):
        # Python's advice (sys.set_int_max_str_digits) is not for the person at the page.
        return f"a number has more than {sys.get_int_max_str_digits()} digits"
    return said


def loads(text: str) -> Any:
    """``text`` as JSON.

    Raises:
        ValueError: it is not JSON, or is JSON Python cannot read (nesting deeper than it
            recurses, an integer past its limit on digits); the message says which.
    """
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(_unreadable(exc)) from None


def dumps(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON text a page can hold, never an error.

    Readable, unless it holds a lone surrogate (which no UTF-8 page holds) or a NUL: then
    escaped, as the rows' forms show it. A value JSON cannot carry (nesting deeper than
    Python recurses, an integer past its digit limit, a value that holds itself, a key that
    is not text) is said so.
    """
    try:
        return json.dumps(value, ensure_ascii=holds_unstorable(value), indent=indent, cls=_Encoder)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"(This value cannot be shown as JSON: {_unreadable(exc)}.)"


def pretty(value: Any) -> str:
    return dumps(value, indent=2)


# -- forms built from JSON Schema ------------------------------------------------------------

_MISSING: Any = object()


@dataclass
class Choice:
    """One option of a select or multi-select: what is posted, what is shown, what is sent."""

    value: str
    label: str
    data: Any


@dataclass
class Field:
    """One input of a form: how to show it, and what was typed into it."""

    key: str
    name: str
    id: str
    label: str
    widget: str  # input, lines, json, checkbox, select, multi
    kind: str = "string"  # the JSON type sent (of each item, for lines and multi)
    required: bool = False
    help: str = ""
    hint: str = ""
    input_type: str = "text"
    attrs: list[tuple[str, str]] = field(default_factory=list)
    choices: list[Choice] = field(default_factory=list)
    value: str = ""
    values: list[str] = field(default_factory=list)
    checked: bool = False
    errors: list[str] = field(default_factory=list)
    schema: Mapping[str, Any] = field(default_factory=dict)

    @property
    def described_by(self) -> str:
        """The ids of the field's errors and help, for ``aria-describedby``."""
        ids = [f"{self.id}_error"] if self.errors else []
        if self.help or self.hint:
            ids.append(f"{self.id}_helptext")
        return " ".join(ids)


def _json_type(schema: Mapping[str, Any]) -> str | None:
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), None)
    return declared if isinstance(declared, str) else None


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """For ``anyOf``/``oneOf`` of one schema and ``{"type": "null"}``, the usual way an optional
    field is written, that one schema (with the outer keywords): it gets that type's input."""
    for keyword in ("anyOf", "oneOf"):
        members = schema.get(keyword)
        if not isinstance(members, list) or len(members) != 2:
            continue
        others = [m for m in members if not (isinstance(m, dict) and m.get("type") == "null")]
        if len(others) == 1 and isinstance(others[0], dict):
            outer = {k: v for k, v in schema.items() if k != keyword}
            return {**others[0], **outer}
    return schema


def _text(value: Any) -> str:
    """A JSON value as a person types it (and an option posts it): strings as they are."""
    return value if isinstance(value, str) else dumps(value)


def _options(schema: Mapping[str, Any]) -> list[Choice] | None:
    """The choices of an enum (titled by ``enumNames``), a titled ``oneOf``/``anyOf`` or a const."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        names = schema.get("enumNames")  # the legacy way of titling an enum
        if isinstance(names, list) and len(names) == len(enum):
            labels = [str(name) for name in names]
        else:
            labels = [_text(v) for v in enum]
        return [Choice(_text(v), label, v) for v, label in zip(enum, labels, strict=True)]
    for key in ("oneOf", "anyOf"):
        alternatives = schema.get(key)
        if (
            isinstance(alternatives, list)
            and alternatives
            and all(isinstance(a, dict) and "const" in a for a in alternatives)
        ):
            return [
                Choice(_text(a["const"]), str(a.get("title") or _text(a["const"])), a["const"])
                for a in alternatives
            ]
    if "const" in schema:
        return [Choice(_text(schema["const"]), _text(schema["const"]), schema["const"])]
    return None


def _number_text(value: Any) -> str:
    return "" if isinstance(value, bool) or not isinstance(value, int | float) else _text(value)


def schema_field(
    key: str,
    schema: Any,
    *,
    required: bool,
    prefix: str,
    id_prefix: str,
    index: int,
    elicitation: bool = False,
) -> Field:
    """The input for one property of an object schema, its default filled in."""
    schema = schema if isinstance(schema, dict) else {}
    shown = _nullable(schema)
    title = shown.get("title")
    description = shown.get("description")
    found = Field(
        key=key,
        name=prefix + key,
        id=f"{id_prefix}-{index}",
        label=str(title) if isinstance(title, str) and title else key,
        widget="input",
        required=required,
        help=str(description) if isinstance(description, str) else "",
        schema=schema,
    )
    kind = _json_type(shown)
    options = _options(shown)
    default = shown.get("default", _MISSING)
    if options is not None:
        found.widget, found.kind, found.choices = "select", kind or "any", options
    elif kind == "boolean":
        found.kind = "boolean"
        if elicitation or required or default is not _MISSING:
            found.widget = "checkbox"
        else:
            # Optional with no default: "not given" is a third answer, distinct from false.
            found.widget = "select"
            found.choices = [Choice("true", "true", True), Choice("false", "false", False)]
    elif kind in ("number", "integer"):
        found.kind, found.input_type = kind, "number"
        found.attrs.append(("step", "1" if kind == "integer" else "any"))
        for keyword, attr in (("minimum", "min"), ("maximum", "max")):
            bound = _number_text(shown.get(keyword))
            if bound:
                found.attrs.append((attr, bound))
    elif kind == "string":
        fmt = shown.get("format")
        found.input_type = {"email": "email", "uri": "url", "date": "date"}.get(str(fmt), "text")
        if fmt == "date-time":
            found.hint = "A date and time, e.g. 2026-07-28T09:30:00Z."
        for keyword, attr in (("minLength", "minlength"), ("maxLength", "maxlength")):
            bound = _number_text(shown.get(keyword))
            if bound:
                found.attrs.append((attr, bound))
    elif kind == "array" and isinstance(shown.get("items"), dict):
        items = shown["items"]
        item_options = _options(items)
        if item_options is not None:
            found.widget, found.kind, found.choices = "multi", "array", item_options
        elif _json_type(items) in ("string", "number", "integer", "boolean"):
            found.widget, found.kind = "lines", str(_json_type(items))
            found.hint = f"One {found.kind} per line."
        else:
            found.widget, found.kind, found.hint = "json", "any", "A JSON array."
    else:
        found.widget, found.kind = "json", kind or "any"
        found.hint = f"JSON ({kind})." if kind else "JSON."
    if default is not _MISSING:
        fill(found, default)
    return found


def object_fields(
    schema: Any, *, prefix: str, id_prefix: str, elicitation: bool = False
) -> list[Field]:
    """One input per property of an object schema, in the schema's order."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    required = schema.get("required")
    wanted = (
        {name for name in required if isinstance(name, str)}
        if isinstance(required, list)
        else set()
    )
    return [
        schema_field(
            str(key),
            value,
            required=key in wanted,
            prefix=prefix,
            id_prefix=id_prefix,
            index=index,
            elicitation=elicitation,
        )
        for index, (key, value) in enumerate(schema["properties"].items())
    ]


def fill(target: Field, value: Any) -> None:
    """Show ``value`` (JSON) in the field, as a person would have typed it."""
    if target.widget == "checkbox":
        target.checked = value is True
    elif target.widget == "select":
        target.value = _text(value)
    elif target.widget == "multi":
        target.values = [_text(v) for v in value] if isinstance(value, list) else []
    elif target.widget == "lines" and isinstance(value, list):
        target.value = "\n".join(_text(v) for v in value)
    elif target.widget == "json":
        target.value = pretty(value)
    else:
        target.value = _text(value)


def fill_all(fields: Iterable[Field], values: Mapping[str, Any]) -> None:
    for target in fields:
        if target.key in values:
            fill(target, values[target.key])


_INTEGER = re.compile(r"[+-]?\d+")


def _number(raw: str, kind: str) -> int | float | None:
    """``raw`` as a JSON number of ``kind``, or ``None`` when it is not one."""
    text = raw.strip()
    if _INTEGER.fullmatch(text):
        try:
            return int(text)
        except ValueError:  # past Python's limit on digits converted
            return None
    try:
        number = float(text)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    if kind == "integer":
        # 1.0 and 1e2 are whole numbers, as JSON Schema's "integer" has it (a browser's
        # step=1 check lets them through too); past 2**53 a float is not the number typed.
        return int(number) if number.is_integer() and abs(number) < 2**53 else None
    return number


def _scalar(raw: str, kind: str) -> Any:
    """A typed value of ``kind``, or ``_MISSING`` when ``raw`` does not read as one."""
    if kind in ("number", "integer"):
        number = _number(raw, kind)
        return _MISSING if number is None else number
    if kind == "boolean":
        return {"true": True, "false": False}.get(raw.strip().lower(), _MISSING)
    return raw


def _choose(target: Field, raw: str) -> Any:
    for choice in target.choices:
        if choice.value == raw:
            return choice.data
    return _MISSING


def _check_bounds(target: Field, value: Any) -> None:
    """The limits of an elicitation field's schema that the value breaks."""
    schema = target.schema
    if isinstance(value, str):
        low, high = schema.get("minLength"), schema.get("maxLength")
        if isinstance(low, int) and len(value) < low:
            target.errors.append(f"Enter at least {low} characters.")
        if isinstance(high, int) and len(value) > high:
            target.errors.append(f"Enter at most {high} characters.")
        if schema.get("format") == "email" and "@" not in value:
            target.errors.append("Enter an email address.")
    elif isinstance(value, list):
        low, high = schema.get("minItems"), schema.get("maxItems")
        if isinstance(low, int) and len(value) < low:
            target.errors.append(f"Choose at least {low}.")
        if isinstance(high, int) and len(value) > high:
            target.errors.append(f"Choose at most {high}.")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and value < low:
            target.errors.append(f"Enter a number of at least {_text(low)}.")
        if isinstance(high, int | float) and value > high:
            target.errors.append(f"Enter a number of at most {_text(high)}.")


def read_field(target: Field, data: QueryDict, *, strict: bool) -> Any:
    """The JSON value typed into ``target``, or ``_MISSING`` to leave it out.

    ``strict`` (elicitation answers, which this page must make valid) turns what does not
    read as the field's type into an error on the field. Otherwise (tool arguments) the text
    is sent as it was typed, so the server's validation, the one that counts, says what is
    wrong.
    """
    target.errors = []
    value: Any = _MISSING
    if target.widget == "checkbox":
        target.checked = target.name in data
        value = target.checked
    elif target.widget == "multi":
        target.values = data.getlist(target.name)
        picked = [_choose(target, raw) for raw in target.values]
        if strict and any(v is _MISSING for v in picked):
            target.errors.append("Select valid choices.")
        picked = [raw if v is _MISSING else v for v, raw in zip(picked, target.values, strict=True)]
        if picked or target.required:
            value = picked
    else:
        raw = data.get(target.name, "")
        target.value = raw
        if raw.strip() == "" and not (target.widget == "input" and target.kind == "string" and raw):
            value = _MISSING
        elif target.widget == "select":
            value = _choose(target, raw)
            if value is _MISSING:
                if strict:
                    target.errors.append("Select a valid choice.")
                value = raw
        elif target.widget == "json":
            try:
                value = loads(raw)
            except ValueError as exc:
                target.errors.append(f"Not valid JSON: {exc}.")
                value = _MISSING
        elif target.widget == "lines":
            items = [line.strip() for line in raw.splitlines() if line.strip()]
            typed = [_scalar(item, target.kind) for item in items]
            if strict and any(v is _MISSING for v in typed):
                target.errors.append(f"Every line must be a {target.kind}.")
            value = [item if v is _MISSING else v for v, item in zip(typed, items, strict=True)]
        else:
            value = _scalar(raw, target.kind)
            if value is _MISSING:
                if strict:
                    whole = "a whole number" if target.kind == "integer" else "a number"
                    target.errors.append(f"Enter {whole}.")
                value = raw
    if value is _MISSING and target.required and strict and not target.errors:
        target.errors.append("This field is required.")
    if strict and value is not _MISSING and not target.errors:
        _check_bounds(target, value)
    return value


def read_fields(fields: Iterable[Field], data: QueryDict, *, strict: bool) -> tuple[JSON, bool]:
    """The values typed into ``fields`` by key, and whether none has an error."""
    values: JSON = {}
    good = True
    for target in fields:
        value = read_field(target, data, strict=strict)
        if target.errors:
            good = False
        elif value is not _MISSING:
            values[target.key] = value
    return values, good


_PROBLEM = re.compile(r"at (?P<where>the root|/[^:]*): (?P<message>.+)", re.DOTALL)
_PROPERTY = re.compile(r"(?:missing required|unexpected) property '(?P<key>[^']*)'")


def place_problems(text: str, fields: Sequence[Field]) -> list[str]:
    """Put the problems of the server's ``Invalid arguments ...`` message on their fields.

    Returns the problems that belong to no field.
    """
    prefix = "Invalid arguments "
    if not text.startswith(prefix):
        return []
    by_key = {f.key: f for f in fields}
    loose: list[str] = []
    for part in re.split(r"; (?=at (?:the root|/))", text[len(prefix) :]):
        match = _PROBLEM.fullmatch(part)
        if match is None:
            loose.append(part)
            continue
        where, message = match["where"], match["message"]
        if where == "the root":
            named = _PROPERTY.search(message)
            key = named["key"] if named else None
        else:
            # The first step of the JSON pointer (RFC 6901) names the argument.
            key = where[1:].split("/", 1)[0].replace("~1", "/").replace("~0", "~")
        target = by_key.get(key) if key is not None else None
        if target is None:
            loose.append(part)
        else:
            target.errors.append(message if where == "the root" else part)
    return loose


# -- how a person reads a result ------------------------------------------------------------

_MIME = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")


@dataclass
class Block:
    """One content block, or one resource's contents, ready to show."""

    type: str  # text, image, audio, link, resource, json
    text: str = ""
    src: str = ""  # a checked data: URI for <img>, <audio> or a download
    mime: str = ""
    uri: str = ""
    name: str = ""
    title: str = ""
    description: str = ""
    size: str = ""
    href: str = ""  # where to try a linked resource in the playground
    external: str = ""  # an http(s) link a person may open
    raw: str = ""  # the block as JSON, when it is nothing the page can show otherwise
    annotations: str = ""

    @property
    def media(self) -> str:
        """``image`` or ``audio`` for a blob the page plays or shows, else ``""``."""
        kind = self.mime.split("/", 1)[0]
        return kind if self.src and kind in ("image", "audio") else ""


def _size(count: int) -> str:
    return f"{count} byte{'s' if count != 1 else ''}"


def _data_uri(data: Any, mime: Any) -> tuple[str, str, str] | None:
    """``(data URI, mime type, size)`` for base64 ``data``, or ``None`` when it is not valid."""
    if not isinstance(data, str) or not isinstance(mime, str):
        return None
    mime = mime.strip().lower()
    if not _MIME.fullmatch(mime):
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    # Rebuilt from the decoded bytes: the URI holds only base64 characters, whatever came in.
    return f"data:{mime};base64,{base64.b64encode(raw).decode()}", mime, _size(len(raw))


def _http(uri: Any) -> str:
    """``uri`` if it is a web link that parses, else ``""``."""
    if not isinstance(uri, str):
        return ""
    try:
        scheme = urlsplit(uri).scheme
    except ValueError:  # an IPv6 literal left open, say: shown as text
        return ""
    return uri if scheme in ("http", "https") else ""


def _contents_block(item: Any, try_url: Callable[[str], str]) -> Block:
    """A resource's contents (``text`` or ``blob``), as a read or an embedded resource has them."""
    if not isinstance(item, dict):
        return Block("json", raw=pretty(item))
    uri = str(item.get("uri", ""))
    mime = str(item.get("mimeType") or "")
    shown = Block("resource", uri=uri, mime=mime, href=try_url(uri))
    if isinstance(item.get("text"), str):
        shown.text = item["text"]
        if mime == "application/json" or mime.endswith("+json"):
            with contextlib.suppress(ValueError):  # shown as it came when it is not JSON
                shown.text = pretty(loads(shown.text))
    elif "blob" in item:
        found = _data_uri(item.get("blob"), mime or "application/octet-stream")
        if found is None:
            shown.text = "(The blob is not valid base64.)"
        else:
            shown.src, shown.mime, shown.size = found
            if not shown.media:
                # Offered only as a download: a page or script type must never be opened.
                shown.src = "data:application/octet-stream;base64," + shown.src.split(",", 1)[1]
    return shown


def content_block(block: Any, try_url: Callable[[str], str]) -> Block:
    """One content block of a tool result, a prompt message or a sampling request."""
    if not isinstance(block, dict):
        return Block("json", raw=pretty(block))
    kind = block.get("type")
    shown: Block
    if kind == "text" and isinstance(block.get("text"), str):
        shown = Block("text", text=block["text"])
    elif kind in ("image", "audio"):
        found = _data_uri(block.get("data"), block.get("mimeType"))
        if found is None or not found[1].startswith(f"{kind}/"):
            shown = Block("json", raw=pretty(block), text=f"This {kind} cannot be shown.")
        else:
            shown = Block(str(kind), src=found[0], mime=found[1], size=found[2])
    elif kind == "resource_link":
        uri = str(block.get("uri", ""))
        size = block.get("size")
        shown = Block(
            "link",
            uri=uri,
            name=str(block.get("name") or ""),
            title=str(block.get("title") or ""),
            description=str(block.get("description") or ""),
            mime=str(block.get("mimeType") or ""),
            size=_size(size) if isinstance(size, int) and not isinstance(size, bool) else "",
            href=try_url(uri),
            external=_http(uri),
        )
    elif kind == "resource":
        shown = _contents_block(block.get("resource"), try_url)
    else:
        shown = Block("json", raw=pretty(block))
    if block.get("annotations"):
        shown.annotations = dumps(block["annotations"])
    return shown


def blocks(content: Any, try_url: Callable[[str], str]) -> list[Block]:
    items = content if isinstance(content, list) else [content]
    return [content_block(item, try_url) for item in items if item is not None]


@dataclass
class Message:
    role: str
    blocks: list[Block]


@dataclass
class Shown:
    """A response as the page shows it."""

    kind: str  # result, input, error
    is_error: bool = False
    blocks: list[Block] = field(default_factory=list)
    structured: str = ""
    contents: list[Block] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    description: str = ""
    code: Any = None
    message: str = ""
    data: str = ""
    status: int = 200


def show(exchange: Exchange, kind: str, try_url: Callable[[str], str]) -> Shown:
    error, result = exchange.error, exchange.result
    if error is not None or result is None:
        found = error or {}
        return Shown(
            "error",
            is_error=True,
            code=found.get("code"),
            message=str(found.get("message") or "The server's answer is not a JSON-RPC result."),
            data=pretty(found["data"]) if "data" in found else "",
            status=exchange.status,
        )
    if result.get("resultType") == "input_required":
        return Shown("input", status=exchange.status)
    shown = Shown("result", is_error=result.get("isError") is True, status=exchange.status)
    if kind == "tool":
        shown.blocks = blocks(result.get("content") or [], try_url)
        if "structuredContent" in result:
            shown.structured = pretty(result["structuredContent"])
    elif kind == "prompt":
        description = result.get("description")
        shown.description = description if isinstance(description, str) else ""
        for message in result.get("messages") or []:
            if isinstance(message, dict):
                role = str(message.get("role", ""))
                shown.messages.append(Message(role, blocks(message.get("content"), try_url)))
    else:
        shown.contents = [_contents_block(c, try_url) for c in result.get("contents") or []]
    return shown


@dataclass
class Note:
    """A notification the call streamed before its result: a log message or progress."""

    kind: str  # log, progress, other
    label: str
    text: str


def note(message: JSON) -> Note:
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    if message.get("method") == "notifications/message":
        where = f" {params['logger']}" if isinstance(params.get("logger"), str) else ""
        return Note("log", f"{params.get('level', 'log')}{where}", _text(params.get("data")))
    if message.get("method") == "notifications/progress":
        done, total = params.get("progress"), params.get("total")
        text = _text(done) + (f" of {_text(total)}" if total is not None else "")
        if isinstance(params.get("message"), str):
            text += f": {params['message']}"
        return Note("progress", "progress", text)
    return Note("other", str(message.get("method", "message")), pretty(message))


# -- input requests answered in the page -----------------------------------------------------


@dataclass
class Asked:
    """One of the server's input requests, with what the person answered."""

    key: str
    method: str
    kind: str  # form, url, sampling, roots, unknown
    index: int
    message: str = ""
    fields: list[Field] = field(default_factory=list)
    url: str = ""
    link: str = ""
    host: str = ""
    conversation: list[Message] = field(default_factory=list)
    #: Sampling parameters: label, text, and whether the text is JSON of a list or object.
    details: list[tuple[str, str, bool]] = field(default_factory=list)
    params: str = ""
    action: str = "accept"
    answer: str = ""

    @property
    def action_name(self) -> str:
        return f"action:{self.key}"

    @property
    def answer_name(self) -> str:
        return f"answer:{self.key}"

    @property
    def elicits(self) -> bool:
        return self.kind in ("form", "url")


_SAMPLING_DETAILS = (
    ("systemPrompt", "System prompt"),
    ("maxTokens", "Max tokens"),
    ("temperature", "Temperature"),
    ("stopSequences", "Stop sequences"),
    ("includeContext", "Include context"),
    ("modelPreferences", "Model preferences"),
    ("toolChoice", "Tool choice"),
    ("metadata", "Metadata"),
)


def asked_of(requests: Any, try_url: Callable[[str], str]) -> list[Asked]:
    """The input requests of an ``input_required`` result, ready to show and answer."""
    found: list[Asked] = []
    if not isinstance(requests, dict):
        return found
    for index, (key, request) in enumerate(requests.items()):
        request = request if isinstance(request, dict) else {}
        method = str(request.get("method", ""))
        given = request.get("params")
        params: JSON = given if isinstance(given, dict) else {}
        asked = Asked(str(key), method, "unknown", index, params=pretty(params))
        message = params.get("message")
        asked.message = message if isinstance(message, str) else ""
        if method == "elicitation/create" and params.get("mode") == "url":
            asked.kind = "url"
            asked.url = str(params.get("url", ""))
            # Only web links are clickable: a javascript: or data: URL stays text.
            asked.link = _http(asked.url)
            asked.host = (urlsplit(asked.link).hostname or "") if asked.link else ""
        elif method == "elicitation/create":
            asked.kind = "form"
            asked.fields = object_fields(
                params.get("requestedSchema"),
                prefix=f"in:{key}:",
                id_prefix=f"in{index}",
                elicitation=True,
            )
        elif method == "sampling/createMessage":
            asked.kind = "sampling"
            messages = params.get("messages")
            for item in messages if isinstance(messages, list) else []:
                if isinstance(item, dict):
                    role = str(item.get("role", ""))
                    asked.conversation.append(Message(role, blocks(item.get("content"), try_url)))
            for name, label in (*_SAMPLING_DETAILS, ("tools", "Tools offered")):
                if name in params:
                    value = params[name]
                    structured = isinstance(value, dict | list)
                    shown = pretty(value) if structured else _text(value)
                    asked.details.append((label, shown, structured))
        elif method == "roots/list":
            asked.kind = "roots"
        found.append(asked)
    return found


def answer(asked: Sequence[Asked], data: QueryDict) -> tuple[JSON, bool]:
    """The ``inputResponses`` a person gave in the page, and whether they are all valid."""
    responses: JSON = {}
    good = True
    for request in asked:
        if request.elicits:
            action = data.get(request.action_name, "accept")
            request.action = action if action in ACTIONS else "accept"
            if request.action != "accept" or request.kind == "url":
                responses[request.key] = {"action": request.action}
                continue
            content, valid = read_fields(request.fields, data, strict=True)
            if valid:
                responses[request.key] = {"action": "accept", "content": content}
            good = good and valid
        elif request.kind == "sampling":
            request.answer = data.get(request.answer_name, "")
            responses[request.key] = {
                "role": "assistant",
                "content": {"type": "text", "text": request.answer},
                "model": "human",
                "stopReason": "endTurn",
            }
        elif request.kind == "roots":
            request.answer = data.get(request.answer_name, "")
            uris = [line.strip() for line in request.answer.splitlines() if line.strip()]
            responses[request.key] = {"roots": [{"uri": uri} for uri in uris]}
    return responses, good


# -- the catalog page ------------------------------------------------------------------------


@dataclass
class Entry:
    """One line of a server's catalog page."""

    key: str
    title: str
    description: str
    source: str
    enabled: bool
    status: str = ""
    permission: str = ""
    allowed: bool | None = None
    try_url: str = ""
    row_url: str = ""


@dataclass
class Section:
    kind: str
    label: str
    entries: list[Entry]


def describe_permission(permission: Any) -> str:
    """Who may use a definition, in words.

    Besides a codename and a callable, it reads the rules rows carry: an object with
    ``groups`` (ids) and ``permissions`` (codenames), and one that needs both a ``code``
    permission and a ``row`` rule.
    """
    if permission is None:
        return "Anyone the endpoint admits"
    if isinstance(permission, str):
        return f"Users with the permission {permission}"
    if isinstance(permission, list | tuple | set | frozenset) and all(
        isinstance(each, str) for each in permission
    ):
        return f"Users with each of the permissions {', '.join(sorted(permission))}"
    groups = getattr(permission, "groups", None)
    codenames = getattr(permission, "permissions", None)
    if isinstance(groups, frozenset | set) and isinstance(codenames, frozenset | set):
        return _describe_access(groups, codenames)
    code, row = getattr(permission, "code", _MISSING), getattr(permission, "row", None)
    if code is not _MISSING and row is not None:
        return f"{describe_permission(code)}, who are also: {describe_permission(row)}"
    if callable(permission):
        module = getattr(permission, "__module__", "") or ""
        name = getattr(permission, "__qualname__", "") or type(permission).__qualname__
        return f"Decided by {module}.{name}()" if module else f"Decided by {name}()"
    return repr(permission)


def _describe_access(groups: Iterable[Any], codenames: Iterable[Any]) -> str:
    from django.contrib.auth.models import Group

    wanted = sorted(groups)
    names = sorted(Group.objects.filter(pk__in=wanted).values_list("name", flat=True))
    parts = []
    if wanted:
        # A group deleted since the rule was read has no name left to show.
        parts.append("members of " + ", ".join(names or [f"{len(wanted)} deleted group(s)"]))
    if codenames:
        parts.append("users with " + " or ".join(sorted(str(c) for c in codenames)))
    return "Superusers, " + " or ".join(parts) if parts else "Superusers only"


def key_of(definition: Definition) -> str:
    return definition.uri if isinstance(definition, ResourceDef) else definition.name


class _Caller:
    """What ``Engine.permitted`` reads of a request context: the user."""

    def __init__(self, user: Any) -> None:
        self.user = user


# -- the views -------------------------------------------------------------------------------


class _Page(TemplateResponse):
    """A playground page, written escaped where it holds a lone surrogate.

    Definitions and handlers give the page its strings (a title, a tool's text, a log
    message), and a Python string may hold a lone surrogate that no UTF-8 page can: encoding
    the page would fail. Each is written as JSON escapes it, ``\\ud800``.
    """

    @property
    def rendered_content(self) -> str:
        content = super().rendered_content
        if content.isascii():
            return content
        return LONE_SURROGATE.sub(lambda found: f"\\u{ord(found[0]):04x}", content)


def _model_of(attr: str) -> Any:
    """The model of a kind's rows (``"tools"``, ``"resources"``, ``"templates"``, ``"prompts"``)."""
    from .models import Prompt, Resource, ResourceTemplate, Tool

    return {"tools": Tool, "resources": Resource, "templates": ResourceTemplate, "prompts": Prompt}[
        attr
    ]


def _attr_of(definition: Any) -> str:
    """The catalog attribute of a definition's kind (a resource read through a template is
    the template's)."""
    if isinstance(definition, ToolDef):
        return "tools"
    if isinstance(definition, ResourceDef):
        return "resources"
    return "templates" if isinstance(definition, TemplateDef) else "prompts"


class Playground:
    """The playground's views, served by one admin site."""

    def __init__(self, site: admin.AdminSite) -> None:
        self.site = site

    def get_urls(self) -> list[URLPattern]:
        wrap = self.site.admin_view
        return [
            path("mcp_app/playground/", wrap(self.index), name="mcp_app_playground"),
            path(
                "mcp_app/playground/<str:server>/",
                wrap(self.catalog),
                name="mcp_app_playground_catalog",
            ),
            path(
                "mcp_app/playground/<str:server>/resource/",
                wrap(self.try_resource),
                name="mcp_app_playground_resource",
            ),
            re_path(
                r"^mcp_app/playground/(?P<server>[^/]+)/(?P<kind>tool|template|prompt)/(?P<name>.+)/$",
                wrap(self.try_definition),
                name="mcp_app_playground_try",
            ),
            re_path(
                r"^mcp_app/playground/(?P<server>[^/]+)/(?P<kind>tool|template|prompt)/$",
                wrap(self.try_named),
                name="mcp_app_playground_try_named",
            ),
        ]

    # -- helpers ---------------------------------------------------------------------------

    def _url(self, name: str, *args: str, query: Mapping[str, str] | None = None) -> str:
        try:
            found = reverse(f"admin:{name}", args=args, current_app=self.site.name)
        except NoReverseMatch:
            return ""
        return f"{found}?{urlencode(query)}" if query else found

    def try_url(self, server: str, kind: str, key: str) -> str:
        if kind == "resource":
            return self._url("mcp_app_playground_resource", server, query={"uri": key})
        if any(segment in (".", "..") for segment in key.split("/")):
            # A browser resolves such a segment of a path away: the name goes in the query.
            return self._url("mcp_app_playground_try_named", server, kind, query={"name": key})
        return self._url("mcp_app_playground_try", server, kind, key)

    def _linker(self, server: Server, catalog: Catalog) -> Callable[[str], str]:
        """Where to read a URI in the playground, when this server serves it."""

        def link(uri: str) -> str:
            if not uri:
                return ""
            if uri in catalog.resource_map:
                return self.try_url(server.name, "resource", uri)
            if catalog.find_template(uri) is not None:
                return self.try_url(server.name, "resource", uri)
            return ""

        return link

    def _context(self, request: HttpRequest, title: str, **extra: Any) -> JSON:
        return {
            **self.site.each_context(request),
            "title": title,
            "playground_url": self._url("mcp_app_playground"),
            "app_url": self._url("app_list", "mcp_app"),
            "app_name": apps.get_app_config("mcp_app").verbose_name,
            **extra,
        }

    def _server(self, request: HttpRequest, name: str) -> Server:
        request.current_app = self.site.name
        server = servers.get(name)
        if server is None:
            raise Http404(f"No MCP server {name!r}")
        return server

    def _allowed(self, server: Server, definition: Any, user: Any) -> bool | None:
        if definition.permission is None:
            return True
        try:
            return bool(server.engine.permitted(definition, _Caller(user)))
        except Exception:  # a permission callable failing here is the call's business
            return None

    # -- the pages -------------------------------------------------------------------------

    def index(self, request: HttpRequest) -> HttpResponse:
        """Every server, with how many definitions of each kind it lists."""
        request.current_app = self.site.name
        listed = []
        for name, server in sorted(servers.items()):
            catalog = server.catalog()
            listed.append(
                {
                    "name": name,
                    "title": server.options.title or server.options.name,
                    "url": self._url("mcp_app_playground_catalog", name),
                    "counts": [
                        (label, self._count_shown(request, server, catalog, attr))
                        for attr, _, label in KINDS.values()
                    ],
                    "generation": catalog.generation,
                }
            )
        context = self._context(request, "MCP playground", servers=listed)
        return _Page(request, "admin/mcp_app/playground/index.html", context)

    def catalog(self, request: HttpRequest, server: str) -> HttpResponse:
        """A server's definitions: source, whether enabled, who may use them, and a try link."""
        found = self._server(request, server)
        catalog = found.catalog()
        sections = [
            Section(kind, label + "s", self._entries(request, found, catalog, kind))
            for kind, (_, _, label) in KINDS.items()
        ]
        from . import rows

        context = self._context(
            request,
            f"Catalog of server {found.name}",
            server=found,
            sections=sections,
            generation=catalog.generation,
            row_generation=rows.generation(found.name) if found.rows else None,
        )
        return _Page(request, "admin/mcp_app/playground/catalog.html", context)

    def _entries(
        self, request: HttpRequest, server: Server, catalog: Catalog, kind: str
    ) -> list[Entry]:
        attr = KINDS[kind][0]
        may_view = self._may_view_rows(request, attr)
        # Rows, disabled ones included, only for those who may see them in the admin.
        stored = self._rows(server, attr) if may_view else {}
        code = server.code_definitions(attr)
        entries: list[Entry] = []
        for definition in catalog.items(attr):
            key = key_of(definition)
            allowed = self._allowed(server, definition, request.user)
            if allowed is False and not may_view:
                # Only those who may see the rows of its kind learn what others may use.
                continue
            row, row_url = stored.get(key, (None, ""))
            source = definition.source
            if source == "row" or getattr(row, "overrides_code", False):
                stored.pop(key, None)
                if source == "code":
                    source = "code, restyled by a row"
            else:
                # A row of the same name as a code definition is shadowed: listed below.
                row_url = ""
            entries.append(
                Entry(
                    key=key,
                    title=definition.title or "",
                    description=definition.description or "",
                    source=source,
                    enabled=True,
                    permission=describe_permission(definition.permission),
                    allowed=allowed,
                    try_url=self.try_url(server.name, kind, key),
                    row_url=row_url,
                )
            )
        # Rows the catalog leaves out: disabled, shadowed by code, or not valid.
        for key, (row, row_url) in stored.items():
            if not row.enabled:
                hides = getattr(row, "overrides_code", False)
                status = "hides the code tool of this name" if hides else "disabled"
            elif key in code:
                status = "not listed: the code definition of this name wins"
            else:
                status = "not listed: the row does not make a valid definition (see the log)"
            entries.append(
                Entry(
                    key=key,
                    title=row.title,
                    description=row.description,
                    source="row",
                    enabled=row.enabled,
                    status=status,
                    row_url=row_url,
                )
            )
        return entries

    def _count_shown(
        self, request: HttpRequest, server: Server, catalog: Catalog, attr: str
    ) -> int:
        """How many of a kind's definitions the pages show the user."""
        may_view = self._may_view_rows(request, attr)
        return sum(
            self._shown(request, server, definition, may_view) for definition in catalog.items(attr)
        )

    def _may_view_rows(self, request: HttpRequest, attr: str) -> bool:
        """Whether the user may see the rows of a kind (``view`` or ``change``), as this admin
        says, or as the user's permissions say where it does not show them."""
        model = _model_of(attr)
        if self.site.is_registered(model):
            return bool(self.site.get_model_admin(model).has_view_or_change_permission(request))
        opts = model._meta
        user: Any = request.user
        return any(
            user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")
            for action in ("view", "change")
        )

    def _shown(
        self, request: HttpRequest, server: Server, definition: Any, may_view: bool | None = None
    ) -> bool:
        """Whether the page shows ``definition``: one the user may not use is shown only to
        those who may see the rows of its kind (``may_view``, when the caller knows it)."""
        if self._allowed(server, definition, request.user) is not False:
            return True
        if may_view is None:
            may_view = self._may_view_rows(request, _attr_of(definition))
        return may_view

    def _rows(self, server: Server, attr: str) -> dict[str, tuple[Any, str]]:
        """The server's rows of a kind by key, each with its admin page (for a user who may
        see them: ``_may_view_rows``)."""
        if not server.rows:
            return {}
        model = _model_of(attr)
        field_name = "uri" if attr == "resources" else "name"
        change = f"mcp_app_{model._meta.model_name}_change"
        return {
            getattr(row, field_name): (row, self._url(change, str(row.pk)))
            for row in model.objects.filter(server=server.name).order_by("order", field_name)
        }

    def try_resource(self, request: HttpRequest, server: str) -> HttpResponse:
        uri = request.POST.get("uri") if request.method == "POST" else None
        return self.try_definition(request, server, "resource", uri or request.GET.get("uri", ""))

    def try_named(self, request: HttpRequest, server: str, kind: str) -> HttpResponse:
        """``try_definition`` of the definition named by ``?name=``: for a name that a URL's
        path cannot carry (``.``, ``..``, or a prompt's ``a/../b``)."""
        return self.try_definition(request, server, kind, request.GET.get("name", ""))

    def try_definition(
        self, request: HttpRequest, server: str, kind: str, name: str
    ) -> HttpResponse:
        """Try one definition: its input form, then the result or the server's questions."""
        found = self._server(request, server)
        catalog = found.catalog()
        link = self._linker(found, catalog)
        definition, uri = self._definition(catalog, kind, name)
        label = KINDS[kind][2]
        if definition is not None and not self._shown(request, found, definition):
            definition = None  # as the catalog page leaves it out
        if definition is None:
            context = self._context(
                request,
                f"No {label} {name}",
                server=found,
                kind=kind,
                label=label,
                name=name,
                catalog_url=self._url("mcp_app_playground_catalog", found.name),
            )
            return _Page(request, "admin/mcp_app/playground/missing.html", context, status=404)
        trial = Trial(request, found, kind, definition, uri, link)
        if request.method == "POST":
            trial.post(request.POST)
        context = self._context(
            request,
            f"Read {uri}" if kind == "resource" else f"Try {label} {definition.name}",
            server=found,
            kind=kind,
            label=label,
            definition=definition,
            permission=describe_permission(definition.permission),
            allowed=self._allowed(found, definition, request.user),
            wire=pretty(definition.wire),
            catalog_url=self._url("mcp_app_playground_catalog", found.name),
            run_label=RUN_LABELS[kind],
            log_levels=LOG_LEVELS,
            trial=trial,
        )
        return _Page(request, "admin/mcp_app/playground/try.html", context)

    def _definition(self, catalog: Catalog, kind: str, name: str) -> tuple[Any, str]:
        """The definition tried, and for a resource read through a template, the URI."""
        if kind == "tool":
            return catalog.tool_map.get(name), ""
        if kind == "prompt":
            return catalog.prompt_map.get(name), ""
        if kind == "template":
            return catalog.template_map.get(name), ""
        resource = catalog.resource_map.get(name)
        if resource is not None:
            return resource, name
        # A URI a template serves (a resource link, or a template read): read it as it is.
        matched = catalog.find_template(name) if name else None
        return (matched[0], name) if matched is not None else (None, name)


_QUERY_EXPRESSION = re.compile(r"\{[?&]([^}]*)\}")


def _optional_variables(template: str) -> set[str]:
    """Variables of ``{?...}``/``{&...}`` expressions, which a URI may leave out (RFC 6570)."""
    names: set[str] = set()
    for match in _QUERY_EXPRESSION.finditer(template):
        names.update(part.strip().rstrip("*").split(":")[0] for part in match[1].split(","))
    return names


class Trial:
    """One try of a definition: its form, and the exchange a POST made."""

    def __init__(
        self,
        request: HttpRequest,
        server: Server,
        kind: str,
        definition: Any,
        uri: str,
        link: Callable[[str], str],
    ) -> None:
        self.request = request
        self.server = server
        self.kind = kind
        self.definition = definition
        self.link = link
        #: The URI of a resource, or of a read a template serves; a template's is filled in.
        self.uri = uri
        self.method = KINDS[kind][1]
        self.fields = self._fields()
        self.extra = ""
        self.extra_open = False
        self.extra_errors: list[str] = []
        self.errors: list[str] = []
        self.exchange: Exchange | None = None
        self.shown: Shown | None = None
        self.asked: list[Asked] = []
        #: What the next round carries in hidden fields: the requestState, the original
        #: arguments (or URI), the questions asked, and the number of the round.
        self.state: str | None = None
        self.carried = ""
        self.requests = ""
        self.round = 0
        self.log_level = ""
        #: The URI a template read formed, and how many rounds of input led to the result.
        self.uri_read = ""
        self.answered = 0
        if kind == "tool":
            schema = definition.input_schema
            # A schema the fields cannot express (no properties, $ref, oneOf...) is typed as JSON.
            self.extra_open = not schema.get("properties") and bool(
                set(schema) - {"type", "$schema", "properties"}
            )

    # -- the definition's own input ---------------------------------------------------------

    def _fields(self) -> list[Field]:
        definition = self.definition
        if self.kind == "tool":
            return object_fields(definition.input_schema, prefix="arg:", id_prefix="arg")
        if self.kind == "prompt":
            return [
                Field(
                    key=argument.name,
                    name=f"arg:{argument.name}",
                    id=f"arg-{index}",
                    label=argument.title or argument.name,
                    widget="input",
                    required=argument.required,
                    help=argument.description or "",
                )
                for index, argument in enumerate(definition.arguments)
            ]
        if self.kind == "template":
            optional = _optional_variables(definition.uri_template)
            return [
                Field(
                    key=name,
                    name=f"arg:{name}",
                    id=f"arg-{index}",
                    label=name,
                    widget="input",
                    required=name not in optional,
                )
                for index, name in enumerate(definition.matcher.variables)
            ]
        return []

    def _read_input(self, data: QueryDict) -> tuple[JSON, str] | None:
        """The arguments typed in and the URI to read, or ``None`` with the errors placed."""
        if self.kind == "resource":
            return {}, self.uri
        values, good = read_fields(self.fields, data, strict=False)
        if self.kind == "template":
            for target in self.fields:
                if target.required and target.key not in values:
                    target.errors.append("This variable is required to form the URI.")
                    good = False
            return ({}, self.definition.matcher.expand(values)) if good else None
        if self.kind == "tool":
            self.extra = data.get("extra", "")
            if self.extra.strip():
                self.extra_open = True
                try:
                    more = loads(self.extra)
                except ValueError as exc:
                    self.extra_errors.append(f"Not valid JSON: {exc}.")
                else:
                    if isinstance(more, dict):
                        values.update(more)
                    else:
                        self.extra_errors.append("Give a JSON object of further arguments.")
                good = good and not self.extra_errors
        return (values, "") if good else None

    def _show_input(self, arguments: JSON, uri: str) -> None:
        """Fill the form with what was sent, so the try can be run again as it was."""
        if self.kind == "template":
            fill_all(self.fields, self.definition.matcher.match(uri) or {})
            return
        fill_all(self.fields, arguments)
        known = {f.key for f in self.fields}
        rest = {k: v for k, v in arguments.items() if k not in known}
        if self.kind == "tool" and rest:
            self.extra, self.extra_open = pretty(rest), True

    # -- a POST: a first try, or answers to the server's questions --------------------------

    def post(self, data: QueryDict) -> None:
        level = data.get("log_level", "")
        self.log_level = level if level in versions.LOG_LEVELS else ""
        if data.get("step") == "answer":
            self._answer(data)
            return
        typed = self._read_input(data)
        if typed is None:
            self.errors.append("Please correct the errors below.")
            return
        self._send(*typed, {}, 0)

    def _answer(self, data: QueryDict) -> None:
        self.carried, self.requests = data.get("carried", ""), data.get("requests", "")
        try:
            carried = loads(self.carried)
            requests = loads(self.requests)
            self.round = int(data.get("round", "1"))
        except ValueError:
            self.errors.append("The answers came without the request they answer; start again.")
            return
        carried = carried if isinstance(carried, dict) else {}
        arguments = carried.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        uri = carried.get("uri")
        uri = uri if isinstance(uri, str) else ""
        if self.method == "resources/read" and not self._serves(uri):
            self.errors.append("The answers are for another resource; start again.")
            return
        self._show_input(arguments, uri)
        self.state = data.get("state") if "state" in data else None
        self.asked = asked_of(requests, self.link)
        responses, good = answer(self.asked, data)
        if not good:
            self.errors.append("Please correct the errors in the answers below.")
            self.shown = Shown("input")
            return
        extra: JSON = {"inputResponses": responses}
        if self.state is not None:
            extra["requestState"] = self.state
        self._send(arguments, uri, extra, self.round)

    def _serves(self, uri: str) -> bool:
        if self.kind == "resource":
            return uri == self.uri
        return self.definition.matcher.match(uri) is not None

    def _params(self, arguments: JSON, uri: str) -> JSON:
        if self.method == "resources/read":
            return {"uri": uri}
        return {"name": self.definition.name, "arguments": arguments}

    def _send(self, arguments: JSON, uri: str, extra: JSON, answered: int) -> None:
        params = {**self._params(arguments, uri), **extra}
        self.exchange = send(
            self.server, self.request, self.method, params, log_level=self.log_level
        )
        self.shown = show(self.exchange, self.kind, self.link)
        self.uri_read = uri
        self.answered = answered
        result = self.exchange.result or {}
        if self.shown.kind == "input":
            self.round = answered + 1
            self.asked = asked_of(result.get("inputRequests"), self.link)
            state = result.get("requestState")
            self.state = state if isinstance(state, str) else None
            carried: JSON = {"uri": uri} if uri else {"arguments": arguments}
            self.carried = dumps(carried)
            self.requests = dumps(result.get("inputRequests") or {})
        elif self.kind == "tool" and self.shown.is_error:
            # The server's validation message, put on the fields it names.
            text = " ".join(b.text for b in self.shown.blocks if b.type == "text")
            loose = place_problems(text, self.fields)
            if loose or any(f.errors for f in self.fields):
                self.errors.append(f"The server refused the arguments: {text}")
        elif self.shown.kind == "error" and self.kind == "prompt":
            data = (self.exchange.error or {}).get("data")
            missing = data.get("missing") if isinstance(data, dict) else None
            for target in self.fields:
                if isinstance(missing, list) and target.key in missing:
                    target.errors.append("This argument is required.")

    # -- for the template ------------------------------------------------------------------

    @property
    def single(self) -> Asked | None:
        """The one elicitation asked, answered with Accept, Decline and Cancel buttons."""
        if len(self.asked) == 1 and self.asked[0].elicits:
            return self.asked[0]
        return None

    @property
    def sent(self) -> str:
        return pretty(self.exchange.sent) if self.exchange is not None else ""

    @property
    def received(self) -> str:
        return pretty(self.exchange.message) if self.exchange is not None else ""

    @property
    def notes(self) -> list[Note]:
        if self.exchange is None:
            return []
        return [note(message) for message in self.exchange.notifications]
