"""Validate MCP tool arguments and structured results against JSON Schema, naming where and what."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

import jsonschema  # type: ignore[import-untyped]
import jsonschema_specifications  # type: ignore[import-untyped]
import regex  # type: ignore[import-untyped]
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012, lookup_recursive_ref, specification_with

from .protocol.jsonrpc import json_depth

__all__ = [
    "JSONSchemaValidator",
    "Problem",
    "Schema",
    "SchemaError",
    "Validator",
    "check_schema",
    "format_problems",
    "incompatible",
    "is_valid_schema",
    "unsatisfiable",
    "validate",
]

#: A JSON Schema: an object, or ``true``/``false`` (accept or reject everything).
Schema: TypeAlias = Mapping[str, Any] | bool

# Draft 3 is left out on purpose: its keywords (boolean ``required``, ``extends``,
# ``disallow``) predate everything MCP clients send, and the messages below assume draft 4+.
_SUPPORTED = frozenset(
    {
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    }
)

#: The ``$schema`` values of the supported dialects, as their meta-schemas spell them.
_DIALECT_URIS = (
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-04/schema#",
)

# Longest rendering of a value inside a message; instances can be arbitrarily large.
_SHOW_LIMIT = 60

_BOUNDS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
# Draft 4 spells exclusive bounds as a boolean next to minimum/maximum.
_DRAFT4_EXCLUSIVE = {"minimum": ("exclusiveMinimum", ">"), "maximum": ("exclusiveMaximum", "<")}
_SIZES = {
    "minLength": ("at least", "character", "characters"),
    "maxLength": ("at most", "character", "characters"),
    "minItems": ("at least", "item", "items"),
    "maxItems": ("at most", "item", "items"),
    "minProperties": ("at least", "property", "properties"),
    "maxProperties": ("at most", "property", "properties"),
}
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (type(None), "null"),
    # bool before int: True is an int in Python but never an integer in JSON.
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (Mapping, "object"),
    (list, "array"),
    (tuple, "array"),
)


class SchemaError(ValueError):
    """The schema itself is invalid; ``pointer`` says where in the schema and ``reason`` what."""

    def __init__(self, reason: str, pointer: str = "") -> None:
        super().__init__(f"invalid schema {_where(pointer)}: {reason}")
        self.reason = reason
        self.pointer = pointer


@dataclass(frozen=True)
class Problem:
    """One way an instance fails its schema.

    ``pointer`` is an RFC 6901 JSON pointer into the instance ("" for the root). ``str()`` gives
    ``at /numbers/0: expected number, got string``, or ``at the root: ...`` for the root, since
    the pointer ``/`` names the property whose key is the empty string.
    """

    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{_where(self.pointer)}: {self.message}"


class Validator(Protocol):
    """What the MCP layer needs from a JSON Schema validator."""

    def check_schema(self, schema: Schema) -> None:
        """Check that ``schema`` is a usable JSON Schema.

        Raises:
            SchemaError: the schema is invalid.
        """

    def problems(self, schema: Schema, instance: object) -> list[Problem]:
        """Return every way ``instance`` fails ``schema``, most relevant first; empty if valid.

        Raises:
            SchemaError: the schema is invalid.
        """


class JSONSchemaValidator(Validator):
    """The default validator: the ``jsonschema`` package, offline, with format checking.

    The dialect is draft 2020-12 unless the schema's ``$schema`` names draft 4, 6, 7 or 2019-09;
    any other ``$schema`` is a SchemaError. Only references the schema itself resolves
    (``#/$defs/...``, ``$anchor``, ``$id``) and the official meta-schemas are followed; any
    other ``$ref`` is a SchemaError rather than a network fetch.
    """

    def __init__(self, *, cache_size: int | None = 1024) -> None:
        # A tool's schema is validated on every call, and compiling it (meta-schema check,
        # reference check) costs far more than validating a typical argument object.
        self._compiled = functools.lru_cache(maxsize=cache_size)(_compile)

    def check_schema(self, schema: Schema) -> None:
        """Check that ``schema`` is a usable JSON Schema, caching the compiled result.

        Raises:
            SchemaError: the schema is not JSON, breaks its meta-schema, uses an unsupported
                ``$schema`` or has a ``$ref`` that does not resolve locally.
        """
        self._compiled(canonical(schema))

    def problems(self, schema: Schema, instance: object) -> list[Problem]:
        """Return every way ``instance`` fails ``schema``, most relevant first; empty if valid.

        Raises:
            SchemaError: as for ``check_schema``, or a reference met only while validating
                does not resolve locally.
        """
        return self.problems_of(canonical(schema), instance)

    def problems_of(self, key: str, instance: object) -> list[Problem]:
        """As ``problems``, for the schema whose canonical text (``canonical()``) is ``key``:
        for a schema that does not change, keyed once rather than on every call."""
        compiled, quick = self._compiled(key)
        try:
            if quick is not None and quick(instance):
                return []
            with _pattern_time():
                errors = sorted(compiled.iter_errors(instance), key=_relevance)
        except ArithmeticError as error:
            # A value the checks cannot compute with (an integer too large for a float
            # ``multipleOf``): the client's value, not the schema, is at fault.
            return [Problem("", f"the value cannot be checked against the schema: {error}")]
        except RecursionError:
            if json_depth(instance) > SHALLOW:
                # A value nested deeper than a recursive schema can follow: the client's.
                return [Problem("", _VALUE_TOO_DEEP)]
            # A shallow value: a loop of references reached only through its values.
            raise SchemaError(_TOO_DEEP) from None
        except Unresolvable as error:
            # The static check in _compile misses references reached only through other
            # references (e.g. into an unknown keyword), so they can still fail here.
            ref: str = error.ref
            raise _unresolvable(error, ref, _locate_ref(compiled.schema, ref)) from error
        return _problems(errors)

    def cache_info(self) -> functools._CacheInfo:
        """Return hit/miss statistics of the compiled-schema cache."""
        return self._compiled.cache_info()

    def cache_clear(self) -> None:
        """Forget every compiled schema."""
        self._compiled.cache_clear()


def validate(
    schema: Schema, instance: object, *, validator: Validator | None = None
) -> list[Problem]:
    """Return the problems of ``instance`` against ``schema``; empty if valid.

    Raises:
        SchemaError: the schema is invalid.
    """
    return (validator or _default).problems(schema, instance)


def check_schema(schema: Schema, *, validator: Validator | None = None) -> None:
    """Check that ``schema`` is a usable JSON Schema.

    Raises:
        SchemaError: the schema is invalid.
    """
    (validator or _default).check_schema(schema)


def is_valid_schema(schema: Schema, *, validator: Validator | None = None) -> bool:
    """Return whether ``schema`` is a usable JSON Schema."""
    try:
        check_schema(schema, validator=validator)
    except SchemaError:
        return False
    return True


def format_problems(
    problems: Sequence[Problem], prefix: str = "Invalid arguments", *, limit: int = 5
) -> str:
    """Render problems as one line, e.g. ``Invalid arguments at /a: expected string, got null``.

    At most ``limit`` problems are spelled out, then ``; and N more``; no problems gives
    ``prefix`` alone.

    Raises:
        ValueError: ``limit`` is less than 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if not problems:
        return prefix
    text = f"{prefix} " + "; ".join(str(problem) for problem in problems[:limit])
    if len(problems) > limit:
        text += f"; and {len(problems) - limit} more"
    return text


def incompatible(
    first: Schema, second: Schema, names: tuple[str, str] = ("the first", "the second")
) -> list[str]:
    """Why no value could pass both schemas, as far as their types and properties show: root
    types that do not meet, a property either requires whose declared types do not meet, or
    a name one requires and the other's ``additionalProperties: false`` refuses. Empty when
    none is shown (which does not prove that a value passes both). ``names`` name the two
    schemas in the reasons."""
    if not isinstance(first, Mapping) or not isinstance(second, Mapping):
        return []
    found = []
    one, other = _declared_types(first), _declared_types(second)
    if one is not None and other is not None and not _types_meet(one, other):
        return [
            f"the value is {' or '.join(sorted(one))} in {names[0]} and "
            f"{' or '.join(sorted(other))} in {names[1]}"
        ]
    shown = (_properties(first), _properties(second))
    required = _required(first) | _required(second)
    # A property neither requires may be left out, which both then accept.
    for name in sorted(set(shown[0]) & set(shown[1]) & required):
        one, other = _declared_types(shown[0][name]), _declared_types(shown[1][name])
        if one is not None and other is not None and not _types_meet(one, other):
            found.append(
                f"{name!r} is {' or '.join(sorted(one))} in {names[0]} and "
                f"{' or '.join(sorted(other))} in {names[1]}"
            )
    for requiring, refusing, (by, not_by) in ((first, second, names), (second, first, names[::-1])):
        if refusing.get("additionalProperties") is not False or "patternProperties" in refusing:
            continue
        allowed = _properties(refusing)
        for name in sorted(_required(requiring) - set(allowed)):
            found.append(f"{name!r} is required by {by} and not allowed by {not_by}")
    return found


def unsatisfiable(schema: Schema) -> str | None:
    """Why no value can pass ``schema``, when a glance shows it: ``false``, a ``not`` that takes
    everything, an empty ``enum``, an ``allOf`` member or every ``anyOf`` or ``oneOf`` member
    no value passes, a ``const`` or every ``enum`` value not of the declared type, or bounds
    no value of any declared type meets (``minItems`` over ``maxItems``, a required property
    no value passes...). ``None`` otherwise, which does not prove that a value passes; a
    valid schema is assumed. The reason begins with where (``at /properties/n: ...``)."""
    try:
        draft4 = _validator_class(schema) is jsonschema.Draft4Validator
    except SchemaError:
        return None
    found = _unsatisfiable(schema, "", draft4)
    return None if found is None else f"{_where(found[0])}: {found[1]}"


def _unsatisfiable(schema: object, pointer: str, draft4: bool) -> tuple[str, str] | None:
    """As ``unsatisfiable``, at ``pointer``; ``draft4``: the schema is of draft 4, which has no
    ``const`` (nor boolean schemas, which its meta-schema refuses)."""
    if schema is False:
        return pointer, "it is false, which no value passes"
    if not isinstance(schema, Mapping) or any(key in schema for key in _REFERENCES):
        return None  # what a reference leads to is not looked at
    if pointer and "$schema" in schema:
        return None  # a resource of its own dialect, which may read keywords otherwise
    if schema.get("not") is True or schema.get("not") == {}:
        return pointer, "its not refuses every value"
    if schema.get("enum") == []:
        return pointer, "its enum is empty"
    members = schema.get("allOf")
    for index, member in enumerate(members if isinstance(members, list) else []):
        found = _unsatisfiable(member, f"{pointer}/allOf/{index}", draft4)
        if found is not None:
            return found
    for keyword in ("anyOf", "oneOf"):
        found = _every_member_unsatisfiable(schema.get(keyword), f"{pointer}/{keyword}", draft4)
        if found is not None:
            return found
    types = _declared_types(schema)
    if not types:
        return None  # a value of a type no keyword bounds passes
    if "const" in schema and not draft4 and not _may_have_type(schema["const"], types):
        return pointer, f"its const {_shown(schema['const'])} is not {_types_named(types)}"
    values = schema.get("enum")
    if isinstance(values, list) and not any(_may_have_type(value, types) for value in values):
        return pointer, f"none of its enum values is {_types_named(types)}"
    reasons: list[tuple[str, str, str]] = []
    for kind in sorted(types):
        blocked = _blocked(schema, kind, pointer, draft4)
        if blocked is None:
            return None
        reasons.append((kind, *blocked))
    if len(reasons) == 1:
        return reasons[0][1], reasons[0][2]
    return pointer, "; ".join(
        f"as {_a(kind)} {why}" if where == pointer else f"as {_a(kind)} {_where(where)}: {why}"
        for kind, where, why in reasons
    )


def _every_member_unsatisfiable(
    members: object, pointer: str, draft4: bool
) -> tuple[str, str] | None:
    """Why no member of an ``anyOf`` or ``oneOf`` passes any value, or ``None``."""
    if not isinstance(members, list) or not members:
        return None
    reasons = []
    for index, member in enumerate(members):
        found = _unsatisfiable(member, f"{pointer}/{index}", draft4)
        if found is None:
            return None
        reasons.append(found)
    if len(reasons) == 1:
        return reasons[0]
    return pointer, "none of its members passes a value (" + "; ".join(
        f"{_where(where)}: {why}" for where, why in reasons
    ) + ")"


def _may_have_type(value: object, types: set[str]) -> bool:
    """Whether ``value`` may be of one of ``types``, to the validator of any draft."""
    if value is None:
        return "null" in types
    if isinstance(value, bool):  # before int: a boolean is never a number
        return "boolean" in types
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        # An integer is a number; from draft 6 on, 1.0 is an integer too.
        return bool(types & {"integer", "number"})
    kinds = (("number", float), ("string", str), ("array", (list, tuple)), ("object", Mapping))
    for kind, python in kinds:
        if isinstance(value, python):
            return kind in types
    return True  # not a value JSON makes: not judged here


def _types_named(types: set[str]) -> str:
    return " or ".join(kind if kind == "null" else _a(kind) for kind in sorted(types))


def _shown(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=_plain)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
#: Pairs of bounds, by the type they bound, that no value meets when the first is over the
#: second (or, with ``or_equal``, equal to it).
_BOUND_PAIRS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "number": (
        ("minimum", "maximum", False),
        ("exclusiveMinimum", "maximum", True),
        ("minimum", "exclusiveMaximum", True),
        ("exclusiveMinimum", "exclusiveMaximum", True),
    ),
    "string": (("minLength", "maxLength", False),),
    "array": (("minItems", "maxItems", False),),
    "object": (("minProperties", "maxProperties", False),),
}


def _blocked(
    schema: Mapping[str, Any], kind: str, pointer: str, draft4: bool
) -> tuple[str, str] | None:
    """Why no value of the JSON type ``kind`` passes ``schema``, or ``None``."""
    for low, high, or_equal in _BOUND_PAIRS.get("number" if kind == "integer" else kind, ()):
        first: Any = schema.get(low)
        second: Any = schema.get(high)
        if not (_is_number(first) and _is_number(second)):
            continue
        if first >= second if or_equal else first > second:
            over = "not under" if or_equal else "over"
            return pointer, f"its {low} {first} is {over} its {high} {second}"
    if kind != "object":
        return None
    required = _required(schema)
    most = schema.get("maxProperties")
    if isinstance(most, int) and not isinstance(most, bool) and len(required) > most:
        return pointer, f"it requires {len(required)} properties and its maxProperties is {most}"
    properties = _properties(schema)
    for name in sorted(required):
        if name in properties:
            found = _unsatisfiable(
                properties[name], f"{pointer}/properties/{_escape(name)}", draft4
            )
            if found is not None:
                return found
        elif schema.get("additionalProperties") is False and "patternProperties" not in schema:
            return pointer, f"it requires {name!r}, which its additionalProperties: false refuses"
    return None


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _required(schema: Mapping[str, Any]) -> set[str]:
    required = schema.get("required")
    return (
        {name for name in required if isinstance(name, str)}
        if isinstance(required, list)
        else set()
    )


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _declared_types(schema: object) -> set[str] | None:
    """The types a property's schema declares with ``type``; ``None`` if it declares none,
    or refers to another (before draft 2019-09, ``type`` beside ``$ref`` is ignored)."""
    if not isinstance(schema, Mapping) or "$ref" in schema:
        return None
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list) and all(isinstance(item, str) for item in declared):
        return set(declared)
    return None


def _types_meet(first: set[str], second: set[str]) -> bool:
    # Every integer is a number.
    widened = [types | {"integer"} if "number" in types else types for types in (first, second)]
    return bool(widened[0] & widened[1])


class _NotFetched(Exception):
    """A reference named a document the registry does not hold."""


def _refuse(uri: str) -> Resource[Schema]:
    # jsonschema's default registry fetches unknown http(s) URIs; tool schemas come from
    # clients and servers we do not trust, and validation must never touch the network.
    raise _NotFetched(uri)


# The official meta-schemas stay resolvable (``$ref`` to a draft is legal and common).
_REGISTRY: Registry[Schema] = jsonschema_specifications.REGISTRY.combine(
    Registry(retrieve=_refuse)  # type: ignore[call-arg]
)


def canonical(schema: object) -> str:
    """The schema as sorted JSON text: what compiled validators are cached by.

    Raises:
        SchemaError: the schema is not a JSON object or boolean.
    """
    if not isinstance(schema, bool | Mapping):
        raise SchemaError(f"expected object or boolean, got {_json_type(schema)}")
    try:
        return json.dumps(schema, sort_keys=True, allow_nan=False, default=_plain)
    except RecursionError:
        raise SchemaError(_NESTED) from None
    except (TypeError, ValueError) as error:
        raise SchemaError(f"not representable as JSON: {error}") from error


def _plain(value: object) -> dict[str, Any]:
    # Lets read-only mappings (e.g. MappingProxyType) through json.dumps.
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not a JSON type")


@functools.cache
def _formats(cls: Any) -> jsonschema.FormatChecker:
    """``cls``'s format checker, with every check that fails to run counted as a mismatch: a
    string that makes ``re.compile`` overflow or recurse is no valid ``regex``, not a fault."""
    checker = jsonschema.FormatChecker(formats=())
    for name, (check, raises) in cls.FORMAT_CHECKER.checkers.items():
        checker.checkers[name] = (_forgiving(check), raises)
    return checker


def _forgiving(check: Callable[[object], bool]) -> Callable[[object], bool]:
    def checked(instance: object) -> bool:
        try:
            return bool(check(instance))
        except Exception:
            return False

    return checked


def _compile(key: str) -> tuple[Any, Any]:
    """The validator of the schema ``key`` spells, and its quick check (or ``None``).

    Raises:
        SchemaError: the schema cannot be used, whatever the checks tripped over.
    """
    try:
        return _compile_checked(key)
    except SchemaError:
        raise
    except RecursionError:
        raise SchemaError(_NESTED) from None
    except (ValueError, TypeError, LookupError, ArithmeticError) as error:
        # What else jsonschema or referencing trip over in a schema is still the schema's
        # fault: a form error, not a server error.
        raise SchemaError(f"cannot be used: {error or type(error).__name__}") from error


def _compile_checked(key: str) -> tuple[Any, Any]:
    # Compile from the canonical text, not the caller's object, so that a caller mutating its
    # schema later cannot change what a cached validator enforces.
    schema = json.loads(key)
    cls = _validator_class(schema)
    meta = jsonschema.validators.validator_for(cls.META_SCHEMA, default=cls)
    try:
        # The forgiving format checker makes a pattern re.compile cannot take (a repeat too
        # large, nesting too deep) "not a valid regex" at its place, not an OverflowError.
        cls.check_schema(schema, format_checker=_formats(meta))
    except jsonschema.exceptions.SchemaError as error:
        raise SchemaError(_describe(error), _pointer(error.absolute_path)) from error
    _check_refs(schema, cls)
    _check_loops(schema, cls)
    validator = _timed(cls)(schema, registry=_REGISTRY, format_checker=_formats(cls))
    # A reference that leads back to itself before reading any of the instance makes every
    # validation recurse without end: found now, on the simplest instance, not on a call.
    try:
        for _error in validator.iter_errors({}):
            pass
    except RecursionError:
        raise SchemaError(_LOOP) from None
    except Exception:  # what else the trial meets, a real validation reports
        pass
    return validator, _quick_check(schema)


#: Longest a ``pattern`` (or a ``patternProperties`` key) may take to match one string. A
#: pattern that backtracks catastrophically, such as ``^(a+)+$``, would otherwise hold a worker
#: for minutes on a short argument any client may send; past this, the string is refused.
PATTERN_SECONDS = 0.25
#: Longest all the pattern matching of one validation may take: a value of many strings
#: (or names), each taking ``PATTERN_SECONDS``, would otherwise hold a worker as long.
PATTERNS_SECONDS = 4 * PATTERN_SECONDS
_SLOW = "took longer than"
#: The seconds the validation under way has spent matching patterns (in a list, so that
#: each search adds to it), or ``None`` outside a validation.
_spent: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "mcp_app_pattern_seconds", default=None
)


class _OutOfTime(TimeoutError):
    """The validation's ``PATTERNS_SECONDS`` were spent before this search."""


@contextlib.contextmanager
def _pattern_time() -> Iterator[None]:
    """One validation's ``PATTERNS_SECONDS``, shared by the searches made within."""
    spent = _spent.set([0.0])
    try:
        yield
    finally:
        _spent.reset(spent)


_UNMATCHED = "was left unmatched after"


def _slow(exc: TimeoutError) -> str:
    if isinstance(exc, _OutOfTime):
        return f"{_UNMATCHED} {PATTERNS_SECONDS} s of matching the value's patterns, against"
    return f"{_SLOW} {PATTERN_SECONDS} s to match"


def _search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` is found in ``text``, given ``PATTERN_SECONDS`` at most (and no
    more than what is left of the validation's ``PATTERNS_SECONDS``).

    Raises:
        TimeoutError: the search took longer, or no time was left.
    """
    timeout = PATTERN_SECONDS
    spent = _spent.get()
    if spent is not None:
        left = PATTERNS_SECONDS - spent[0]
        if left <= 0:
            raise _OutOfTime
        timeout = min(timeout, left)
    started = time.monotonic()
    try:
        return regex.search(pattern, text, timeout=timeout) is not None
    except TimeoutError:
        if timeout < PATTERN_SECONDS:
            raise _OutOfTime from None  # cut short by what was left, not by its own limit
        raise
    except regex.error:
        # A pattern the regex module reads otherwise than re, which checked it as a schema.
        return re.search(pattern, text) is not None
    finally:
        if spent is not None:
            spent[0] += time.monotonic() - started


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "string"):
        return
    try:
        found = _search(pattern, instance)
    except TimeoutError as exc:
        yield jsonschema.ValidationError(_slow(exc))
        return
    if not found:
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                found = _search(pattern, key)
            except TimeoutError as exc:
                yield jsonschema.ValidationError(
                    f"the name {_show(key)} {_slow(exc)} {_show(pattern)}"
                )
                continue
            if found:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _matches_any(patterns: Iterable[str], key: str) -> bool:
    """Whether ``key`` matches one of ``patterns``. A search that takes too long counts as no
    match, so the name is extra (or not evaluated), and refused where that refuses it."""
    for pattern in patterns:
        try:
            if _search(pattern, key):
                return True
        except TimeoutError:
            return False
    return False


def _listed(keys: list[str]) -> str:
    return ", ".join(repr(key) for key in sorted(keys)) + (" was" if len(keys) == 1 else " were")


# jsonschema's own additionalProperties and unevaluatedProperties match the names of a
# client's properties against patternProperties with re, which no time limit stops: these
# match them as patternProperties does, and otherwise decide as jsonschema does.


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [key for key in instance if key not in known and not _matches_any(patterns, key)]
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif extra is False and extras:
        error = jsonschema.ValidationError(
            f"Additional properties are not allowed ({_listed(extras)} unexpected)"
        )
        # Named one by one in the problems, without matching the names again.
        error.extra_names = sorted(extras)
        yield error


def _unevaluated_properties(validator: Any, rest: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    failing = [
        key
        for key in instance
        if key not in evaluated
        and next(validator.descend(instance[key], rest, path=key, schema_path=key), None)
        is not None
    ]
    if failing and rest is False:
        yield jsonschema.ValidationError(
            f"Unevaluated properties are not allowed ({_listed(failing)} unexpected)"
        )
    elif failing:
        yield jsonschema.ValidationError(
            "Unevaluated properties are not valid under the given schema "
            f"({_listed(failing)} unevaluated and invalid)"
        )


def _evaluated_keys(validator: Any, instance: Any, schema: Any) -> set[str]:
    """The names of ``instance``'s properties that ``schema`` evaluates, as jsonschema counts
    them for ``unevaluatedProperties`` (in 2020-12, or in 2019-09 for a validator of it)."""
    if not isinstance(schema, dict):
        return set()
    draft2019 = "$recursiveRef" in validator.VALIDATORS
    keys: set[str] = set()
    for keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
        if keyword not in schema or keyword not in validator.VALIDATORS:
            continue
        resolved = (
            lookup_recursive_ref(validator._resolver)
            if keyword == "$recursiveRef"
            else validator._resolver.lookup(schema[keyword])
        )
        inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
        keys |= _evaluated_keys(inner, instance, resolved.contents)
    for keyword in ("properties", "additionalProperties", "unevaluatedProperties"):
        if keyword not in schema:
            continue
        value = schema[keyword]
        if draft2019:
            # 2019-09, as jsonschema reads it: true takes every name, a schema the names it has.
            if value is True:
                keys |= instance.keys()
            elif isinstance(value, dict):
                keys |= value.keys() & instance.keys()
        elif keyword == "properties":
            if isinstance(value, dict):
                keys |= value.keys() & instance.keys()
        else:
            keys |= {
                key
                for key, item in instance.items()
                if next(validator.descend(item, value), None) is None
            }
    patterns = list(schema.get("patternProperties", {}))
    keys |= {key for key in instance if _matches_any(patterns, key)}
    for name, subschema in schema.get("dependentSchemas", {}).items():
        if name in instance:
            keys |= _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if next(validator.descend(instance, subschema), None) is None:
                keys |= _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys |= _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys |= _evaluated_keys(validator, instance, schema["else"])
    return keys


@functools.cache
def _timed(cls: Any) -> Any:
    """``cls`` matching ``pattern`` and ``patternProperties`` within ``PATTERN_SECONDS``, and
    property names against ``patternProperties`` wherever it matches them."""
    keywords = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
        "enum": _enum,
    }
    if "unevaluatedProperties" in cls.VALIDATORS:
        keywords["unevaluatedProperties"] = _unevaluated_properties
    return jsonschema.validators.extend(cls, keywords)


# jsonschema compares unhashable items (objects, arrays) pair by pair: an argument of some
# thousands of objects against "uniqueItems", or a long "enum" of objects, held a worker for
# minutes. These keywords decide as jsonschema does, by a key equal values share.


def _same(value: object) -> object:
    """A key equal JSON values share and others do not, as jsonschema compares them: ``1``
    and ``1.0`` alike, ``true`` and ``1`` not, objects whatever their key order."""
    if isinstance(value, bool):
        return (bool, value)
    if isinstance(value, int | float):
        return (float, value)
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, list | tuple):
        return (list, tuple(_same(item) for item in value))
    if isinstance(value, Mapping):
        return (dict, frozenset((key, _same(item)) for key, item in value.items()))
    return (object, id(value))  # no JSON value: equal to itself only


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[object] = set()
    for item in instance:
        key = _same(item)
        if key in seen:
            yield jsonschema.ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(key)


#: The keys of the enums met lately, by the list's id (kept with it, so the id stays its).
_ENUM_KEYS: dict[int, tuple[Any, frozenset[object]]] = {}
_ENUM_KEYS_KEPT = 256


def _enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not isinstance(enums, list | tuple):
        yield from jsonschema._keywords.enum(validator, enums, instance, schema)
        return
    cached = _ENUM_KEYS.get(id(enums))
    if cached is None or cached[0] is not enums:
        if len(_ENUM_KEYS) >= _ENUM_KEYS_KEPT:
            _ENUM_KEYS.clear()
        cached = (enums, frozenset(_same(each) for each in enums))
        _ENUM_KEYS[id(enums)] = cached
    if _same(instance) not in cached[1]:
        yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")


_LOOP = "the schema refers to itself without end ($ref loop)"
_NESTED = "the schema nests too deeply to be checked"
_VALUE_TOO_DEEP = "the value nests too deeply to be checked against the schema"
#: Deepest value whose RecursionError while validating can only be a loop in the schema.
SHALLOW = 16
_TOO_DEEP = "the schema refers to itself without end ($ref loop), met while validating"


# -- a quick check for the schemas most tools have ------------------------------------------
#
# Most input schemas are an object of typed properties, some required. For those, a direct
# check in plain Python says "valid" for the usual argument object at a fraction of the cost
# of the general validator. It is only ever trusted when it says valid: anything it does not
# fully understand (other keywords, a float where an integer is expected, whose meaning
# differs between drafts) goes to the general validator, which also words the problems.

#: Keywords that never change whether an instance is valid.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
_QUICK_ROOT = _ANNOTATIONS | {"$schema", "type", "properties", "required", "additionalProperties"}
#: Property keywords the quick check understands; each means the same in every draft from 4.
_QUICK_PROPERTY = _ANNOTATIONS | {
    "type",
    "minLength",
    "maxLength",
    "enum",
    "const",
    "minimum",
    "maximum",
}


def _is_integer(value: object) -> bool:
    return type(value) is int


def _is_number(value: object) -> bool:
    return type(value) is int or type(value) is float


_QUICK_TYPES: dict[str, Any] = {
    "string": lambda value: type(value) is str,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "object": lambda value: type(value) is dict,
    "array": lambda value: type(value) is list,
}


def _quick_property(schema: object) -> Any:
    """A sound test of one property's schema, or ``None`` if it is not simple enough."""
    if schema is True:
        return lambda value: True
    if not isinstance(schema, dict) or not set(schema) <= _QUICK_PROPERTY:
        return None
    tests: list[Any] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not kinds or not all(isinstance(k, str) and k in _QUICK_TYPES for k in kinds):
            return None
        of_type = [_QUICK_TYPES[k] for k in kinds]
        tests.append(of_type[0] if len(of_type) == 1 else _any_of(of_type))
    for keyword in ("minLength", "maxLength", "minimum", "maximum"):
        if keyword in schema:
            bound = schema[keyword]
            if not _is_number(bound):
                return None
            tests.append(_QUICK_LIMITS[keyword](bound))
    if "enum" in schema:
        members = schema["enum"]
        # Strings only: JSON Schema tells true from 1, and 1 from 1.0 only in some drafts.
        if not isinstance(members, list) or not all(type(m) is str for m in members):
            return None
        allowed = frozenset(members)
        tests.append(lambda value: type(value) is str and value in allowed)
    if "const" in schema:
        const = schema["const"]
        if type(const) is not str:
            return None
        tests.append(lambda value: type(value) is str and value == const)
    if not tests:
        return lambda value: True
    if len(tests) == 1:
        return tests[0]
    return lambda value: all(test(value) for test in tests)


def _any_of(tests: list[Any]) -> Any:
    return lambda value: any(test(value) for test in tests)


# A length applies to strings (counted in code points, as len() counts them) and a bound to
# numbers (never to booleans); any other plain JSON value passes that keyword. A value of
# another type (a str or int subclass a handler returned, a Decimal) is left to the
# validator, which applies the keyword to it by isinstance.
_PLAIN = frozenset({str, int, float, bool, type(None), dict, list})
_QUICK_LIMITS: dict[str, Any] = {
    "minLength": lambda n: (
        lambda value: len(value) >= n if type(value) is str else type(value) in _PLAIN
    ),
    "maxLength": lambda n: (
        lambda value: len(value) <= n if type(value) is str else type(value) in _PLAIN
    ),
    "minimum": lambda n: lambda value: value >= n if _is_number(value) else type(value) in _PLAIN,
    "maximum": lambda n: lambda value: value <= n if _is_number(value) else type(value) in _PLAIN,
}


def _quick_check(schema: Any) -> Any:
    """For an object schema of simply typed properties, a function that returns ``True``
    only for instances the schema accepts; ``None`` for any other schema."""
    if not isinstance(schema, dict) or not set(schema) <= _QUICK_ROOT:
        return None
    if schema.get("type") != "object":
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(additional, bool):
        return None
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return None
    tests = {name: _quick_property(sub) for name, sub in properties.items()}
    if any(test is None for test in tests.values()):
        return None

    def quick(instance: object) -> bool:
        if type(instance) is not dict:
            return False
        for name in required:
            if name not in instance:
                return False
        for name, value in instance.items():
            test = tests.get(name)
            if test is None:
                if not additional:
                    return False
            elif not test(value):
                return False
        return True

    return quick


def _validator_class(schema: Schema) -> Any:
    dialect = schema.get("$schema") if isinstance(schema, Mapping) else None
    if dialect is not None and not isinstance(dialect, str):
        raise SchemaError(f"expected string, got {_json_type(dialect)}", "/$schema")
    if dialect is None:
        return jsonschema.Draft202012Validator
    # A dialect this validator does not know is refused, not read as 2020-12: MCP requires an
    # error naming the unsupported dialect, and its keywords may mean something else.
    cls = jsonschema.validators.validator_for(schema, default=None)
    if cls not in _SUPPORTED:
        raise SchemaError(
            f"unsupported dialect {dialect!r}; use one of {', '.join(_DIALECT_URIS)}",
            "/$schema",
        )
    return cls


def _check_refs(schema: Schema, cls: Any) -> None:
    # jsonschema resolves references lazily, so a bad one would surface only for instances
    # that reach it; resolving every $ref up front reports it once, with its location.
    where = {id(node): pointer for pointer, node in _nodes(schema)}
    # $dynamicRef is a reference only in the dialects that define it (2020-12).
    keywords = [k for k in ("$ref", "$dynamicRef") if k in cls.VALIDATORS]
    for resolver, resource in _subresources(schema, DRAFT202012):
        contents = resource.contents
        for keyword in keywords:
            ref = contents.get(keyword) if isinstance(contents, Mapping) else None
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except Unresolvable as error:
                    pointer = f"{where[id(contents)]}/{keyword}"
                    raise _unresolvable(error, ref, pointer, keyword) from error


#: Keywords that apply their subschemas to the very value their own schema checks (rather
#: than to a property or an item of it): a loop of these never reaches the end of a value.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LIST = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas", "dependencies")
#: Dialects in which ``$ref`` makes its siblings ignored.
_REF_ALONE = frozenset(
    {jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator}
)


def _check_loops(schema: Schema, cls: Any) -> None:
    """Refuse references that lead back to where they start without going into the value.

    Such a loop recurses without end on every value that reaches it, which may be a value only
    some calls send (a property the trial on ``{}`` does not have); and a loop through ``not``
    can end in a crash beyond ``RecursionError``. Found here, it is the schema's error at once.

    ``$dynamicRef`` and ``$recursiveRef`` are not followed: where they lead depends on the way
    taken to them, and their static target would refuse schemas whose dynamic one goes into
    the value. A loop through them is met on the trial value, or while validating.
    """
    walk = _LoopWalk(cls)
    order = {id(node): (index, pointer) for index, (pointer, node) in enumerate(_nodes(schema))}
    for resolver, resource in _subresources(schema, walk.specification):
        loop = walk.loop_from(resolver, resource)
        if loop:
            # Named by its first subschema in the document, whichever the walk entered by.
            _, pointer = min(order.get(key, (len(order), "")) for key in loop)
            raise SchemaError(_LOOP, pointer)


def in_place(schema: Schema, subschema: Any) -> Iterator[Mapping[str, Any]]:
    """``subschema`` (found by identity within ``schema``) and every subschema a value it
    accepts must or may match too: where its references lead (``$ref`` to a pointer, an
    anchor, an ``$id``), its ``allOf``/``anyOf``/``oneOf`` and ``then``/``else``, and theirs,
    each once. Not ``not`` or ``if``, which a value need not match.

    Nothing when ``subschema`` is not in ``schema``; a reference that does not resolve is
    not followed.
    """
    cls = _validator_class(schema)
    specification = specification_with(cls.META_SCHEMA.get("$schema", ""))
    found = next(
        (pair for pair in _subresources(schema, specification) if pair[1].contents is subschema),
        None,
    )
    if found is None:
        return

    def resource(contents: Any) -> Any:
        return Resource.from_contents(contents, default_specification=specification)

    seen: set[int] = set()
    stack = [found]
    while stack:
        resolver, current = stack.pop()
        contents = current.contents
        if id(contents) in seen or not isinstance(contents, Mapping):
            continue
        seen.add(id(contents))
        yield contents
        ref = contents.get("$ref")
        if isinstance(ref, str):
            try:
                resolved = resolver.lookup(ref)
            except Unresolvable:
                pass
            else:
                stack.append((resolved.resolver, resource(resolved.contents)))
            if cls in _REF_ALONE:
                continue
        subschemas = [contents[k] for k in ("then", "else") if "if" in contents and k in contents]
        for keyword in _IN_PLACE_LIST:
            if isinstance(contents.get(keyword), list):
                subschemas.extend(contents[keyword])
        for sub in subschemas:
            child = resource(sub)
            stack.append((resolver.in_subresource(child), child))


class _LoopWalk:
    """Depth-first walks of the in-place keywords of one schema (see ``_check_loops``)."""

    def __init__(self, cls: Any) -> None:
        self.specification = specification_with(cls.META_SCHEMA.get("$schema", ""))
        self.keywords = frozenset(cls.VALIDATORS)
        self.ref_alone = cls in _REF_ALONE
        #: Subschemas already found to lead to no loop, across walks.
        self.done: set[int] = set()

    def loop_from(self, resolver: Any, resource: Any) -> list[int]:
        """The ids of the subschemas on the first loop reached from ``resource``; else empty."""
        path: list[int] = []
        on_path: set[int] = set()
        # None marks the end of the steps from the subschema last put on the path.
        stack: list[tuple[Any, Any] | None] = [(resolver, resource)]
        while stack:
            item = stack.pop()
            if item is None:
                self.done.add(path[-1])
                on_path.discard(path.pop())
                continue
            resolver, resource = item
            key = id(resource.contents)
            if key in on_path:
                return path[path.index(key) :]
            if key in self.done:
                continue
            path.append(key)
            on_path.add(key)
            stack.append(None)
            stack.extend(self._steps(resolver, resource.contents))
        return []

    def _steps(self, resolver: Any, contents: Any) -> Iterator[tuple[Any, Any]]:
        """The subschemas ``contents`` applies to the value it checks, each with its resolver."""
        if not isinstance(contents, Mapping):
            return
        ref = contents.get("$ref")
        if isinstance(ref, str):
            try:
                resolved = resolver.lookup(ref)
            except Unresolvable:
                pass  # reported where it is met (_check_refs, or while validating)
            else:
                yield resolved.resolver, self._resource(resolved.contents)
        if self.ref_alone and "$ref" in contents:
            return
        subschemas: list[Any] = []
        for keyword in _IN_PLACE_ONE:
            # then and else are read by the if keyword, and only beside it.
            known = "if" if keyword in ("then", "else") else keyword
            if known in self.keywords and known in contents and keyword in contents:
                subschemas.append(contents[keyword])
        for keyword in _IN_PLACE_LIST:
            if keyword in self.keywords and isinstance(contents.get(keyword), list):
                subschemas.extend(contents[keyword])
        for keyword in _IN_PLACE_MAP:
            if keyword in self.keywords and isinstance(contents.get(keyword), Mapping):
                # dependencies also maps names to lists of names, which are no schemas.
                subschemas.extend(contents[keyword].values())
        for sub in subschemas:
            if isinstance(sub, Mapping):
                child = self._resource(sub)
                yield resolver.in_subresource(child), child

    def _resource(self, contents: Any) -> Any:
        return Resource.from_contents(contents, default_specification=self.specification)


def _subresources(schema: Schema, specification: Any) -> Iterator[tuple[Any, Any]]:
    """Every subschema of ``schema`` as a resource, with the resolver of its references.

    The registry is crawled once, so that it has every anchor indexed: left uncrawled, each
    lookup of an anchor crawls the whole schema again (a schema of a few hundred anchors took
    seconds to check).
    """
    root = Resource.from_contents(schema, default_specification=specification)
    uri = root.id() or ""
    pending = [(_REGISTRY.with_resource(uri, root).crawl().resolver(base_uri=uri), root)]
    while pending:
        resolver, resource = pending.pop()
        yield resolver, resource
        pending.extend((resolver.in_subresource(sub), sub) for sub in resource.subresources())


def _unresolvable(
    error: BaseException, ref: str, pointer: str, keyword: str = "$ref"
) -> SchemaError:
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, _NotFetched):
            return SchemaError(
                f"cannot resolve {keyword} {ref!r}: remote references are not fetched", pointer
            )
        cause = cause.__cause__
    return SchemaError(
        f"cannot resolve {keyword} {ref!r}: nothing in the schema has that address", pointer
    )


def _locate_ref(schema: Schema, ref: str) -> str:
    # The reference error carries no location, so point at the first place using that value.
    for pointer, node in _nodes(schema):
        if isinstance(node, Mapping):
            for keyword in ("$ref", "$dynamicRef"):
                if node.get(keyword) == ref:
                    return f"{pointer}/{keyword}"
    return ""


def _nodes(value: object) -> Iterator[tuple[str, object]]:
    """Every value inside ``value`` with its pointer, in document order, without recursion."""
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        pointer, node = stack.pop()
        yield pointer, node
        if isinstance(node, Mapping):
            items: list[tuple[str | int, object]] = list(node.items())
        elif isinstance(node, list):
            items = list(enumerate(node))
        else:
            continue
        stack.extend((f"{pointer}/{_escape(key)}", item) for key, item in reversed(items))


def _relevance(error: Any) -> tuple[int, tuple[tuple[bool, Any], ...], bool, bool]:
    # Same preferences as jsonschema's best_match (higher in the instance, then anyOf/oneOf
    # last), plus document order so that the result never depends on set or hash order.
    path = tuple((isinstance(part, str), part) for part in error.absolute_path)
    return (
        len(path),
        path,
        error.validator in jsonschema.exceptions.WEAK_MATCHES,
        error.validator not in jsonschema.exceptions.STRONG_MATCHES,
    )


def _problems(errors: Iterable[Any]) -> list[Problem]:
    found: dict[Problem, None] = {}
    grouped: set[tuple[Any, ...]] = set()
    for top in errors:
        # Descends into anyOf/oneOf the way jsonschema's best_match does.
        error = jsonschema.exceptions.best_match([top])
        pointer = _pointer(error.absolute_path)
        if error.validator in ("required", "additionalProperties"):
            # jsonschema reports these per property (required) or all at once
            # (additionalProperties); emit one problem per property from the first error.
            group = (pointer, tuple(error.absolute_schema_path))
            if group in grouped:
                continue
            grouped.add(group)
            messages = _property_messages(error)
        else:
            messages = [_describe(error)]
        for message in messages:
            found.setdefault(Problem(pointer, message))
    return list(found)


def _property_messages(error: Any) -> list[str]:
    instance = error.instance
    if error.validator == "required":
        return [
            f"missing required property {_show(name)}"
            for name in error.validator_value
            if name not in instance
        ]
    extras = getattr(error, "extra_names", ())
    return [f"unexpected property {_show(name)}" for name in extras] or [str(error.message)]


def _describe(error: Any) -> str:
    keyword = error.validator
    value = error.validator_value
    instance = error.instance
    if keyword in _SIZES:
        bound, one, many = _SIZES[keyword]
        return f"expected {bound} {_count(value, one, many)}, got {len(instance)}"
    if keyword in _BOUNDS:
        op = _BOUNDS[keyword]
        flag, strict = _DRAFT4_EXCLUSIVE.get(keyword, ("", op))
        if error.schema.get(flag) is True:
            op = strict
        return f"expected a number {op} {_show(value)}, got {_show(instance)}"
    match keyword:
        case "type":
            return f"expected {_either(_names(value))}, got {_json_type(instance)}"
        case "enum":
            return "expected one of: " + ", ".join(_show(option) for option in value)
        case "const":
            return f"expected {_show(value)}"
        case "pattern":
            if str(error.message).startswith((_SLOW, _UNMATCHED)):
                return f"{_show(instance)} {error.message} {_show(value)}"
            return f"expected a string matching {_show(value)}, got {_show(instance)}"
        case "format":
            return f"not a valid {value}"
        case "multipleOf":
            return f"expected a multiple of {_show(value)}, got {_show(instance)}"
        case "uniqueItems":
            return "expected all items to be unique"
        case "contains":
            return "expected at least one item matching 'contains'"
        case "minContains":
            return f"expected at least {_count(value, 'item', 'items')} matching 'contains'"
        case "maxContains":
            return f"expected at most {_count(value, 'item', 'items')} matching 'contains'"
        case "anyOf" | "oneOf":
            return _alternatives(error)
        case "not":
            return "matches a schema it must not match"
        case None:
            # A ``false`` subschema, e.g. ``"properties": {"x": false}``.
            return "no value is allowed here"
    # Rare keywords (dependencies, unevaluated*, ...) keep jsonschema's own wording.
    return str(error.message)


def _alternatives(error: Any) -> str:
    context = list(error.context)
    if error.validator == "oneOf" and not context:
        return "matches more than one of the alternatives, but must match exactly one"
    here = [sub for sub in context if not sub.relative_path]
    wrong_type = [sub for sub in here if sub.validator == "type"]
    # anyOf [{"type": "integer"}, {"type": "null"}] is how optional fields usually look;
    # saying "expected integer or null" beats "does not match any of the alternatives".
    if wrong_type and len(wrong_type) == len(context):
        names = [name for sub in wrong_type for name in _names(sub.validator_value)]
        return f"expected {_either(names)}, got {_json_type(error.instance)}"
    # If every alternative but one failed on type alone, that one is what was meant.
    others = [sub for sub in here if sub.validator != "type"]
    if len(others) == 1 and len(here) == len(context):
        return _describe(others[0])
    return "does not match any of the allowed alternatives"


def _names(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _either(names: list[str]) -> str:
    unique = list(dict.fromkeys(names))
    if len(unique) == 1:
        return unique[0]
    return ", ".join(unique[:-1]) + " or " + unique[-1]


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def _json_type(value: object) -> str:
    return next(
        (name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__
    )


def _show(value: object) -> str:
    if isinstance(value, str):
        text = repr(value)
    else:
        try:
            text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= _SHOW_LIMIT else text[: _SHOW_LIMIT - 3] + "..."


def _pointer(path: Iterable[str | int]) -> str:
    return "".join(f"/{_escape(part)}" for part in path)


def _escape(part: str | int) -> str:
    # RFC 6901: "~" first, or the "~1" produced for "/" would be escaped again.
    return str(part).replace("~", "~0").replace("/", "~1")


def _where(pointer: str) -> str:
    return f"at {pointer}" if pointer else "at the root"


# Built last: the constructor needs _compile, defined above.
_default = JSONSchemaValidator()
