"""A call's input as far as the state shows it: a JSON string (maybe truncated), a dict, or a
one-line ``key=value`` rendering, read back into fields."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from ...conversation import lexicon
from ...textutil import ELLIPSIS, js_json

# Keys a one-line input may carry; splitting only at these keeps `KEY=VAL make` inside a command.
_KNOWN_KEYS = frozenset(
    """file_path path notebook_path command description pattern glob type output_mode offset limit
    old_string new_string replace_all content edits url prompt query timeout run_in_background
    subagent_type questions todos plan cell_id new_source edit_mode head_limit multiline
    allowed_domains blocked_domains cell_type shell_id bash_id task_id""".split()
)
_FREE_TEXT_KEYS = frozenset(
    {"command", "description", "prompt", "content", "old_string", "new_string", "query", "new_source", "plan"}
)
_ONE_LINE_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z_][A-Za-z0-9_]*)=")


def strip_ellipsis(value: str) -> tuple[str, bool]:
    """A value cut by ``truncate`` ends in ``…``; keep the known prefix and remember the cut."""
    value = value.strip()
    if value.endswith(ELLIPSIS):
        return value[:-1].rstrip(), True
    return value, False


_JSON_PAIR = re.compile(r'"([A-Za-z_][\w\-]*)"\s*:\s*("(?:[^"\\]|\\.)*(?:"|\\?$)|[^,{}\[\]"]+)')


def _decode_partial_string(raw: str) -> str:
    """Decode a JSON string token that may lack its closing quote (truncated input)."""
    body = raw[1:]
    if body.endswith('"') and not body.endswith('\\"'):
        body = body[:-1]
    elif body.endswith("\\"):
        body = body[:-1]
    try:
        return str(json.loads(f'"{body}"'))
    except ValueError:
        return body.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def _fields_from_json_text(text: str) -> dict[str, Any]:
    """Top-level fields of an input rendered as JSON, tolerating truncation."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    found: dict[str, Any] = {}
    for match in _JSON_PAIR.finditer(text):
        key, raw = match.group(1), match.group(2)
        if key in found:
            continue  # the first occurrence is the top-level one in practice
        if raw.startswith('"'):
            found[key] = _decode_partial_string(raw)
        else:
            found[key] = raw.strip()
    return found


def _fields_from_one_line(text: str) -> dict[str, Any]:
    """``file_path=/a limit={"limit":100}`` -> fields.

    Inside a free-text value (a command, a prompt) only a known key starts the next field, so
    ``command=FOO=1 make`` keeps ``FOO=1 make`` as the command.
    """
    cuts: list[tuple[int, int, str]] = []
    for match in _ONE_LINE_KEY.finditer(text):
        key = match.group(1)
        if cuts and cuts[-1][2] in _FREE_TEXT_KEYS and key not in _KNOWN_KEYS:
            continue
        cuts.append((match.start(), match.end(), key))
    fields: dict[str, Any] = {}
    for n, (_, value_start, key) in enumerate(cuts):
        value_end = cuts[n + 1][0] if n + 1 < len(cuts) else len(text)
        value = text[value_start:value_end].strip()
        if value.startswith("{"):
            # non-string values are rendered as the JSON of {"key": value}
            inner = _fields_from_json_text(value)
            if key in inner:
                fields.setdefault(key, inner[key])
                continue
        fields.setdefault(key, value)
    return fields


def input_fields(raw: Any, one_line: bool = False) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}
    if not isinstance(raw, str):
        return {}
    if one_line:
        return _fields_from_one_line(raw)
    stripped = raw.strip()
    if stripped.startswith("{"):
        return _fields_from_json_text(stripped)
    return _fields_from_one_line(stripped)


def as_text(value: Any) -> str:
    """``lexicon.as_text`` with the keys in the order the state wrote them (``JSON.stringify``'s)."""
    return lexicon.as_text(value, js_json)
