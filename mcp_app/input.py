"""Requests a handler sends the client for input, and the ``input_required`` result that carries them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .protocol.jsonrpc import InvalidParams
from .schema import SchemaError, check_schema, format_problems, in_place, validate

__all__ = ["InputRequired", "elicit", "elicit_url", "input_required", "roots", "sample"]

JSON = dict[str, Any]

#: The first revision whose ``sampling`` capability has sub-capabilities (``context``, ``tools``).
SAMPLING_SUBCAPABILITIES = "2025-11-25"
#: The first revision with elicitation, and the first with URL elicitations and multi-select
#: form fields.
ELICITATION_FORMS = "2025-06-18"
ELICITATION_URLS = "2025-11-25"
#: The methods an input request may use, and the client capability each needs.
INPUT_METHODS = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def elicit(message: str, schema: Mapping[str, Any] | None = None) -> JSON:
    """Ask the user to fill in a form; ``schema`` is a flat object schema of primitive fields."""
    requested = dict(schema) if schema is not None else {"type": "object", "properties": {}}
    requested.setdefault("type", "object")
    requested.setdefault("properties", {})  # required by the schema, even when empty
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": requested},
    }


def elicit_url(message: str, url: str) -> JSON:
    """Ask the user to visit ``url`` (to sign in, pay, consent) before the call goes on."""
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": message, "url": url},
    }


def sample(
    messages: str | Sequence[Mapping[str, Any] | str],
    max_tokens: int,
    **params: Any,
) -> JSON:
    """Ask the client's model for a completion (``sampling/createMessage``).

    ``messages`` may be a string or a list of strings and message dicts; strings become user
    text messages. Extra keyword arguments are sent as the request's other parameters, by their
    wire names (``systemPrompt``, ``temperature``, ``tools``, ``toolChoice`` ...); snake-case
    names are converted.
    """
    items = [messages] if isinstance(messages, str) else list(messages)
    wire_messages = [
        {"role": "user", "content": {"type": "text", "text": m}} if isinstance(m, str) else dict(m)
        for m in items
    ]
    out: JSON = {"messages": wire_messages, "maxTokens": max_tokens}
    for key, value in params.items():
        out[_camel(key)] = value
    return {"method": "sampling/createMessage", "params": out}


def roots() -> JSON:
    """Ask the client for its roots (``roots/list``)."""
    return {"method": "roots/list", "params": {}}


def _camel(name: str) -> str:
    if name.startswith("_"):
        return name
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass(frozen=True)
class InputRequired:
    """A handler's request for input: ``requests`` by key, and the state to resume from."""

    requests: dict[str, JSON] = field(default_factory=dict)
    state: Any = None

    def required_capabilities(
        self, declared: Mapping[str, Any], version: str | None = None
    ) -> JSON:
        """The client capabilities these requests need that ``declared`` lacks.

        ``version``: an initialize-era session's revision. Before 2025-11-25, ``sampling``
        had no sub-capabilities: ``includeContext`` needed only ``sampling`` itself, and
        sampling with tools was not part of the protocol (it is reported as ``sampling.tools``
        missing, which no client of that revision can declare).
        """
        missing: JSON = {}
        nested = version is None or version >= SAMPLING_SUBCAPABILITIES
        modes: set[str] = set()
        for request in self.requests.values():
            capability = INPUT_METHODS.get(str(request.get("method")))
            params = request.get("params") or {}
            have = declared.get(capability or "")
            if capability == "elicitation":
                modes.add(params.get("mode") or "form")
            elif capability == "sampling":
                needs: JSON = {}
                if "tools" in params or "toolChoice" in params:
                    needs["tools"] = {}
                if nested and params.get("includeContext") not in (None, "none"):
                    needs["context"] = {}
                if not isinstance(have, dict):
                    missing.setdefault("sampling", {}).update(needs)
                else:
                    lacking: JSON = {
                        k: {} for k in needs if not (nested and isinstance(have.get(k), dict))
                    }
                    if lacking:
                        missing.setdefault("sampling", {}).update(lacking)
            elif capability is not None and not isinstance(have, dict):
                missing[capability] = {}
        if modes:
            have = declared.get("elicitation")
            # An empty elicitation capability means form only.
            supported = (set(have) or {"form"}) if isinstance(have, dict) else set()
            lacking_modes = modes - supported
            if lacking_modes:
                if not isinstance(have, dict) and lacking_modes == {"form"}:
                    missing["elicitation"] = {}
                else:
                    missing["elicitation"] = {mode: {} for mode in sorted(lacking_modes)}
        return missing


def _lists(spec: Any) -> bool:
    kind = spec.get("type") if isinstance(spec, dict) else None
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def revision_problem(requests: Mapping[str, JSON], version: str) -> str | None:
    """Why a client of an initialize-era ``version`` cannot be sent ``requests``, if it
    cannot: what its revision of the protocol has no words for."""
    for request in requests.values():
        if request.get("method") != "elicitation/create":
            continue
        if version < ELICITATION_FORMS:
            return f"The client's protocol revision ({version}) has no elicitation"
        params = request.get("params") or {}
        if version >= ELICITATION_URLS:
            continue
        if params.get("mode", "form") != "form":
            return f"The client's protocol revision ({version}) has no URL elicitation"
        form = form_schema(request) or {}
        fields = form.get("properties")
        for name, spec in (fields if isinstance(fields, dict) else {}).items():
            if any(_lists(applied) for applied in in_place(form, spec)):
                return (
                    f"The form's field {name!r} is a multi-select list, which the client's "
                    f"protocol revision ({version}) has no words for"
                )
    return None


def input_required(requests: Mapping[str, JSON] | None = None, state: Any = None) -> InputRequired:
    """Stop and ask the client for input; the handler is called again with the answers.

    Raises:
        ValueError: a request has an unknown method or a key that is not text, a form's
            schema is no JSON Schema or has a field of objects, there is neither a request
            nor state, or the state is not JSON (it would come back otherwise, or not at all,
            in one era and unchanged in another).
    """
    requests = dict(requests or {})
    for key, request in requests.items():
        if not isinstance(key, str):
            # It would come back as text from a 2026-07-28 client, and never be found.
            raise ValueError(f"input request keys must be text, not {key!r}")
        if not isinstance(request, dict) or request.get("method") not in INPUT_METHODS:
            raise ValueError(
                f"input request {key!r} must be built with elicit(), elicit_url(), sample() or roots()"
            )
        form = form_schema(request)
        if form is not None:
            requests[key] = _with_form(request, _plain_form(key, form))
    if not requests and state is None:
        raise ValueError("input_required() needs at least one request or a state")
    _check_state(state)
    return InputRequired(requests, state)


def _plain_form(key: str, form: JSON) -> JSON:
    """``form`` as the JSON sent (lazy text, decimals, enums written as the wire writes
    them), checked as the object schema of a form: what the answer is checked against."""
    from .transport.sse import WireJSONEncoder

    try:
        plain: JSON = json.loads(json.dumps(form, cls=WireJSONEncoder))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"input request {key!r} asks for a form that is not JSON: {exc}") from None
    if plain.get("type") != "object":
        raise ValueError(f"input request {key!r} asks for a form whose schema is not of an object")
    try:
        check_schema(plain)
    except SchemaError as exc:
        raise ValueError(f"input request {key!r} asks for a form whose {exc}") from None
    fields = plain.get("properties")
    for name, spec in (fields if isinstance(fields, dict) else {}).items():
        if _nested(spec):
            # An answer holds only text, numbers, booleans and lists of text: no answer to
            # such a form could be accepted.
            raise ValueError(
                f"input request {key!r} asks for a form whose field {name!r} holds objects; "
                "a form's fields hold text, numbers, booleans or lists of text"
            )
    return plain


#: The JSON types a form's field may hold, as an answer's content does.
_FIELD_TYPES = frozenset({"string", "number", "integer", "boolean", "array"})


def _nested(spec: Any) -> bool:
    """Whether the field ``spec`` declares a type no form answer can give: objects (or
    lists of them) only. Only its own ``type`` is read, so a reference is not judged."""
    if not isinstance(spec, dict):
        return False
    kind = spec.get("type")
    kinds = {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else None
    if kinds is not None and not kinds & _FIELD_TYPES:
        return True
    items = spec.get("items")
    return kinds == {"array"} and isinstance(items, dict) and _nested(items)


def _with_form(request: JSON, form: JSON) -> JSON:
    return {**request, "params": {**request["params"], "requestedSchema": form}}


def _check_state(state: Any) -> None:
    try:
        same = json.loads(json.dumps(state)) == state
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"input_required() state must be JSON: {exc}") from None
    if not same:
        raise ValueError(
            "input_required() state must be JSON that reads back the same: no tuples, no "
            "keys that are not text, no NaN or Infinity"
        )


def form_schema(request: Mapping[str, Any]) -> JSON | None:
    """The schema of the form an input request asks the user to fill in, if it is one."""
    if request.get("method") != "elicitation/create":
        return None
    params = request.get("params") or {}
    if params.get("mode", "form") != "form":
        return None
    schema = params.get("requestedSchema")
    return schema if isinstance(schema, dict) else None


def expected(requests: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, JSON]]:
    """What the answers to ``requests`` are checked against: the method of each, and the
    schema of each form, by key."""
    methods: dict[str, str] = {}
    forms: dict[str, JSON] = {}
    for key, request in requests.items():
        methods[key] = str((request or {}).get("method"))
        form = form_schema(request or {})
        if form is not None:
            forms[key] = form
    return methods, forms


_ELICIT_ACTIONS = ("accept", "decline", "cancel")


def checked_answers(
    responses: Mapping[str, Any],
    asked: Mapping[str, str] | None,
    forms: Mapping[str, JSON] | None = None,
) -> dict[str, Any]:
    """The answers a handler is given of the client's ``inputResponses``.

    ``asked``: the method of each input request sent, by key, when known (a signed state
    says); ``forms``: the schema of each form among them. Then only answers to those are kept
    (others are ignored, as the spec asks), each checked against its request
    (``kept_answer``). Else (answers sent up front, with no state) an answer shaped as one
    kind of result (an ``action``, ``roots``, a ``role`` or ``model``) is checked as that
    kind, and any other is ignored. A ``null`` answer counts as missing.

    Raises:
        InvalidParams: an answer is malformed; the message names its key.
    """
    kept: dict[str, Any] = {}
    for key, answer in responses.items():
        method = asked.get(key) if asked is not None else _method_of(answer)
        if answer is None or method is None:
            continue
        try:
            kept[key] = kept_answer(method, answer, (forms or {}).get(key))
        except ValueError as exc:
            raise InvalidParams(f"Invalid inputResponses[{key!r}]: {exc}") from None
    return kept


def _method_of(answer: Any) -> str | None:
    """The input request ``answer`` is shaped as the result of, if any."""
    if not isinstance(answer, dict):
        return None
    if "action" in answer:
        return "elicitation/create"
    if "roots" in answer:
        return "roots/list"
    if "role" in answer or "model" in answer:
        return "sampling/createMessage"
    return None


def kept_answer(method: str, answer: Any, form: JSON | None = None) -> Any:
    """The client's ``answer`` to an input request of ``method`` as the handler gets it:
    checked against the result the request asks for (and an accepted form's content against
    its schema ``form``); an elicitation's content only when it was accepted.

    Raises:
        ValueError: the answer is malformed; the message says how.
    """
    problem = answer_problem(method, answer, form)
    if problem:
        raise ValueError(problem)
    if method == "elicitation/create" and answer["action"] != "accept" and "content" in answer:
        # Content is only for an accepted form: a declined one's is not the user's answer.
        return {k: v for k, v in answer.items() if k != "content"}
    return answer


def answer_problem(method: str, answer: Any, form: JSON | None = None) -> str | None:
    """What is wrong with the client's ``answer`` to an input request of ``method`` (the
    result's required shape, and an accepted form's content against its schema ``form``),
    or ``None`` if nothing is."""
    if not isinstance(answer, dict):
        return "the answer must be an object"
    if method == "elicitation/create":
        return _elicitation_problem(answer, form)
    if method == "sampling/createMessage":
        if answer.get("role") not in ("user", "assistant"):
            return "a sampling answer needs 'role': user or assistant"
        content = answer.get("content")
        blocks = content if isinstance(content, list) else [content]
        if not isinstance(content, dict | list) or not all(
            isinstance(block, dict) and isinstance(block.get("type"), str) for block in blocks
        ):
            return "a sampling answer needs 'content': a content block, or a list of them, each with a 'type'"
        if not isinstance(answer.get("model"), str):
            return "a sampling answer needs 'model': the name of the model that answered"
    elif method == "roots/list":
        roots = answer.get("roots")
        if not isinstance(roots, list) or not all(
            isinstance(root, dict) and isinstance(root.get("uri"), str) for root in roots
        ):
            return "a roots answer needs 'roots': a list of objects, each with a 'uri'"
    return None


def _elicitation_problem(answer: JSON, form: JSON | None) -> str | None:
    action = answer.get("action")
    if action not in _ELICIT_ACTIONS:
        return "an elicitation's answer needs 'action': accept, decline or cancel"
    if action != "accept":
        return None
    if "content" in answer:
        content = answer["content"]
        if not isinstance(content, dict):
            return "an accepted elicitation's 'content' must be an object"
        for name, value in content.items():
            if not _primitive(value):
                return (
                    f"an elicitation's content holds only text, numbers, booleans and lists "
                    f"of text; {name!r} is {type(value).__name__}"
                )
    if form is None:
        return None
    problems = validate(form, answer.get("content", {}))
    return (
        format_problems(problems, "its content does not fit the form asked for:")
        if problems
        else None
    )


def _primitive(value: Any) -> bool:
    if isinstance(value, list):
        return all(isinstance(item, str) for item in value)
    return isinstance(value, str | int | float | bool)
