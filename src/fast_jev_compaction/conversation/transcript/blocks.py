"""One content block read for the messages: a result's text, and what a block or its record
holds beyond the messages' own fields, kept so that the session file writes it back as it came."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..messages import BLOCK_FIELDS, NO_EXTRA, RECORD_FIELDS, shared_input
from ..stored import StoredJSON


def _result_item_text(item: Any) -> str:
    """One item of a tool_result ``content`` list, rendered for a reader (never raises)."""
    if isinstance(item, str):
        return item
    if not isinstance(item, Mapping):
        return "" if item is None else json.dumps(item, ensure_ascii=False)
    kind = item.get("type")
    text = item.get("text")
    if kind == "text":
        return text if isinstance(text, str) else ""
    if kind == "tool_reference":
        name = item.get("tool_name") or item.get("name")
        return f"[tool: {name}]" if isinstance(name, str) else "[tool]"
    if kind == "image":
        source = item.get("source")
        media = source.get("media_type") if isinstance(source, Mapping) else None
        return f"[image: {media}]" if isinstance(media, str) else "[image]"
    if kind == "document":
        title = item.get("title")
        return f"[document: {title}]" if isinstance(title, str) else "[document]"
    if isinstance(text, str):
        return text
    return f"[{kind}]" if isinstance(kind, str) else "[item]"


# The members of a block and the fields of a record that the messages hold in their own fields,
# or that the session file's writer makes for itself (a new session, new ids, its own stamps).
USE_KEYS = frozenset({"type", "id", "name", "input"})
TEXT_KEYS = frozenset({"type", "text"})
_RESULT_KEYS = frozenset({"type", "tool_use_id", "content", "is_error"})
_SESSION_FIELDS = frozenset({
    "type", "message", "uuid", "parentUuid", "logicalParentUuid", "timestamp", "sessionId", "cwd",
    "userType", "isSidechain", "version", "gitBranch", "slug", "agentId", "entrypoint", "promptId",
    "teamName", "isMeta", "sourceToolAssistantUUID",
})


def own_fields(data: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any] | None:
    """The members of ``data`` not in ``known``, or None when it has none."""
    if len(data) <= len(known) and all(key in known for key in data):
        return None
    return {key: value for key, value in data.items() if key not in known}


def result_extra(block: Mapping[str, Any], raw: Any, record: StoredJSON | None) -> Mapping[str, Any]:
    """What a result block and its record hold beyond its text and error flag, so that a
    result no pass cuts is written back as it came: its content list as written (tool
    references, images, documents, the items of a text list), its other members, its record's
    fields (``messages.RECORD_FIELDS``)."""
    extra: dict[str, Any] = {}
    if isinstance(raw, list):
        extra["content"] = raw
    own = own_fields(block, _RESULT_KEYS)
    if "content" in block and raw is not None and not isinstance(raw, (str, list)):
        own = {**(own or {}), "content": raw}
    flag = block.get("is_error")
    if "is_error" in block and not isinstance(flag, bool):
        own = {**(own or {}), "is_error": flag}
    if own:
        extra[BLOCK_FIELDS] = own
    if record:
        extra[RECORD_FIELDS] = record
    return extra or NO_EXTRA


def record_fields(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """A user record's own fields (``toolUseResult``, ...): those that neither the messages nor
    a session file's writer make; None when it has none."""
    return own_fields(record, _SESSION_FIELDS)


def result_text(content: Any) -> str:
    """A tool_result's content as the text the model reads (a list's items one per line)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_result_item_text(item) for item in content)
    return _result_item_text(content)


def as_input(value: Any, shared: dict[Any, Any]) -> dict[str, Any]:
    if isinstance(value, dict):
        return shared_input(value, shared)  # JSON object keys are strings
    # A non-object input (not seen in real files) is kept rather than dropped.
    return {} if value is None else {"value": value}
