"""Form fields and widgets of the definition rows' admin: readable JSON, monospace templates."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.forms.fields import InvalidJSONInput

from .fields import holds_unstorable
from .protocol.jsonrpc import json_depth

__all__ = ["CodeTextarea", "JSONTextarea", "PrettyJSONField", "RowForm"]

_MONOSPACE = "font-family: monospace; width: 100%; max-width: 48em;"


class JSONTextarea(forms.Textarea):
    """A monospace textarea sized for a few lines of JSON."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__({"rows": 6, "style": _MONOSPACE, "spellcheck": "false", **(attrs or {})})


class CodeTextarea(forms.Textarea):
    """A monospace textarea for Django template source."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__({"rows": 4, "style": _MONOSPACE, "spellcheck": "false", **(attrs or {})})


#: Deepest nesting of arrays and objects a row's JSON may have: far beyond what a schema or
#: a config needs, and short of what Python's recursion (validating, pretty-printing) follows.
MAX_JSON_DEPTH = 64
_TOO_DEEP = f"JSON may nest at most {MAX_JSON_DEPTH} levels deep."


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            # JSON would keep the last silently: the first was typed for a reason.
            raise ValueError(f"the key {key!r} is given twice in one object")
        found[key] = value
    return found


class UniqueKeysDecoder(json.JSONDecoder):
    """Reads JSON, refusing an object that gives a key twice."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("object_pairs_hook", _once_each)
        super().__init__(**kwargs)


class PrettyJSONField(forms.JSONField):
    """JSON shown indented, and an empty box (not ``null``) for no value; an object giving a
    key twice is refused."""

    widget = JSONTextarea

    def __init__(self, **kwargs: Any) -> None:
        kwargs["decoder"] = kwargs.get("decoder") or UniqueKeysDecoder
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except RecursionError:
            raise forms.ValidationError(_TOO_DEEP, code="invalid") from None
        except ValueError as exc:  # not a JSONDecodeError: an integer past Python's limit
            raise forms.ValidationError(f"Enter valid JSON: {exc}.", code="invalid") from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        # Read again to show the form: JSON that cannot be read is shown as typed, as
        # Django shows JSON that does not parse, and to_python() says why.
        try:
            return super().bound_data(data, initial)
        except (RecursionError, ValueError):
            return InvalidJSONInput(data)

    def validate(self, value: Any) -> None:
        super().validate(value)
        if json_depth(value) > MAX_JSON_DEPTH:
            raise forms.ValidationError(_TOO_DEEP, code="invalid")
        if holds_unstorable(value):
            # As Django's text fields refuse a NUL; PostgreSQL's jsonb cannot store any of these.
            raise forms.ValidationError(
                "JSON may not hold a null character (\\u0000), a lone surrogate, NaN or Infinity.",
                code="null_characters",
            )

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, InvalidJSONInput):
            return value  # what was typed comes back as typed, with the error
        if value is None:
            return ""
        # A lone surrogate (refused by validate) is shown escaped: no page can hold it.
        readable = not holds_unstorable(value)
        return json.dumps(value, ensure_ascii=not readable, indent=2, cls=self.encoder)


#: Text fields that hold Django template source, per model name.
TEMPLATE_FIELDS = {
    "resourcetemplate": ("text",),
    "promptmessage": ("text", "resource_uri"),
}
#: Content served as typed: leading and trailing whitespace (indentation, a final newline)
#: is part of it.
VERBATIM_FIELDS = {
    "resource": ("text",),
    "resourcetemplate": ("text",),
    "promptmessage": ("text",),
}


class RowForm(forms.ModelForm):  # type: ignore[type-arg]
    """The admin's form for a definition row; validation is the model's ``full_clean``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        model = self._meta.model._meta.model_name or ""
        for name in VERBATIM_FIELDS.get(model, ()):
            field = self.fields.get(name)
            if isinstance(field, forms.CharField):
                field.strip = False
        for name in TEMPLATE_FIELDS.get(model, ()):
            field = self.fields.get(name)
            if field is not None:
                attrs = {"style": _MONOSPACE, "spellcheck": "false"}
                if isinstance(field.widget, forms.Textarea):
                    attrs["rows"] = "4"
                field.widget.attrs.update(attrs)
