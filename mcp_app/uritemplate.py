"""RFC 6570 URI templates for MCP resource templates: parsing, matching and expansion."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from urllib.parse import quote, unquote

__all__ = ["URITemplate", "URITemplateError", "is_template"]


class URITemplateError(ValueError):
    """A URI template is malformed, or uses a feature that matching does not support."""


@dataclass(frozen=True, slots=True)
class _Operator:
    # Expansion behaviour per operator, as tabulated in RFC 6570 appendix A.
    first: str
    sep: str
    named: bool
    ifemp: str
    allow_reserved: bool


_OPERATORS: dict[str, _Operator] = {
    "": _Operator("", ",", False, "", False),
    "+": _Operator("", ",", False, "", True),
    "#": _Operator("#", ",", False, "", True),
    ".": _Operator(".", ".", False, "", False),
    "/": _Operator("/", "/", False, "", False),
    ";": _Operator(";", ";", True, "", False),
    "?": _Operator("?", "&", True, "=", False),
    "&": _Operator("&", "&", True, "=", False),
}
# RFC 6570 section 2.2 keeps these for future extensions, so they are errors rather than names.
_RESERVED_OPERATORS = frozenset("=,!@|")
_QUERY_OPERATORS = frozenset("?&")

_TOKEN = re.compile(r"\{([^{}]*)\}|([^{}]+)|([{}])")
_EXPRESSION = re.compile(r"\{[^{}]+\}")
_VARNAME = re.compile(r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+(?:\.(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+)*")
_PREFIX_LENGTH = re.compile(r"[1-9][0-9]{0,3}")
_PCT_TRIPLET = re.compile(r"(%[0-9A-Fa-f]{2})")
_RESERVED_CHARS = ":/?#[]@!$&'()*+,;="

# Characters that end a captured value, per operator: (one variable, several variables).
# A list member must stop at the separator, otherwise the split between members is ambiguous.
_MATCH_STOP: dict[str, tuple[str, str]] = {
    "": ("/?#", "/?#,"),
    "+": ("", ","),
    "#": ("", ","),
    # One variable may hold a dot ("tar.gz" expands to ".tar.gz"); in a list it separates.
    ".": ("/?#", "/?#."),
    "/": ("/?#", "/?#"),
    ";": ("/?#;", "/?#;"),
}


@dataclass(frozen=True, slots=True)
class _VarSpec:
    name: str
    prefix: int | None
    explode: bool


@dataclass(frozen=True, slots=True)
class _Expression:
    operator: str
    varspecs: tuple[_VarSpec, ...]


@dataclass(frozen=True, slots=True)
class _Literal:
    text: str


@dataclass(frozen=True, slots=True)
class _Capture:
    name: str
    stop: str
    # Shortest match first, so that "{+path}{?q}" leaves the query string to "{?q}".
    lazy: bool
    # "{;name}" expands an empty value to ";name" with no "=", so "=value" is optional.
    after_equals: bool

    def span(self, uri: str, start: int, run_end: list[int]) -> tuple[int, int]:
        if not self.after_equals:
            return start + 1, run_end[start]
        if uri.startswith("=", start):
            return start, run_end[start + 1]
        return start, start

    def value(self, uri: str, start: int, end: int) -> str:
        if self.after_equals:
            return uri[start + 1 : end] if end > start else ""
        return uri[start:end]


_Atom = _Literal | _Capture


@dataclass(frozen=True, slots=True)
class _Matcher:
    atoms: tuple[_Atom, ...]
    prefix: str
    #: The characters the query may begin with ("?", "&", or "?&"); None without a query.
    query_lead: str | None
    query_names: frozenset[str]


def is_template(text: str) -> bool:
    """Return True if ``text`` contains at least one ``{...}`` expression."""
    return _EXPRESSION.search(text) is not None


class URITemplate:
    """A parsed RFC 6570 URI template that can match URIs and expand values."""

    __slots__ = ("_matcher", "_parts", "_template", "_variables")

    def __init__(self, template: str) -> None:
        """Parse and compile ``template``; raise URITemplateError if it is malformed."""
        self._template = template
        self._parts = _parse(template)
        names: list[str] = []
        repeated: str | None = None
        for part in self._parts:
            if isinstance(part, _Expression):
                for spec in part.varspecs:
                    if spec.name in names:
                        repeated = repeated or spec.name
                    else:
                        names.append(spec.name)
        self._variables = tuple(names)
        # RFC 6570 expands a variable used twice ({/var:1,var}); a match could disagree with
        # itself, so such a template only expands.
        self._matcher = (
            f"URI template {template!r} cannot be used for matching: variable {repeated!r} "
            "appears more than once"
            if repeated is not None
            else _compile_matcher(template, self._parts)
        )

    @property
    def template(self) -> str:
        """The template string as given."""
        return self._template

    @property
    def variables(self) -> tuple[str, ...]:
        """Variable names in the order they appear in the template."""
        return self._variables

    def match(self, uri: str) -> dict[str, str] | None:
        """Match the whole of ``uri`` and return its percent-decoded variables, or None.

        Every variable outside ``{?...}``/``{&...}`` must be present and, except for ``{;...}``,
        non-empty. Query variables are optional and may come in any order; absent ones are left
        out of the result, unknown parameters are ignored and the first of repeated ones wins.
        Ambiguities resolve as a regex would: greedy, but lazy for ``{+...}`` and ``{#...}``.
        Runs in time linear in ``len(uri)``. Raises URITemplateError if the template uses the
        explode (``*``) or prefix (``:n``) modifier, or has a query expression before its end.
        """
        matcher = self._matcher
        if isinstance(matcher, str):
            raise URITemplateError(matcher)
        if not uri.startswith(matcher.prefix):
            return None
        scanned = _scan(matcher, uri)
        if scanned is None:
            return None
        captured, end = scanned
        try:
            result = {name: _decoded(value) for name, value in captured.items()}
            # _scan only stops short of the end at the query lead character, so the rest is
            # the query.
            for param in uri[end + 1 :].split("&"):
                name, _, value = param.partition("=")
                if name in matcher.query_names and name not in result:
                    result[name] = _decoded(value)
        except UnicodeDecodeError:
            # Escapes of no UTF-8 text: not a URI the template makes (nor one "%EF%BF%BD" names).
            return None
        return result

    def expand(self, values: Mapping[str, object]) -> str:
        """Expand the template with ``values``; missing or None values expand to nothing.

        Lists and tuples expand as lists, mappings as associative arrays and anything else
        through ``str()``.
        """
        return "".join(
            part if isinstance(part, str) else _expand_expression(part, values)
            for part in self._parts
        )

    def __repr__(self) -> str:
        return f"URITemplate({self._template!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, URITemplate):
            return self._template == other._template
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._template)


def _malformed(template: str, problem: str) -> URITemplateError:
    return URITemplateError(f"invalid URI template {template!r}: {problem}")


def _parse(template: str) -> tuple[str | _Expression, ...]:
    parts: list[str | _Expression] = []
    for token in _TOKEN.finditer(template):
        body, literal, stray = token.groups()
        if stray == "{":
            raise _malformed(template, f"unclosed '{{' at position {token.start()}")
        if stray == "}":
            raise _malformed(template, f"unmatched '}}' at position {token.start()}")
        if literal is not None:
            parts.append(literal)
        else:
            parts.append(_parse_expression(template, body))
    return tuple(parts)


def _parse_expression(template: str, body: str) -> _Expression:
    if not body:
        raise _malformed(template, "empty expression '{}'")
    operator = body[0]
    if operator in _RESERVED_OPERATORS:
        raise _malformed(template, f"unsupported operator {operator!r} in '{{{body}}}'")
    if operator not in _OPERATORS:
        operator = ""
    varlist = body[len(operator) :]
    return _Expression(
        operator, tuple(_parse_varspec(template, body, raw) for raw in varlist.split(","))
    )


def _parse_varspec(template: str, body: str, raw: str) -> _VarSpec:
    name, prefix, explode = raw, None, False
    if ":" in raw:
        name, _, length = raw.partition(":")
        if _PREFIX_LENGTH.fullmatch(length) is None:
            raise _malformed(template, f"invalid prefix length {length!r} in '{{{body}}}'")
        prefix = int(length)
    elif raw.endswith("*"):
        name, explode = raw[:-1], True
    if not name:
        raise _malformed(template, f"empty variable name in '{{{body}}}'")
    if _VARNAME.fullmatch(name) is None:
        raise _malformed(template, f"invalid variable name {name!r} in '{{{body}}}'")
    return _VarSpec(name, prefix, explode)


def _compile_matcher(template: str, parts: tuple[str | _Expression, ...]) -> _Matcher | str:
    # Returns the error message instead of raising so that expand() still works for templates
    # that are valid RFC 6570 but cannot be matched.
    def unsupported(problem: str) -> str:
        return f"URI template {template!r} cannot be used for matching: {problem}"

    atoms: list[_Atom] = []
    query_names: list[str] = []
    query_lead: str | None = None
    #: Whether a ``{&...}`` follows a ``{?...}``: with every ``{?...}`` variable absent, its
    #: "&" comes straight after the path.
    and_after_query = False
    for part in parts:
        is_query = isinstance(part, _Expression) and part.operator in _QUERY_OPERATORS
        if query_lead is not None and not is_query:
            return unsupported("query expressions must come at the end of the template")
        if isinstance(part, str):
            _add_literal(atoms, part)
            continue
        for spec in part.varspecs:
            if spec.explode:
                return unsupported(f"explode modifier '*' on {spec.name!r} is not supported")
            if spec.prefix is not None:
                return unsupported(
                    f"prefix modifier ':{spec.prefix}' on {spec.name!r} is not supported"
                )
        if is_query:
            and_after_query = and_after_query or (query_lead == "?" and part.operator == "&")
            query_lead = query_lead or part.operator
            query_names.extend(spec.name for spec in part.varspecs)
        else:
            _add_expression(atoms, part)
    if query_lead == "&":
        # The query goes on from a literal one ("?a={a}{&b}"): a variable of it that encodes
        # reserved characters has no "&" of its own, so one there starts the rest of the
        # query. Variables before the "?" (in the path) may hold one.
        in_query = False
        for index, atom in enumerate(atoms):
            if isinstance(atom, _Literal):
                in_query = in_query or "?" in atom.text
            elif in_query and not atom.lazy:
                atoms[index] = replace(atom, stop=atom.stop + "&")
    if and_after_query:
        # Then the path ends at its first "&", which a variable that encodes reserved
        # characters has none of.
        atoms = [
            replace(atom, stop=atom.stop + "&")
            if isinstance(atom, _Capture) and not atom.lazy and "&" not in atom.stop
            else atom
            for atom in atoms
        ]
    first = atoms[0] if atoms else None
    prefix = first.text if isinstance(first, _Literal) else ""
    # The characters the query may begin with: "&" too when every "{?...}" variable may be absent.
    leads = None if query_lead is None else query_lead + ("&" if and_after_query else "")
    return _Matcher(tuple(atoms), prefix, leads, frozenset(query_names))


def _decoded(value: str) -> str:
    return unquote(value, errors="strict")


def _add_literal(atoms: list[_Atom], text: str) -> None:
    if not text:
        return
    last = atoms[-1] if atoms else None
    if isinstance(last, _Literal):
        atoms[-1] = _Literal(last.text + text)
    else:
        atoms.append(_Literal(text))


def _add_expression(atoms: list[_Atom], expression: _Expression) -> None:
    operator = _OPERATORS[expression.operator]
    single, multiple = _MATCH_STOP[expression.operator]
    stop = single if len(expression.varspecs) == 1 else multiple
    for index, spec in enumerate(expression.varspecs):
        _add_literal(atoms, operator.sep if index else operator.first)
        if operator.named:
            _add_literal(atoms, spec.name)
        atoms.append(_Capture(spec.name, stop, operator.allow_reserved, operator.named))


def _scan(matcher: _Matcher, uri: str) -> tuple[dict[str, str], int] | None:
    # A backtracking regex can take polynomial time on hostile URIs once a template has a few
    # variables. Instead, work backwards to find where the rest of the template can still
    # match from, then walk forwards picking the same greedy or lazy ends a regex would pick.
    # That is linear in len(uri) per atom.
    size = len(uri)
    ok = [False] * size + [True]
    leads = matcher.query_lead
    if leads is not None:
        start = uri.rfind("#") + 1
        if len(leads) > 1 and "?" in uri[start:]:
            leads = "?"  # a query that has its "?" begins there
        for end in range(start, size):
            ok[end] = uri[end] in leads and (uri[end] != "&" or _names_at(uri, end + 1, matcher))
    steps: list[tuple[_Atom, list[bool], list[int]]] = []
    for atom in reversed(matcher.atoms):
        if isinstance(atom, _Literal):
            steps.append((atom, ok, []))
            ok = _literal_starts(atom.text, uri, ok)
        else:
            run_end = _run_ends(uri, atom.stop)
            steps.append((atom, ok, run_end))
            ok = _capture_starts(atom, uri, ok, run_end)
    if not ok[0]:
        return None
    captured: dict[str, str] = {}
    position = 0
    for atom, ok_after, run_end in reversed(steps):
        if isinstance(atom, _Literal):
            position += len(atom.text)
            continue
        low, high = atom.span(uri, position, run_end)
        ends = range(low, high + 1) if atom.lazy else range(high, low - 1, -1)
        end = next(end for end in ends if ok_after[end])
        captured[atom.name] = atom.value(uri, position, end)
        position = end
    return captured, position


def _names_at(uri: str, index: int, matcher: _Matcher) -> bool:
    """Whether a query parameter of the template (``name=``) begins at ``index``: without its
    "?", the query is known by that alone, since a path may hold an "&" of its own."""
    return any(uri.startswith(name + "=", index) for name in matcher.query_names)


def _run_ends(uri: str, stop: str) -> list[int]:
    run_end = [len(uri)] * (len(uri) + 1)
    for index in range(len(uri) - 1, -1, -1):
        run_end[index] = index if uri[index] in stop else run_end[index + 1]
    return run_end


def _literal_starts(text: str, uri: str, ok_after: list[bool]) -> list[bool]:
    starts = [False] * len(ok_after)
    index = uri.find(text)
    while index != -1:
        starts[index] = ok_after[index + len(text)]
        index = uri.find(text, index + 1)
    return starts


def _capture_starts(
    capture: _Capture, uri: str, ok_after: list[bool], run_end: list[int]
) -> list[bool]:
    size = len(uri)
    nearest = [size + 1] * (size + 2)
    for index in range(size, -1, -1):
        nearest[index] = index if ok_after[index] else nearest[index + 1]
    starts: list[bool] = []
    for start in range(size + 1):
        low, high = capture.span(uri, start, run_end)
        starts.append(low <= high and nearest[low] <= high)
    return starts


def _encode(text: str, allow_reserved: bool) -> str:
    if not allow_reserved:
        return quote(text, safe="")
    # Reserved expansion passes existing percent-encoded triplets through unchanged.
    pieces = _PCT_TRIPLET.split(text)
    return "".join(
        piece if index % 2 else quote(piece, safe=_RESERVED_CHARS)
        for index, piece in enumerate(pieces)
    )


def _named(name: str, value: str, ifemp: str) -> str:
    return f"{name}={value}" if value else name + ifemp


def _expand_expression(expression: _Expression, values: Mapping[str, object]) -> str:
    operator = _OPERATORS[expression.operator]
    items = [
        item
        for spec in expression.varspecs
        if (item := _expand_variable(spec, operator, values.get(spec.name))) is not None
    ]
    if not items:
        return ""
    return operator.first + operator.sep.join(items)


def _expand_variable(spec: _VarSpec, operator: _Operator, value: object) -> str | None:
    if value is None:
        return None
    reserved = operator.allow_reserved
    if isinstance(value, Mapping):
        pairs = [(_encode(str(k), reserved), _encode(str(v), reserved)) for k, v in value.items()]
        if not pairs:
            return None
        _reject_prefix(spec)
        if spec.explode:
            ifemp = operator.ifemp if operator.named else "="
            return operator.sep.join(_named(k, v, ifemp) for k, v in pairs)
        joined = ",".join(f"{k},{v}" for k, v in pairs)
    elif isinstance(value, list | tuple):
        members = [_encode(str(member), reserved) for member in value]
        if not members:
            return None
        _reject_prefix(spec)
        if spec.explode:
            if operator.named:
                return operator.sep.join(_named(spec.name, m, operator.ifemp) for m in members)
            return operator.sep.join(members)
        joined = ",".join(members)
    else:
        text = str(value)
        if spec.prefix is not None:
            text = text[: spec.prefix]
        joined = _encode(text, reserved)
    if operator.named:
        return _named(spec.name, joined, operator.ifemp)
    return joined


def _reject_prefix(spec: _VarSpec) -> None:
    # RFC 6570 section 2.4.1: prefix modifiers do not apply to composite values.
    if spec.prefix is not None:
        raise URITemplateError(
            f"prefix modifier ':{spec.prefix}' cannot be applied to the list or mapping "
            f"value of {spec.name!r}"
        )
