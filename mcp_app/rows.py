"""Definitions stored as rows, merged with the code definitions of a server."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connections, router, transaction
from django.db.models import F, Prefetch, Q

from .conf import conf, imported
from .exceptions import AlreadyRegistered, DefinitionError
from .protocol.jsonrpc import InvalidParams
from .protocol.jsonrpc import clip as jsonrpc_clip
from .recent import Recent
from .registry import (
    KINDS,
    PromptArgument,
    PromptDef,
    ResourceDef,
    TemplateDef,
    ToolDef,
    authority_end,
    check_call,
    percent_identity,
    permission_allows,
)
from .server import channel_name, servers
from .uritemplate import URITemplate, URITemplateError

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.template import Template

    from .models import Definition, Prompt, Resource, ResourceTemplate, Tool

__all__ = [
    "RowAccess",
    "RowHandler",
    "TemplateTooLarge",
    "access",
    "code_keys",
    "compile_template",
    "connect_access_signals",
    "forget_generations",
    "generation",
    "get_handler",
    "handler_choices",
    "merge",
    "prompt_def",
    "render_template",
    "resource_def",
    "restyled",
    "row_handler",
    "template_def",
    "template_error",
    "tool_def",
    "touch",
]

logger = logging.getLogger("mcp_app")

F_ = TypeVar("F_", bound=Callable[..., Any])
Lists = tuple[list[ToolDef], list[ResourceDef], list[TemplateDef], list[PromptDef]]
JSON = dict[str, Any]

# -- handlers that code offers to rows ---------------------------------------------------


@dataclass(frozen=True)
class RowHandler:
    """A handler staff may bind rows to, by ``name``, from a list in the admin."""

    name: str
    label: str
    function: Callable[..., Any]
    kinds: frozenset[str]
    check: Callable[[Any], None] | None = None


_handlers: dict[str, RowHandler] = {}


def row_handler(
    name: str,
    *,
    label: str | None = None,
    kinds: Iterable[str] = ("tools",),
    check: Callable[[Any], None] | None = None,
) -> Callable[[F_], F_]:
    """Offer a function to rows of the given kinds (``"tools"``, ``"templates"``).

    The function is called as a code handler of that kind is, ``(arguments, context)`` for a
    tool and ``(variables, context)`` for a resource template, with the row's ``config`` in
    ``context.config``. ``check(config)`` raises ``ValidationError`` for a config the function
    cannot use; the admin shows it on the config field. Returns the function unchanged.

    Raises:
        AlreadyRegistered: a row handler of that name exists.
        ValueError: the name is empty or longer than 100 characters, or a kind is unknown;
            also (a ``DefinitionError``) the function cannot take its arguments.
    """
    wanted = frozenset(kinds)
    if not name or len(name) > 100:
        raise ValueError("a row handler's name must be 1-100 characters")
    if not wanted or not wanted <= {"tools", "templates"}:
        raise ValueError("a row handler serves 'tools' and/or 'templates'")

    def decorator(fn: F_) -> F_:
        existing = _handlers.get(name)
        if existing is not None:
            raise AlreadyRegistered("row handler", name, existing.function, fn)
        # Found out now, not as each row bound to it is left out of the catalog.
        first = "arguments" if "tools" in wanted else "variables"
        check_call(f"row handler {name!r}", fn, first, "context")
        _handlers[name] = RowHandler(name, label or name, fn, wanted, check)
        return fn

    return decorator


def handler_choices(kind: str) -> list[tuple[str, str]]:
    """The ``(name, label)`` choices of the row handlers that serve ``kind``, by label."""
    found = [(h.name, h.label) for h in _handlers.values() if kind in h.kinds]
    return sorted(found, key=lambda choice: choice[1].lower())


def get_handler(name: str) -> RowHandler | None:
    """The row handler registered under ``name``, if any."""
    return _handlers.get(name)


# -- Django templates written by staff ---------------------------------------------------


class TemplateTooLarge(InvalidParams, ValueError):
    """A row's template would render more than ``ROW_TEMPLATE_MAX_CHARS`` allows, or takes
    longer than ``ROW_TEMPLATE_MAX_SECONDS``.

    Raised before the text is made where its size is known beforehand. A prompt or resource
    template answers it as an invalid-params error (-32602), the ``template`` tool handler
    as an ``isError`` result.
    """

    def __init__(
        self, limit: float, *, rounds: bool = False, seconds: bool = False, why: str = ""
    ) -> None:
        setting = "MCP_APP['ROW_TEMPLATE_MAX_CHARS']"
        if why:
            message = why
        elif seconds:
            message = (
                "The template took longer to render than "
                f"MCP_APP['ROW_TEMPLATE_MAX_SECONDS'] ({limit:g} s)"
            )
        elif rounds:
            message = f"The template's loops would run more than {setting} ({limit:,}) rounds"
        else:
            message = f"The template's output would be longer than {setting} ({limit:,} characters)"
        super().__init__(message)
        self.limit = limit


@functools.cache
def _engine(allowed: tuple[str, ...]) -> Any:
    from django.template import Engine, engines
    from django.template.backends.django import DjangoTemplates

    libraries: dict[str, str] = {}
    for backend in engines.all():
        if isinstance(backend, DjangoTemplates):
            # Only the libraries ROW_TEMPLATE_LIBRARIES names ({% load humanize %}), and none of
            # the site's builtins: a library such as cache reads and writes beyond the template,
            # and whoever may edit rows need not be trusted with the site's cache.
            libraries = {
                name: path for name, path in backend.engine.libraries.items() if name in allowed
            }
            break
    # No loaders: a row's template cannot {% include %} files from the server's disk, and
    # no autoescaping: the output is text for a model, not HTML.
    engine = Engine(loaders=[], libraries=libraries, autoescape=False)
    engine.template_builtins = [_guarded(library) for library in engine.template_builtins]
    engine.template_libraries = {
        name: _guarded(library) for name, library in engine.template_libraries.items()
    }
    return engine


#: Built-in tags a row's template may not use: {% debug %} prints the context and, with
#: DEBUG on, every imported module, to whoever reads the row's output.
WITHHELD_TAGS = frozenset({"debug"})


def _guarded(library: Any) -> Any:
    """A copy of a tag library for rows' templates: without the withheld tags, and bounded.

    Every filter's result is held to ``ROW_TEMPLATE_MAX_CHARS`` once made, which stops a
    chain of filters that each make their text a few times longer. The filters and tags whose
    arguments alone can ask for any size (a width, a precision, a count, a separator repeated
    per item) are checked before Django's own function runs, which then runs unchanged.
    """
    from django.template import Library

    checks, tags = _guards()
    guarded = Library()
    guarded.tags = {
        name: tags[tag](tag) if tag in tags else tag
        for name, tag in library.tags.items()
        if name not in WITHHELD_TAGS
    }
    guarded.filters = {
        name: _bounded(function, checks.get(function)) for name, function in library.filters.items()
    }
    return guarded


@functools.cache
def _guards() -> tuple[dict[Any, Callable[..., None]], dict[Any, Callable[[Any], Any]]]:
    """The checks run before Django's amplifying filters, and the wrappers of its amplifying
    tags, keyed by Django's own functions (a library's filter of the same name is not them)."""
    from django.template import defaultfilters, defaulttags

    checks: dict[Any, Callable[..., None]] = {
        defaultfilters.truncatechars_html: _check_html,
        defaultfilters.truncatewords_html: _check_html,
        defaultfilters.ljust: _check_width,
        defaultfilters.rjust: _check_width,
        defaultfilters.center: _check_width,
        defaultfilters.floatformat: _check_precision,
        defaultfilters.stringformat: _check_format,
        defaultfilters.join: _check_join,
        defaultfilters.add: _check_add,
    }
    tags: dict[Any, Callable[[Any], Any]] = {
        defaulttags.do_for: functools.partial(_checked_tag, attribute="sequence", check=_rounds),
        defaulttags.lorem: functools.partial(_checked_tag, attribute="count", check=_check_lorem),
    }
    return checks, tags


# The rendering's meter. Where output is made, by nodes nested in one another, Django has no
# single place to count it: each node's render is wrapped, and counts what it returned less
# what the nodes rendered inside it returned (already counted). Loops are counted when they
# start, by the length of their sequence, so that nested loops stop even with no output.


@dataclass
class _Meter:
    limit: int
    #: When the rendering is to stop (time.monotonic()): work that makes no text, such as a
    #: filter run on a long argument in every round, or a Django 6 partial that renders
    #: itself, is counted by no other measure.
    deadline: float = float("inf")
    chars: int = 0
    rounds: int = 0
    #: What the filters have made so far (list and tuple items weighing ``ITEM_WEIGHT``).
    made: int = 0
    #: What the nodes rendered so far returned, for a node to tell its own output apart.
    returned: int = 0
    #: The first refusal, raised again once the node it came up in returns: Django reads an
    #: error within {% if a == b %} as false, and {% lorem %} a ValueError as a count of one.
    refused: TemplateTooLarge | None = None


_meter: ContextVar[_Meter | None] = ContextVar("mcp_app_row_template_meter", default=None)


def _limit() -> int:
    meter = _meter.get()
    return conf.ROW_TEMPLATE_MAX_CHARS if meter is None else meter.limit


def _refuse(
    limit: float, *, rounds: bool = False, seconds: bool = False, why: str = ""
) -> NoReturn:
    error = TemplateTooLarge(limit, rounds=rounds, seconds=seconds, why=why)
    meter = _meter.get()
    if meter is not None and meter.refused is None:
        meter.refused = error
    raise error


def _metered_template(template: Any) -> Any:
    """``template``, its rendering counted against ``ROW_TEMPLATE_MAX_CHARS`` and timed against
    ``ROW_TEMPLATE_MAX_SECONDS``."""
    from django.template.base import Node

    for node in template.nodelist.get_nodes_by_type(Node):
        node.render_annotated = _metered_node(node.render_annotated)
    render = template.render

    def metered_render(context: Any = None) -> str:
        meter = _Meter(
            conf.ROW_TEMPLATE_MAX_CHARS, time.monotonic() + conf.ROW_TEMPLATE_MAX_SECONDS
        )
        token = _meter.set(meter)
        try:
            output: str = render(context)
        except Exception as exc:
            # Some tags turn an error into another ({% widthratio %}: a syntax error), or
            # read it as false ({% if %}): the refusal is what the reader should see.
            if meter.refused is None or exc is meter.refused:
                raise
            raise meter.refused from exc
        finally:
            _meter.reset(token)
        if meter.refused is not None:
            raise meter.refused
        return output

    template.render = metered_render
    return template


def _metered_node(render: Callable[[Any], str]) -> Callable[[Any], str]:
    def render_annotated(context: Any) -> str:
        meter = _meter.get()
        if meter is None:
            return render(context)
        if time.monotonic() > meter.deadline:
            _refuse(conf.ROW_TEMPLATE_MAX_SECONDS, seconds=True)
        before = meter.returned
        output = render(context)
        if meter.refused is not None:
            raise meter.refused
        own = len(output) - (meter.returned - before)
        meter.returned = before + len(output)
        if own > 0:
            meter.chars += own
            if meter.chars > meter.limit:
                _refuse(meter.limit)
        return output

    return render_annotated


#: How many times ``ROW_TEMPLATE_MAX_CHARS`` a rendering's filters may make in all: what
#: {% with %} keeps in memory, and work one tag does before the next is timed.
MADE_FACTOR = 10
#: What an item of a list or tuple a filter makes weighs against that, as characters: each
#: is an object of its own (``make_list`` of a long text makes one per character).
ITEM_WEIGHT = 8
#: Most tags a text given to ``truncatechars_html`` or ``truncatewords_html`` may hold:
#: their work grows faster than the number of tags.
HTML_TAGS_MAX = 10_000


def _bounded(function: Callable[..., Any], check: Callable[..., None] | None) -> Any:
    @functools.wraps(function)
    def bounded(value: Any, *args: Any, **kwargs: Any) -> Any:
        meter = _meter.get()
        limit = conf.ROW_TEMPLATE_MAX_CHARS if meter is None else meter.limit
        if meter is not None and time.monotonic() > meter.deadline:
            # Filters run within one tag ({% with %} and its many assignments) are timed too.
            _refuse(conf.ROW_TEMPLATE_MAX_SECONDS, seconds=True)
        if check is not None:
            check(limit, value, *args, **kwargs)
        result = function(value, *args, **kwargs)
        if isinstance(result, str | list | tuple):
            if len(result) > limit:
                _refuse(limit)
            if meter is not None:
                meter.made += len(result) * (1 if isinstance(result, str) else ITEM_WEIGHT)
                if meter.made > MADE_FACTOR * limit:
                    _refuse(
                        limit,
                        why=f"The template's filters would make more than {MADE_FACTOR} times "
                        f"MCP_APP['ROW_TEMPLATE_MAX_CHARS'] ({MADE_FACTOR * limit:,} characters) "
                        "in all",
                    )
        return result

    return bounded


def _check_html(limit: int, value: Any, *args: Any) -> None:
    if isinstance(value, str) and value.count("<") > HTML_TAGS_MAX:
        _refuse(
            limit,
            why=f"The template gives an HTML truncating filter a text of more than "
            f"{HTML_TAGS_MAX:,} tags",
        )


def _text_size(value: Any, limit: int) -> int:
    """About the length of the text ``value`` makes (its strings, and one for each other item),
    counted no further than past ``limit``: a list may hold one long string many times."""
    total = 0
    pending = [value]
    while pending and total <= limit:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, list | tuple | dict):
            total += len(item)
            if total <= limit:
                pending.extend(item)
                if isinstance(item, dict):
                    pending.extend(item.values())
        else:
            total += 1
    return total


def _integer(value: Any) -> int | None:
    """``value`` as a filter's ``int()`` reads it, or ``None`` where that fails; digits past
    the length ``int()`` takes, or an infinity, count as more than any limit."""
    try:
        return int(value)
    except OverflowError:
        return sys.maxsize
    except (TypeError, ValueError):
        return sys.maxsize if str(value).strip().isdigit() else None


def _check_width(limit: int, value: Any, width: Any = None) -> None:
    number = _integer(width)
    if number is not None and number > limit:
        _refuse(limit)


def _check_precision(limit: int, value: Any, precision: Any = -1) -> None:
    if isinstance(precision, str):
        precision = precision.rstrip("gu") or -1  # "g": grouped, "u": unlocalized
    number = _integer(precision)
    if number is not None and abs(number) > limit:
        _refuse(limit)


def _check_join(limit: int, items: Any, separator: Any, autoescape: bool = True) -> None:
    if not hasattr(items, "__len__") or len(items) < 2:
        return  # the one item is the result, which is checked
    if autoescape:
        separator = str(separator)  # as conditional_escape() makes it, or longer
    elif not isinstance(separator, str) or not all(isinstance(item, str) for item in items):
        return  # str.join() fails, and join answers the items unjoined
    # What the text comes to at least (escaping only adds), before it is made.
    total = len(separator) * (len(items) - 1)
    if total <= limit:
        total += sum(len(item) for item in items if isinstance(item, str))
    if total > limit:
        _refuse(limit)


def _check_add(limit: int, value: Any, other: Any) -> None:
    # Lists added to themselves double at each step, holding the same strings again: what
    # {{ list }} then makes grows with the strings, not with the list.
    concatenated = (isinstance(value, list) and isinstance(other, list)) or (
        isinstance(value, tuple) and isinstance(other, tuple)
    )
    if concatenated and _text_size(value, limit) + _text_size(other, limit) > limit:
        _refuse(limit)


#: A printf-style conversion after its mapping key, as Python reads it: flags, width,
#: precision, length modifier and type (ASCII digits only, as Python's own parser).
_CONVERSION = re.compile(r"[-+ #0]*(\*|[0-9]+)?(?:\.(\*|[0-9]*))?[hlL]?.?", re.DOTALL)
_PARENS = re.compile(r"[()]")


def _conversions(format_: str) -> Iterator[tuple[str, str | None, str | None, bool]]:
    """The conversions of a printf-style format: their text, width and precision digits, and
    whether they name a mapping key; up to an unclosed key, which Python refuses."""
    start = format_.find("%")
    while start != -1:
        at = start + 1
        keyed = format_.startswith("(", at)
        if keyed:
            depth = 0
            for paren in _PARENS.finditer(format_, at):
                depth += 1 if paren[0] == "(" else -1
                if not depth:
                    at = paren.end()
                    break
            else:
                return
        match = _CONVERSION.match(format_, at)
        width, precision = match.groups() if match else (None, None)
        end = match.end() if match else at
        yield format_[start:end], width, precision, keyed
        start = format_.find("%", end)


def _digits(text: str | None) -> int:
    if not text or text == "*":
        return 0
    text = text.lstrip("0")
    return int(text) if len(text) < 19 else sys.maxsize


def _check_format(limit: int, value: Any, specifier: Any) -> None:
    if isinstance(value, tuple):
        value = str(value)  # as stringformat does
    total = 0
    made: dict[str, int] = {}
    for text, width, precision, keyed in _conversions("%" + str(specifier)):
        if _digits(width) > limit or _digits(precision) > limit:
            _refuse(limit)
        if not keyed:
            continue
        # A key may come back any number of times; each conversion is made alone (once per
        # distinct one), and what they add up to is checked before the whole is made.
        size = made.get(text)
        if size is None:
            try:
                size = made[text] = len(text % value)
            except Exception:
                return  # Python stops at this conversion too, and stringformat answers for it
        total += size
        if total > limit:
            _refuse(limit)


class _Checked:
    """A tag's expression whose value goes through ``check`` when the tag resolves it."""

    def __init__(self, expression: Any, check: Callable[[Any], Any]) -> None:
        self.expression = expression
        self.check = check

    def resolve(self, context: Any, ignore_failures: bool = False) -> Any:
        return self.check(self.expression.resolve(context, ignore_failures))

    def __str__(self) -> str:
        return str(self.expression)


def _checked_tag(
    tag: Callable[..., Any], *, attribute: str, check: Callable[[Any, Any], Any]
) -> Callable[..., Any]:
    """Django's ``tag``, its node resolving ``attribute`` through ``check(node, value)``."""

    @functools.wraps(tag)
    def compile_tag(parser: Any, token: Any) -> Any:
        node = tag(parser, token)
        expression = getattr(node, attribute)
        setattr(node, attribute, _Checked(expression, functools.partial(check, node)))
        return node

    return compile_tag


def _rounds(node: Any, values: Any) -> Any:
    """A {% for %} loop's values, its rounds counted before it runs them."""
    limit = _limit()
    if values is not None and not hasattr(values, "__len__"):
        # Django lists them; only as far as past the limit, as an iterator may not end.
        try:
            iterator = iter(values)
        except TypeError:
            return values  # Django's list() fails as it did
        values = list(itertools.islice(iterator, limit + 1))
    if values is None:
        return values
    meter = _meter.get()
    rounds = len(values) + (meter.rounds if meter is not None else 0)
    if rounds > limit:
        _refuse(limit, rounds=True)
    if meter is not None:
        meter.rounds = rounds
    return values


@functools.cache
def _lorem_longest() -> tuple[int, int, int]:
    """The longest text one {% lorem %} word, one paragraph and the common first paragraph
    make, separators included."""
    from django.utils import lorem_ipsum

    word = max(len(w) for w in (*lorem_ipsum.WORDS, *lorem_ipsum.COMMON_WORDS)) + len(" ")
    # django.utils.lorem_ipsum: a sentence is 1-5 sections of 3-12 distinct words joined by
    # ", ", ended by "." or "?"; a paragraph is 1-4 sentences joined by " ".
    section = sum(sorted(len(w) for w in lorem_ipsum.WORDS)[-12:]) + 11
    sentence = 5 * section + 4 * len(", ") + 1
    around = len("<p></p>\n\n")
    return word, 4 * sentence + 3 + around, len(lorem_ipsum.COMMON_P) + around


def _check_lorem(node: Any, count: Any) -> Any:
    # Held to the longest text the count could make, so that a count is refused or not
    # whatever words chance picks.
    try:
        number = int(count)
    except OverflowError:  # an infinity
        _refuse(_limit())
    except (TypeError, ValueError):
        return count  # {% lorem %} makes one
    word, paragraph, common = _lorem_longest()
    if node.method == "w":
        longest = number * word
    elif node.common and number > 0:
        longest = common + (number - 1) * paragraph
    else:
        longest = number * paragraph
    limit = _limit()
    if longest > limit:
        _refuse(limit)
    return count


def compile_template(source: str) -> Template:
    """Compile a row's Django template (cached by its source).

    Its rendering is held to ``ROW_TEMPLATE_MAX_CHARS`` and ``ROW_TEMPLATE_MAX_SECONDS``.

    Raises:
        TemplateSyntaxError: the template does not compile, or loads a library that
            ``ROW_TEMPLATE_LIBRARIES`` does not allow.
    """
    return _compiled(source, conf.ROW_TEMPLATE_LIBRARIES)


@functools.lru_cache(maxsize=1024)
def _compiled(source: str, allowed: tuple[str, ...]) -> Template:
    return _metered_template(_engine(allowed).from_string(source))  # type: ignore[no-any-return]


def render_template(source: str, values: Mapping[str, Any]) -> str:
    """Render a row's Django template with ``values`` as its variables, unescaped.

    Raises:
        TemplateSyntaxError: the template does not compile.
        TemplateTooLarge: the output, a filter's result or the loops' rounds would pass
            ``ROW_TEMPLATE_MAX_CHARS``, or the rendering ``ROW_TEMPLATE_MAX_SECONDS``.
    """
    from django.template import Context

    return compile_template(source).render(Context(dict(values), autoescape=False))


def render_for_client(source: str, values: Mapping[str, Any], what: str) -> str:
    """``render_template`` for a prompt or resource template row, whose variables a client sends.

    A template that fails on them (``{{ when|timesince }}`` given a string, ``divisibleby``
    given a word, nesting deeper than Python's stack) is answered as invalid params (-32602)
    naming ``what``, and logged for the staff who wrote it: not as the server's failure.

    Raises:
        InvalidParams: the template could not be rendered with ``values``.
    """
    try:
        return render_template(source, values)
    except InvalidParams:
        raise  # TemplateTooLarge: its message says what to ask for
    except Exception as exc:
        logger.warning("Could not render %s", what, exc_info=True)
        message = f"Could not render {what} with these arguments"
        if conf.TOOL_ERROR_DETAILS:
            detail = ": ".join(filter(None, (type(exc).__name__, str(exc))))
            message += f" ({jsonrpc_clip(detail)})"
        raise InvalidParams(message) from exc


#: What every template context holds besides the values given it.
_BUILTIN_NAMES = frozenset({"True", "False", "None"})


def template_reads(source: str) -> set[str] | None:
    """The variables a row's template (compiled already) reads from the values it is given:
    the first name of each lookup, less those its own tags bind (``for`` loop variables,
    ``with``, ``as``). ``None`` when it uses a tag whose reads this does not follow.
    """
    from django.template import Variable
    from django.template.base import FilterExpression, TextNode, VariableNode
    from django.template.defaulttags import (
        AutoEscapeControlNode,
        CommentNode,
        CycleNode,
        FilterNode,
        FirstOfNode,
        ForNode,
        IfNode,
        LoadNode,
        NowNode,
        SpacelessNode,
        TemplateTagNode,
        VerbatimNode,
        WithNode,
    )

    read: set[str] = set()
    bound: set[str | None] = {"forloop"}

    def expression(found: Any, own: bool = True) -> None:
        # own: whether the expression's own variable is read from the values (a {% filter %}
        # applies its filters to what it wraps).
        if isinstance(found, _Checked):  # a guarded tag's expression ({% for %}'s sequence)
            found = found.expression
        if not isinstance(found, FilterExpression):
            return
        if own and isinstance(found.var, Variable) and found.var.lookups:
            read.add(found.var.lookups[0])
        for _function, arguments in found.filters:
            for lookup, argument in arguments:
                if lookup and isinstance(argument, Variable) and argument.lookups:
                    read.add(argument.lookups[0])

    def condition(found: Any) -> None:
        if found is None:
            return
        expression(getattr(found, "value", None))
        for side in ("first", "second"):
            if getattr(found, side, None) is not None:
                condition(getattr(found, side))

    stack: list[Any] = list(compile_template(source).nodelist)
    while stack:
        node = stack.pop()
        if isinstance(node, VariableNode):
            expression(node.filter_expression)
        elif isinstance(node, IfNode):
            for test, nodelist in node.conditions_nodelists:
                condition(test)
                stack.extend(nodelist)
        elif isinstance(node, ForNode):
            expression(node.sequence)
            bound.update(node.loopvars)
            stack.extend(node.nodelist_loop)
            stack.extend(node.nodelist_empty)
        elif isinstance(node, WithNode):
            for value in node.extra_context.values():
                expression(value)
            bound.update(node.extra_context)
            stack.extend(node.nodelist)
        elif isinstance(node, FirstOfNode):
            for value in node.vars:
                expression(value)
            bound.add(node.asvar)
        elif isinstance(node, CycleNode):
            for value in node.cyclevars:
                expression(value)
            bound.add(node.variable_name)
        elif isinstance(node, FilterNode | SpacelessNode | AutoEscapeControlNode):
            expression(getattr(node, "filter_expr", None), own=False)
            stack.extend(node.nodelist)
        elif isinstance(node, NowNode):
            bound.add(node.asvar)
        elif not isinstance(
            node, TextNode | CommentNode | LoadNode | TemplateTagNode | VerbatimNode
        ):
            return None
    return read - bound - _BUILTIN_NAMES


def template_error(source: str) -> str | None:
    """Why ``source`` does not compile as a Django template, or ``None`` if it does."""
    from django.template import TemplateSyntaxError
    from django.template.loader_tags import ExtendsNode, IncludeNode

    try:
        template = compile_template(source)
    except TemplateSyntaxError as exc:
        return f"Template syntax error: {exc}"
    except Exception as exc:
        # Some tags' parsers fail on bad input with other errors ({% filter %}: ValueError).
        return f"Template syntax error: {type(exc).__name__}: {exc}".rstrip(": ")
    for node_type, tag in ((ExtendsNode, "extends"), (IncludeNode, "include")):
        if template.nodelist.get_nodes_by_type(node_type):
            return (
                f"Template error: {{% {tag} %}} cannot work here; a row's template has no "
                "other templates to load."
            )
    return _unreversed(template)


def _unreversed(template: Template) -> str | None:
    """Why a ``{% url %}`` of the template, given only literals, reverses to no URL of the
    site: it would fail every rendering. One given a variable is judged when rendered."""
    from django.template.base import Variable
    from django.template.defaulttags import URLNode
    from django.urls import NoReverseMatch, reverse

    def literal(expression: Any) -> tuple[bool, Any]:
        value = expression.var
        if expression.filters:
            return False, None
        if isinstance(value, Variable):
            return value.literal is not None, value.literal
        return True, str(value)

    node: Any
    for node in template.nodelist.get_nodes_by_type(URLNode):
        if node.asvar:
            continue  # {% url ... as name %} renders nothing, not an error, for a bad one
        given = [literal(node.view_name)]
        given += [literal(arg) for arg in node.args]
        given += [literal(kwarg) for kwarg in node.kwargs.values()]
        if not all(known for known, _ in given):
            continue
        values = [value for _, value in given]
        args, rest = values[1 : 1 + len(node.args)], values[1 + len(node.args) :]
        try:
            reverse(values[0], args=args, kwargs=dict(zip(node.kwargs, rest, strict=True)))
        except NoReverseMatch as exc:
            return f"Template error: {{% url %}} names no URL of the site ({exc})"
        except Exception:
            # The site's URLs cannot be read now (an import error among them): not the row's
            # doing, and judged when it renders.
            logger.warning("Could not check a row template's {% url %}", exc_info=True)
    return None


def _check_template_config(config: Any) -> None:
    if not isinstance(config, dict) or not isinstance(config.get("template"), str):
        raise ValidationError('The template handler needs {"template": "Hello {{ name }}"}.')
    problem = template_error(config["template"])
    if problem:
        raise ValidationError(problem)


@row_handler(
    "template",
    label='Django template (config: {"template": "..."}, rendered with the arguments)',
    check=_check_template_config,
)
def _template_tool(arguments: Mapping[str, Any], context: Any) -> Any:
    """The built-in handler: the row's ``config["template"]`` rendered with the arguments."""
    from .content import tool_error

    try:
        return render_template(context.config["template"], arguments)
    except TemplateTooLarge as exc:
        # For the model to read and ask for less, even with TOOL_ERROR_DETAILS off: the
        # message tells of a setting, nothing of the server's data.
        return tool_error(str(exc))


# -- the generation and change notifications ---------------------------------------------

#: Unique numbers for views of uncommitted edits (see ``generation``).
_versions = itertools.count(1)
_PENDING = "_mcp_app_row_edits"


class _Edits:
    """One server's edits in an open transaction, published in one message when it commits."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.kinds: set[str] = set()
        self.uris: set[str] = set()
        self.version = 0
        self.publish = self._publisher()

    def _publisher(self) -> Callable[[], None]:
        # Django logs a failing robust hook by its __qualname__, which a bound method of an
        # instance has but an instance does not; so the hook is a plain function.
        def publish_row_edits() -> None:
            from .delivery import tell

            _known.forget(self.server)
            kinds = [kind for kind in KINDS if kind in self.kinds]
            tell(channel_name(self.server, "lists"), {"kinds": kinds})
            for uri in sorted(self.uris):
                tell(channel_name(self.server, "updated"), {"uri": uri})

        return publish_row_edits


def _live_edits(connection: BaseDatabaseWrapper, server: str) -> _Edits | None:
    """The server's edits still awaiting this connection's commit, if any.

    They are live while their publish hook is queued: a rollback (of the transaction, or of
    the savepoint the hook was queued in) drops the hook, and the generation bump with it.
    """
    pending: dict[str, _Edits] | None = connection.__dict__.get(_PENDING)
    if not pending:
        return None
    edits = pending.get(server)
    if edits is None:
        return None
    if connection.in_atomic_block and any(
        entry[1] is edits.publish for entry in connection.run_on_commit
    ):
        return edits
    del pending[server]
    return None


def _seed() -> int:
    # A generation row starts at the clock (µs), not at 1, so a table emptied and filled
    # again (flush, restore) never repeats a value some process has cached a catalog for.
    return time.time_ns() // 1000


def _bump(using: str, server: str) -> None:
    from .models import CatalogGeneration

    rows = CatalogGeneration.objects.using(using).filter(server=server)
    if rows.update(value=F("value") + 1):
        return
    try:
        # A savepoint: losing the race to create the row must not break the transaction.
        with transaction.atomic(using=using):
            CatalogGeneration.objects.using(using).create(server=server, value=_seed())
    except IntegrityError:
        rows.update(value=F("value") + 1)


def touch(
    server: str, kinds: Iterable[str], uris: Iterable[str] = (), *, using: str | None = None
) -> None:
    """Record an edit of a server's rows: bump its generation, announce it after commit.

    The signal receivers call this for every save and delete; call it yourself after
    ``bulk_create``, ``QuerySet.update`` or raw SQL, which send no signals. Within one
    transaction the generation moves once per server and one ``lists`` message carries
    every changed kind; ``uris`` are resources whose content changed (``updated``).

    Raises:
        ValueError: a kind is not one of ``tools``, ``resources``, ``templates``, ``prompts``.
    """
    from .models import CatalogGeneration

    changed = set(kinds)
    if not changed or not changed <= set(KINDS):
        raise ValueError(f"kinds must be among {KINDS}, got {sorted(changed)}")
    # Now as well as at commit: a read in this transaction must not reuse what it knew.
    _known.forget(server)
    alias = using or router.db_for_write(CatalogGeneration)
    connection = connections[alias]
    edits = _live_edits(connection, server) if connection.in_atomic_block else None
    fresh = edits is None
    if edits is None:
        _bump(alias, server)
        edits = _Edits(server)
    edits.kinds |= changed
    edits.uris.update(uris)
    edits.version = next(_versions)
    if fresh:
        if connection.in_atomic_block:
            connection.__dict__.setdefault(_PENDING, {})[server] = edits
        transaction.on_commit(edits.publish, using=alias, robust=True)


#: The committed generations this process has read, by server.
_known: Recent[str, int] = Recent()


def forget_generations(server: str | None = None) -> None:
    """Make the next call read ``server``'s generation (every server's by default) again.

    For edits made where neither the signals nor the delivery backend see them, such as
    another process writing without a shared backend, when waiting for
    ``RECHECK_SECONDS`` is not wanted.
    """
    _known.forget(server)


def snapshot_may_lag(connection: Any) -> bool:
    """Whether a transaction on ``connection`` may read an older state than one committed
    since it began. Every backend but PostgreSQL is taken to (SQLite in WAL mode does; MySQL's
    default level is above READ COMMITTED), and PostgreSQL at any level but READ COMMITTED, its
    default, which reads the latest commit on every query."""
    if connection.vendor != "postgresql":
        return True
    level = (connection.settings_dict.get("OPTIONS") or {}).get("isolation_level")
    # psycopg's IsolationLevel names it; a level given otherwise is taken as a stricter one.
    return level is not None and getattr(level, "name", None) != "READ_COMMITTED"


def generation(server_name: str) -> int:
    """The server's row generation: changes with every committed edit of its rows.

    One indexed query when this process does not know it already (``mcp_app.recent``), and
    inside a transaction whose snapshot may lag (``snapshot_may_lag``); ``0`` before any edit. Inside a
    transaction that has edited the server's rows, a unique negative number instead, so a
    catalog built from uncommitted rows is never mistaken for the committed one, whether the
    transaction commits or not.
    """
    alias = router.db_for_write(imported("mcp_app.models.CatalogGeneration"))
    connection = connections[alias]
    if connection.in_atomic_block:
        edits = _live_edits(connection, server_name)
        if edits is not None:
            return -edits.version
        if snapshot_may_lag(connection):
            # The transaction may read a snapshot older than the generation this process
            # knows: the rows it loads must be keyed by the generation of that snapshot, never
            # by a newer one, or their catalog would pass for current.
            return _read_generation(server_name, alias)
    known = _known.get(server_name)
    if known is not None:
        return known
    # Another process's edit is announced on the lists channel before its clients hear of it.
    _known.watch(channel_name(server_name, "lists"), lambda message: server_name)
    epoch = _known.epoch()
    value = _read_generation(server_name, alias)
    _known.store(server_name, value, epoch)
    return value


def _read_generation(server_name: str, alias: str) -> int:
    # Built only here: a query set costs tens of microseconds, and most calls of
    # generation() need none.
    from .models import CatalogGeneration

    rows = CatalogGeneration.objects.using(alias).filter(server=server_name)
    return next(iter(rows.values_list("value", flat=True)[:1]), 0)


# -- building definitions from rows ------------------------------------------------------


class _Configured:
    """A row handler bound to a row's config, for kinds whose context has no config slot."""

    def __init__(self, function: Callable[..., Any], config: Any) -> None:
        self.function = function
        self.config = config

    def __call__(self, variables: Any, context: Any) -> Any:
        context.config = self.config
        return self.function(variables, context)


class _AsyncConfigured(_Configured):
    async def __call__(self, variables: Any, context: Any) -> Any:
        context.config = self.config
        return await self.function(variables, context)


def _bind(function: Callable[..., Any], config: Any) -> Callable[..., Any]:
    from .registry import _is_async

    cls = _AsyncConfigured if _is_async(function) else _Configured
    return cls(function, config)


def _or_none(value: Any) -> Any:
    return value if value else None


def _handler(row: Tool | ResourceTemplate, kind: str) -> RowHandler:
    found = _handlers.get(row.handler)
    if found is None or kind not in found.kinds:
        raise DefinitionError(f"no row handler {row.handler!r} serves {kind}")
    return found


# -- who may use a row ---------------------------------------------------------------------

#: Where a user's group ids are kept for the rest of its request (as Django keeps _perm_cache).
_GROUP_CACHE = "_mcp_app_group_ids"


def _group_ids(user: Any) -> frozenset[int]:
    cached: frozenset[int] | None = user.__dict__.get(_GROUP_CACHE)
    if cached is None:
        groups = getattr(user, "groups", None)
        cached = (
            frozenset(groups.values_list("id", flat=True)) if groups is not None else frozenset()
        )
        user.__dict__[_GROUP_CACHE] = cached
    return cached


@dataclass(frozen=True)
class RowAccess:
    """Who may use a row: members of any of its groups, holders of any of its permissions.

    Called with the request's user, as a definition's ``permission`` callable is. Anonymous
    and inactive users never may; active superusers always may.
    """

    groups: frozenset[int] = frozenset()
    permissions: frozenset[str] = frozenset()

    def __call__(self, user: Any) -> bool:
        if user is None or not getattr(user, "is_authenticated", False):
            return False
        if not getattr(user, "is_active", True):
            return False
        if getattr(user, "is_superuser", False):
            return True
        if self.groups and not self.groups.isdisjoint(_group_ids(user)):
            return True
        # has_perm caches the user's permissions (its own and its groups') on the user.
        return any(user.has_perm(codename) for codename in sorted(self.permissions))


def access(row: Definition) -> RowAccess | None:
    """The row's access rule, or ``None`` when it names no group and no permission (public).

    Reads the row's groups and permissions (prefetched or not); an unsaved row has none.
    """
    if row.pk is None:
        return None
    groups = frozenset(group.pk for group in row.groups.all())
    permissions = frozenset(
        f"{permission.content_type.app_label}.{permission.codename}"
        for permission in row.permissions.all()
    )
    if not groups and not permissions:
        return None
    return RowAccess(groups, permissions)


@dataclass(frozen=True)
class _Both:
    """A code tool's own permission and a restyling row's access: the caller needs both."""

    code: Any
    row: RowAccess

    def __call__(self, user: Any) -> bool:
        return permission_allows(self.code, user) and self.row(user)


def tool_def(row: Tool) -> ToolDef:
    """The tool a (non-restyling) tool row defines.

    Raises:
        DefinitionError: the row's handler is not registered, or an attribute is invalid.
    """
    return ToolDef(
        name=row.name,
        handler=_handler(row, "tools").function,
        title=_or_none(row.title),
        description=_or_none(row.description),
        input_schema=row.input_schema if row.input_schema is not None else {"type": "object"},
        output_schema=row.output_schema,
        annotations=_or_none(row.annotations),
        icons=_or_none(row.icons),
        meta=_or_none(row.meta),
        permission=access(row),
        source="row",
        config=row.config,
    )


@dataclass(frozen=True)
class _Restyle:
    """What a restyling row changes of a code tool: every attribute it sets.

    Its groups and permissions narrow who may use the tool: a caller then needs the code's
    permission too, and arguments must pass the code's input schema as well as the row's, so
    staff editing rows can restrict a code tool but never open it wider.
    """

    changes: Mapping[str, Any]
    access: RowAccess | None = None

    @classmethod
    def of(cls, row: Tool) -> _Restyle:
        values = {
            "title": _or_none(row.title),
            "description": _or_none(row.description),
            "input_schema": row.input_schema,
            "output_schema": row.output_schema,
            "annotations": _or_none(row.annotations),
            "icons": _or_none(row.icons),
            "meta": _or_none(row.meta),
        }
        changes = {key: value for key, value in values.items() if value is not None}
        return cls(changes, access(row))

    def apply(self, tool: ToolDef) -> ToolDef:
        """The tool as restyled.

        Raises:
            DefinitionError: the result is not a valid tool.
        """
        changes = dict(self.changes)
        if "input_schema" in changes and tool.code_input_schema is None:
            # Arguments must still pass the code's schema: its handler relies on it.
            changes["code_input_schema"] = tool.input_schema
        return dataclasses.replace(self.limited(tool), **changes)

    def limited(self, tool: ToolDef) -> ToolDef:
        """The tool with only the row's access limit added: what a restyling that is not a
        valid tool still applies, so that it fails closed."""
        if self.access is None:
            return tool
        own = tool.permission
        return dataclasses.replace(
            tool, permission=self.access if own is None else _Both(own, self.access)
        )


def restyled(tool: ToolDef, row: Tool) -> ToolDef:
    """The code tool as a restyling row shows it.

    Raises:
        DefinitionError: the result is not a valid tool.
    """
    return _Restyle.of(row).apply(tool)


def _read_text(text: str) -> Callable[[Any], str]:
    def read(context: Any) -> str:
        return text

    return read


def _read_file(storage: Any, name: str) -> Callable[[Any], bytes]:
    def read(context: Any) -> bytes:
        try:
            with storage.open(name, "rb") as handle:
                return handle.read()  # type: ignore[no-any-return]
        except FileNotFoundError:
            # Said without the storage's path, which the error's text would give clients.
            logger.error("A resource's file, %s, is missing from its storage", name)
            raise FileNotFoundError("The resource's file is missing from its storage") from None

    return read


def resource_def(row: Resource) -> ResourceDef:
    """The resource a resource row defines: its text, or its file as a blob.

    Raises:
        DefinitionError: an attribute is invalid.
    """
    if row.file:
        handler: Callable[[Any], Any] = _read_file(row.file.storage, row.file.name or "")
    else:
        handler = _read_text(row.text)
    return ResourceDef(
        uri=row.uri,
        name=row.name,
        handler=handler,
        title=_or_none(row.title),
        description=_or_none(row.description),
        mime_type=_or_none(row.mime_type),
        size=row.size,
        annotations=_or_none(row.annotations),
        icons=_or_none(row.icons),
        meta=_or_none(row.meta),
        permission=access(row),
        source="row",
    )


def _render_variables(source: str, uri_template: str) -> Callable[[Mapping[str, str], Any], str]:
    def read(variables: Mapping[str, str], context: Any) -> str:
        return render_for_client(source, variables, f"the resource template {uri_template}")

    return read


def template_def(row: ResourceTemplate) -> TemplateDef:
    """The resource template a template row defines.

    Raises:
        DefinitionError: the handler is not registered, or the URI template is invalid.
    """
    if row.handler:
        handler = _bind(_handler(row, "templates").function, row.config)
    else:
        handler = _render_variables(row.text, row.uri_template)
    return TemplateDef(
        uri_template=row.uri_template,
        name=row.name,
        handler=handler,
        title=_or_none(row.title),
        description=_or_none(row.description),
        mime_type=_or_none(row.mime_type),
        annotations=_or_none(row.annotations),
        icons=_or_none(row.icons),
        meta=_or_none(row.meta),
        permission=access(row),
        source="row",
    )


@dataclass(frozen=True)
class _Message:
    role: str
    text: str
    resource_uri: str


def _embedded(server_name: str, uri: str, role: str, context: Any) -> list[JSON] | Any:
    """The resource at ``uri`` on the prompt's server, as embedded-resource messages."""
    from .input import InputRequired

    server = servers.get(server_name) or context.server
    catalog = server.catalog()
    previous = context.definition
    try:
        outcome = server.engine.resources_read({"uri": uri}, context, catalog)
    finally:
        context.definition = previous
    if isinstance(outcome, InputRequired):
        return outcome
    return [
        {"role": role, "content": {"type": "resource", "resource": item}}
        for item in outcome["contents"]
    ]


def _prompt_handler(
    server_name: str, name: str, messages: tuple[_Message, ...]
) -> Callable[..., Any]:
    what = f"the prompt {name}"

    def get(arguments: Mapping[str, str], context: Any) -> Any:
        out: list[JSON] = []
        for message in messages:
            if message.resource_uri:
                uri = render_for_client(message.resource_uri, arguments, what).strip()
                embedded = _embedded(server_name, uri, message.role, context)
                if not isinstance(embedded, list):
                    return embedded  # the resource asked for input
                out.extend(embedded)
            else:
                text = render_for_client(message.text, arguments, what)
                out.append({"role": message.role, "content": {"type": "text", "text": text}})
        return {"messages": out}

    return get


def prompt_def(row: Prompt) -> PromptDef:
    """The prompt a prompt row defines, with its arguments and messages (prefetched or not).

    Raises:
        DefinitionError: an attribute is invalid.
    """
    arguments = tuple(
        PromptArgument(
            name=a.name,
            description=_or_none(a.description),
            required=a.required,
            title=_or_none(a.title),
        )
        for a in row.arguments.all()
    )
    messages = tuple(_Message(m.role, m.text, m.resource_uri) for m in row.messages.all())
    return PromptDef(
        name=row.name,
        handler=_prompt_handler(row.server, row.name, messages),
        title=_or_none(row.title),
        description=_or_none(row.description),
        arguments=arguments,
        icons=_or_none(row.icons),
        meta=_or_none(row.meta),
        permission=access(row),
        source="row",
    )


# -- loading a server's rows, cached per generation --------------------------------------


@dataclass
class _Rows:
    """A server's enabled rows as definitions, at one generation."""

    generation: int
    tools: list[ToolDef] = field(default_factory=list)
    restyles: dict[str, _Restyle] = field(default_factory=dict)
    hidden: set[str] = field(default_factory=set)
    resources: list[ResourceDef] = field(default_factory=list)
    templates: list[TemplateDef] = field(default_factory=list)
    prompts: list[PromptDef] = field(default_factory=list)
    #: Code tools as restyled, so their wire form is computed once per generation.
    memo: dict[ToolDef, ToolDef] = field(default_factory=dict)

    def restyle(self, tool: ToolDef) -> ToolDef:
        done = self.memo.get(tool)
        if done is None:
            restyle = self.restyles[tool.name]
            try:
                done = restyle.apply(tool)
            except DefinitionError as exc:
                # Its access limit still applies: who the row kept out stays out.
                logger.warning(
                    "tool row restyling %r is ignored but for its access limit: %s", tool.name, exc
                )
                done = restyle.limited(tool)
            self.memo[tool] = done
        return done


_cache: dict[str, _Rows] = {}

D = TypeVar("D")


def _build(row: Any, build: Callable[[Any], D], out: list[D]) -> None:
    try:
        out.append(build(row))
    except DefinitionError as exc:
        # A row saved without validation (ORM, fixtures) must not take the catalog down.
        logger.warning("%s row %r is left out of the catalog: %s", type(row).__name__, row, exc)


def _access_prefetches() -> tuple[Prefetch[Any], Prefetch[Any]]:
    """Each row's groups (ids only) and permissions (with their app labels), in two queries."""
    from django.contrib.auth.models import Group, Permission

    return (
        Prefetch("groups", Group.objects.only("id")),
        Prefetch("permissions", Permission.objects.select_related("content_type")),
    )


def _load(server: str, at: int, alias: str) -> _Rows:
    from .models import Prompt, PromptArgument, PromptMessage, Resource, ResourceTemplate, Tool

    loaded = _Rows(at)
    tools = (
        Tool.objects.using(alias)
        .filter(server=server)
        .filter(Q(enabled=True) | Q(overrides_code=True))
        .order_by("order", "name")
        .prefetch_related(*_access_prefetches())
    )
    for tool in tools:
        if not tool.overrides_code:
            _build(tool, tool_def, loaded.tools)
        elif tool.enabled:
            loaded.restyles[tool.name] = _Restyle.of(tool)
        else:
            loaded.hidden.add(tool.name)
    enabled = {"server": server, "enabled": True}
    resources = (
        Resource.objects.using(alias)
        .filter(**enabled)
        .order_by("order", "name")
        .prefetch_related(*_access_prefetches())
    )
    for resource in resources:
        _build(resource, resource_def, loaded.resources)
    templates = (
        ResourceTemplate.objects.using(alias)
        .filter(**enabled)
        .order_by("order", "name")
        .prefetch_related(*_access_prefetches())
    )
    for template in templates:
        _build(template, template_def, loaded.templates)
    prompts = (
        Prompt.objects.using(alias)
        .filter(**enabled)
        .order_by("order", "name")
        .prefetch_related(
            Prefetch("arguments", PromptArgument.objects.order_by("order", "id")),
            Prefetch("messages", PromptMessage.objects.order_by("order", "id")),
            *_access_prefetches(),
        )
    )
    for prompt in prompts:
        _build(prompt, prompt_def, loaded.prompts)
    return loaded


def _rows(server: str) -> _Rows:
    from .models import CatalogGeneration

    at = generation(server)
    cached = _cache.get(server)
    if cached is not None and cached.generation == at:
        return cached
    loaded = _load(server, at, router.db_for_write(CatalogGeneration))
    _cache[server] = loaded
    return loaded


D2 = TypeVar("D2", ToolDef, ResourceDef, TemplateDef, PromptDef)


def _after_code(kind: str, code: list[D2], rows: list[D2], *keys: Callable[[D2], str]) -> list[D2]:
    """``code``, then the ``rows`` none of whose ``keys`` a definition before them has."""
    taken = [{key(item) for item in code} for key in keys]
    merged = list(code)
    for item in rows:
        pairs = zip(keys, taken, strict=True)
        clash = next((key(item) for key, had in pairs if key(item) in had), None)
        if clash is not None:
            logger.warning("%s row %r is shadowed by a definition listed before it", kind, clash)
            continue
        merged.append(item)
        # Two template rows of one shape: the first would serve every URI of both.
        for key, had in zip(keys, taken, strict=True):
            had.add(key(item))
    return merged


def merge(
    server_name: str,
    tools: list[ToolDef],
    resources: list[ResourceDef],
    templates: list[TemplateDef],
    prompts: list[PromptDef],
) -> Lists:
    """The code definitions with the server's enabled rows applied, in listing order.

    Code definitions come first, in registration order, then rows by ``(order, name)``. A
    row restyling a code tool replaces it in place; a disabled restyling row removes it. A
    row whose name (URI for resources) a code definition has is left out: code wins; so is a
    template row with the URI template shape of a code template or of a row listed before it.
    """
    rows = _rows(server_name)
    merged_tools: list[ToolDef] = []
    for tool in tools:
        if tool.name in rows.hidden:
            continue
        merged_tools.append(rows.restyle(tool) if tool.name in rows.restyles else tool)
    return (
        _after_code("tool", merged_tools, rows.tools, lambda t: t.name),
        _after_code("resource", resources, rows.resources, lambda r: r.uri),
        # A row with a code template's URI template would never be read: code matches first.
        _after_code(
            "resource template",
            templates,
            rows.templates,
            lambda t: t.name,
            lambda t: template_shape(t.uri_template),
        ),
        _after_code("prompt", prompts, rows.prompts, lambda p: p.name),
    )


_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]*)\}")
_VARSPEC = re.compile(r"^[^:*]*")
#: Operators whose variables' names the matcher requires in the URI (``;b=1``): there the
#: names are part of the shape. A query (``?q=x``) matches whatever names it holds.
_NAMED = frozenset({";"})


def template_shape(uri_template: str) -> str:
    """``uri_template`` with its variables' names left out: two templates of one shape match
    the same URIs, so the one listed first serves them all."""

    def expression(match: re.Match[str]) -> str:
        specs = [spec.strip() for spec in match.group(2).split(",")]
        if match.group(1) not in _NAMED:
            specs = [_VARSPEC.sub("", spec) for spec in specs]
        return "{" + match.group(1) + ",".join(specs) + "}"

    return _EXPRESSION.sub(expression, uri_template)


def template_identity(uri_template: str) -> str:
    """The template's shape with its literal text as ``registry.uri_identity`` leaves a URI's:
    the scheme in lower case, and the host too where no expression is in the authority;
    percent-encodings decoded or in upper case; Unicode's composed form."""
    shape = template_shape(uri_template)
    held = [match.group() for match in _EXPRESSION.finditer(shape)]
    # split() puts each expression's groups between the literal pieces.
    literal = _EXPRESSION.split(shape)[:: _EXPRESSION.groups + 1]
    scheme, colon, rest = literal[0].partition(":")
    if colon:
        if rest.startswith("//"):
            end = authority_end(rest)
            # An expression that begins the path, query or fragment leaves the host whole.
            if end < len(rest) or not held or held[0][1:2] in ("/", "?", "#"):
                userinfo, at, host = rest[2:end].rpartition("@")
                rest = "//" + userinfo + at + host.lower() + rest[end:]
        literal[0] = scheme.lower() + colon + rest
    text = [percent_identity(piece) for piece in literal]
    joined = text[0] + "".join(e + t for e, t in zip(held, text[1:], strict=True))
    return unicodedata.normalize("NFC", joined)


def templates_alike(first: str, second: str) -> bool:
    """Whether two URI templates of different shapes make URIs that look alike: equal in
    ``template_identity``."""
    return template_shape(first) != template_shape(second) and template_identity(
        first
    ) == template_identity(second)


def code_template_alike(server_name: str, uri_template: str) -> str | None:
    """The URI template of a server's code resource template that ``templates_alike`` says
    makes URIs looking like ``uri_template``'s, if any."""
    for template in _code_registry(server_name, "templates").values():
        theirs: str = template.uri_template
        if templates_alike(theirs, uri_template):
            return theirs
    return None


def code_uri_templates(server_name: str) -> frozenset[str]:
    """The shapes (``template_shape``) of a server's code resource templates."""
    server = servers.get(server_name)
    if server is None:
        return frozenset()
    templates = server.code_definitions("templates").values()
    return frozenset(template_shape(t.uri_template) for t in templates)


#: Values a template is expanded with to tell whether another matches all its URIs: unlike
#: each other in length and in the characters they hold, reserved ones among them (which
#: ``{+x}`` and ``{#x}`` keep and ``{x}`` encodes).
_PROBES = ("x", "a-1", "Z_9.q", "a/b", "p:q?r#s@t")


def covers(first: URITemplate, later: URITemplate) -> bool:
    """Whether ``first`` matches every URI ``later`` makes, as far as probing tells: the
    expansions of ``later`` with each of a few unlike values (and with two variables
    differing) all match ``first``."""
    names = later.variables
    samples = [{name: probe for name in names} for probe in _PROBES]
    samples.append({name: _PROBES[i % len(_PROBES)] for i, name in enumerate(names)})
    for values in samples:
        uri = later.expand(values)
        try:
            if first.match(uri) is None:
                return False
        except URITemplateError:
            return False
    return True


def code_template_covering(server_name: str, template: URITemplate) -> str | None:
    """The URI template of the server's first code resource template that matches every URI
    ``template`` makes (``covers``), if any."""
    for code in _code_registry(server_name, "templates").values():
        if covers(code.matcher, template):
            return str(code.uri_template)
    return None


def code_template_for(server_name: str, uri: str) -> TemplateDef | None:
    """The server's first code resource template that matches ``uri``, if any."""
    for template in _code_registry(server_name, "templates").values():
        if template.matcher.match(uri) is not None:
            return template  # type: ignore[no-any-return]
    return None


def code_keys(server_name: str, kind: str) -> frozenset[str]:
    """The names (URIs for resources) of a server's code definitions of ``kind``."""
    return frozenset(_code_registry(server_name, kind))


def code_definition(server_name: str, kind: str, key: str) -> Any:
    """The server's code definition of ``kind`` named (for resources, with the URI) ``key``."""
    return _code_registry(server_name, kind).get(key)


def _code_registry(server_name: str, kind: str) -> Mapping[str, Any]:
    server = servers.get(server_name)
    return {} if server is None else server.code_definitions(kind)


# -- access edits that save no row -------------------------------------------------------

_ACCESS_FIELDS = ("groups", "permissions")
#: Where the servers a reverse ``clear()`` or a deletion is about to change are kept.
_PENDING_SERVERS = "_mcp_app_access_servers"


def _servers_of(model: type[Definition], field: str, value: Any, using: str) -> set[str]:
    rows = model._default_manager.using(using).filter(**{field: value})
    return set(rows.values_list("server", flat=True).distinct())


def _access_changed(
    sender: Any,
    instance: Any,
    action: str,
    reverse: bool,
    model: Any,
    pk_set: set[Any] | None,
    using: str,
    field: str = "",
    row_model: Any = None,
    **kwargs: Any,
) -> None:
    """Touch the servers whose rows gained or lost a group or permission.

    Forward (``tool.groups.add(g)``) the row names its server; reverse (``g.mcp_tools.add(t)``)
    the rows are looked up, before a ``clear()`` since nothing names them after it. The touch
    comes after the change, so no worker caches the old access under the new generation.
    """
    if not reverse:
        if action in ("post_add", "post_remove", "post_clear"):
            touch(instance.server, [row_model.KIND], using=using)
        return
    if action == "pre_clear":
        found = _servers_of(row_model, field, instance, using)
        instance.__dict__.setdefault(_PENDING_SERVERS, {})[sender] = found
        return
    if action in ("post_add", "post_remove") and pk_set:
        servers_touched = _servers_of(row_model, "pk__in", pk_set, using)
    elif action == "post_clear":
        servers_touched = instance.__dict__.get(_PENDING_SERVERS, {}).pop(sender, set())
    else:
        return
    for server in sorted(servers_touched):
        touch(server, [row_model.KIND], using=using)


def _receiver(row_model: type[Definition], field: str) -> Callable[..., None]:
    def receiver(**kwargs: Any) -> None:
        _access_changed(field=field, row_model=row_model, **kwargs)

    return receiver


def _before_access_delete(
    sender: Any, instance: Any, using: str, row_models: Iterable[type[Definition]], **kwargs: Any
) -> None:
    # Deleting a group or permission removes it from rows without any m2m signal.
    field = "groups" if sender._meta.label_lower == "auth.group" else "permissions"
    found: set[tuple[str, str]] = set()
    # The enabled rows it restricts, to be looked at once it is gone: several groups deleted
    # at once are each still linked when the first one's pre_delete runs.
    restricted: dict[type[Definition], list[Any]] = {}
    for model in row_models:
        named = model._default_manager.using(using).filter(**{field: instance})
        for pk, server, enabled in named.values_list("pk", "server", "enabled"):
            found.add((server, model.KIND))
            if enabled:
                restricted.setdefault(model, []).append(pk)
    instance.__dict__[_RESTRICTED_ROWS] = restricted
    instance.__dict__[_PENDING_SERVERS] = found


#: Where a group or permission being deleted keeps the rows it restricted.
_RESTRICTED_ROWS = "_mcp_app_restricted_rows"


def _close_orphans(model: type[Definition], pks: list[Any], instance: Any, using: str) -> None:
    """Disable the rows of ``pks`` that the deletion of ``instance`` left with no group and no
    permission: they would be open to everyone, which nobody chose. Their saves are part of the
    deletion's transaction."""
    from django.db.models import Count

    orphans = (
        model._default_manager.using(using)
        .filter(pk__in=pks, enabled=True)
        .annotate(_groups=Count("groups"), _permissions=Count("permissions"))
        .filter(_groups=0, _permissions=0)
    )
    for row in orphans:
        logger.warning(
            "%s %r was restricted by %s %r, which is deleted, and by nothing else: the row is "
            "disabled rather than opened to everyone.",
            model._meta.verbose_name,
            str(row),
            instance._meta.verbose_name,
            str(instance),
        )
        row.enabled = False
        row.save(update_fields=["enabled", "updated"])


def _after_access_delete(sender: Any, instance: Any, using: str, **kwargs: Any) -> None:
    restricted: dict[type[Definition], list[Any]] = instance.__dict__.pop(_RESTRICTED_ROWS, {})
    for model, pks in restricted.items():
        _close_orphans(model, pks, instance, using)
    found: set[tuple[str, str]] = instance.__dict__.pop(_PENDING_SERVERS, set())
    for server in sorted({server for server, _ in found}):
        kinds = sorted({kind for name, kind in found if name == server})
        touch(server, kinds, using=using)


def connect_access_signals(row_models: Iterable[type[Definition]]) -> None:
    """Touch the catalog when rows' groups or permissions change without a save (idempotent).

    ``m2m_changed`` on each row model's ``groups`` and ``permissions``, in both directions,
    and the deletion of a group or permission that rows name.
    """
    from django.db.models.signals import m2m_changed, post_delete, pre_delete

    models_ = tuple(row_models)
    for row_model in models_:
        label = row_model._meta.label_lower
        for name in _ACCESS_FIELDS:
            m2m_changed.connect(
                _receiver(row_model, name),
                sender=getattr(row_model, name).through,
                weak=False,  # a closure: nothing else holds it
                dispatch_uid=f"mcp_app:{label}:{name}:m2m",
            )

    def before_delete(**kwargs: Any) -> None:
        _before_access_delete(row_models=models_, **kwargs)

    for sender in ("auth.Group", "auth.Permission"):
        pre_delete.connect(
            before_delete, sender=sender, weak=False, dispatch_uid=f"mcp_app:{sender}:pre"
        )
        post_delete.connect(
            _after_access_delete, sender=sender, dispatch_uid=f"mcp_app:{sender}:post"
        )
