"""The initialize-era wire (2025-03-26 to 2025-11-25): negotiation and what differs from 2026-07-28."""

from __future__ import annotations

from typing import Any

from . import versions

JSON = dict[str, Any]

#: Methods only the initialize era serves, besides the engine's common table.
OWN_METHODS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)


def negotiate(requested: Any) -> str:
    """Echo a supported requested version, else answer with the newest initialize-era one."""
    if isinstance(requested, str) and requested in versions.LEGACY:
        return requested
    return versions.LEGACY[0]


def capabilities_for(version: str, capabilities: JSON) -> JSON:
    """Drop what a revision does not know from the server's capabilities."""
    caps = dict(capabilities)
    caps.pop("extensions", None)
    if version < "2025-03-26":
        caps.pop("completions", None)
    return caps


def server_info_for(version: str, info: JSON) -> JSON:
    if version >= "2025-11-25":
        return dict(info)
    # Older revisions know only name, version (and, from 2025-06-18, title).
    keep = ("name", "version", "title") if version >= "2025-06-18" else ("name", "version")
    return {k: v for k, v in info.items() if k in keep}


#: Fields of listed definitions each revision lacks, by the revision that brought them.
_NEWER_FIELDS = (("2025-11-25", ("icons",)), ("2025-06-18", ("title", "_meta", "outputSchema")))
_LISTS = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}
_CONTENT_RESULTS = {"tools/call": "content", "prompts/get": "messages"}


def result_for(version: str, method: str, result: JSON) -> JSON:
    """A result as revision ``version`` can read it: what 2026-07-28 allows and older
    revisions do not (a non-object structured result, resource links, newer fields) is
    left out or said another way.
    """
    if method in _LISTS:
        key = _LISTS[method]
        items = result.get(key)
        if isinstance(items, list):
            return {**result, key: [_definition_for(version, item) for item in items]}
        return result
    if method == "tools/call":
        adapted = dict(result)
        # Before 2026-07-28 structured content is an object, and only from 2025-06-18.
        if version < "2025-06-18" or not isinstance(adapted.get("structuredContent"), dict):
            adapted.pop("structuredContent", None)
        if version < "2025-06-18" and isinstance(adapted.get("content"), list):
            adapted["content"] = [_block_for(block) for block in adapted["content"]]
        return adapted
    if method == "prompts/get" and version < "2025-06-18":
        messages = result.get("messages")
        if isinstance(messages, list):
            return {
                **result,
                "messages": [
                    {**m, "content": _block_for(m.get("content"))} if isinstance(m, dict) else m
                    for m in messages
                ],
            }
    return result


def _definition_for(version: str, item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    adapted = {k: v for k, v in item.items() if not _newer(version, k)}
    schema = adapted.get("outputSchema")
    if schema is not None and not (isinstance(schema, dict) and schema.get("type") == "object"):
        # Before 2026-07-28 an output schema describes an object.
        del adapted["outputSchema"]
    arguments = adapted.get("arguments")
    if version < "2025-06-18" and isinstance(arguments, list):
        adapted["arguments"] = [
            {k: v for k, v in a.items() if k != "title"} if isinstance(a, dict) else a
            for a in arguments
        ]
    annotations = adapted.get("annotations")
    if version < "2025-06-18" and isinstance(annotations, dict) and "lastModified" in annotations:
        # Annotations of a resource gained lastModified in 2025-06-18.
        adapted["annotations"] = {k: v for k, v in annotations.items() if k != "lastModified"}
    return adapted


def _newer(version: str, field: str) -> bool:
    return any(version < since and field in fields for since, fields in _NEWER_FIELDS)


def _block_for(block: Any) -> Any:
    """A content block 2025-03-26 can read: a resource link becomes text naming the resource."""
    if not isinstance(block, dict) or block.get("type") != "resource_link":
        return block
    name = block.get("title") or block.get("name") or block.get("uri")
    return {"type": "text", "text": f"{name}: {block.get('uri')}"}
